"""Failover plan and apply: where each consumer group resumes on the target, then commit it there.

Modes, as operators describe them:

* ``planned``: the source answers. Replication is drained first (by the caller), then the groups'
  *current* committed offsets are translated live, exact wherever the copy was contiguous.
* ``disaster``: the source is gone. The last checkpoints on the target are all there is (what MM2's
  ``RemoteClusterUtils.translateOffsets`` would return); their age is part of the report.

Every step is idempotent: planning writes nothing, applying commits offsets that are never behind the
target's own (a group that already moved on keeps its offsets), and a group with active members on
the target is refused unless ``force`` (its consumers would overwrite the offsets anyway).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from .. import clients, preflight
from ..checkpoints.emit import committed_offsets, read_checkpoints, read_translator, remote_topic
from ..checkpoints.groupsync import IDLE_STATES, group_states
from ..config.model import FlowConfig
from ..replication.progress import last_record_timestamp

Mode = Literal["planned", "disaster", "failback"]


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


@dataclass
class GroupMove:
    group: str
    target_state: str
    partitions: list[PartitionMove] = field(default_factory=list)
    refused: str | None = None  # why the group is not moved
    applied: bool = False

    @property
    def max_rereads(self) -> int:
        return max((p.rereads for p in self.partitions if p.action == "write"), default=0)


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


#: Per group: (topic, partition) on the cluster written -> (offset on the other cluster, offset to write, kind, rereads).
Wanted = dict[str, dict[tuple[str, int], tuple[int, int | None, str, int]]]


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
        for (topic, partition), (upstream, downstream, kind, rereads) in sorted(wanted[group].items()):
            existing = have.get((topic, partition))
            part = PartitionMove(
                topic, partition, upstream, downstream, kind, rereads, existing[0] if existing else None
            )
            if downstream is None:
                part.action = "skip"
            elif existing is not None and existing[0] >= downstream:
                part.action = "keep"  # never move a target offset backwards
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
    checkpoints = read_checkpoints(flow, timeout)
    by_group: Wanted = defaultdict(dict)
    for (group, topic, partition), cp in checkpoints.items():
        by_group[group][(topic, partition)] = (cp.upstream_offset, cp.downstream_offset, "checkpoint", 0)
    if mode == "planned":
        translator = read_translator(flow, timeout)
        live = committed_offsets(clients.admin(flow, "source"), list(by_group), timeout)
        for group, offsets in live.items():
            for (topic, partition), (upstream, _meta) in offsets.items():
                if flow.should_replicate_topic(topic):
                    t = translator.translate(topic, partition, upstream)
                    by_group[group][(remote_topic(flow, topic), partition)] = (
                        upstream,
                        t.downstream,
                        t.kind,
                        t.rereads,
                    )
    names = sorted(g for g in by_group if only is None or only.fullmatch(g))
    if not names:
        plan.notes.append(
            f"no group to move: no checkpoints on {flow.target}"
            + (f" for groups matching '{groups}'" if groups else "")
            + " (has the checkpoints DAG run?)"
        )
    plan.groups = group_moves(flow, {g: by_group[g] for g in names}, force=force, timeout=timeout)
    plan.seconds = round(time.monotonic() - started, 3)
    return plan


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
    "plan_failover",
    "plan_from_dict",
]


def plan_from_dict(data: dict[str, Any]) -> FailoverPlan:
    """A plan back from its JSON form (XCom, the failover log)."""
    groups = [
        GroupMove(**{**g, "partitions": [PartitionMove(**p) for p in g["partitions"]]})  # type: ignore[arg-type]
        for g in data["groups"]
    ]
    return FailoverPlan(**{**data, "groups": groups})
