"""Where work units run: Spark tasks (production) or the current process (CLI checks, small tests).

Spark tasks come from a Spark Connect server (``connect.SparkConnectExecutor``, the default path) or from the
SparkContext of a spark-submit app (``SparkExecutor``, for clusters that need spark-submit).

Both run the very same :func:`copy_units` (a process copies the units it is given in a few threads, so the waits
of small units overlap); Spark adds parallelism across partitions, task retries and executors on other machines.
Records never pass through the Spark driver or a DataFrame: each task reads and writes Kafka itself with
confluent-kafka, which is the fastest shape (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .copy import copy_units
from .lanes import task_shares
from .producers import close_kept_clients
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
            close_kept_clients()  # this process may live on (tests, Airflow workers): no idle connections

    def close(self) -> None:
        """Nothing to stop: units ran in this process."""


class SparkExecutor:
    """One Spark task per work unit, or per share of a large wave (``lanes.task_shares``: units that share a
    transactional producer go to the same task); units of one wave never share a partition, so order is kept."""

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
        shares = [[units[i] for i in share] for share in task_shares(units)]
        # One share per Spark partition (parallelize keeps a list's elements in order, one per slice here).
        results = context.parallelize(shares, len(shares)).mapPartitions(
            lambda part: [result for share in part for result in copy_units(share)]
        )
        by_key = {(r.topic, r.partition): r for r in results.collect()}
        return [by_key[(unit.topic, unit.partition)] for unit in units]
