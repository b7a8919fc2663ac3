"""Migrating from MM2: translations never worse than MM2's own checkpoints, exact where mirrorflow copied.

No MM2 process: the test writes the history MM2 would leave, in the library's own wire formats, then lets
mirrorflow continue the copy in process:

* the remote topic holds MM2's copy of source offsets 0..11,999 per partition; on partition 2 MM2's task was
  restarted after 5,999 and re-sent 5,850..5,999 (at-least-once: 150 duplicates downstream);
* ``mm2-offset-syncs.<src>.internal`` holds MM2's sparse syncs as ``OffsetSyncWriter`` emits them (first
  record, every ``offset.lag.max`` = 100 downstream records, upstream gaps, and the delayed sync of the last
  record promoted at the final flush), with no mirrorflow trailer;
* ``mm2-offsets.<src>.internal`` holds MM2's progress (last copied offset 11,999, no mirrorflow headers);
* ``<src>.checkpoints.internal`` holds MM2's checkpoints, each what MM2's store said when it wrote it (the
  syncs read up to the group's committed offset): precise then, while today's store has lost that precision.

Then every group's answer (checkpoint emission, ``translate``, a disaster failover dry run) is at least as
good as MM2's checkpoint, exact where mirrorflow copied, names its basis, and skips no record.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from mirrorflow.checkpoints.emit import emit_checkpoints, read_translator
from mirrorflow.checkpoints.failover_offsets import translate_group
from mirrorflow.checkpoints.groupsync import sync_group_offsets
from mirrorflow.checkpoints.syncstore import OffsetSyncStore
from mirrorflow.cli import main
from mirrorflow.config import load_config
from mirrorflow.failover.failback import plan_failback
from mirrorflow.failover.plan import plan_failover
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.progress import progress_location, progress_topic
from mirrorflow.replication.run import replicate
from mirrorflow.wire import Checkpoint, OffsetSync, source_offset_value
from tests.integration.test_checkpoints import commit
from tests.kafka_helpers import create_topic, produce, read_all

pytestmark = pytest.mark.integration

MM2_END = 12_000  # MM2 copied source offsets 0..11,999 of every partition
TOTAL = 12_600  # mirrorflow copies 12,000..12,599
RESTART = (6_000, 5_850)  # partition 2: MM2's task restarted after 5,999 and resumed from 5,850
OFFSET_LAG_MAX = 100
COMPACT = {"cleanup.policy": "compact"}

#: group suffix -> (partition, committed offset, upstream offset of its MM2 checkpoint or None)
GROUPS: dict[str, tuple[int, int, int | None]] = {
    "g-a": (0, 10_050, 10_050),  # group g-a: old offset in MM2's range, its checkpoint unchanged
    "g-c": (1, 6_700, 6_700),  # group g-c
    "g-x2": (2, 11_000, 11_000),  # group g-x2: after MM2's restart (downstream shifted by 150)
    "g-old": (2, 3_000, 3_000),  # before MM2's restart: today's store cleared by the rewind, refuses it
    "g-moved": (0, 3_050, 3_000),  # moved on since MM2's checkpoint; the translation did not get better
    "g-edge": (0, MM2_END, MM2_END),  # exactly where MM2 stopped: mirrorflow's first record
    "g-new": (1, 12_300, 11_500),  # in mirrorflow's range; its MM2 checkpoint is from earlier
}


def value(partition: int, upstream: int) -> bytes:
    return b"p%d-%d" % (partition, upstream)


def mm2_copy_order(partition: int) -> list[int]:
    """The source offsets MM2 sent to the target, in order (with the restart's re-sent records on partition 2)."""
    if partition != 2:
        return list(range(MM2_END))
    crashed_after, resumed_from = RESTART
    return list(range(crashed_after)) + list(range(resumed_from, MM2_END))


@dataclass
class _PartitionState:
    """MM2's ``OffsetSyncWriter.PartitionState``: previous offsets and the last sync, reset by a task restart."""

    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1

    def due(self, upstream: int, downstream: int) -> bool:
        return (
            self.last_sync_downstream == -1
            or downstream - (self.last_sync_downstream + 1) >= OFFSET_LAG_MAX
            or upstream - self.previous_upstream != 1
            or downstream < self.previous_downstream
        )


def mm2_syncs(topic: str, partition: int, copies: list[tuple[int, int]]) -> Iterator[OffsetSync]:
    """The syncs MM2 emits for ``copies`` (upstream, downstream) in send order (MM2's ``OffsetSyncWriter``)."""
    state, delayed = _PartitionState(), None
    for upstream, downstream in copies:
        if partition == 2 and upstream == RESTART[1] and state.previous_upstream == RESTART[0] - 1:
            state, delayed = _PartitionState(), None  # a new task: a crash loses the delayed sync
        if state.due(upstream, downstream):
            state.last_sync_downstream, delayed = downstream, None
            yield OffsetSync(topic, partition, upstream, downstream)
        else:
            delayed = OffsetSync(topic, partition, upstream, downstream)
        state.previous_upstream, state.previous_downstream = upstream, downstream
    if delayed is not None:
        yield delayed  # the last flush promotes the delayed sync (KAFKA-15906)


def mm2_checkpoint(syncs: list[OffsetSync], partition: int, upstream: int) -> int:
    """What MM2's checkpoint task wrote for ``upstream`` soon after copying it: its store fed up to there."""
    store = OffsetSyncStore(must_read_to_end=False)
    for sync in (s for s in syncs if s.partition == partition):
        store.add(sync.topic, sync.partition, sync.upstream_offset, sync.downstream_offset)
        if sync.upstream_offset >= upstream:
            break
    store.finish_initial_read()
    downstream = store.translate_mm2(syncs[0].topic, partition, upstream)
    assert downstream is not None and downstream >= 0
    return downstream


def write(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for key, val, partition in records:
        producer.produce(topic, key=key, value=val, partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def migrated(kafka_clusters: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """MM2's history on the clusters, mirrorflow's continued copy, and the groups' committed offsets."""
    tag = uuid.uuid4().hex[:6]
    src, prefix = f"mm{tag}", f"mig{tag}"
    primary, backup = kafka_clusters.primary, kafka_clusters.backup
    topic = create_topic(primary, f"{prefix}.orders", partitions=3)
    produce(primary, topic, [{"value": value(p, u), "partition": p} for p in range(3) for u in range(TOTAL)])

    remote = create_topic(backup, f"{src}.{topic}", partitions=3)
    syncs: list[OffsetSync] = []
    landed: dict[int, dict[int, int]] = {}  # partition -> upstream -> downstream (the last copy)
    for p in range(3):
        order = mm2_copy_order(p)
        delivered = produce(backup, remote, [{"value": value(p, u), "partition": p} for u in order])
        copies = [(u, d.offset) for u, d in zip(order, delivered, strict=True)]
        landed[p] = dict(copies)
        syncs += mm2_syncs(topic, p, copies)
    syncs_topic = create_topic(backup, f"mm2-offset-syncs.{src}.internal", config=COMPACT)
    write(backup, syncs_topic, [(s.key(), s.value(), 0) for s in syncs])
    progress = create_topic(backup, progress_topic(src), partitions=25, config=COMPACT)
    write(
        backup,
        progress,
        [
            (key, source_offset_value(MM2_END - 1), where)
            for key, where in (progress_location(src, topic, p, 25) for p in range(3))
        ],
    )
    mm2: dict[str, Checkpoint] = {}
    for suffix, (p, _committed, at) in GROUPS.items():
        if at is not None:
            mm2[suffix] = Checkpoint(f"{prefix}-{suffix}", remote, p, at, mm2_checkpoint(syncs, p, at))
    checkpoints_topic = create_topic(backup, f"{src}.checkpoints.internal", config=COMPACT)
    write(backup, checkpoints_topic, [(cp.key(), cp.value(), 0) for cp in mm2.values()])
    for suffix, (p, committed, _at) in GROUPS.items():
        commit(primary, f"{prefix}-{suffix}", {(topic, p): committed})

    path = tmp_path_factory.mktemp("mm2") / "mm2.properties"
    path.write_text(
        f"clusters = {src}, dr\n{src}.bootstrap.servers = {primary}\ndr.bootstrap.servers = {backup}\n"
        f"{src}->dr.enabled = true\n{src}->dr.topics = {prefix}\\\\..*\n{src}->dr.groups = {prefix}-.*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\nemit.heartbeats.enabled = false\n"
        "mirrorflow.unit.max.records = 200\n"
    )
    config = load_config(path)
    report = replicate(config, f"{src}->dr", None, LocalExecutor())
    assert report.ok and report.lag == 0, report.errors
    copies = read_all(backup, remote)
    for p in range(3):  # mirrorflow resumed right after MM2's last copy: no gap, no duplicate of its own
        values = [r.value for r in copies if r.partition == p]
        assert values == [value(p, u) for u in mm2_copy_order(p)] + [value(p, u) for u in range(MM2_END, TOTAL)]
    for r in copies:
        upstream = int(r.value.split(b"-")[1])
        if upstream >= MM2_END:
            landed[r.partition][upstream] = r.offset
    return {
        "flow": config.flow(src, "dr"),
        "prefix": prefix,
        "topic": topic,
        "remote": remote,
        "mm2": mm2,
        "landed": landed,
        "copies": copies,
        "path": path,
    }


def resumes_cleanly(copies: list[Any], partition: int, committed: int, downstream: int) -> int:
    """Check that resuming at ``downstream`` skips no record from ``committed`` on; return the records read again."""
    read = [int(r.value.split(b"-")[1]) for r in copies if r.partition == partition and r.offset >= downstream]
    assert set(range(committed, TOTAL)) <= set(read), "a record would be skipped"
    return sum(1 for u in read if u < committed)


def test_every_answer_is_at_least_as_good_as_mm2s_checkpoint_and_exact_where_mirrorflow_copied(
    migrated: dict[str, Any],
) -> None:
    flow, prefix, topic = migrated["flow"], migrated["prefix"], migrated["topic"]
    mm2, landed, copies = migrated["mm2"], migrated["landed"], migrated["copies"]
    syncs_only = read_translator(flow)  # what the offset syncs alone say: today's syncs

    emitted = {g.group: g.partitions[0] for g in emit_checkpoints(flow).groups}
    live = {suffix: translate_group(flow, f"{prefix}-{suffix}")[1][0] for suffix in GROUPS}
    disaster = plan_failover(flow, mode="disaster", dry_run=True)
    moves = {g.group: g.partitions[0] for g in disaster.groups}

    table = []
    seen: dict[str, tuple[int, int, int, str, int]] = {}
    for suffix, (p, committed, _at) in GROUPS.items():
        group = f"{prefix}-{suffix}"
        e, t, m = emitted[group], live[suffix], moves[group]
        before = syncs_only.translate(topic, p, committed)
        table.append(
            (suffix, p, committed, mm2[suffix].downstream_offset, e.downstream, e.basis, e.kind, before.downstream)
        )
        assert (e.downstream, e.basis) == (t.downstream, t.basis), suffix  # emission and translate agree
        assert (m.target_offset, m.basis) == (e.downstream, e.basis), suffix  # ...and the disaster dry run
        assert e.downstream is not None and e.downstream >= mm2[suffix].downstream_offset, suffix  # never worse
        rereads = resumes_cleanly(copies, p, committed, e.downstream)  # valid: nothing skipped
        seen[suffix] = (rereads, e.rereads, t.rereads, m.outcome, m.re_read_records)
        if e.kind == "exact":
            assert rereads == 0 and e.downstream == landed[p][committed]

    rows = {row[0]: row for row in table}
    # Records actually read again from the answer; what emission and translate report; the disaster dry run's row
    # (its source offset is the checkpoint's: 3,000 for g-moved). g-old's count is an upper bound: MM2's restart
    # duplicated 150 records, the count assumes one copy per offset. Never "exact" where records are re-read.
    assert seen == {
        "g-a": (50, 50, 50, "re-read", 50),
        "g-c": (33, 33, 33, "re-read", 33),
        "g-x2": (99, 99, 99, "re-read", 99),
        "g-old": (70, 220, 220, "re-read", 220),
        "g-moved": (120, 120, 120, "re-read", 70),
        "g-edge": (0, 0, 0, "exact", 0),
        "g-new": (0, 0, 0, "exact", 0),
    }
    # MM2's range: its checkpoint kept (emission writes nothing over it); today's syncs alone were far worse.
    for suffix in ("g-a", "g-c", "g-x2", "g-old", "g-moved"):
        _, p, committed, cp, answer, basis, kind, before = rows[suffix]
        assert (answer, basis, kind) == (cp, "existing checkpoint", "checkpoint"), suffix
        assert before is None or before < cp, suffix
        assert not emitted[f"{prefix}-{suffix}"].emitted
    assert rows["g-old"][7] is None  # MM2's restart rewound the store: only the checkpoint answers
    # The figures: MM2's +1 rule on the sync at the last multiple of 101 below (partition 2 after the restart:
    # syncs at 5,850 + k * 101, downstream shifted by 150).
    assert [rows[s][3] for s in ("g-a", "g-c", "g-x2", "g-old", "g-moved")] == [10_000, 6_667, 11_051, 2_930, 2_930]
    # Where mirrorflow copied (and at MM2's last record + 1): exact, better than the MM2 checkpoint, written.
    for suffix in ("g-edge", "g-new"):
        _, p, committed, cp, answer, basis, kind, _before = rows[suffix]
        assert (answer, basis, kind) == (landed[p][committed], "copied runs", "exact"), suffix
    assert emitted[f"{prefix}-g-new"].emitted and rows["g-new"][3] == 11_414  # MM2's checkpoint for 11,500


def test_translate_names_the_basis_it_used(migrated: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    flow_args = ["--config", str(migrated["path"]), "--flow", migrated["flow"].name]
    group = f"{migrated['prefix']}-g-a"
    assert main(["translate", *flow_args, "--group", group, "--json"]) == 0
    [offset] = json.loads(capsys.readouterr().out)["offsets"]
    assert (offset["upstream"], offset["downstream"], offset["kind"], offset["basis"], offset["rereads"]) == (
        10_050,
        10_000,
        "checkpoint",
        "existing checkpoint",
        50,
    )
    assert main(["translate", *flow_args, "--group", f"{migrated['prefix']}-g-new"]) == 0
    out = capsys.readouterr().out
    assert f"{migrated['remote']} [1]  offset      12301  exact [copied runs]" in out


def test_group_offset_sync_writes_the_best_answers(migrated: dict[str, Any]) -> None:
    flow, prefix, remote, mm2 = migrated["flow"], migrated["prefix"], migrated["remote"], migrated["mm2"]
    emit_checkpoints(flow)  # g-new's exact checkpoint (the others keep MM2's)
    synced = sync_group_offsets(flow)
    assert synced.errors == [] and synced.skipped_active == []
    written = {g.group.removeprefix(f"{prefix}-"): (g.written, g.basis) for g in synced.groups}
    for suffix in ("g-a", "g-c", "g-x2", "g-old", "g-moved"):
        p = GROUPS[suffix][0]
        assert written[suffix] == (
            {f"{remote}:{p}": mm2[suffix].downstream_offset},
            {f"{remote}:{p}": "existing checkpoint"},
        ), suffix
    landed = migrated["landed"]
    assert written["g-edge"] == ({f"{remote}:0": landed[0][MM2_END]}, {f"{remote}:0": "copied runs"})
    assert written["g-new"] == ({f"{remote}:1": landed[1][12_300]}, {f"{remote}:1": "copied runs"})


def test_failback_dry_run_maps_the_groups_home_never_backwards(migrated: dict[str, Any]) -> None:
    """After the group sync above, each group sits on the remote topic at its answer; going home inverts it."""
    flow, prefix, topic = migrated["flow"], migrated["prefix"], migrated["topic"]
    plan = plan_failback(load_config(migrated["path"]), flow, groups=f"{prefix}-.*", dry_run=True)
    rows = {
        g.group.removeprefix(f"{prefix}-"): (p.remote_topic, p.target_offset, p.kind, p.basis, p.action)
        for g in plan.groups
        for p in g.partitions
    }
    # Where mirrorflow copied, exactly home (the source already holds these offsets: nothing to write).
    assert rows["g-edge"] == (topic, MM2_END, "exact", "copied runs", "keep")
    assert rows["g-new"] == (topic, 12_300, "exact", "copied runs", "keep")
    # In MM2's range, one past the closest sync kept before the checkpoint's offset: never ahead of what the
    # group committed on the source, which keeps its own offset (never moved back).
    homes = {"g-a": 9_697, "g-c": 6_465, "g-x2": 10_699, "g-moved": 1}  # the store lost precision there
    for suffix, home in homes.items():
        assert rows[suffix] == (topic, home, "approximate", "offset syncs", "keep"), suffix
        assert home <= GROUPS[suffix][1]
    assert rows["g-old"] == (topic, None, "refused", "", "skip")  # before MM2's restart: no sync kept, not moved
