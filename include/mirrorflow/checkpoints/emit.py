"""Checkpoints: translate the source's consumer-group offsets and write them in MM2's format and place.

One run does what MM2's ``MirrorCheckpointTask`` does in one poll (mm2-behaviour 2.5), reading its
state from the clusters so any process can run it:

1. read the offset-syncs topic into an :class:`OffsetTranslator` (exact runs + MM2's store), with the
   copy's stored progress (labels at a trailing transaction marker);
2. read ``<source>.checkpoints.internal`` on the target: the last checkpoint per (group, partition),
   so checkpoints stay monotonic across runs exactly as MM2 keeps them;
3. list the source's groups passing the group filter, and their committed offsets on topics passing
   the topic filter;
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
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from .. import clients
from ..config.model import FlowConfig
from ..internal_topics import InternalTopic, TopicState, ensure_internal_topic
from ..replication.progress import progress_topic, read_partitions, read_stored_progress
from ..wire import Checkpoint, OffsetSync, WireFormatError
from .best import CHECKPOINT, BestTranslator
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
        return {
            "group": self.group,
            "exact": self.count("exact"),
            "approximate": self.count("approximate") + self.count(CHECKPOINT),
            "kept": self.count(CHECKPOINT),
            "refused": self.count("refused") + self.count("unavailable"),
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
        return sum(g.summary()["emitted"] for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "started_at": self.started_at,
            "seconds": self.seconds,
            "syncs_read": self.syncs_read,
            "emitted": self.emitted,
            "dry_run": self.dry_run,
            "groups": [{**g.summary(), "partitions": [asdict(p) for p in g.partitions]} for g in self.groups],
            "errors": self.errors,
            "internal_topics": [t.to_dict() for t in self.internal_topics],
        }


# ----------------------------------------------------------------------------------------------------
# Reading what the clusters hold
# ----------------------------------------------------------------------------------------------------


def syncs_location(flow: FlowConfig) -> tuple[str, str]:
    """(side, topic) of the flow's offset-syncs topic (``offset-syncs.topic.location``)."""
    if flow.get("offset-syncs.topic.location") == "target":
        return "target", flow.policy.offset_syncs_topic(flow.source)
    return "source", flow.policy.offset_syncs_topic(flow.target)


def _records(flow: FlowConfig, side: str, topic: str, timeout: float) -> Iterable[tuple[bytes | None, bytes | None]]:
    config = clients.client_properties(flow, side, "consumer")  # type: ignore[arg-type]
    return read_partitions(config, topic, [0], timeout)


def read_translator(flow: FlowConfig, timeout: float = 60.0) -> OffsetTranslator:
    """Every offset sync of the flow (partition 0 from the beginning), as a translator, and the copy's progress.

    The progress (on the target) tells an offset right after a trailing transaction marker from one the copy
    has not reached (see ``OffsetTranslator.note_progress``).
    """
    side, topic = syncs_location(flow)
    translator = OffsetTranslator()
    syncs = []
    for key, value in _records(flow, side, topic, timeout):
        if key is None or value is None:
            continue
        try:
            syncs.append(OffsetSync.decode(key, value))
        except WireFormatError as exc:
            log.warning("%s: skipping a record that is not an offset sync: %s", topic, exc)
    translator.add_all(syncs)
    config = clients.client_properties(flow, "target", "consumer")
    for (source_topic, partition), stored in read_stored_progress(
        config, progress_topic(flow.source), flow.source, timeout=timeout
    ).items():
        translator.note_progress(source_topic, partition, stored.offset, stored.target_next)
    return translator


def read_best(flow: FlowConfig, timeout: float = 60.0, *, syncs: bool = True) -> BestTranslator:
    """The flow's translator (unless ``syncs`` is False: they cannot be read) and the checkpoints on the target."""
    return BestTranslator(read_translator(flow, timeout) if syncs else None, read_checkpoints(flow, timeout))


def read_checkpoints(flow: FlowConfig, timeout: float = 60.0) -> dict[tuple[str, str, int], Checkpoint]:
    """The last checkpoint per (group, remote topic, partition) in the target's checkpoints topic."""
    topic = flow.policy.checkpoints_topic(flow.source)
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in _records(flow, "target", topic, timeout):
        if key is None or value is None:
            continue
        try:
            cp = Checkpoint.decode(key, value)
        except WireFormatError as exc:
            log.warning("%s: skipping a record that is not a checkpoint: %s", topic, exc)
            continue
        latest[(cp.group, cp.topic, cp.partition)] = cp
    return latest


def _wait_all(futures: dict[str, Future], timeout: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, future in futures.items():
        try:
            results[name] = future.result(timeout)
        except KafkaException as exc:
            results[name] = exc
    return results


def list_groups(admin: AdminClient, timeout: float) -> list[str]:
    listing = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
    return sorted(g.group_id for g in listing.valid)


def committed_offsets(
    admin: AdminClient, groups: Iterable[str], timeout: float
) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
    """(offset, metadata) per (topic, partition) of each group; groups are asked concurrently (one call each)."""
    futures: dict[str, Future] = {}
    for group in groups:
        futures.update(
            admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
        )
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
    """Translate the source groups' offsets and write the checkpoints that MM2 would write (see module doc)."""
    started = time.monotonic()
    report = CheckpointReport(flow.name, datetime.now(UTC).isoformat(timespec="seconds"))
    only = re.compile(groups) if groups else None
    source_admin = clients.admin(flow, "source")
    target_admin = clients.admin(flow, "target")
    checkpoints_topic = flow.policy.checkpoints_topic(flow.source)
    if not dry_run:
        topic = InternalTopic(checkpoints_topic, 1, flow.get_int("checkpoints.topic.replication.factor"))
        report.internal_topics.append(ensure_internal_topic(flow, "target", topic, admin=target_admin, timeout=timeout))
    best = read_best(flow, timeout)
    assert best.translator is not None
    report.syncs_read = best.translator.syncs_read
    report.dry_run = dry_run
    names = [
        g
        for g in list_groups(source_admin, timeout)
        if flow.group_filter.should_replicate_group(g) and (only is None or only.fullmatch(g))
    ]
    offsets = committed_offsets(source_admin, names, timeout)
    out: list[Checkpoint] = []
    for group in names:
        mine = {tp: v for tp, v in offsets.get(group, {}).items() if flow.should_replicate_topic(tp[0])}
        if not mine:
            continue  # like MM2: only groups with offsets on replicated topics
        result = GroupResult(group)
        for (topic, partition), (upstream, metadata) in sorted(mine.items()):
            remote = remote_topic(flow, topic)
            t = best.translate(group, topic, remote, partition, upstream)
            part = PartitionResult(
                topic, partition, remote, upstream, t.downstream, t.kind, t.rereads, t.reason, basis=t.basis
            )
            if t.downstream is not None and should_emit(best.checkpoints.get((group, remote, partition)), t):
                out.append(Checkpoint(group, remote, partition, upstream, t.downstream, metadata))
                part.emitted = True
            result.partitions.append(part)
        report.groups.append(result)
    if out and not dry_run:
        _produce(flow, checkpoints_topic, out, timeout)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _produce(flow: FlowConfig, topic: str, checkpoints: list[Checkpoint], timeout: float) -> None:
    producer = Producer(clients.client_properties(flow, "target", "producer", **{"enable.idempotence": True}))
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
    "committed_offsets",
    "emit_checkpoints",
    "list_groups",
    "read_best",
    "read_checkpoints",
    "read_translator",
    "remote_topic",
    "render_report",
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
