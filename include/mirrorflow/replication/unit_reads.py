"""What a unit reads besides the records it copies: its partition's stored progress, and the source.

The stored progress is read after the unit's producer holds the partition's ``transactional.id`` (a zombie may have
committed since the run planned). The source consumer is a bounded reader that never resets silently; the committed
records a read_committed fetch skipped are read one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ..kafka.clients import BOUNDED_READER, RECEIVE_MAX
from . import tuning
from .delivery import UnitFailed
from .progress import StoredProgress, progress_since, progress_since_many, read_stored_progress
from .units import UnitSpec


def stored(spec: UnitSpec) -> StoredProgress | None:
    """The partition's stored progress now (after fencing): what the run read, updated by what was written since."""
    if spec.progress_from >= 0:
        return progress_since(
            spec.target_consumer,
            spec.progress_topic,
            spec.progress_partition,
            spec.progress_key,
            spec.progress_from,
            spec.stored,
            spec.timeout_s,
        )
    return read_stored_progress(
        spec.target_consumer, spec.progress_topic, spec.source_alias, [spec.progress_partition], timeout=spec.timeout_s
    ).get((spec.topic, spec.partition))


def stored_many(specs: Sequence[UnitSpec]) -> dict[tuple[str, int], StoredProgress | None]:
    """``stored`` of several units at once: those whose run read the progress topic (``progress_from``) in one
    read of their progress partitions; the others are left out (each reads its own)."""
    since = [spec for spec in specs if spec.progress_from >= 0]
    if not since:
        return {}
    first = since[0]
    found = progress_since_many(
        first.target_consumer,
        first.progress_topic,
        {(spec.progress_partition, spec.progress_key): spec.stored for spec in since},
        {spec.progress_partition: spec.progress_from for spec in since},
        first.timeout_s,
    )
    return {(spec.topic, spec.partition): found[(spec.progress_partition, spec.progress_key)] for spec in since}


def source_config(spec: UnitSpec, **overrides: Any) -> dict[str, Any]:
    """A bounded reader of the source partition (``clients.bounded_reader``: it reports the end of the partition and
    never waits out a long poll there) that never resets silently: an out-of-range position (retention deleted
    records) surfaces as an error, hence as a loss event."""
    return {
        "receive.message.max.bytes": RECEIVE_MAX,
        **tuning.CONSUMER_DEFAULTS,
        **spec.source_consumer,
        **BOUNDED_READER,
        "auto.offset.reset": "error",
        **overrides,
    }


def source_consumer(spec: UnitSpec, **overrides: Any) -> Consumer:
    """A new consumer of ``source_config``; a unit's copy borrows a kept one (``kept_clients.lent_consumer``)."""
    return Consumer(source_config(spec, **overrides))


def _read_range(spec: UnitSpec, begin: int, end: int, isolation: str) -> list[Any]:
    """Messages of ``spec.topic[spec.partition]`` with ``begin <= offset < end``, read from ``begin``."""
    consumer = source_consumer(spec, **{"isolation.level": isolation})
    found: list[Any] = []
    try:
        consumer.assign([TopicPartition(spec.topic, spec.partition, begin)])
        deadline = time.monotonic() + spec.timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                break  # end of partition (or out of range): nothing more to find
            if message.offset() >= end:
                break
            found.append(message)
    finally:
        consumer.close()
    return found


def skipped_committed(spec: UnitSpec, begin: int, end: int) -> list[Any]:
    """Committed records in ``[begin, end)`` that a read_committed fetch starting at ``begin`` skipped.

    Apache Kafka skips only aborted records and markers there. The embedded test broker also drops
    committed records when a fetch starts inside (or at the first record of) a committed transaction;
    a fetch starting at an earlier transaction boundary finds them. Earlier offsets are tried, doubling
    the distance back down to the log start, until a fetch returns anything. This costs a few short
    reads, and only when records were skipped right at the start of a unit (never on Apache Kafka unless
    aborted records sit exactly there).
    """
    if not _read_range(spec, begin, end, "read_uncommitted"):
        return []  # nothing at all in the range: markers only
    low = _log_start(spec)
    back = 1
    while True:
        start = max(low, begin - back)
        found = _read_range(spec, start, end, "read_committed")
        if found or start == low:
            return [m for m in found if m.offset() >= begin]
        back *= 2


def _log_start(spec: UnitSpec) -> int:
    consumer = source_consumer(spec)
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(spec.topic, spec.partition), timeout=spec.timeout_s)
        return int(low)
    finally:
        consumer.close()


def check_partition(messages: list[Any], spec: UnitSpec) -> None:
    """Refuse a consumer batch that is not of the unit's partition (ends only: two calls per batch, not per record).

    The source consumer is a kept one (``kept_clients``) that copied another partition before; librdkafka discards
    what it fetched for a partition no longer assigned, and this makes sure of it where a mistake would put
    records into the wrong partition.
    """
    for message in (messages[0], messages[-1]):
        if message.partition() != spec.partition or message.topic() != spec.topic:
            raise UnitFailed(
                f"{spec.topic}[{spec.partition}]: the source consumer returned a record of "
                f"{message.topic()}[{message.partition()}]; nothing of it was copied",
                retriable=True,
            )


def headers_size(headers: list[tuple[str, bytes | None]]) -> int:
    return sum(len(k) + len(v or b"") for k, v in headers)


def last_offset(messages: list[Any]) -> int:
    """Offset of the last record in a consumer batch (-1 when it holds only events such as end of partition)."""
    for message in reversed(messages):
        if message.error() is None:
            return int(message.offset())
    return -1
