"""Shows mirrorflow configuration errors as an Airflow import error (file, line and key); defines no DAG.

When ``$MIRRORFLOW_CONFIG`` has errors, this file fails to import and Airflow's DAG list shows every
error; the DAGs of flows that are fine still load from ``mirror.py``.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.config_check import raise_config_errors

raise_config_errors()
