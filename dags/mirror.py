"""Airflow mirror DAGs, one per enabled flow and topic family of the mirrorflow configuration.

Generated from ``$MIRRORFLOW_CONFIG`` (absolute, or relative to ``$AIRFLOW_HOME``): a new family in the
file is a new DAG ``mirror__<src>__<tgt>__<family>``. The logic is in the installed provider
(``mirrorflow_airflow``) and ``include/mirrorflow``.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.mirror import mirror_dags

globals().update(mirror_dags())
