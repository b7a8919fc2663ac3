"""What a user does with an installed mirrorflow, run by the fresh virtualenv's Python (not the checkout's).

Imports only what the wheel installed: the DAG folder's file is three lines, the configuration comes from
``MIRRORFLOW_CONFIG``. Prints one JSON line: the DAG ids Airflow parsed, its import errors, the mirror DAG run's task
states and report, and where ``mirrorflow`` and ``mirrorflow_airflow`` were imported from.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def dag_bag(folder: str) -> Any:  # Airflow's DagBag moved between 3.x releases
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:
        from airflow.models.dagbag import DagBag
    return DagBag(dag_folder=folder)  # AIRFLOW__CORE__LOAD_EXAMPLES=False: only the user's folder


def main() -> int:
    import mirrorflow
    import mirrorflow_airflow

    bag = dag_bag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    result: dict = {
        "dag_ids": sorted(bag.dag_ids),
        "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        "mirrorflow": str(Path(mirrorflow.__file__).parent),
        "mirrorflow_airflow": str(Path(mirrorflow_airflow.__file__).parent),
    }
    mirror = os.environ["MIRROR_DAG"]  # the family the test's topics are in (the flow also has a default family)
    from mirrorflow_airflow.dags import mirror_dags

    run = mirror_dags()[mirror].test()
    result["states"] = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    result["report"] = run.get_task_instance("publish_report").xcom_pull(task_ids="publish_report", key="report")
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
