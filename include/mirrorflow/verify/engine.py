"""Run chunk tasks on the executor a copy would use: this process, a SparkContext, or a Spark Connect server.

Why reuse the copy's executors rather than a new engine: they already hold what a run needs (the Spark Connect
session with its warm Python workers, the spark-submit app's SparkContext), are configured by the same CLI
options and Airflow connection, and are closed the same way. Only the function the tasks run differs
(``verify_chunks`` instead of ``copy_units``), so the dispatch lives here and the executors stay as they are.
A Spark task verifies a share of the chunks (``reader.task_shares``: one chunk per task when chunks are large,
many small chunks together, read by one consumer per side); a chunk's result (counts, digests, a difference) is a
few hundred bytes.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import Any

from ..replication.connect import SparkConnectExecutor, check_answers
from ..replication.executor import SparkExecutor, UnitExecutor
from .chunk import ChunkResult, ChunkSpec
from .reader import task_shares, verify_chunks


def run_chunks(executor: UnitExecutor, specs: Sequence[ChunkSpec]) -> list[ChunkResult]:
    """Every chunk's result, in the order of ``specs``."""
    if not specs:
        return []
    if isinstance(executor, SparkConnectExecutor):
        return _on_spark_connect(executor, specs)
    if isinstance(executor, SparkExecutor):
        context = executor.spark.sparkContext
        context.setJobDescription(f"mirrorflow: verify {len(specs)} chunk(s)")
        shares = [[specs[i] for i in share] for share in task_shares(specs)]
        # One share per Spark partition (parallelize keeps a list's elements in order, one per slice here).
        results = context.parallelize(shares, len(shares)).mapPartitions(
            lambda part: [result for share in part for result in verify_chunks(share)]
        )
        by_index = {result.index: result for result in results.collect()}
        return [by_index[spec.index] for spec in specs]
    return verify_chunks(specs)


def _verify_tasks(payload: Sequence[bytes]) -> Any:
    """The function each Spark Connect task runs: verify the share whose number arrives, return each chunk's index
    and pickled result."""

    def verify(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            for share in batch.column(0).to_pylist():
                results = verify_chunks(pickle.loads(payload[share]))
                yield pa.RecordBatch.from_pydict(
                    {"index": [r.index for r in results], "result": [pickle.dumps(r) for r in results]}
                )

    return verify


def _on_spark_connect(executor: SparkConnectExecutor, specs: Sequence[ChunkSpec]) -> list[ChunkResult]:
    """One job, a task per share; the specs travel in the function's closure, never in a DataFrame."""
    session = executor.session(specs[0].source_consumer, specs[0].target_consumer)  # a verification's chunks share them
    shares = task_shares(specs)
    # A share's specs pickled together: the client configurations every chunk shares are written once per share.
    payload = [pickle.dumps([specs[i] for i in share]) for share in shares]
    frame = session.range(0, len(shares), 1, len(shares)).mapInArrow(
        _verify_tasks(payload), "index long, result binary"
    )
    try:
        rows = frame.collect()
    except BaseException:
        check_answers(executor.url)  # a server that died: one line naming it
        executor.interrupt()
        raise
    if len(rows) != len(specs):
        raise RuntimeError(f"Spark Connect returned {len(rows)} result(s) for {len(specs)} chunk(s)")
    by_index = {row["index"]: row["result"] for row in rows}
    return [pickle.loads(by_index[spec.index]) for spec in specs]


__all__ = ["run_chunks"]
