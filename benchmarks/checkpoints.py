"""Benchmark: checkpoint staleness, and the cost of the checkpoints DAG on a whole-cluster flow.

Why this exists: MM2 checkpoints on a fixed clock (``emit.checkpoints.interval.seconds`` 60) and writes
target group offsets on another (``sync.group.offsets.interval.seconds`` 60), so a failed-over consumer
resumes from offsets up to ~2-3 minutes old (``MirrorCheckpointTask``, KIP-545). mirrorflow runs the same work as
short Airflow tasks (``emit_checkpoints`` then ``sync_group_offsets``), scheduled on the mirror DAG's
asset events or every N seconds. Whether that is better depends on how long one run takes, and one run
reads the whole offset-syncs, progress and checkpoints topics and asks the source about every group; this
script measures both on real (embedded) brokers so the claim can be checked and re-checked after changes:

1. commit-to-checkpoint latency: a group commits, one emit + sync run, how long until the target has it;
2. a whole-cluster flow (default 1,000 topics x 10 partitions, created with one ``create_topics`` call, 3
   records in each partition, copied once by an in-process ``replicate`` so offset syncs exist) and G groups
   (default 500) each committed on 20 of its partitions: ``emit_checkpoints`` and ``sync_group_offsets`` as the
   DAG's tasks call them, first with everything new, then with nothing changed; per call the wall time, the CPU
   of this process (librdkafka's threads included) and of both brokers, and the admin requests it made
   (``kafka_calls``). The target, at 1,000 x 10 and 500 groups: emit + sync within 5 s on 2 cores.

It is a benchmark, not a test: it never asserts timings. Each size gets its own two noida-db clusters (temp
state dir, free ports), always stopped, also on Ctrl-C, SIGTERM or an exception.

    .venv/bin/python benchmarks/checkpoints.py                                  # 1,000 x 10, 500 groups
    .venv/bin/python benchmarks/checkpoints.py --sizes 200x10,1000x10 --skip-latency   # and how it grows
    .venv/bin/python benchmarks/checkpoints.py --quick                          # smoke run: 20 x 2, 10 groups
    .venv/bin/python benchmarks/checkpoints.py --profile                        # + cProfile of every run
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import logging
import os
import pstats
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from _common import (
    FLOW,
    INTERRUPTED,
    PREFIX,
    Clusters,
    create_topic,
    create_topics,
    embedded_clusters,
    mm2_properties,
    peak_rss_mib,
    produce,
    produce_everywhere,
    rss_mib,
    say,
    spread,
    spread_commit,
    table,
    timed,
    tree_cpu_seconds,
    wait_until_quiet,
)
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.checkpoints.emit import CheckpointReport, emit_checkpoints, read_checkpoints
from mirrorflow.checkpoints.groupsync import SyncReport, sync_group_offsets
from mirrorflow.checkpoints.state import add_syncs, latest_checkpoints
from mirrorflow.checkpoints.translate import OffsetTranslator
from mirrorflow.config import parse_config
from mirrorflow.config.model import MirrorConfig
from mirrorflow.kafka import calls as kafka_calls
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.producers import close_kept_clients
from mirrorflow.replication.run import RunReport, replicate
from mirrorflow.wire import Checkpoint, CopiedRun, OffsetSync

T = TypeVar("T")

#: MM2 defaults the comparison uses (``MirrorSourceConnector``, ``MirrorCheckpointConnector``); mirrorflow reads the same keys.
MM2_EMIT_INTERVAL_S = 60
MM2_SYNC_INTERVAL_S = 60
MM2_OFFSET_FLUSH_S = 60
#: mirrorflow's default ``mirrorflow.schedule`` of a family's mirror DAG (the asset-event cadence).
MIRROR_SCHEDULE_S = 300


# ----------------------------------------------------------------------------------------------------
# Clusters and plain Kafka helpers (independent of the library under measurement)
# ----------------------------------------------------------------------------------------------------


def commit_with_consumer(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit like an application does (synchronous commit of a short-lived consumer)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def target_group_offset(bootstrap: str, group: str, topic: str, partition: int) -> int | None:
    """The group's committed offset on the target (what a failed-over consumer would resume from)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until the future resolves
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    for tp in answer.topic_partitions or []:
        if tp.topic == topic and tp.partition == partition and tp.error is None and tp.offset >= 0:
            return tp.offset
    return None


def flow_config(primary: str, backup: str) -> MirrorConfig:
    """The flow under measurement: MM2 property names, mirrorflow's defaults, checkpoints + group sync on."""
    return parse_config(
        mm2_properties(primary, backup, "primary->backup.sync.group.offsets.enabled = true"), file="<benchmark>"
    )


def checked_replicate(config: MirrorConfig) -> RunReport:
    report = replicate(config, FLOW, None, LocalExecutor())
    if not report.ok or report.lag:
        raise RuntimeError(f"replication failed: errors={report.errors[:3]} lag={report.lag}")
    return report


# ----------------------------------------------------------------------------------------------------
# 1. Commit-to-checkpoint latency
# ----------------------------------------------------------------------------------------------------


@dataclass
class LatencyResult:
    mirror_run: list[float] = field(default_factory=list)  # replicate() of the new records (asset cadence)
    to_checkpoint: list[float] = field(default_factory=list)  # commit -> checkpoint acked on the target
    to_group: list[float] = field(default_factory=list)  # commit -> target group offset written
    read_checkpoint: list[float] = field(default_factory=list)  # a fresh reader finds it (failover tooling)
    read_group: list[float] = field(default_factory=list)  # the target group offset is listed


def measure_latency(primary: str, backup: str, repeats: int, profile: bool = False) -> LatencyResult:
    """Per round: new records, a mirror run, a group commit on the source, then emit + sync, timed.

    The checkpoint is readable once ``emit_checkpoints`` returns (its producer flushed with acks=all);
    the group offset once ``sync_group_offsets`` returns. Both are then read back independently, to
    check the values and to show what a failover tool pays to read them (not part of the staleness).
    """
    config = flow_config(primary, backup)
    flow = config.flow("primary", "backup")
    topic, group = f"{PREFIX}.latency", f"{PREFIX}-latency"
    remote = f"primary.{topic}"
    create_topic(primary, topic, 1)
    result = LatencyResult()
    end = 0
    for round_no in range(repeats):
        produce(primary, topic, 1, 100, f"r{round_no}")
        end += 100
        report, seconds = timed(lambda: checked_replicate(config))
        result.mirror_run.append(seconds)
        upstream = end - (10 * (round_no + 1)) % 50  # somewhere in the last 100 records, never the same twice
        commit_with_consumer(primary, group, {(topic, 0): upstream})
        committed = time.perf_counter()
        profiler = cProfile.Profile() if profile and round_no == 0 else None
        if profiler is not None:
            profiler.enable()
        cps = emit_checkpoints(flow)
        acked = time.perf_counter()
        sync = sync_group_offsets(flow)
        written = time.perf_counter()
        if profiler is not None:
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(15)
            print(f"\n--- cProfile: latency round 1, emit + sync ---\n{out.getvalue()}", flush=True)
        if cps.emitted != 1 or sync.errors or cps.errors:
            raise RuntimeError(f"round {round_no}: emitted {cps.emitted}, errors {cps.errors + sync.errors}")
        result.to_checkpoint.append(acked - committed)
        result.to_group.append(written - committed)

        stored, seconds = timed(lambda: read_checkpoints(flow))
        cp = stored.get((group, remote, 0))
        if cp is None or cp.upstream_offset != upstream:
            raise RuntimeError(f"round {round_no}: checkpoint not readable back: {cp}")
        result.read_checkpoint.append(seconds)
        offset, seconds = timed(lambda: target_group_offset(backup, group, remote, 0))
        if offset != cp.downstream_offset:
            raise RuntimeError(f"round {round_no}: target group at {offset}, checkpoint says {cp.downstream_offset}")
        result.read_group.append(seconds)
        say(
            f"  round {round_no + 1}/{repeats}: mirror run {result.mirror_run[-1]:.3f} s ({report.records} records), "
            f"commit->checkpoint {result.to_checkpoint[-1]:.3f} s, commit->target group {result.to_group[-1]:.3f} s "
            f"(upstream {upstream} -> downstream {cp.downstream_offset}, {cps.groups[0].partitions[0].kind})"
        )
    return result


# ----------------------------------------------------------------------------------------------------
# 1b. The latency table
# ----------------------------------------------------------------------------------------------------


def latency_rows(lat: LatencyResult) -> list[tuple[str, str, str]]:
    emit_sync = statistics.median(lat.to_group)
    mirror = statistics.median(lat.mirror_run)
    mm2_min = MM2_EMIT_INTERVAL_S + MM2_SYNC_INTERVAL_S
    mm2_max = mm2_min + MM2_OFFSET_FLUSH_S
    return [
        (
            "commit -> checkpoint on target (one emit run)",
            spread(lat.to_checkpoint),
            f"next checkpoint poll: <= {MM2_EMIT_INTERVAL_S} s",
        ),
        (
            "commit -> target group offset (emit + sync run)",
            spread(lat.to_group),
            f"next group sync: <= {mm2_min} s; off by default",
        ),
        ("mirror run of the new records (replicate)", spread(lat.mirror_run), "n/a (continuous task)"),
        ("failover read of the checkpoint (read_checkpoints)", spread(lat.read_checkpoint), "-"),
        ("failover read of the target group offset", spread(lat.read_group), "-"),
        (
            f"staleness, checkpoints every {MM2_EMIT_INTERVAL_S} s (emit.checkpoints.interval.seconds)",
            f"<= {MM2_EMIT_INTERVAL_S + emit_sync:.1f} s ({MM2_EMIT_INTERVAL_S} + {emit_sync:.2f})",
            (
                f"<= {mm2_min}-{mm2_max} s (emit {MM2_EMIT_INTERVAL_S} + sync {MM2_SYNC_INTERVAL_S}"
                f" [+ flush {MM2_OFFSET_FLUSH_S}])"
            ),
        ),
        (
            "staleness, on mirror asset events, mirror DAG back to back",
            f"<= {mirror + emit_sync:.1f} s ({mirror:.2f} + {emit_sync:.2f}) + Airflow trigger",
            "same as above; group sync off by default",
        ),
        (
            f"staleness, on mirror asset events, mirror schedule {MIRROR_SCHEDULE_S // 60}m (default)",
            f"<= {MIRROR_SCHEDULE_S + mirror + emit_sync:.1f} s ({MIRROR_SCHEDULE_S} + {mirror:.2f} + {emit_sync:.2f})",
            "-",
        ),
    ]


# ----------------------------------------------------------------------------------------------------
# 2. One checkpoint run on a whole-cluster flow
# ----------------------------------------------------------------------------------------------------

#: The size the targets are set for: 1,000 topics x 10 partitions, 500 groups, emit + sync within 5 s on 2 cores.
TARGET_SIZE = (1000, 10, 500)
TARGET_EMIT_SYNC_S = 5.0


@dataclass
class Step:
    """One timed call: wall and CPU seconds (this process, librdkafka's threads included, and both brokers), the
    Kafka calls it made (``kafka_calls``), and what it wrote."""

    wall: float = 0.0
    cpu: float = 0.0
    broker_cpu: float = 0.0
    calls: dict[str, Any] = field(default_factory=dict)
    written: int = 0


@dataclass
class WideResult:
    topics: int
    partitions: int
    groups: int
    per_group: int
    records: int
    setup: dict[str, float] = field(default_factory=dict)
    steps: dict[str, Step] = field(default_factory=dict)
    syncs_read: int = 0
    checkpoints_total: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    max_rereads: int = 0
    groups_written: int = 0
    kept: int = 0
    xcom_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    rss_before: float = 0.0
    rss_after: float = 0.0
    peak_rss: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.topics:,} x {self.partitions} partitions, {self.groups} groups x {self.per_group} partitions"

    def emit_sync(self, when: str) -> float:
        return self.steps[f"emit {when}"].wall + self.steps[f"sync {when}"].wall


def measured(fn: Callable[[], T], brokers: list[int], profile: bool, label: str) -> tuple[T, Step]:
    """``fn()`` timed (wall, this process's CPU, the brokers' CPU) with its Kafka calls counted."""
    broker_before = sum(tree_cpu_seconds(pid) for pid in brokers)
    cpu_before = time.process_time()
    with kafka_calls.counting() as calls:
        result, wall = timed(fn, profile, label)
    step = Step(wall, time.process_time() - cpu_before, 0.0, kafka_calls.summary(calls))
    step.broker_cpu = sum(tree_cpu_seconds(pid) for pid in brokers) - broker_before
    return result, step


def xcom_values(emit: CheckpointReport, sync: SyncReport) -> float:
    """Seconds the DAG's tasks spend turning the reports into their XCom values (``_compact``, ``to_dict``)."""
    from mirrorflow_airflow.dags.checkpoints import _compact  # Airflow: imported only here, not timed

    started = time.perf_counter()
    _compact(emit)
    sync.to_dict()
    return time.perf_counter() - started


def measure_wide(
    clusters: Clusters, topics: int, partitions: int, groups: int, per_group: int, records: int, profile: bool
) -> WideResult:
    """A flow of ``topics`` x ``partitions`` copied once, ``groups`` groups each committed on ``per_group`` of its
    partitions; then the checkpoints DAG's two calls, twice: first (everything new), then with nothing changed."""
    primary, backup = clusters.primary, clusters.backup
    brokers = [pid for pid in (clusters.pid("primary"), clusters.pid("backup")) if pid is not None]
    config = flow_config(primary, backup)
    flow = config.flow("primary", "backup")
    result = WideResult(topics, partitions, groups, per_group, records)
    names = [f"{PREFIX}.w{t:05d}" for t in range(topics)]
    group_names = [f"{PREFIX}-w{g:05d}" for g in range(groups)]

    _, result.setup["create_topics"] = timed(lambda: create_topics(primary, names, partitions))
    say(
        f"  {topics:,} topics x {partitions} partitions created (one create_topics call) in {result.setup['create_topics']:.1f} s"
    )
    _, result.setup["produce"] = timed(
        lambda: produce_everywhere(primary, names, partitions, records, lambda _p, i: (b"k%d" % i, b"v%d" % i))
    )
    say(f"  {records} records in each of {topics * partitions:,} partitions in {result.setup['produce']:.1f} s")
    report, result.setup["replicate"] = timed(lambda: replicate(config, FLOW, None, LocalExecutor(), timeout=1200.0))
    if not report.ok or report.lag:
        raise RuntimeError(f"replication failed: errors={report.errors[:3]} lag={report.lag}")
    close_kept_clients()  # the copy's clients kept for a next run: their threads would be counted as the runs' CPU
    gc.collect()
    say(f"  copied once in-process ({report.records:,} records) in {result.setup['replicate']:.1f} s")
    _, result.setup["commit"] = timed(
        lambda: spread_commit(primary, group_names, names, partitions, per_group, records)
    )
    say(f"  {groups} groups committed on {per_group} partitions each in {result.setup['commit']:.1f} s")
    result.setup["settle"] = wait_until_quiet(brokers, 120.0)
    result.rss_before = rss_mib()

    mine = set(group_names)
    runs: dict[str, Any] = {}
    for when in ("first", "again"):
        say(f"  emit_checkpoints ({'everything new' if when == 'first' else 'nothing changed'})")
        emitted, step = measured(lambda: emit_checkpoints(flow, timeout=600), brokers, profile, f"emit {when}")
        step.written = emitted.emitted
        result.steps[f"emit {when}"] = step
        say(f"    {step.written:,} checkpoint(s) written in {step.wall:.2f} s (CPU {step.cpu:.2f} s)")
        synced, step = measured(lambda: sync_group_offsets(flow, timeout=600), brokers, profile, f"sync {when}")
        step.written = sum(len(g.written) for g in synced.groups)
        result.steps[f"sync {when}"] = step
        say(f"    {step.written:,} group offset(s) written in {step.wall:.2f} s (CPU {step.cpu:.2f} s)")
        runs[when] = (emitted, synced)
        result.errors += [*emitted.errors, *synced.errors]
    first_emit, first_sync = runs["first"]
    result.syncs_read = first_emit.syncs_read
    for g in first_emit.groups:
        if g.group in mine:
            result.kinds.update(p.kind for p in g.partitions)
            result.max_rereads = max(result.max_rereads, g.max_rereads)
    result.checkpoints_total = sum(len(g.partitions) for g in first_emit.groups if g.group in mine)
    result.groups_written = sum(1 for g in first_sync.groups if g.written and g.group in mine)
    result.kept = sum(len(g.kept) for g in runs["again"][1].groups if g.group in mine)
    result.rss_after, result.peak_rss = rss_mib(), peak_rss_mib()  # before Airflow's import below
    result.xcom_seconds = xcom_values(first_emit, first_sync)
    if result.errors:
        say(f"  errors reported by the library: {result.errors[:5]}")
    return result


def admin_calls(calls: dict[str, Any]) -> str:
    """``500 list_consumer_group_offsets, 1 list_consumer_groups, ...``: the admin requests of one step."""
    by_kind = calls.get("by_kind") or {}
    admin = [(k.removeprefix("admin "), n) for k, n in by_kind.items() if k.startswith("admin ")]
    return f"{calls.get('admin', 0)}: " + ", ".join(f"{n} {k}" for k, n in admin)


def wide_rows(r: WideResult) -> list[tuple[str, str, str]]:
    target = (r.topics, r.partitions, r.groups) == TARGET_SIZE
    rows: list[tuple[str, str, str]] = [
        (
            f"setup, {r.label}",
            (
                f"create_topics {r.setup['create_topics']:.1f} s, produce {r.setup['produce']:.1f} s, "
                f"replicate {r.setup['replicate']:.1f} s, commits {r.setup['commit']:.1f} s"
            ),
            "-",
        )
    ]
    for when, what in (("first", "everything new"), ("again", "nothing changed")):
        total = r.emit_sync(when)
        verdict = "" if not target else (" (target <= 5 s: met)" if total <= TARGET_EMIT_SYNC_S else " (NOT met)")
        emit, sync = r.steps[f"emit {when}"], r.steps[f"sync {when}"]
        rows += [
            (
                f"emit + sync, {what}: wall",
                f"{total:.2f} s{verdict}; CPU {emit.cpu + sync.cpu:.2f} s, brokers {emit.broker_cpu + sync.broker_cpu:.2f} s",
                "n/a (Connect task, every 60 s)",
            ),
            (
                "  emit_checkpoints",
                f"{emit.wall:.2f} s (CPU {emit.cpu:.2f}, brokers {emit.broker_cpu:.2f}), {emit.written:,} written",
                "one ListConsumerGroupOffsets per group",
            ),
            ("    admin requests", admin_calls(emit.calls), "-"),
            (
                "  sync_group_offsets",
                f"{sync.wall:.2f} s (CPU {sync.cpu:.2f}, brokers {sync.broker_cpu:.2f}), {sync.written:,} written",
                "one AlterConsumerGroupOffsets per group",
            ),
            ("    admin requests", admin_calls(sync.calls), "-"),
        ]
    kinds = ", ".join(f"{k} {r.kinds.get(k, 0)}" for k in ("exact", "approximate", "refused", "unavailable"))
    rows += [
        ("  translation kinds (first emit)", f"{kinds}; max re-reads {r.max_rereads}", "-"),
        (
            "  groups written / offsets kept on the repeat",
            f"{r.groups_written} of {r.groups} / {r.kept:,} of {r.checkpoints_total:,}",
            "never backwards",
        ),
        ("  offset syncs read per run", f"{r.syncs_read:,}", "-"),
        ("  the tasks' XCom values (_compact, to_dict)", f"{r.xcom_seconds:.3f} s", "-"),
        (
            "  RSS of the process",
            f"{r.rss_before:.0f} MiB before the runs, {r.rss_after:.0f} MiB after (peak {r.peak_rss:.0f}, setup included)",
            "n/a (JVM worker)",
        ),
    ]
    return rows


def growth_rows(small: WideResult, large: WideResult) -> list[tuple[str, str, str]]:
    """How the cost grew from one flow width to the other (same groups and partitions per group)."""
    ratio = (large.topics * large.partitions) / (small.topics * small.partitions)
    rows = []
    for when in ("first", "again"):
        a, b = small.emit_sync(when), large.emit_sync(when)
        cpu_a = small.steps[f"emit {when}"].cpu + small.steps[f"sync {when}"].cpu
        cpu_b = large.steps[f"emit {when}"].cpu + large.steps[f"sync {when}"].cpu
        rows.append(
            (
                f"growth, {small.topics:,} -> {large.topics:,} topics (x{ratio:.0f} partitions), emit + sync {when}",
                f"wall {a:.2f} -> {b:.2f} s (x{b / a:.2f}), CPU {cpu_a:.2f} -> {cpu_b:.2f} s (x{cpu_b / cpu_a:.2f})",
                "-",
            )
        )
    return rows


# ----------------------------------------------------------------------------------------------------
# 3. A long uncompacted history (no cluster: the decoding alone)
# ----------------------------------------------------------------------------------------------------

#: Partitions of the synthetic history, and the copied runs per partition to measure (4,096 are kept at most).
HISTORY_PARTITIONS = 10
HISTORY_RUNS = (100, 1000, 4000)
HISTORY_CHECKPOINTS = 10_000  # (group, partition) keys of the synthetic checkpoints topic
HISTORY_VERSIONS = (1, 10)  # checkpoints written per key since the last compaction


def history_rows() -> list[tuple[str, str, str]]:
    """CPU per record to replay offset syncs (every one, in order) and to reduce checkpoints (the last per key),
    at growing uncompacted lengths: what a long-lived flow's run reads before any compaction (the embedded
    broker never compacts). Per-record costs that stay flat are costs that grow linearly with the history."""
    rows = []
    for runs in HISTORY_RUNS:
        records = []
        for r in range(runs):
            for p in range(HISTORY_PARTITIONS):
                run = CopiedRun(10 * r, 11 * r, 10 * r - 2 if r else -1, -1)
                for upstream in (10 * r, 10 * r + 8):
                    sync = OffsetSync(f"{PREFIX}.h", p, upstream, 11 * r + (upstream - 10 * r), run)
                    records.append((sync.key(), sync.value()))
        started = time.process_time()
        translator = add_syncs(OffsetTranslator(), records)
        seconds = time.process_time() - started
        assert translator.translate(f"{PREFIX}.h", 0, 10 * (runs - 1) + 3).kind == "exact"
        rows.append(
            (
                f"replay {len(records):,} offset syncs ({runs:,} runs x {HISTORY_PARTITIONS} partitions)",
                f"{seconds:.3f} s CPU, {seconds / len(records) * 1e6:.1f} us a sync",
                "read once at start, then tailed",
            )
        )
    for versions in HISTORY_VERSIONS:
        cps = [
            (Checkpoint(f"{PREFIX}-g{k // 20}", f"primary.{PREFIX}.h", k % 20, v, v))
            for v in range(versions)
            for k in range(HISTORY_CHECKPOINTS)
        ]
        raw = [(cp.key(), cp.value()) for cp in cps]
        started = time.process_time()
        latest = latest_checkpoints(raw)
        seconds = time.process_time() - started
        assert len(latest) == HISTORY_CHECKPOINTS
        rows.append(
            (
                f"last checkpoint of {HISTORY_CHECKPOINTS:,} keys among {len(raw):,} records",
                f"{seconds:.3f} s CPU, {seconds / len(raw) * 1e6:.1f} us a record",
                "read once at start",
            )
        )
    return rows


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``200x10,1000x10`` -> [(200, 10), (1000, 10)]."""
    sizes = []
    for part in text.split(","):
        topics, _, partitions = part.strip().lower().partition("x")
        if not topics.isdigit() or not partitions.isdigit():
            raise argparse.ArgumentTypeError(f"{part!r}: expected TOPICSxPARTITIONS, e.g. 1000x10")
        sizes.append((int(topics), int(partitions)))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=[(1000, 10)],
        help="flow widths, TOPICSxPARTITIONS, comma-separated, each on fresh clusters (default 1000x10)",
    )
    parser.add_argument("--groups", type=int, default=500, help="consumer groups (default 500)")
    parser.add_argument("--group-partitions", type=int, default=20, help="partitions each group commits on (20)")
    parser.add_argument("--records", type=int, default=3, help="records per partition (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the latency measurement (default 5)")
    parser.add_argument("--skip-latency", action="store_true", help="only the whole-cluster flow")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20x2 partitions, 10 groups, 3 rounds")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the first latency round and the runs at scale (slower)"
    )
    parser.add_argument("--verbose", action="store_true", help="the library's INFO logs")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.groups, args.group_partitions, args.repeats = [(20, 2)], 10, 4, 3
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    lat: LatencyResult | None = None
    wide: list[WideResult] = []
    try:
        for number, (topics, partitions) in enumerate(args.sizes):
            with embedded_clusters() as clusters:
                if number == 0 and not args.skip_latency:
                    say(f"1. commit-to-checkpoint latency ({args.repeats} rounds)")
                    lat = measure_latency(clusters.primary, clusters.backup, args.repeats, args.profile)
                say(f"2. a whole-cluster flow: {topics:,} topics x {partitions} partitions, {args.groups} groups")
                wide.append(
                    measure_wide(
                        clusters, topics, partitions, args.groups, args.group_partitions, args.records, args.profile
                    )
                )
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    print(f"\nmirrorflow checkpoint benchmark, {started_at}, {os.cpu_count()} CPU(s), noida-db embedded brokers")
    print(f"command: {command}\n")
    rows = latency_rows(lat) if lat is not None else []
    for result in wide:
        rows += wide_rows(result)
    if len(wide) == 2:
        rows += growth_rows(wide[0], wide[1])
    rows += history_rows()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
