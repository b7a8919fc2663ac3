"""Failover plan and apply: where each consumer group resumes on the target, then commit it there.

Modes, as operators describe them:

* ``planned``: the source answers. Replication is drained first (by the caller), then the groups'
  *current* committed offsets are translated live, exact wherever the copy was contiguous.
* ``disaster``: the source is gone. The last checkpoints on the target are all there is (what MM2's
  ``RemoteClusterUtils.translateOffsets`` would return); their age is part of the report. Where the
  offset syncs survive the source (on the target), each checkpoint's offset is translated again.

Either way each offset gets the best valid answer (``checkpoints.best.choose``): exact from the copied
runs, else the higher of the fresh translation and the checkpoint already on the target; ``basis`` says
which.

Every step is idempotent: planning writes nothing, applying commits offsets that are never behind the
target's own (a group that already moved on keeps its offsets), and a group with active members on
the target is refused unless ``force`` (its consumers would overwrite the offsets anyway).
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from .. import preflight
from ..checkpoints.best import CHECKPOINT, BestTranslator
from ..checkpoints.emit import (
    committed_offsets,
    read_checkpoints,
    read_translator,
    remote_topic,
    source_topic_of,
    syncs_location,
)
from ..checkpoints.groupsync import IDLE_STATES, group_states
from ..checkpoints.translate import OffsetTranslator, Translation
from ..config.model import FlowConfig
from ..kafka import clients
from ..kafka.timestamps import READ_TIMEOUT_S, fetch_timestamps
from ..replication.progress import last_record_timestamp, progress_topic, read_stored_progress
from .outcome import NOT_YET_COPIED, classify

Mode = Literal["planned", "disaster", "failback"]

plan_log = logging.getLogger(__name__)


class FailoverError(RuntimeError):
    """A failover that must not go on (target unreachable, no checkpoints, planned mode without the source)."""


@dataclass
class PartitionMove:
    remote_topic: str
    partition: int
    source_offset: int  # the group's committed offset on the source (live, or as of the checkpoint)
    target_offset: int | None  # where the group resumes on the target (None: cannot translate)
    kind: str  # exact, approximate, refused, unavailable, checkpoint
    rereads: int  # most records the group's consumers may read again
    current: int | None = None  # the group's offset on the target before the failover
    action: str = "write"  # write, keep (target already there or further), skip
    # What the move does (see outcome.py); the fields the report and tools read:
    outcome: str = ""  # exact, re-read, not-yet-copied, untranslated
    re_read_records: int = 0  # records the group reads a second time
    missing_records: int = 0  # committed on the source but not copied yet: not on the target
    missing_age_seconds: float | None = None  # age of the oldest of them (None: unknown, e.g. source not read)
    source_topic: str | None = None
    copied_position: int | None = None  # next source offset the copy will copy (stored progress + 1)
    basis: str = ""  # where target_offset came from: copied runs, offset syncs or existing checkpoint

    def assess(self, copied_position: int | None) -> None:
        """Set the outcome from the translation and how far the copy got (None: not known)."""
        self.copied_position = copied_position
        proven = self.kind == "exact" or self.rereads > 0  # a kept checkpoint counted 0 is not proven exact
        c = classify(self.source_offset, self.target_offset, self.rereads, copied_position, proven)
        self.outcome, self.re_read_records, self.missing_records = c.outcome, c.re_read_records, c.missing_records


@dataclass
class GroupMove:
    group: str
    target_state: str
    partitions: list[PartitionMove] = field(default_factory=list)
    refused: str | None = None  # why the group is not moved
    applied: bool = False

    @property
    def max_rereads(self) -> int:
        """The largest re-read of any row (kept rows too: the report shows every row, the heading agrees)."""
        return max((p.re_read_records if p.outcome else p.rereads for p in self.partitions), default=0)


@dataclass
class FailoverPlan:
    flow: str
    mode: Mode
    dry_run: bool
    started_at: str
    source_reachable: bool | None  # None: not checked (disaster mode)
    checkpoints_age_s: float | None
    groups: list[GroupMove] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def changes(self) -> list[tuple[str, str, int, int]]:
        """(group, remote topic, partition, new offset) the plan writes (or would write in a dry run)."""
        return [
            (g.group, p.remote_topic, p.partition, p.target_offset)  # type: ignore[misc]
            for g in self.groups
            if g.refused is None
            for p in g.partitions
            if p.action == "write" and p.target_offset is not None
        ]


#: Per group: (topic, partition) on the cluster written -> the answer (its ``upstream`` is the offset on the other
#: cluster, its ``downstream`` the offset to write).
Wanted = dict[str, dict[tuple[str, int], Translation]]


def group_moves(dest: FlowConfig, wanted: Wanted, *, force: bool, timeout: float) -> list[GroupMove]:
    """What to write into ``dest.target``'s groups: never backwards, active groups refused unless ``force``.

    Shared by failover (``dest`` is the flow) and failback (``dest`` is the reverse pair).
    """
    names = sorted(wanted)
    states = group_states(clients.admin(dest, "target"), names, timeout)
    current = committed_offsets(clients.admin(dest, "target"), names, timeout)
    moves = []
    for group in names:
        state = states.get(group, ConsumerGroupState.UNKNOWN)
        move = GroupMove(group, state.name)
        if state not in IDLE_STATES and not force:
            move.refused = f"active on {dest.target} ({state.name}); set force to include it"
        have = current.get(group, {})
        for (topic, partition), t in sorted(wanted[group].items()):
            existing = have.get((topic, partition))
            downstream = t.downstream
            part = PartitionMove(
                topic, partition, t.upstream, downstream, t.kind, t.rereads, existing[0] if existing else None
            )
            part.basis = t.basis
            if downstream is None:
                part.action = "skip"
            elif existing is not None and existing[0] >= downstream:
                part.action = "keep"  # never move a target offset backwards
            part.assess(None)  # refined by the caller where it knows how far the copy got
            move.partitions.append(part)
        moves.append(move)
    return moves


def plan_failover(
    flow: FlowConfig,
    *,
    mode: Mode = "disaster",
    groups: str | None = None,
    force: bool = False,
    dry_run: bool = True,
    timeout: float = 30.0,
) -> FailoverPlan:
    """Decide, per group and partition, the target offset (see the module docstring); writes nothing."""
    started = time.monotonic()
    only = re.compile(groups) if groups else None
    try:
        preflight.check_cluster(flow, "target", timeout=min(timeout, 15.0))
    except preflight.ClusterUnreachableError as exc:
        raise FailoverError(f"failover to {flow.target} impossible: {exc}") from None
    source_up: bool | None = None  # disaster: the source is not contacted (a dead one costs a full timeout)
    if mode == "planned":
        try:
            preflight.check_cluster(flow, "source", timeout=min(timeout, 10.0))
            source_up = True
        except preflight.ClusterUnreachableError:
            source_up = False
    if mode == "planned" and not source_up:
        raise FailoverError(f"planned failover needs {flow.source} to answer; it does not: use mode 'disaster'")
    newest = last_record_timestamp(
        clients.client_properties(flow, "target", "consumer"), flow.policy.checkpoints_topic(flow.source)
    )
    plan = FailoverPlan(
        flow.name,
        mode,
        dry_run,
        datetime.now(UTC).isoformat(timespec="seconds"),
        source_up,
        None if newest is None else round(time.time() - newest / 1000, 1),
    )
    # Disaster mode reads the syncs only where they survive the source (offset-syncs.topic.location=target).
    syncs = mode == "planned" or syncs_location(flow)[0] == "target"
    # read_checkpoints looked up here, at call time: benchmarks/failover.py times it by replacing it on this module.
    best = BestTranslator(read_translator(flow, timeout) if syncs else None, read_checkpoints(flow, timeout))
    by_group = wanted_from_checkpoints(flow, best)
    if mode == "planned":
        live = committed_offsets(clients.admin(flow, "source"), list(by_group), timeout)
        add_live(flow, best, by_group, live)
    names = sorted(g for g in by_group if only is None or only.fullmatch(g))
    if not names:
        plan.notes.append(
            f"no group to move: no checkpoints on {flow.target}"
            + (f" for groups matching '{groups}'" if groups else "")
            + " (has the checkpoints DAG run?)"
        )
    plan.groups = group_moves(flow, {g: by_group[g] for g in names}, force=force, timeout=timeout)
    assess_plan(flow, plan, best.translator, timeout)
    plan.seconds = round(time.monotonic() - started, 3)
    return plan


def wanted_from_checkpoints(flow: FlowConfig, best: BestTranslator) -> Wanted:
    """Every group with checkpoints, each checkpoint given its best answer (translated again where syncs were read)."""
    by_group: Wanted = defaultdict(dict)
    for (group, remote, partition), cp in best.checkpoints.items():
        by_group[group][(remote, partition)] = best.resolve(cp, source_topic_of(flow, remote))
    return by_group


def add_live(
    flow: FlowConfig, best: BestTranslator, by_group: Wanted, live: dict[str, dict[tuple[str, int], tuple[int, str]]]
) -> None:
    """Planned mode: the groups' current offsets on the source, each given the best answer, replace the checkpoints'."""
    for group, offsets in live.items():
        for (topic, partition), (upstream, _meta) in offsets.items():
            if flow.should_replicate_topic(topic):
                remote = remote_topic(flow, topic)
                by_group[group][(remote, partition)] = best.translate(group, topic, remote, partition, upstream)


def copied_positions(flow: FlowConfig, timeout: float) -> dict[tuple[str, int], int]:
    """Per source partition, the next offset the copy will copy (stored progress + 1), read on the target.

    The progress lives on the target, so this is known in a disaster too; partitions never copied are absent.
    """
    config = clients.client_properties(flow, "target", "consumer")
    stored = read_stored_progress(config, progress_topic(flow.source), flow.source, timeout=timeout)
    return {key: progress.offset + 1 for key, progress in stored.items()}


def checkpoint_rereads(translator: OffsetTranslator, source_topic: str, p: PartitionMove) -> int:
    """Records a group resuming at a checkpoint's target offset reads again (counted on the source).

    A checkpoint records where the group would resume when it was written, not how exact that was, and the
    copy may have gone on since. Mapping the checkpoint's target offset back through the copied runs gives
    the source record the group would resume at: everything from there to its committed offset it reads
    again (or, past the copied position, lacks: ``classify`` moves those to missing). Without an exact
    mapping (syncs written by MM2) the estimate ``best.choose`` made stands.
    """
    if p.target_offset is None:
        return 0
    back = translator.translate_back(source_topic, p.partition, p.target_offset)
    if back.kind == "exact" and back.downstream is not None:
        return max(0, p.source_offset - back.downstream)
    return p.rereads


def assess_plan(flow: FlowConfig, plan: FailoverPlan, translator: OffsetTranslator | None, timeout: float) -> None:
    """Classify every row as exact, re-read or not yet copied, and age the missing records where the source answers."""
    copied = copied_positions(flow, timeout)
    unknown_rereads = False
    for move in plan.groups:
        for p in move.partitions:
            p.source_topic = source_topic_of(flow, p.remote_topic)
            if p.kind == CHECKPOINT:
                if translator is None:
                    unknown_rereads = True
                else:
                    p.rereads = checkpoint_rereads(translator, p.source_topic, p)
            p.assess(copied.get((p.source_topic, p.partition)))
    if unknown_rereads:
        plan.notes.append(
            f"the offset syncs are on {flow.source} (offset-syncs.topic.location=source), so how exact the "
            "checkpoints are is not known here: re-reads are not counted"
        )
    if plan.source_reachable:
        age_missing(flow, [p for g in plan.groups for p in g.partitions], timeout)


def age_missing(flow: FlowConfig, partitions: list[PartitionMove], timeout: float) -> None:
    """Set the age of the oldest missing record: the source record at the copied position (one fetch each)."""
    rows = [p for p in partitions if p.outcome == NOT_YET_COPIED and p.source_topic and p.copied_position is not None]
    wanted: dict[tuple[str, int], tuple[int, int, int]] = {}
    for p in rows:
        key = (p.source_topic, p.partition)
        end = max(p.source_offset, wanted[key][2]) if key in wanted else p.source_offset
        wanted[key] = (0, p.copied_position, end)  # type: ignore[arg-type]
    if not wanted:
        return
    try:
        stamps = fetch_timestamps(
            clients.client_properties(flow, "source", "consumer"), wanted, min(timeout, READ_TIMEOUT_S)
        )
    except Exception as exc:  # noqa: BLE001 - the age informs; it must never stop a failover
        plan_log.warning("cannot read the ages of the records not copied yet: %s", exc)
        return
    now = time.time()
    for p in rows:
        oldest = stamps.get((p.source_topic, p.partition), (None, None))[1]  # type: ignore[arg-type]
        p.missing_age_seconds = None if oldest is None else round(max(0.0, now - oldest / 1000), 1)


def apply_plan(flow: FlowConfig, plan: FailoverPlan, timeout: float = 30.0) -> FailoverPlan:
    """Commit the plan's offsets to the target's groups (idempotent: re-applying changes nothing)."""
    if plan.dry_run:
        return plan
    admin = clients.admin(flow, "target")
    futures: dict[str, Future] = {}
    for move in plan.groups:
        if move.refused is not None:
            continue
        writes = [
            TopicPartition(p.remote_topic, p.partition, p.target_offset)
            for p in move.partitions
            if p.action == "write" and p.target_offset is not None
        ]
        if writes:
            futures.update(
                admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(move.group, writes)], request_timeout=timeout
                )
            )
        else:
            move.applied = True
    moves = {m.group: m for m in plan.groups}
    for group, future in futures.items():
        try:
            future.result(timeout)
            moves[group].applied = True
        except KafkaException as exc:
            moves[group].refused = f"the target refused the offsets (a consumer joined?): {exc.args[0]}"
    return plan


__all__ = [
    "FailoverError",
    "FailoverPlan",
    "GroupMove",
    "PartitionMove",
    "apply_plan",
    "assess_plan",
    "copied_positions",
    "plan_failover",
    "plan_from_dict",
    "source_topic_of",
]


def plan_from_dict(data: dict[str, Any]) -> FailoverPlan:
    """A plan back from its JSON form (XCom, the failover log)."""
    groups = [
        GroupMove(**{**g, "partitions": [PartitionMove(**p) for p in g["partitions"]]})  # type: ignore[arg-type]
        for g in data["groups"]
    ]
    return FailoverPlan(**{**data, "groups": groups})
