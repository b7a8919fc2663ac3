"""Benchmark: how long one ``status`` of a flow takes for 1,000 partitions and 1,000 groups (target: about 1 s).

Why this exists: the status is computed live from the clusters every time someone looks (the CLI, a page, a
monitoring scrape), so it must stay cheap as a flow grows. It reads every stored progress record, lists the
end and start offsets of every partition, fetches one or two records per partition for the timestamps, and
checks heartbeats, the failover log and every checkpoint on the target (translated again from the offset
syncs, to count the groups that translate exactly). This script builds that situation on real (embedded)
brokers: one topic of N partitions, copied once by ``mirrorflow replicate --in-process`` (the CLI, so the
progress is exactly what a run writes), G consumer groups committing on the source (group i on partition
i mod N) and their checkpoints written by ``mirrorflow checkpoints``, then a few more records into half of
the partitions so that those lag; then it times ``flow_status`` (in this process) and the
``mirrorflow status --json`` command (a fresh process: imports and client start-up included).

It is a benchmark, not a test: it never asserts timings. It starts its own two noida-db clusters (temp
state dir, free ports) and always stops them, also on Ctrl-C, SIGTERM or an exception.

    .venv/bin/python benchmarks/status.py                                 # 1,000 partitions, 1,000 groups
    .venv/bin/python benchmarks/status.py --partitions 100 --groups 100   # smaller
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import FLOW, PREFIX, create_topic, embedded_clusters, mm2_properties, produce, say, table, timed
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.config import parse_config
from mirrorflow.status import flow_status

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
ROUNDS = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=3, help="records per partition before the copy")
    parser.add_argument("--groups", type=int, default=1000, help="consumer groups with a checkpoint")
    args = parser.parse_args()
    topic = f"{PREFIX}.status"
    with embedded_clusters() as clusters:
        create_topic(clusters.primary, topic, args.partitions)
        produce(clusters.primary, topic, args.partitions, args.records, "before")
        say(f"{topic}: {args.partitions} partitions x {args.records} records")
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
        _, commit_s = timed(lambda: commit_groups(clusters.primary, topic, args.partitions, args.groups, args.records))
        _, emit_s = timed(
            lambda: subprocess.run(
                [*cli, "checkpoints", "--config", str(config_file), "--flow", FLOW], check=True, capture_output=True
            )
        )
        say(f"{args.groups} groups committed in {commit_s:.1f} s, their checkpoints written in {emit_s:.1f} s")
        lagging = args.partitions // 2
        produce(clusters.primary, topic, lagging, 2, "after")  # partitions 0 .. lagging-1 now lag by 2 records
        flow = parse_config(text).flow("primary", "backup")
        library: list[float] = []
        for i in range(ROUNDS):
            status, seconds = timed(lambda: flow_status(flow))
            library.append(seconds)
            data = status.to_dict()
            groups = status.groups
            say(
                f"  round {i + 1}: flow_status {seconds:.3f} s: {len(status.partitions)} partitions, "
                f"lag {data['lag_records']} records, max {data['max_lag_seconds']:.1f} s; "
                f"{groups.get('groups')} groups, {groups.get('groups_exact')} exact; errors {status.errors}"
            )
        command: list[float] = []
        for i in range(ROUNDS):
            started = time.monotonic()
            done = subprocess.run(
                [*cli, "status", "--config", str(config_file), "--flow", FLOW, "--json"],
                check=False,
                capture_output=True,
                text=True,
            )
            command.append(time.monotonic() - started)
            parts = len(json.loads(done.stdout)["flows"][0]["partitions"]) if done.returncode == 0 else 0
            say(f"  round {i + 1}: mirrorflow status --json {command[-1]:.3f} s (exit {done.returncode}, {parts} rows)")
    rows = [
        (
            f"flow_status, {args.partitions} partitions, {args.groups} groups (median of {ROUNDS})",
            f"{statistics.median(library):.3f} s",
        ),
        (f"mirrorflow status --json, new process (median of {ROUNDS})", f"{statistics.median(command):.3f} s"),
        ("target", f"about {TARGET_S:.0f} s"),
    ]
    print(table(rows, header=("measure", "seconds")))
    return 0


def commit_groups(bootstrap: str, topic: str, partitions: int, groups: int, offset: int) -> None:
    """Group i commits ``offset`` on partition i mod N (inside the copied range: its checkpoint is exact)."""

    def commit(i: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{PREFIX}-group-{i:05d}"})
        try:
            consumer.commit(offsets=[TopicPartition(topic, i % partitions, offset)], asynchronous=False)
        finally:
            consumer.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(commit, range(groups)))


if __name__ == "__main__":
    sys.exit(main())
