"""The environment spark-submit and Spark's Python workers need to run mirrorflow's Spark app.

spark-submit is looked up on PATH and executors start ``python3`` unless ``PYSPARK_PYTHON`` says
otherwise; both must be this installation's (confluent-kafka and the library live in its venv), and the
repository root must be importable. The Airflow operator and the demo's Airflow build the same settings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..config.location import REPO_ROOT

SUBMITTED_AT_ENV = "MIRRORFLOW_SUBMITTED_AT"
"""Epoch seconds at which the launcher (the CLI, the Airflow operator) started spark-submit: the app reports
the time from there to its first line as the run's ``submit`` phase."""


def prepend_path(entry: str, current: str | None) -> str:
    """``entry`` first in a PATH-like list, without a second copy of it further down."""
    rest = [item for item in (current or "").split(os.pathsep) if item and item != entry]
    return os.pathsep.join([entry, *rest])


def spark_environment(environ: Mapping[str, str], *, keep_choices: bool) -> dict[str, str]:
    """PATH (venv bin first), PYTHONPATH (the library's folder and the repo first), the Spark Python and local IP.

    With ``keep_choices`` a ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON``/``SPARK_LOCAL_IP`` already in
    ``environ`` wins (an operator pointing executors of a cluster at their own Python); without, this
    process's Python and loopback are imposed (the local demo).
    """
    kept = environ if keep_choices else {}
    return {
        "PATH": prepend_path(str(Path(sys.executable).parent), environ.get("PATH")),
        # include/ first: the executors import the library as `mirrorflow` (its code lives in include/mirrorflow)
        "PYTHONPATH": prepend_path(str(REPO_ROOT / "include"), prepend_path(str(REPO_ROOT), environ.get("PYTHONPATH"))),
        "PYSPARK_PYTHON": kept.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": kept.get("PYSPARK_DRIVER_PYTHON", sys.executable),
        "SPARK_LOCAL_IP": kept.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }


__all__ = ["prepend_path", "spark_environment"]
