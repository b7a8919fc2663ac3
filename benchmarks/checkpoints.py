"""Benchmark: checkpoint staleness and the cost of one checkpoint run, side by side with MM2's defaults.

Why this exists: MM2 checkpoints on a fixed clock (``emit.checkpoints.interval.seconds`` 60) and writes
target group offsets on another (``sync.group.offsets.interval.seconds`` 60), so a failed-over consumer
resumes from offsets up to ~2-3 minutes old (mm2-behaviour 2.5-2.6). mirrorflow runs the same work as
short Airflow tasks (``emit_checkpoints`` then ``sync_group_offsets``), scheduled on the mirror DAG's
asset events or every N seconds. Whether that is better depends on how long one run takes, and one run
reads the whole offset-syncs and checkpoints topics and asks the source about every group; this script
measures both on real (embedded) brokers so the claim can be checked and re-checked after changes.

It is a benchmark, not a test: it never asserts timings. It starts its own two noida-db clusters (temp
state dir, free ports) and always stops them, also on Ctrl-C, SIGTERM or an exception.

    .venv/bin/python benchmarks/checkpoints.py                  # 1,000 groups x 20 partitions
    .venv/bin/python benchmarks/checkpoints.py --quick          # smoke run: 20 groups x 4 partitions
    .venv/bin/python benchmarks/checkpoints.py --profile        # + cProfile: where the time of each run goes
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import os
import pstats
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from _common import (
    FLOW,
    INTERRUPTED,
    PREFIX,
    commit_many,
    create_topic,
    embedded_clusters,
    mm2_properties,
    peak_rss_mib,
    produce,
    rss_mib,
    say,
    spread,
    table,
    timed,
)
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.checkpoints.emit import CheckpointReport, emit_checkpoints, read_checkpoints
from mirrorflow.checkpoints.groupsync import SyncReport, sync_group_offsets
from mirrorflow.config import parse_config
from mirrorflow.config.model import MirrorConfig
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import RunReport, replicate

#: MM2 defaults the comparison uses (mm2-behaviour 2.2, 2.5, 2.6); mirrorflow reads the same keys.
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
# 2. One checkpoint run at scale
# ----------------------------------------------------------------------------------------------------


@dataclass
class ScaleResult:
    groups: int
    partitions: int
    records_per_partition: int
    setup_seconds: float = 0.0
    commit_seconds: float = 0.0
    emit: CheckpointReport | None = None
    emit_seconds: float = 0.0
    sync: SyncReport | None = None
    sync_seconds: float = 0.0
    emit_again: CheckpointReport | None = None
    emit_again_seconds: float = 0.0
    sync_again: SyncReport | None = None
    sync_again_seconds: float = 0.0
    kinds: Counter[str] = field(default_factory=Counter)
    max_rereads: int = 0
    rss_before: float = 0.0
    peak_after_setup: float = 0.0
    peak_after_emit: float = 0.0
    peak_after_all: float = 0.0


def measure_scale(
    primary: str, backup: str, groups: int, partitions: int, per_partition: int, profile: bool
) -> ScaleResult:
    """``groups`` groups committed on all ``partitions`` partitions, then one emit + sync, and a no-op repeat."""
    config = flow_config(primary, backup)
    flow = config.flow("primary", "backup")
    topic = f"{PREFIX}.scale"
    result = ScaleResult(groups, partitions, per_partition)
    started = time.perf_counter()
    create_topic(primary, topic, partitions)
    produce(primary, topic, partitions, per_partition, "s")
    report = checked_replicate(config)
    result.setup_seconds = time.perf_counter() - started
    say(f"  topic {topic}: {partitions} partitions x {per_partition} records replicated in {report.seconds:.2f} s")

    names = [f"{PREFIX}-g{g:05d}" for g in range(groups)]

    def offset_of(g: int, p: int) -> int:
        """Spread the committed offsets over 0..end, different per group and partition."""
        return (g * 7 + p * 13) % (per_partition + 1)

    say(f"committing {groups} groups x {partitions} partitions on the source (AdminClient, one request per group)")
    _, result.commit_seconds = timed(lambda: commit_many(primary, topic, names, offset_of, partitions))
    say(f"  setup (topic, records, replication) {result.setup_seconds:.2f} s, commits {result.commit_seconds:.2f} s")
    result.rss_before = rss_mib()
    result.peak_after_setup = peak_rss_mib()

    say("timing emit_checkpoints (first run: every (group, partition) is new)")
    result.emit, result.emit_seconds = timed(lambda: emit_checkpoints(flow, timeout=600), profile, "emit_checkpoints")
    result.peak_after_emit = peak_rss_mib()
    say(f"  {result.emit.emitted} checkpoint(s) written in {result.emit_seconds:.2f} s")
    mine = set(names)  # the run also covers the latency group; count only the groups made here
    for g in result.emit.groups:
        if g.group not in mine:
            continue
        result.kinds.update(p.kind for p in g.partitions)
        result.max_rereads = max(result.max_rereads, g.max_rereads)

    say("timing sync_group_offsets (first run: every target group is absent)")
    result.sync, result.sync_seconds = timed(
        lambda: sync_group_offsets(flow, timeout=600), profile, "sync_group_offsets"
    )
    say(f"  {sum(1 for g in result.sync.groups if g.written)} group(s) written in {result.sync_seconds:.2f} s")

    say("timing a second emit_checkpoints + sync_group_offsets with nothing changed")
    result.emit_again, result.emit_again_seconds = timed(
        lambda: emit_checkpoints(flow, timeout=600), profile, "emit_checkpoints (nothing changed)"
    )
    result.sync_again, result.sync_again_seconds = timed(
        lambda: sync_group_offsets(flow, timeout=600), profile, "sync_group_offsets (nothing changed)"
    )
    result.peak_after_all = peak_rss_mib()
    say(
        f"  {result.emit_again.emitted} checkpoint(s) in {result.emit_again_seconds:.2f} s, "
        f"{sum(len(g.written) for g in result.sync_again.groups)} offset(s) in {result.sync_again_seconds:.2f} s"
    )
    errors = [*result.emit.errors, *result.sync.errors, *result.emit_again.errors, *result.sync_again.errors]
    if errors:
        say(f"  errors reported by the library: {errors[:5]}")
    return result


# ----------------------------------------------------------------------------------------------------
# The table
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


def scale_rows(s: ScaleResult) -> list[tuple[str, str, str]]:
    assert s.emit and s.sync and s.emit_again and s.sync_again
    pairs = s.groups * s.partitions
    groups_written = sum(1 for g in s.sync.groups if g.written)
    offsets_written = sum(len(g.written) for g in s.sync.groups)
    kept = sum(len(g.kept) for g in s.sync_again.groups if g.group.startswith(f"{PREFIX}-g"))
    kinds = ", ".join(f"{k} {s.kinds.get(k, 0)}" for k in ("exact", "approximate", "refused", "unavailable"))
    size = f"{s.groups} groups x {s.partitions} partitions"
    return [
        (f"emit_checkpoints, {size}: wall time", f"{s.emit_seconds:.2f} s", "n/a (Connect task, every 60 s)"),
        (
            "  checkpoints written (first run)",
            f"{s.emit.emitted} of {pairs} (offset syncs read: {s.emit.syncs_read})",
            "one per translatable (group, partition)",
        ),
        ("  translation kinds", f"{kinds}; max re-reads {s.max_rereads}", "+1 rule: approximate unless a sync pins it"),
        ("sync_group_offsets: wall time", f"{s.sync_seconds:.2f} s", "n/a (every 60 s, if enabled)"),
        ("  groups / offsets written", f"{groups_written} / {offsets_written}", "all groups absent or EMPTY"),
        (
            "second emit_checkpoints, nothing changed",
            f"{s.emit_again_seconds:.2f} s, {s.emit_again.emitted} written",
            "0 written (same filter)",
        ),
        (
            "second sync_group_offsets, nothing changed",
            f"{s.sync_again_seconds:.2f} s, {sum(len(g.written) for g in s.sync_again.groups)} written, {kept} kept",
            "0 written (never backwards)",
        ),
        (
            "peak RSS of the process",
            (
                f"{s.peak_after_all:.0f} MiB (before the runs: {s.rss_before:.0f} MiB current, "
                f"{s.peak_after_setup:.0f} MiB peak; after first emit: {s.peak_after_emit:.0f} MiB)"
            ),
            "n/a (JVM worker)",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000, help="consumer groups at scale (default 1000)")
    parser.add_argument("--partitions", type=int, default=20, help="partitions of the scale topic (default 20)")
    parser.add_argument("--records", type=int, default=100, help="records per partition at scale (default 100)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the latency measurement (default 5)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20 groups x 4 partitions, 3 rounds")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the first latency round and the runs at scale (slower)"
    )
    parser.add_argument("--verbose", action="store_true", help="the library's INFO logs")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.partitions, args.repeats = 20, 4, 3
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        with embedded_clusters() as clusters:
            primary, backup = clusters.primary, clusters.backup
            say(f"1. commit-to-checkpoint latency ({args.repeats} rounds)")
            lat = measure_latency(primary, backup, args.repeats, args.profile)
            say(f"2. one checkpoint run for {args.groups} groups x {args.partitions} partitions")
            scale = measure_scale(primary, backup, args.groups, args.partitions, args.records, args.profile)
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    print(f"\nmirrorflow checkpoint benchmark, {started_at}, {os.cpu_count()} CPU(s), noida-db embedded brokers")
    print(f"command: {command}\n")
    print(table(latency_rows(lat) + scale_rows(scale)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
