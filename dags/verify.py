"""Airflow verify DAGs, ``verify__<src>__<tgt>``: prove the copy equals the source, record by record.

One per enabled flow of ``$MIRRORFLOW_CONFIG``; the logic is in the installed provider (``mirrorflow_airflow``) and
``include/mirrorflow/verify``.
"""

from __future__ import annotations

from mirrorflow_airflow.dags.verify import verify_dags

globals().update(verify_dags())
