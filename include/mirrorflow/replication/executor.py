"""Where work units run: Spark tasks (production) or the current process (CLI checks, small tests).

Spark tasks come from a Spark Connect server (``connect.SparkConnectExecutor``, the default path) or from the
SparkContext of a spark-submit app (``SparkExecutor``, for clusters that need spark-submit).

Both run the very same :func:`copy_unit`; Spark adds parallelism across partitions, task retries and
executors on other machines. Records never pass through the Spark driver or a DataFrame: each task
reads and writes Kafka itself with confluent-kafka, which is the fastest shape measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .copy import close_shared_producers, copy_unit
from .units import UnitResult, UnitSpec


class UnitExecutor(Protocol):
    """Runs a wave of units; ``engine_seconds`` is what starting its engine cost (the run's ``engine`` phase)."""

    engine_seconds: float

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Run units one after the other in this process."""

    engine_seconds = 0.0

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]:
        try:
            return [copy_unit(unit) for unit in units]
        finally:
            close_shared_producers()  # this process may live on (tests, Airflow workers): no idle connections

    def close(self) -> None:
        """Nothing to stop: units ran in this process."""


class SparkExecutor:
    """One Spark task per work unit (units of one wave never share a partition, so order is kept)."""

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
        return context.parallelize(list(units), len(units)).map(copy_unit).collect()
