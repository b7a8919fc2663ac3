"""Group offset sync: commit the latest checkpoints into the target's consumer groups (KIP-545).

With ``sync.group.offsets.enabled`` a consumer that fails over needs no tooling: its group already has
offsets on the target. Rules, MM2's (``MirrorCheckpointTask.syncGroupOffset``, KIP-545) plus what MM2 only logs:

* only groups that are empty or absent on the target are written; a group with members there is
  **skipped and named** (MM2 sends the write anyway and logs the broker's refusal);
* a target offset is **never moved backwards**: a partition is written only if the target has no
  offset for it or a smaller one;
* the offsets come from the checkpoints topic (state on the cluster), so this step can run anywhere,
  after any checkpoint run; each checkpoint's committed offset is given the best valid answer
  (``best.choose``): the checkpoint, or the exact translation the copy allows now if it got there since.

Requests: one ``describe_consumer_groups`` for every group, then one offsets listing and (where something is
written) one ``alter_consumer_group_offsets`` per group, since confluent-kafka takes one group per such call:
each batch is sent at once and awaited together, never one group after another.
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from ..config.model import FlowConfig
from ..kafka import clients
from ..wire import Checkpoint
from .best import BestTranslator, Checkpoints
from .emit import collect_committed_offsets, request_committed_offsets, source_topic_of
from .state import StateReads

log = logging.getLogger(__name__)

#: Group states in which nobody consumes: offsets may be written for the group.
IDLE_STATES = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)


@dataclass
class GroupSync:
    group: str
    state: str  # the group's state on the target before the write
    written: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> offset written
    basis: dict[str, str] = field(default_factory=dict)  # "topic:partition" -> where the offset came from
    kept: dict[str, int] = field(default_factory=dict)  # target offsets already at or past the checkpoint
    skipped: str | None = None  # why nothing was written (an active group)

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` of it, without its deep copy of every entry: a sync has one per group."""
        return {
            "group": self.group,
            "state": self.state,
            "written": dict(self.written),
            "basis": dict(self.basis),
            "kept": dict(self.kept),
            "skipped": self.skipped,
        }


@dataclass
class SyncReport:
    flow: str
    seconds: float = 0.0
    groups: list[GroupSync] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def skipped_active(self) -> list[str]:
        return [g.group for g in self.groups if g.skipped]

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "seconds": self.seconds,
            "written": sum(len(g.written) for g in self.groups),
            "skipped_active": self.skipped_active,
            "groups": [g.to_dict() for g in self.groups],
            "errors": self.errors,
        }


def request_group_states(admin: Any, groups: list[str], timeout: float) -> dict[str, Future]:
    """Ask for every group's description at once: one ``describe_consumer_groups`` call for all of them."""
    return admin.describe_consumer_groups(groups, request_timeout=timeout) if groups else {}


def collect_group_states(futures: dict[str, Future], timeout: float) -> dict[str, ConsumerGroupState]:
    """Each described group's state (UNKNOWN when it cannot be described)."""
    states: dict[str, ConsumerGroupState] = {}
    for group, future in futures.items():
        try:
            states[group] = future.result(timeout).state
        except KafkaException as exc:
            log.warning("group %s: cannot describe it: %s", group, exc)
            states[group] = ConsumerGroupState.UNKNOWN
    return states


def group_states(admin: Any, groups: list[str], timeout: float) -> dict[str, ConsumerGroupState]:
    """Each group's state on the admin's cluster (UNKNOWN when it cannot be described), one request for all."""
    return collect_group_states(request_group_states(admin, groups, timeout), timeout)


def sync_group_offsets(
    flow: FlowConfig, *, groups: str | None = None, timeout: float = 60.0, best: BestTranslator | None = None
) -> SyncReport:
    """Write the latest checkpoints' best answers to the target's idle groups; never backwards; active groups named.

    ``best`` (the translator and checkpoints) is read when not given: the checkpoints first, then the target is
    asked about their groups while the syncs of their partitions (only those) are decoded.
    """
    started = time.monotonic()
    report = SyncReport(flow.name)
    only = re.compile(groups) if groups else None
    target_admin = clients.admin(flow, "target")
    if best is None:
        with StateReads(flow, timeout) as reads:
            mine, source_of = _selected(flow, reads.checkpoints(), only)
            described = request_group_states(target_admin, sorted({key[0] for key, _cp in mine}), timeout)
            best = reads.best({(source_of[key[1]], key[2]) for key, _cp in mine})
    else:
        mine, source_of = _selected(flow, best.checkpoints, only)
        described = request_group_states(target_admin, sorted({key[0] for key, _cp in mine}), timeout)
    latest: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)  # (topic, partition, offset, basis)
    for (group, topic, partition), cp in mine:
        t = best.resolve(cp, source_of[topic])
        if t.downstream is not None:
            latest[group].append((topic, partition, t.downstream, t.basis))
    names = sorted(latest)
    states = collect_group_states(described, timeout)
    listed = request_committed_offsets(target_admin, [g for g in names if states.get(g) in IDLE_STATES], timeout)
    current = collect_committed_offsets(listed, timeout)
    futures: dict[str, Future] = {}
    for group in names:
        state = states.get(group, ConsumerGroupState.UNKNOWN)
        result = GroupSync(group, state.name)
        report.groups.append(result)
        if state not in IDLE_STATES:
            result.skipped = f"active on {flow.target} ({state.name}): its consumers own its offsets"
            log.warning("group %s: %s; not written", group, result.skipped)
            continue
        have = current.get(group, {})
        write = []
        for topic, partition, offset, basis in sorted(latest[group]):
            name = f"{topic}:{partition}"
            existing = have.get((topic, partition))
            if existing is not None and existing[0] >= offset:
                result.kept[name] = existing[0]
                continue
            metadata = best.checkpoints[(group, topic, partition)].metadata
            write.append(TopicPartition(topic, partition, offset, metadata=metadata))
            result.written[name] = offset
            result.basis[name] = basis
        if write:
            futures.update(
                target_admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, write)], request_timeout=timeout
                )
            )
    by_group = {g.group: g for g in report.groups}
    for group, future in futures.items():
        try:
            answer = future.result(timeout)
            failed = [f"{tp.topic}:{tp.partition}: {tp.error}" for tp in answer.topic_partitions or [] if tp.error]
            if failed:
                report.errors.append(f"group {group}: " + "; ".join(failed))
        except KafkaException as exc:
            # A consumer joined between describe and write: the broker refuses (UNKNOWN_MEMBER_ID etc.).
            sync = by_group[group]
            sync.written.clear()
            sync.skipped = f"became active on {flow.target} during the sync: {exc.args[0]}"
            log.warning("group %s: %s", group, sync.skipped)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _selected(
    flow: FlowConfig, checkpoints: Checkpoints, only: re.Pattern[str] | None
) -> tuple[list[tuple[tuple[str, str, int], Checkpoint]], dict[str, str]]:
    """The checkpoints of the groups ``only`` lets through (all: None), and the source topic of each remote topic
    among them (asked once per topic, not once per checkpoint)."""
    wanted: dict[str, bool] = {}
    source_of: dict[str, str] = {}
    mine: list[tuple[tuple[str, str, int], Checkpoint]] = []
    for key, cp in checkpoints.items():
        keep = wanted.get(key[0])
        if keep is None:
            keep = wanted[key[0]] = only is None or only.fullmatch(key[0]) is not None
        if keep:
            mine.append((key, cp))
            if key[1] not in source_of:
                source_of[key[1]] = source_topic_of(flow, key[1])
    return mine, source_of


__all__ = [
    "IDLE_STATES",
    "GroupSync",
    "SyncReport",
    "collect_group_states",
    "group_states",
    "request_group_states",
    "sync_group_offsets",
]
