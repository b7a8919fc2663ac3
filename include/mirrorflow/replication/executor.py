"""Where work units run: Spark tasks (production) or the current process (CLI checks, small tests).

Spark tasks come from a Spark Connect server (``connect.SparkConnectExecutor``, the default path) or from the
SparkContext of a spark-submit app (``SparkExecutor``, for clusters that need spark-submit).

Both run the very same :func:`copy_units` (a process copies the units it is given in a few threads, so the waits
of small units overlap); Spark adds parallelism across partitions, task retries and executors on other machines.
Records never pass through the Spark driver or a DataFrame: each task reads and writes Kafka itself with
confluent-kafka, which is the fastest shape measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .copy import close_shared_producers, copy_units, task_groups
from .units import UnitResult, UnitSpec


class UnitExecutor(Protocol):
    """Runs a wave of units; ``engine_seconds`` is what starting its engine cost (the run's ``engine`` phase)."""

    engine_seconds: float

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Run units in this process (a few at once, in threads: see ``copy_units``)."""

    engine_seconds = 0.0

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]:
        try:
            return copy_units(units)
        finally:
            close_shared_producers()  # this process may live on (tests, Airflow workers): no idle connections

    def close(self) -> None:
        """Nothing to stop: units ran in this process."""


class SparkExecutor:
    """One Spark task per work unit, or per share of a large wave (``task_groups``); units of one wave never share a
    partition, so order is kept."""

    engine_seconds = 0.0  # the Spark app times its own SparkSession start

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def close(self) -> None:
        """The Spark app stops its session itself."""

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]:
        if not units:
            return []
        context = self.spark.sparkContext
        context.setJobDescription(f"mirrorflow: copy {len(units)} work unit(s)")
        tasks = task_groups(len(units))
        return context.parallelize(list(units), tasks).mapPartitions(lambda part: copy_units(list(part))).collect()
