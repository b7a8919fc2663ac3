"""Benchmark: ``mirrorflow verify`` against the plain loop a user would write to compare two clusters.

Why this exists: verification must be cheap enough to run before every planned failover and on a schedule; its
target is to be at least as fast as a plain single-process confluent-kafka loop that reads both sides and compares
them record by record, and its cost must grow with the records and partitions, not by a fixed wait per partition
(``--partitions 200 --records 600`` measures that case). This script loads N records of S bytes (key, value, one
header) into P partitions of a source topic, copies them with mirrorflow (``replicate``, exactly-once, in this
process: not timed), then times, each ``--rounds`` times, in a rotated order:

* ``mirrorflow verify`` as a command, its chunks as Spark tasks on a Spark Connect server (the default engine;
  the script starts its own local server first, not timed, as a deployment has one running): wall clock, so
  Python start-up, configuration, cluster checks, planning and the Spark job all count;
* ``verify_flow`` called in this process with the same Spark Connect server (what the DAG will call);
* ``mirrorflow verify --in-process`` (no Spark; with ``--in-process``);
* the baseline: one process, one read_committed consumer per cluster with every partition assigned, records
  compared partition by partition, in order, as both sides deliver them (key, value, headers, timestamp), no digest,
  no offset mapping (it assumes the copy's order).

``--long-poll`` puts a proxy before each cluster that holds an empty fetch for its ``fetch.wait.max.ms``, as Apache
Kafka does (the embedded broker answers at once; ``tests/longpoll_proxy.py``): every timed variant reads through
them. It prints the figures side by side, with each one's ratio to the loop (above 1.0: faster than the loop). It is
a benchmark, not a test: it never asserts timings. It starts two embedded noida-db clusters (temp state dir, free
ports) and always stops them, also on Ctrl-C, SIGTERM or an exception.

    .venv/bin/python benchmarks/verify.py                                   # 1,000,000 x 1 KB in 4 partitions
    .venv/bin/python benchmarks/verify.py --records 200000 --rounds 1       # smaller, for a busy machine
    .venv/bin/python benchmarks/verify.py --partitions 200 --records 600 --size 100 --in-process --long-poll
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import FLOW, create_topic, embedded_clusters, say, table, timed
from confluent_kafka import Consumer, KafkaError, TopicPartition
from replication_throughput import load_records

from mirrorflow.config import parse_config
from mirrorflow.replication.connect import SparkConnectExecutor
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow.verify import verify_flow

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.longpoll_proxy
TOPIC = "bench.verify"
#: noida-db answers a fetch with a partition's whole backlog, ignoring fetch sizes; librdkafka drops a response
#: above receive.message.max.bytes and the consumer then sees nothing. librdkafka's maximum (embedded only).
RECEIVE_MAX = 2**31 - 1


def properties(primary: str, backup: str) -> str:
    """The flow under measurement; both sides' consumers take noida-db's whole-backlog answers."""
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\nprimary->backup.topics = bench\\.verify\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
        f"primary.consumer.receive.message.max.bytes = {RECEIVE_MAX}\n"
        f"backup.consumer.receive.message.max.bytes = {RECEIVE_MAX}\n"
    )


def _consumer(bootstrap: str) -> Consumer:
    """A plain read_committed consumer; the short fetch wait mirrorflow's readers use, so that the loop does not
    wait 500 ms (librdkafka's default) for each empty fetch behind a long-poll proxy either."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-verify-loop",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "receive.message.max.bytes": RECEIVE_MAX,
            "fetch.wait.max.ms": 10,
        }
    )


def plain_loop(primary: str, backup: str, partitions: int) -> tuple[int, int]:
    """The baseline: one consumer per cluster reading every partition; each partition's records compared in order
    as both sides deliver them; (records, differences)."""
    consumers = (_consumer(primary), _consumer(backup))
    buffers: tuple[list[list[Any]], ...] = ([[] for _ in range(partitions)], [[] for _ in range(partitions)])
    open_ = (set(range(partitions)), set(range(partitions)))
    records = differences = 0
    try:
        for consumer, topic in zip(consumers, (TOPIC, f"primary.{TOPIC}"), strict=True):
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        while open_[0] or open_[1]:
            touched: set[int] = set()
            for side in (0, 1):
                if not open_[side]:
                    continue
                first = consumers[side].poll(0.01)
                for m in [first, *consumers[side].consume(10_000, 0)] if first is not None else []:
                    if m.error() is not None:
                        if m.error().code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(str(m.error()))
                        open_[side].discard(m.partition())
                        continue
                    buffers[side][m.partition()].append((m.key(), m.value(), m.headers(), m.timestamp()[1]))
                    touched.add(m.partition())
            for p in touched:
                left, right = buffers[0][p], buffers[1][p]
                n = min(len(left), len(right))
                differences += sum(1 for a, b in zip(left[:n], right[:n], strict=True) if a != b)
                records += n
                del left[:n], right[:n]
        differences += sum(len(b) for side in buffers for b in side)
    finally:
        for consumer in consumers:
            consumer.close()
    return records, differences


@contextlib.contextmanager
def long_poll(clusters: Any, enabled: bool) -> Iterator[tuple[str, str]]:
    """The bootstraps the timed variants use: the clusters', or long-poll proxies before them (``--long-poll``)."""
    if not enabled:
        yield clusters.primary, clusters.backup
        return
    from tests.longpoll_proxy import LongPollProxy

    with LongPollProxy(clusters.primary) as primary, LongPollProxy(clusters.backup) as backup:
        say(f"long-poll proxies: primary {primary.bootstrap}, backup {backup.bootstrap}")
        yield primary.bootstrap, backup.bootstrap


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds of each variant (median shown)")
    parser.add_argument("--chunk-records", type=int, default=250_000, help="source offsets per Spark task")
    parser.add_argument("--in-process", action="store_true", help="also time `mirrorflow verify --in-process`")
    parser.add_argument("--long-poll", action="store_true", help="read through proxies with Apache Kafka's long poll")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-verify-"))
    with embedded_clusters() as clusters:
        config_file = work / "mm2.properties"
        config_file.write_text(properties(clusters.primary, clusters.backup))
        config = parse_config(config_file.read_text())
        create_topic(clusters.primary, TOPIC, args.partitions)
        (_, load_s) = timed(lambda: load_records(clusters.primary, TOPIC, args.partitions, args.records, args.size))
        say(f"loaded {args.records:,} records of {args.size} bytes into {args.partitions} partitions in {load_s:.0f} s")
        report, copy_s = timed(lambda: replicate(config, FLOW, None, LocalExecutor()))
        assert report.ok, report.errors
        say(f"copied with mirrorflow (exactly-once, in-process) in {copy_s:.0f} s: {report.records:,} records")
        from mirrorflow.replication.local_connect import ensure_local_server, stop_local_server

        url = ensure_local_server(directory=work / "spark-connect", progress=False)
        try:
            with long_poll(clusters, args.long_poll) as (primary, backup):
                config_file.write_text(properties(primary, backup))
                return measure(args, primary, backup, parse_config(config_file.read_text()), config_file, url)
        finally:
            stop_local_server(directory=work / "spark-connect")


def measure(args: argparse.Namespace, primary: str, backup: str, config: Any, config_file: Path, url: str) -> int:
    exe = str(REPO / ".venv" / "bin" / "mirrorflow")
    command = [exe, "verify", "--config", str(config_file), "--flow", FLOW, "--chunk-records", str(args.chunk_records)]

    def cli(*engine: str) -> Callable[[], int]:
        def run() -> int:
            done = subprocess.run([*command, *engine], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"mirrorflow verify exited {done.returncode}: {done.stdout[-2000:]}{done.stderr}")
            return args.records

        return run

    def in_process() -> int:
        report = verify_flow(config, FLOW, executor=LocalExecutor(), chunk_records=args.chunk_records)
        if report.exit_code != 0:
            raise RuntimeError(f"verify_flow: {report.status}: {report.errors or report.differences}")
        return report.records

    def library() -> int:
        executor = SparkConnectExecutor(url, f"{FLOW}/verify")
        try:
            report = verify_flow(config, FLOW, executor=executor, chunk_records=args.chunk_records)
        finally:
            executor.close()
        if report.exit_code != 0:
            raise RuntimeError(f"verify_flow: {report.status}: {report.errors or report.differences}")
        return report.records

    def loop() -> int:
        records, differences = plain_loop(primary, backup, args.partitions)
        if differences or records != args.records:
            raise RuntimeError(f"plain loop: {records} records, {differences} differences")
        return records

    variants: dict[str, Callable[[], int]] = {
        "plain loop (confluent-kafka, 1 process): baseline": loop,
        "mirrorflow verify (CLI, Spark Connect)": cli("--remote", url),
        "verify_flow() in this process (Spark Connect)": library,
    }
    if args.in_process:
        variants["mirrorflow verify --in-process (CLI, no Spark)"] = cli("--in-process")
        variants["verify_flow() in this process (no Spark)"] = in_process
    say("warm-up: one verify_flow() call (the Spark Connect session's Python workers start), not timed")
    library()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for number in range(args.rounds):
        for name in names[number % len(names) :] + names[: number % len(names)]:  # rotated: no fixed position
            _, took = timed(variants[name])
            seconds[name].append(took)
            say(f"  round {number + 1}: {name}: {_s(took)} s ({args.records / took:,.0f} records/s)")
    baseline = statistics.median(seconds[names[0]])
    rows = []
    for name in names:
        median = statistics.median(seconds[name])
        spread = f" ({_s(min(seconds[name]))}-{_s(max(seconds[name]))})" if len(seconds[name]) > 1 else ""
        rows.append((name, f"{_s(median)} s{spread}", f"{args.records / median:,.0f}", f"{baseline / median:.2f}x"))
    print()
    print(
        f"verify {args.records:,} records of {args.size} bytes in {args.partitions} partitions, "
        f"chunks of {args.chunk_records:,} source offsets, median of {args.rounds} round(s)"
        f"{', through long-poll proxies' if args.long_poll else ''}:"
    )
    print(table(rows, header=("variant", "seconds", "records/s", "vs loop")))
    return 0


def _s(seconds: float) -> str:
    """Seconds as the table shows them: two decimals below 10 s (small verifications take a fraction of one)."""
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


if __name__ == "__main__":
    sys.exit(main())
