"""The environment spark-submit, its driver and Spark's Python workers get from mirrorflow.

The library does not rely on ``PYTHONPATH``: this machine imports the installed ``mirrorflow`` package, and the
executors get it with the job (``pyfiles``: ``--py-files`` / Spark Connect artifacts), so a cluster's workers
need only a Python with confluent-kafka.  Which Python that is, is Spark's own setting: ``PYSPARK_PYTHON`` (or
``spark.pyspark.python``, which Spark itself puts above the variable) is kept when the caller has one, and is
this installation's interpreter otherwise.  The driver runs here, so ``PYSPARK_DRIVER_PYTHON`` defaults to this
interpreter too.  ``SPARK_LOCAL_IP`` is pinned to loopback only for local masters: a driver bound to loopback
could not be reached by a cluster's executors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

SUBMITTED_AT_ENV = "MIRRORFLOW_SUBMITTED_AT"
"""Epoch seconds at which the launcher (the CLI, the Airflow operator) started spark-submit: the app reports
the time from there to its first line as the run's ``submit`` phase."""


def prepend_path(entry: str, current: str | None) -> str:
    """``entry`` first in a PATH-like list, without a second copy of it further down."""
    rest = [item for item in (current or "").split(os.pathsep) if item and item != entry]
    return os.pathsep.join([entry, *rest])


def is_local_master(master: str | None) -> bool:
    """``local``, ``local[4]``, ``local[*,4]``...: driver and executors in one JVM on this machine."""
    return master is None or master.strip().startswith("local")


def spark_environment(environ: Mapping[str, str], *, keep_choices: bool, master: str | None = None) -> dict[str, str]:
    """PATH (venv bin first, so ``spark-submit`` is this installation's), the Spark Pythons and the local IP.

    With ``keep_choices`` a ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON``/``SPARK_LOCAL_IP`` already in
    ``environ`` wins (the executors of a cluster run on their own Python); without, this process's Python and
    loopback are imposed (the local Spark Connect server, the demo).  ``master``: a cluster master (not
    ``local...``) gets no ``SPARK_LOCAL_IP`` unless ``environ`` has one.
    """
    kept = environ if keep_choices else {}
    env = {
        "PATH": prepend_path(str(Path(sys.executable).parent), environ.get("PATH")),
        "PYSPARK_PYTHON": kept.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": kept.get("PYSPARK_DRIVER_PYTHON", sys.executable),
    }
    local_ip = kept.get("SPARK_LOCAL_IP", "127.0.0.1" if is_local_master(master) else None)
    if local_ip:
        env["SPARK_LOCAL_IP"] = local_ip
    return env


__all__ = ["SUBMITTED_AT_ENV", "is_local_master", "prepend_path", "spark_environment"]
