"""Airflow checkpoints DAGs, ``checkpoints__<src>__<tgt>``: consumer-group offsets translated to the target.

One per enabled flow of ``$MIRRORFLOW_CONFIG``; the logic is in the installed provider (``mirrorflow_airflow``) and
``include/mirrorflow/checkpoints``.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.checkpoints import checkpoints_dags

globals().update(checkpoints_dags())
