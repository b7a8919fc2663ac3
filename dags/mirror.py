"""Airflow mirror DAGs, one per enabled flow and topic family of the mirrorflow configuration.

Generated from ``$MIRRORFLOW_CONFIG`` (default ``include/config/mm2.properties``): a new family in the
file is a new DAG ``mirror__<src>__<tgt>__<family>``. The logic is in ``plugins/mirrorflow_airflow``
and ``include/mirrorflow``.
"""

from __future__ import annotations

from mirrorflow_airflow.mirror_dag import mirror_dags

globals().update(mirror_dags())
