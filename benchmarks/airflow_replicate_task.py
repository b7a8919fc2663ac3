"""Benchmark: what a mirror DAG's ``replicate`` task costs in a real Airflow, per engine, run after run.

Why this exists: the targets are stated "from the start of the replicate task": a scheduled
run with nothing new in <= 3 s, a run copying 10,000 records in <= 5 s. ``replication_throughput.py`` times
``mirrorflow replicate`` processes; this script times the task itself, as Airflow records it (the task
instance's ``duration``: from the moment its process started running the task to its end), in ``airflow
standalone`` (LocalExecutor) with this checkout's DAGs, the way ``make demo`` runs them, on two embedded
clusters:

* ``spark-connect``: ``spark_default`` is a ``spark_connect`` connection to a local Spark Connect server
  (the demo's engine), started before Airflow and not timed;
* ``spark-submit``: ``spark_default`` is spark-submit in local mode (a Spark application per run).

For each engine: a first run (creates the remote topic; for Spark Connect, the session's first Python
workers), then ``--repeats`` runs with nothing new and ``--repeats`` runs copying 10,000 records of 1 KB in 4
partitions, each triggered over the REST API and waited for. Prints the replicate task's duration per run
(median, min-max) next to the targets, plus the whole DAG run's wall clock (four tasks, scheduling included).
It is a benchmark, not a test: it never asserts timings.

    .venv/bin/python benchmarks/airflow_replicate_task.py [--repeats 3] [--engines spark-connect,spark-submit]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from _common import create_topic, embedded_clusters, say, table
from confluent_kafka import Producer

from mirrorflow.replication.local_connect import ensure_local_server, stop_local_server
from mirrorflow_dev.demo.airflow_server import AirflowServer
from mirrorflow_dev.devcluster import free_port

TARGET_NOTHING_NEW_S = 3.0
TARGET_SMALL_S = 5.0
SMALL = 10_000
DAG_ID = "mirror__primary__backup__bench"


def topic_of(engine: str) -> str:
    """Each engine copies its own topic (a fresh remote topic and progress), one after the other."""
    return f"bench.{engine.replace('-', '')}"


def write_config(path: Path, primary: str, backup: str, topic: str) -> Path:
    pattern = topic.replace(".", "\\\\.")
    path.write_text(
        "clusters = primary, backup\n"
        f"primary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        f"primary->backup.enabled = true\nprimary->backup.topics = {pattern}\n"
        f"primary->backup.mirrorflow.families = bench\nprimary->backup.mirrorflow.family.bench.topics = {pattern}\n"
        "primary->backup.mirrorflow.family.bench.schedule = none\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "offset.storage.replication.factor = 1\noffset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
    )
    return path


def load(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = b"x" * 1024
    for i in range(count):
        producer.produce(topic, value, key=b"k%d" % i, partition=i % 4)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def task_seconds(server: AirflowServer, run_id: str, task_id: str) -> float:
    ti = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}")
    return float(ti["duration"])


@contextlib.contextmanager
def airflow(home: Path, config: Path, spark_url: str | None) -> Iterator[AirflowServer]:
    server = AirflowServer(home, free_port(), config, spark_url)
    try:
        started = time.perf_counter()
        server.start(timeout=300)
        server.wait_for_dags([DAG_ID], timeout=300)
        server.unpause(DAG_ID)
        say(f"  Airflow up in {time.perf_counter() - started:.0f} s at {server.url}")
        yield server
    finally:
        server.stop()


def measure(server: AirflowServer, primary: str, topic: str, repeats: int) -> dict[str, list[tuple[float, float]]]:
    """step -> [(replicate task seconds, DAG run wall seconds)]."""
    results: dict[str, list[tuple[float, float]]] = {}
    steps = [("first run", 100)] + [("nothing new", 0)] * repeats + [(f"{SMALL:,} records", SMALL)] * repeats
    for step, count in steps:
        if count:
            load(primary, topic, count)
        started = time.perf_counter()
        run_id = server.trigger(DAG_ID, {})
        state = server.wait_for_run(DAG_ID, run_id, timeout=600)
        wall = time.perf_counter() - started
        if state != "success":
            raise RuntimeError(f"run {run_id} ended {state}; see {server.log_file}")
        seconds = task_seconds(server, run_id, "replicate")
        say(f"    {step:<16} replicate task {seconds:6.2f} s, DAG run {wall:6.1f} s")
        results.setdefault(step, []).append((seconds, wall))
    return results


def cell(values: list[float], target: float | None = None) -> str:
    if not values:
        return "-"
    text = f"{statistics.median(values):.2f} s" + (f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else "")
    if target is not None:
        text += ": met" if statistics.median(values) <= target else ": NOT met"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per step (default 3)")
    parser.add_argument("--engines", default="spark-connect,spark-submit", help="spark-connect, spark-submit")
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    rows = []
    with embedded_clusters() as pair, tempfile.TemporaryDirectory(prefix="mirrorflow-task-bench-") as tmp:
        work = Path(tmp)
        for engine in engines:
            say(f"{engine}:")
            topic = topic_of(engine)
            create_topic(pair.primary, topic, 4)
            config = write_config(work / f"{engine}.properties", pair.primary, pair.backup, topic)
            connect_dir = work / "spark-connect"
            url = ensure_local_server(directory=connect_dir, progress=False) if engine == "spark-connect" else None
            try:
                with airflow(work / f"airflow-{engine}", config, url) as server:
                    results = measure(server, pair.primary, topic, args.repeats)
            finally:
                stop_local_server(directory=connect_dir)
            for step, runs in results.items():
                target = (
                    TARGET_NOTHING_NEW_S if step == "nothing new" else TARGET_SMALL_S if "records" in step else None
                )
                rows.append([engine, step, cell([r[0] for r in runs], target), cell([r[1] for r in runs])])
    print(f"\nmirrorflow replicate task in airflow standalone, {started_at}, {os.cpu_count()} CPU(s), embedded brokers")
    print(f"command: {' '.join([Path(sys.executable).name, *(argv or sys.argv)])}")
    print(f"targets: nothing new <= {TARGET_NOTHING_NEW_S:g} s, {SMALL:,} records <= {TARGET_SMALL_S:g} s (task)\n")
    print(table(rows, ["engine", "step", "replicate task (median, min-max)", "whole DAG run, 4 tasks"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
