"""The DAG factories: a DAG file calls one and puts what it returns in its globals.

    from mirrorflow_airflow.dags import mirror_dags
    globals().update(mirror_dags())

Each reads ``$MIRRORFLOW_CONFIG`` (or the file it is given) and returns one DAG per enabled flow (per family for
the mirror DAGs); a configuration error is raised by :func:`raise_config_errors` in a file of its own, so the
DAGs of the flows that are fine still load.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.checkpoints import checkpoints_dags
from mirrorflow_airflow.dags.config_check import raise_config_errors
from mirrorflow_airflow.dags.failover import failover_dags
from mirrorflow_airflow.dags.heartbeats import heartbeats_dags
from mirrorflow_airflow.dags.mirror import mirror_dags
from mirrorflow_airflow.dags.verify import verify_dags

__all__ = ["checkpoints_dags", "failover_dags", "heartbeats_dags", "mirror_dags", "raise_config_errors", "verify_dags"]
