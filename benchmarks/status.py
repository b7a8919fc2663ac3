"""Benchmark: how long one ``status`` of a wide flow takes (topics x partitions, groups), and what it asks Kafka.

Why this exists: the status is computed live from the clusters every time someone looks (the CLI, a page, a
monitoring scrape), so it must stay cheap as a flow grows, and grow no faster than the partition count. It reads
every stored progress record, lists the end and start offsets of every partition, fetches the last copied and
the oldest uncopied record's timestamps where needed, and checks heartbeats, the failover log and every
checkpoint on the target (translated again from the offset syncs, to count the groups that translate exactly).
This script builds that situation on real (embedded) brokers: ``--topics`` topics of ``--partitions``
partitions (created with one batched ``create_topics``), copied once by ``mirrorflow replicate --in-process``
(the CLI, so the progress is exactly what a run writes), G consumer groups committing on the source (group i on
one partition of topic i mod T) and their checkpoints written by ``mirrorflow checkpoints``, then a few more
records into half of the partitions so that those lag; then it times ``flow_status`` (in this process, with
the Kafka calls it made: ``kafka_calls``), the page's first pages, the ``--json`` text and the metrics text, and
the ``mirrorflow status --json`` command (a fresh process: imports and client start-up included).

It is a benchmark, not a test: it never asserts timings. It starts its own two noida-db clusters (temp
state dir, free ports) and always stops them, also on Ctrl-C, SIGTERM or an exception.

    .venv/bin/python benchmarks/status.py                                            # 1 topic x 1,000, 1,000 groups
    .venv/bin/python benchmarks/status.py --topics 1000 --partitions 10 --groups 300  # a whole cluster's width
    .venv/bin/python benchmarks/status.py --topics 50 --partitions 2 --groups 10 --profile
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import (
    FLOW,
    PREFIX,
    create_topics,
    embedded_clusters,
    mm2_properties,
    produce_everywhere,
    say,
    spread,
    table,
    timed,
)
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.config import parse_config
from mirrorflow.kafka import calls as kafka_calls
from mirrorflow.status import FlowStatus, StatusPages, flow_status, render_json

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
ROUNDS = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=1000, help="partitions per topic")
    parser.add_argument("--records", type=int, default=3, help="records per partition before the copy")
    parser.add_argument("--groups", type=int, default=1000, help="consumer groups with a checkpoint")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--profile", action="store_true", help="cProfile one flow_status (top 25 by cumulative time)")
    args = parser.parse_args()
    names = [f"{PREFIX}.status.{i:05d}" for i in range(args.topics)] if args.topics > 1 else [f"{PREFIX}.status"]
    width = len(names) * args.partitions
    with embedded_clusters() as clusters:
        _, create_s = timed(lambda: create_topics(clusters.primary, names, args.partitions, timeout=120.0))
        _, produce_s = timed(lambda: produce_all(clusters.primary, names, args.partitions, args.records, "before"))
        say(
            f"{len(names)} topic(s) x {args.partitions} partitions x {args.records} records: created in "
            f"{create_s:.1f} s, written in {produce_s:.1f} s"
        )
        text = mm2_properties(clusters.primary, clusters.backup)
        config_file = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-status-")) / "mm2.properties"
        config_file.write_text(text)
        cli = [str(REPO / ".venv/bin/mirrorflow")]
        _, copy_s = timed(
            lambda: subprocess.run(
                [*cli, "replicate", "--config", str(config_file), "--flow", FLOW, "--in-process"],
                check=True,
                capture_output=True,
            )
        )
        say(f"copied once with mirrorflow replicate --in-process in {copy_s:.1f} s")
        _, commit_s = timed(lambda: commit_groups(clusters.primary, names, args.partitions, args.groups, args.records))
        _, emit_s = timed(
            lambda: subprocess.run(
                [*cli, "checkpoints", "--config", str(config_file), "--flow", FLOW], check=True, capture_output=True
            )
        )
        say(f"{args.groups} groups committed in {commit_s:.1f} s, their checkpoints written in {emit_s:.1f} s")
        lagging = names[: max(1, len(names) // 2)] if len(names) > 1 else names
        lagging_partitions = args.partitions if len(names) > 1 else max(1, args.partitions // 2)
        produce_all(clusters.primary, lagging, lagging_partitions, 2, "after")  # half the partitions lag by 2
        flow = parse_config(text).flow("primary", "backup")
        if args.profile:
            timed(lambda: flow_status(flow), profile=True, label="flow_status")
        library: list[float] = []
        calls: dict[str, object] = {}
        for i in range(args.rounds):
            with kafka_calls.counting() as counted:
                status, seconds = timed(lambda: flow_status(flow))
            calls = kafka_calls.summary(counted)
            library.append(seconds)
            data = status.to_dict()
            groups = status.groups
            say(
                f"  round {i + 1}: flow_status {seconds:.3f} s: {len(status.partitions)} partitions, "
                f"lag {data['lag_records']} records, max {data['max_lag_seconds']:.1f} s; "
                f"{groups.get('groups')} groups, {groups.get('groups_exact')} exact; errors {status.errors}; "
                f"kafka calls {calls}"
            )
        extra = page_and_metrics(status)
        command: list[float] = []
        sizes: list[int] = []
        for i in range(args.rounds):
            started = time.monotonic()
            done = subprocess.run(
                [*cli, "status", "--config", str(config_file), "--flow", FLOW, "--json"],
                check=False,
                capture_output=True,
                text=True,
            )
            command.append(time.monotonic() - started)
            sizes.append(len(done.stdout))
            parts = len(json.loads(done.stdout)["flows"][0]["partitions"]) if done.returncode == 0 else 0
            say(
                f"  round {i + 1}: mirrorflow status --json {command[-1]:.3f} s "
                f"(exit {done.returncode}, {parts} rows, {len(done.stdout):,} bytes)"
            )
    measured = f"{len(names)} topic(s) x {args.partitions} = {width} partitions, {args.groups} groups"
    rows = [
        (f"flow_status, {measured}, median of {args.rounds} (min-max)", spread(library)),
        ("Kafka calls of one flow_status (admin requests, clients)", f"{calls.get('admin')}, {calls.get('clients')}"),
        *extra,
        (
            f"mirrorflow status --json, new process, median of {args.rounds} (min-max); {max(sizes):,} bytes",
            spread(command),
        ),
        ("target for status --json", f"<= {TARGET_S:.0f} s"),
    ]
    print(table(rows, header=("measure", "seconds")))
    return 0


def page_and_metrics(status: FlowStatus) -> list[tuple[str, str]]:
    """The page's first pages (ranking included), the CLI's JSON and the metrics text, timed on one status."""
    from mirrorflow import metrics

    page, page_s = timed(lambda: StatusPages(status).page(limit=100, topics_limit=50))
    text, json_s = timed(lambda: render_json([status]))
    exposition, metrics_s = timed(lambda: metrics.render([status]))
    say(
        f"  page {page_s:.3f} s ({len(json.dumps(page)):,} bytes), --json text {json_s:.3f} s ({len(text):,} bytes), "
        f"metrics {metrics_s:.3f} s ({len(exposition):,} bytes, {exposition.count(chr(10)):,} lines)"
    )
    return [
        ("the page's first pages (100 partitions, 50 topics, worst first; ranking included)", f"{page_s:.3f} s"),
        (f"the --json text ({len(text):,} bytes)", f"{json_s:.3f} s"),
        (f"the metrics text ({len(exposition):,} bytes)", f"{metrics_s:.3f} s"),
    ]


def produce_all(bootstrap: str, names: list[str], partitions: int, per_partition: int, tag: str) -> None:
    """``per_partition`` small records, tagged, into each partition of each topic (``produce_everywhere``)."""
    produce_everywhere(bootstrap, names, partitions, per_partition, lambda p, i: (None, f"{tag}-{p}-{i}".encode()), 120)


def commit_groups(bootstrap: str, names: list[str], partitions: int, groups: int, offset: int) -> None:
    """Group i commits ``offset`` on topic i mod T, partition (i // T) mod P: inside the copied range, so exact."""

    def commit(i: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{PREFIX}-group-{i:05d}"})
        try:
            tp = TopicPartition(names[i % len(names)], (i // len(names)) % partitions, offset)
            consumer.commit(offsets=[tp], asynchronous=False)
        finally:
            consumer.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(commit, range(groups)))


if __name__ == "__main__":
    sys.exit(main())
