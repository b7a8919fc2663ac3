"""Run chunk tasks on the executor a copy would use: this process, a SparkContext, or a Spark Connect server.

Why reuse the copy's executors rather than a new engine: they already hold what a run needs (the Spark Connect
session with its warm Python workers, the spark-submit app's SparkContext), are configured by the same CLI
options and Airflow connection, and are closed the same way. Only the function the tasks run differs
(``verify_chunk`` instead of ``copy_unit``), so the dispatch lives here and the executors stay as they are.
One chunk is one Spark task; its result (counts, digests, a difference) is a few hundred bytes.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import Any

from ..replication.connect import SparkConnectExecutor, check_answers
from ..replication.executor import SparkExecutor, UnitExecutor
from .chunk import ChunkResult, ChunkSpec, verify_chunk


def run_chunks(executor: UnitExecutor, specs: Sequence[ChunkSpec]) -> list[ChunkResult]:
    """Every chunk's result, in the order of ``specs``."""
    if not specs:
        return []
    if isinstance(executor, SparkConnectExecutor):
        return _on_spark_connect(executor, specs)
    if isinstance(executor, SparkExecutor):
        context = executor.spark.sparkContext
        context.setJobDescription(f"mirrorflow: verify {len(specs)} chunk(s)")
        return context.parallelize(list(specs), len(specs)).map(verify_chunk).collect()
    return [verify_chunk(spec) for spec in specs]


def _verify_tasks(payload: Sequence[bytes]) -> Any:
    """The function each Spark Connect task runs: verify the chunk whose index arrives, return its pickled result."""

    def verify(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            indexes = batch.column(0).to_pylist()
            results = [pickle.dumps(verify_chunk(pickle.loads(payload[i]))) for i in indexes]
            yield pa.RecordBatch.from_pydict({"index": indexes, "result": results})

    return verify


def _on_spark_connect(executor: SparkConnectExecutor, specs: Sequence[ChunkSpec]) -> list[ChunkResult]:
    """One job of ``len(specs)`` tasks; the specs travel in the function's closure, never in a DataFrame."""
    session = executor.session(specs[0].source_consumer, specs[0].target_consumer)  # a verification's chunks share them
    payload = [pickle.dumps(spec) for spec in specs]
    frame = session.range(0, len(specs), 1, len(specs)).mapInArrow(_verify_tasks(payload), "index long, result binary")
    try:
        rows = sorted(frame.collect(), key=lambda row: row["index"])
    except BaseException:
        check_answers(executor.url)  # a server that died: one line naming it
        executor.interrupt()
        raise
    if len(rows) != len(specs):
        raise RuntimeError(f"Spark Connect returned {len(rows)} result(s) for {len(specs)} chunk(s)")
    return [pickle.loads(row["result"]) for row in rows]


__all__ = ["run_chunks"]
