"""Checkpoints: translate the source's consumer-group offsets and write them in MM2's format and place.

One run does what MM2's ``MirrorCheckpointTask`` does in one poll (KIP-382), reading its
state from the clusters so any process can run it:

1. read the offset-syncs topic into an :class:`OffsetTranslator` (exact runs + MM2's store), with the
   copy's stored progress (labels at a trailing transaction marker);
2. read ``<source>.checkpoints.internal`` on the target: the last checkpoint per (group, partition),
   so checkpoints stay monotonic across runs exactly as MM2 keeps them;
3. list the source's groups passing the group filter, and their committed offsets on topics passing
   the topic filter (one ``ListGroups``, then one offsets request per group, all in flight at once), while
   the topics of 1 and 2 are read in the background (``state.StateReads``); the syncs and progress are then
   decoded only for the partitions the groups committed on;
4. translate each, rename the topic (``orders`` -> ``primary.orders``; ``backup.orders`` -> ``orders``
   for a topic that came from the target), take the best valid answer between that translation and the
   checkpoint already there (``best.choose``: MM2's checkpoints keep what its store has forgotten), and
   write it to partition 0 if MM2 would (first checkpoint, upstream rewind, or downstream moved forward):
   an existing checkpoint that is at least as good is kept, never replaced by a worse one.

The report says, per group and partition, whether the answer is exact, approximate (and how many
records a failed-over consumer may re-read at most), an existing checkpoint kept, or refused, and its basis.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from ..config.model import FlowConfig
from ..internal_topics import InternalTopic, TopicState, ensure_internal_topic
from ..kafka import clients
from ..wire import Checkpoint
from .best import CHECKPOINT, BestTranslator
from .state import SourcePartition, StateReads, latest_checkpoints, read_raw, syncs_location
from .translate import EXISTING_CHECKPOINT, OffsetTranslator, Translation

log = logging.getLogger(__name__)

#: confluent-kafka's "no committed offset" marker.
_OFFSET_INVALID = -1001


@dataclass
class PartitionResult:
    """One (group, source partition): what it committed, where it translates, and what was written."""

    topic: str
    partition: int
    remote_topic: str
    upstream: int
    downstream: int | None
    kind: str
    rereads: int
    reason: str
    emitted: bool = False
    basis: str = ""  # copied runs, offset syncs or existing checkpoint

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` of it (every field is a plain value), at a fraction of its cost: a run has one
        per (group, partition)."""
        return dict(self.__dict__)


@dataclass
class GroupResult:
    group: str
    partitions: list[PartitionResult] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for p in self.partitions if p.kind == kind)

    @property
    def max_rereads(self) -> int:
        """The largest number of records a consumer of this group may read twice after failing over."""
        return max((p.rereads for p in self.partitions if p.kind in ("approximate", CHECKPOINT)), default=0)

    def summary(self) -> dict[str, Any]:
        kinds = Counter(p.kind for p in self.partitions)
        return {
            "group": self.group,
            "exact": kinds["exact"],
            "approximate": kinds["approximate"] + kinds[CHECKPOINT],
            "kept": kinds[CHECKPOINT],
            "refused": kinds["refused"] + kinds["unavailable"],
            "max_rereads": self.max_rereads,
            "emitted": sum(1 for p in self.partitions if p.emitted),
        }


@dataclass
class CheckpointReport:
    flow: str
    started_at: str
    seconds: float = 0.0
    syncs_read: int = 0
    groups: list[GroupResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    internal_topics: list[TopicState] = field(default_factory=list)  # as found at start, problems named
    dry_run: bool = False  # nothing written: ``emitted`` counts what would have been

    @property
    def emitted(self) -> int:
        return sum(1 for g in self.groups for p in g.partitions if p.emitted)

    def to_dict(self, group_form: Callable[[GroupResult], dict[str, Any]] | None = None) -> dict[str, Any]:
        """The report as plain data; ``group_form`` gives each group's entry (default: its summary and every
        partition)."""
        form = group_form or (lambda g: {**g.summary(), "partitions": [p.to_dict() for p in g.partitions]})
        return {
            "flow": self.flow,
            "started_at": self.started_at,
            "seconds": self.seconds,
            "syncs_read": self.syncs_read,
            "emitted": self.emitted,
            "dry_run": self.dry_run,
            "groups": [form(g) for g in self.groups],
            "errors": self.errors,
            "internal_topics": [t.to_dict() for t in self.internal_topics],
        }


# ----------------------------------------------------------------------------------------------------
# Reading what the clusters hold
# ----------------------------------------------------------------------------------------------------


def read_translator(
    flow: FlowConfig, timeout: float = 60.0, *, partitions: Collection[SourcePartition] | None = None
) -> OffsetTranslator:
    """Every offset sync of the flow (partition 0 from the beginning), as a translator, and the copy's progress.

    The progress (on the target) tells an offset right after a trailing transaction marker from one the copy
    has not reached (see ``OffsetTranslator.note_progress``). ``partitions``: only these source partitions are
    decoded (None: all); the translator answers "unavailable" for any other.
    """
    with StateReads(flow, timeout) as reads:
        translator = reads.translator(partitions)
    assert translator is not None
    return translator


def read_best(flow: FlowConfig, timeout: float = 60.0, *, syncs: bool = True) -> BestTranslator:
    """The flow's translator (unless ``syncs`` is False: they cannot be read) and the checkpoints on the target."""
    with StateReads(flow, timeout, syncs=syncs) as reads:
        return reads.best()


def read_checkpoints(flow: FlowConfig, timeout: float = 60.0) -> dict[tuple[str, str, int], Checkpoint]:
    """The last checkpoint per (group, remote topic, partition) in the target's checkpoints topic."""
    topic = flow.policy.checkpoints_topic(flow.source)
    return latest_checkpoints(read_raw(flow, "target", topic, timeout), topic=topic)


def _wait_all(futures: dict[str, Future], timeout: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, future in futures.items():
        try:
            results[name] = future.result(timeout)
        except KafkaException as exc:
            results[name] = exc
    return results


def list_groups(admin: AdminClient, timeout: float) -> list[str]:
    """The cluster's consumer groups, in one request (``ListGroups``)."""
    listing = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
    return sorted(g.group_id for g in listing.valid)


def request_committed_offsets(admin: AdminClient, groups: Iterable[str], timeout: float) -> dict[str, Future]:
    """Ask for the committed offsets of every group at once: one request each (confluent-kafka takes one group per
    ``list_consumer_group_offsets`` call), all in flight together. Collect with :func:`collect_committed_offsets`."""
    futures: dict[str, Future] = {}
    for group in groups:
        futures.update(
            admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
        )
    return futures


def collect_committed_offsets(
    futures: dict[str, Future], timeout: float
) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
    """(offset, metadata) per (topic, partition) of each group asked; a group that cannot be listed is left out."""
    result: dict[str, dict[tuple[str, int], tuple[int, str]]] = {}
    for group, answer in _wait_all(futures, timeout).items():
        if isinstance(answer, Exception):
            log.warning("group %s: cannot list committed offsets: %s", group, answer)
            continue
        result[group] = {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in answer.topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }
    return result


def committed_offsets(
    admin: AdminClient, groups: Iterable[str], timeout: float
) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
    """(offset, metadata) per (topic, partition) of each group; groups are asked concurrently (one call each)."""
    return collect_committed_offsets(request_committed_offsets(admin, groups, timeout), timeout)


def remote_topic(flow: FlowConfig, topic: str) -> str:
    """MM2's renaming of a checkpointed topic (2.5): back to the original name for the target's own topics."""
    if flow.policy.topic_source(topic) == flow.target:
        return flow.policy.original_topic(topic)
    return flow.policy.format_remote_topic(flow.source, topic)


def source_topic_of(flow: FlowConfig, remote: str) -> str:
    """The source topic a remote topic copies (the inverse of :func:`remote_topic`)."""
    if flow.policy.topic_source(remote) == flow.source:
        return flow.policy.upstream_topic(remote) or remote
    return flow.policy.format_remote_topic(flow.target, remote)  # the target's own topic, back home


def should_emit(previous: Checkpoint | None, chosen: Translation) -> bool:
    """MM2's monotonic filter, on the best answer: first checkpoint, an upstream rewind, or downstream moved forward.

    The existing checkpoint itself (``chosen`` based on it) is never written again, and for the same or a
    later upstream offset nothing at or below its downstream offset replaces it: a worse checkpoint never
    overwrites a better one.
    """
    if chosen.downstream is None or chosen.basis == EXISTING_CHECKPOINT:
        return False
    if previous is None or chosen.upstream < previous.upstream_offset:
        return True
    return chosen.downstream > previous.downstream_offset


# ----------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------


def emit_checkpoints(
    flow: FlowConfig, *, groups: str | None = None, timeout: float = 60.0, dry_run: bool = False
) -> CheckpointReport:
    """Translate the source groups' offsets and write the checkpoints that MM2 would write (see module doc).

    The clusters are asked everything at once: the three topics are read in the background while the source
    lists its groups and their offsets (one request per group, all in flight together), and the checkpoint
    producer connects meanwhile; only the source partitions the groups committed on are decoded.
    """
    started = time.monotonic()
    report = CheckpointReport(flow.name, datetime.now(UTC).isoformat(timespec="seconds"), dry_run=dry_run)
    only = re.compile(groups) if groups else None
    source_admin = clients.admin(flow, "source")
    checkpoints_topic = flow.policy.checkpoints_topic(flow.source)
    producer = None if dry_run else _checkpoint_producer(flow)
    with StateReads(flow, timeout) as reads:
        ensured = None
        if not dry_run:
            topic = InternalTopic(checkpoints_topic, 1, flow.get_int("checkpoints.topic.replication.factor"))
            target_admin = clients.admin(flow, "target")
            ensured = reads.run(ensure_internal_topic, flow, "target", topic, admin=target_admin, timeout=timeout)
        names = [
            g
            for g in list_groups(source_admin, timeout)
            if flow.group_filter.should_replicate_group(g) and (only is None or only.fullmatch(g))
        ]
        offsets = committed_offsets(source_admin, names, timeout)
        replicated = _TopicMemo(flow.should_replicate_topic)
        mine_of = {group: {tp: v for tp, v in offsets.get(group, {}).items() if replicated(tp[0])} for group in names}
        best = reads.best({tp for mine in mine_of.values() for tp in mine})
        if ensured is not None:
            report.internal_topics.append(ensured.result())
    assert best.translator is not None
    report.syncs_read = best.translator.syncs_read
    remote_of = _TopicMemo(lambda topic: remote_topic(flow, topic))
    out: list[Checkpoint] = []
    for group in names:
        mine = mine_of[group]
        if not mine:
            continue  # like MM2: only groups with offsets on replicated topics
        result = GroupResult(group)
        for (topic, partition), (upstream, metadata) in sorted(mine.items()):
            remote = remote_of(topic)
            t = best.translate(group, topic, remote, partition, upstream)
            part = PartitionResult(
                topic, partition, remote, upstream, t.downstream, t.kind, t.rereads, t.reason, basis=t.basis
            )
            if t.downstream is not None and should_emit(best.checkpoints.get((group, remote, partition)), t):
                out.append(Checkpoint(group, remote, partition, upstream, t.downstream, metadata))
                part.emitted = True
            result.partitions.append(part)
        report.groups.append(result)
    if out and producer is not None:
        _produce(flow, producer, checkpoints_topic, out, timeout)
    report.seconds = round(time.monotonic() - started, 3)
    return report


class _TopicMemo:
    """A function of a topic name, asked once per topic: a run asks it for every (group, partition)."""

    def __init__(self, fn: Callable[[str], Any]) -> None:
        self._fn = fn
        self._known: dict[str, Any] = {}

    def __call__(self, topic: str) -> Any:
        try:
            return self._known[topic]
        except KeyError:
            value = self._known[topic] = self._fn(topic)
            return value


#: The checkpoint producer's settings over the flow's: every write acknowledged by all in-sync replicas, and one
#: request in flight, so a retried batch never lands after a later one (the settings Kafka Connect gives MM2's own
#: producers). Not idempotent: a retried checkpoint is the same record (readers keep the last per key, compaction
#: too), while an idempotent producer that writes at once first waits for its producer id, most of a small flow's
#: run (``benchmarks/checkpoints.py``, commit -> checkpoint).
CHECKPOINT_PRODUCER: dict[str, Any] = {"acks": "all", "max.in.flight.requests.per.connection": 1}


def _checkpoint_producer(flow: FlowConfig) -> Producer:
    """The run's checkpoint producer, made first: it connects while the run reads."""
    return clients.producer(flow, "target", **CHECKPOINT_PRODUCER)


def _produce(flow: FlowConfig, producer: Producer, topic: str, checkpoints: list[Checkpoint], timeout: float) -> None:
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for cp in checkpoints:
        producer.produce(topic, key=cp.key(), value=cp.value(), partition=0, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining or failures:
        raise RuntimeError(
            f"{flow.name}: {len(failures) + remaining} of {len(checkpoints)} checkpoint(s) not written to {topic}: "
            + "; ".join(failures[:3])
        )


__all__ = [
    "CheckpointReport",
    "GroupResult",
    "PartitionResult",
    "collect_committed_offsets",
    "committed_offsets",
    "emit_checkpoints",
    "list_groups",
    "read_best",
    "read_checkpoints",
    "read_translator",
    "remote_topic",
    "render_report",
    "request_committed_offsets",
    "should_emit",
    "source_topic_of",
    "syncs_location",
]


def render_report(report: CheckpointReport) -> str:
    """The checkpoint report for people: one line per group, the partitions that are not exact below it."""
    # A dry run writes nothing, and says so: "would write N", never "N written".
    count = (
        f"would write {report.emitted} checkpoint(s)" if report.dry_run else f"{report.emitted} checkpoint(s) written"
    )
    lines = [
        (
            f"{report.flow}: {len(report.groups)} group(s), {count}, "
            f"{report.syncs_read} offset sync(s) read, {report.seconds:.1f} s"
        )
    ]
    for group in report.groups:
        s = group.summary()
        kept = f" ({s['kept']} kept from existing checkpoints)" if s["kept"] else ""
        lines.append(
            f"  {group.group}: {s['exact']} exact, {s['approximate']} approximate{kept}, {s['refused']} refused; "
            f"largest possible re-read {s['max_rereads']} record(s)"
        )
        lines += [
            f"    {p.topic}[{p.partition}] committed {p.upstream}: {p.kind} -> {p.downstream} "
            f"[{p.basis or 'nothing'}] ({p.reason})"
            for p in group.partitions
            if p.kind != "exact"
        ]
    lines += [f"  ERROR {e}" for e in report.errors]
    return "\n".join(lines)
