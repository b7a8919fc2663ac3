"""The local demo (``make demo``): two Kafka clusters, Airflow with the mirror DAGs, and demo traffic.

Also used by tests that need a real Airflow environment (``airflow_env``) or server (``airflow_server``).
"""

from __future__ import annotations
