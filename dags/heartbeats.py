"""Airflow heartbeats DAGs, ``heartbeats__<src>__<tgt>``: MM2-format heartbeats and their freshness.

One per enabled flow of ``$MIRRORFLOW_CONFIG``; the logic is in the installed provider (``mirrorflow_airflow``) and
``include/mirrorflow/heartbeats.py``.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.heartbeats import heartbeats_dags

globals().update(heartbeats_dags())
