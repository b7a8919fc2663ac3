"""The driver's part: which partitions, which offset ranges, and the chunks to verify (no record is read here).

Per source partition: the range both sides hold is the source's log start (or the requested start) up to the
copied position (the stored progress + 1, MM2's place, so a range MM2 copied is in it too); the target side
ends at the remote partition's last stable offset, so a record written after the last copy is compared too
(it should not be there), and, when the whole source partition is verified from offset 0, begins at the remote
partition's log start, so a record before the first known copy is compared too (``mapping.plan_spans``).
Progress and target end are read until two reads of the progress agree around the target end: a copy committing
meanwhile would otherwise look like extra records.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .. import topics
from ..checkpoints.emit import syncs_location
from ..config.model import FlowConfig
from ..kafka import clients
from ..kafka.offsets import offsets_or_errors
from ..replication.progress import StoredProgress, progress_topic, read_partitions, read_stored_progress
from ..wire import OffsetSync, WireFormatError
from .chunk import ChunkSpec
from .compare import LOOKAHEAD
from .mapping import Anchor, Span, Unverifiable, plan_spans, runs_by_partition

log = logging.getLogger(__name__)

#: Source offsets per chunk (one Spark task) by default: large enough that a chunk's fixed cost (a consumer per
#: side, a fetch) is small beside its records, small enough that a large partition spreads over the executors.
CHUNK_RECORDS = 250_000

_PROGRESS_READS = 5


@dataclass
class PartitionPlan:
    topic: str
    remote_topic: str
    partition: int
    spans: list[Span] = field(default_factory=list)
    source_low: int = 0  # each side's log start when planned: chunks read no earlier
    target_low: int = 0
    unverifiable: list[Unverifiable] = field(default_factory=list)
    note: str = ""
    error: str | None = None


def source_topics(
    flow: FlowConfig, family: str | None, only: set[str] | None, timeout: float
) -> list[topics.TopicPlan]:
    """The family's source topics (MM2's filters, as a run discovers them), restricted to ``only``."""
    return topics.only(
        topics.discover(flow, family, clients.admin(flow, "source"), timeout), only, flow, family, "verify"
    )


def list_offsets(admin: Any, tps: list[TopicPartition], spec: Any, timeout: float) -> dict[tuple[str, int], int | str]:
    """Offset per partition as the copier sees it (read_committed), or the error's words for a partition that has
    none (a remote topic not created)."""
    return offsets_or_errors(admin, tps, spec, IsolationLevel.READ_COMMITTED, timeout)


def read_anchors(flow: FlowConfig, timeout: float) -> dict[tuple[str, int], list[Anchor]]:
    """The copied runs of every partition, from the flow's offset-syncs topic (MM2's syncs as single anchors)."""
    side, topic = syncs_location(flow)
    config = clients.client_properties(flow, side, "consumer")  # type: ignore[arg-type]
    syncs = []
    for key, value in read_partitions(config, topic, [0], timeout):
        if key is None or value is None:
            continue
        try:
            syncs.append(OffsetSync.decode(key, value))
        except WireFormatError:
            continue  # not an offset sync: MM2 skips such records too
    return runs_by_partition(syncs)


def progress_and_target_ends(
    flow: FlowConfig, remote_tps: list[TopicPartition], timeout: float
) -> tuple[dict[tuple[str, int], StoredProgress], dict[tuple[str, int], int | str], dict[tuple[str, int], int | str]]:
    """The stored progress and the remote partitions' ends, read so that no copy committed in between; and their
    log starts."""
    config = clients.client_properties(flow, "target", "consumer")
    admin = clients.admin(flow, "target")
    lows = list_offsets(admin, remote_tps, OffsetSpec.earliest(), timeout)
    before = read_stored_progress(config, progress_topic(flow.source), flow.source, timeout=timeout)
    for _ in range(_PROGRESS_READS):
        ends = list_offsets(admin, remote_tps, OffsetSpec.latest(), timeout)
        after = read_stored_progress(config, progress_topic(flow.source), flow.source, timeout=timeout)
        if {k: v.offset for k, v in after.items()} == {k: v.offset for k, v in before.items()}:
            return after, ends, lows
        before = after
        time.sleep(0.2)
    log.warning(
        "%s: the copy kept committing while verification started; records it copies now may show as extra", flow.name
    )
    return before, ends, lows


def start_offsets(
    source_admin: Any,
    tps: list[TopicPartition],
    since_ms: int | None,
    from_offsets: Mapping[tuple[str, int], int] | None,
    timeout: float,
) -> dict[tuple[str, int], int]:
    """Where verification starts per partition: ``--from-offsets``, else the first record at ``--since``, else 0
    (the log start is applied afterwards: below it, records are gone)."""
    starts = {(tp.topic, tp.partition): 0 for tp in tps}
    if since_ms is not None:
        found = list_offsets(source_admin, tps, OffsetSpec.for_timestamp(since_ms), timeout)
        ends = list_offsets(source_admin, tps, OffsetSpec.latest(), timeout)
        for key, offset in found.items():
            starts[key] = offset if isinstance(offset, int) and offset >= 0 else int(ends[key])  # nothing that recent
    for key, offset in (from_offsets or {}).items():
        if key in starts:
            starts[key] = offset
    return starts


def plan_partitions(
    flow: FlowConfig,
    family: str | None,
    only_topics: set[str] | None,
    since_ms: int | None,
    from_offsets: Mapping[tuple[str, int], int] | None,
    chunk_records: int,
    timeout: float,
) -> list[PartitionPlan]:
    """Every selected partition with its chunks and the ranges that cannot be compared."""
    plans = source_topics(flow, family, only_topics, timeout)
    if from_offsets:
        unknown = sorted({t for t, _ in from_offsets} - {p.source_topic for p in plans})
        if unknown:
            raise ValueError(f"--from-offsets names topics that are not verified here: {', '.join(unknown)}")
    tps = [TopicPartition(p.source_topic, i) for p in plans for i in range(p.partitions)]
    remote = {p.source_topic: p.remote_topic for p in plans}
    source_admin = clients.admin(flow, "source")
    lows = list_offsets(source_admin, tps, OffsetSpec.earliest(), timeout)
    ends = list_offsets(source_admin, tps, OffsetSpec.latest(), timeout)
    starts = start_offsets(source_admin, tps, since_ms, from_offsets, timeout)
    remote_tps = [TopicPartition(remote[tp.topic], tp.partition) for tp in tps]
    stored, target_ends, target_lows = progress_and_target_ends(flow, remote_tps, timeout)
    anchors = read_anchors(flow, timeout)
    result = []
    for tp in tps:
        key = (tp.topic, tp.partition)
        plan = PartitionPlan(tp.topic, remote[tp.topic], tp.partition)
        result.append(plan)
        remote_key = (remote[tp.topic], tp.partition)
        low, end, target_low, target_end = lows[key], ends[key], target_lows[remote_key], target_ends[remote_key]
        for name, value in (("source", low), ("source", end), ("target", target_low), ("target", target_end)):
            if isinstance(value, str):
                plan.error = f"{tp.topic}[{tp.partition}]: cannot list the {name}'s offsets: {value}"
        if plan.error:
            continue
        assert isinstance(low, int) and isinstance(end, int)
        assert isinstance(target_low, int) and isinstance(target_end, int)
        plan.source_low, plan.target_low = low, target_low
        if key not in stored:
            plan.note = "not copied yet (no stored progress)"
            continue
        copied_end = min(stored[key].offset + 1, end)
        whole = since_ms is None and key not in (from_offsets or {})
        _plan_one(
            plan,
            anchors.get(key, []),
            starts[key],
            low,
            copied_end,
            target_end,
            chunk_records,
            target_low=target_low if whole else None,
        )
    return result


def _plan_one(
    plan: PartitionPlan,
    anchors: list[Anchor],
    requested: int,
    low: int,
    end: int,
    target_end: int,
    chunk_records: int,
    target_low: int | None = None,
) -> None:
    """Chunks of one partition, and the range retention deleted on the source before it could be compared.

    ``target_low``: the remote partition's log start when the verification was asked for no start of its own (no
    ``--since``, no ``--from-offsets`` for it): if the source partition still holds offset 0, every target record
    must then be a copy of one of its records, and the first chunk begins at the target's log start.
    """
    start = max(requested, low)
    first_copied = anchors[0].upstream if anchors else None
    if first_copied is not None and requested < low and first_copied < low:
        gone_from = max(first_copied, requested)
        plan.unverifiable.append(
            Unverifiable(
                gone_from,
                min(low, end) - 1,
                f"deleted on the source (retention; log start {low}) before verification: their copies on the "
                "target cannot be compared",
            )
        )
    if start >= end:
        plan.note = plan.note or "nothing copied in the requested range"
        return
    whole = target_low if start == 0 else None
    plan.spans, gaps = plan_spans(anchors, start, end, target_end, chunk_records, target_start=whole)
    plan.unverifiable += gaps


def chunk_specs(flow: FlowConfig, plans: list[PartitionPlan], timeout: float) -> list[ChunkSpec]:
    """One task's worth per span, numbered in plan order."""
    source = clients.client_properties(flow, "source", "consumer")
    target = clients.client_properties(flow, "target", "consumer")
    specs = []
    for plan in plans:
        for span in plan.spans:
            specs.append(
                ChunkSpec(
                    index=len(specs),
                    topic=plan.topic,
                    remote_topic=plan.remote_topic,
                    partition=plan.partition,
                    source_begin=span.source_begin,
                    source_end=span.source_end,
                    target_begin=span.target_begin,
                    target_end=span.target_end,
                    source_fetch=span.source_fetch,
                    target_fetch=span.target_fetch,
                    begin_is_record=span.begin_is_record,
                    end_is_record=span.end_is_record,
                    lookahead=LOOKAHEAD,
                    source_consumer=source,
                    target_consumer=target,
                    timeout_s=timeout,
                    source_low=plan.source_low,
                    target_low=plan.target_low,
                )
            )
    return specs


__all__ = ["CHUNK_RECORDS", "PartitionPlan", "chunk_specs", "plan_partitions"]
