"""Airflow failover DAGs, ``failover__<src>__<tgt>``: move consumer groups to the target, from the UI.

One per enabled flow of ``$MIRRORFLOW_CONFIG``; the logic is in the installed provider (``mirrorflow_airflow``) and
``include/mirrorflow/failover``.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.failover import failover_dags

globals().update(failover_dags())
