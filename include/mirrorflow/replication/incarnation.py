"""Is the stored progress about the topics that exist now? Incarnation checks before a run copies.

A topic deleted and recreated under the same name starts again at offset 0. Progress stored for the old
topic (say offset 1,000) is then beyond the new topic's end, and a naive resume either says "up to date"
or, once the new topic has grown past 1,000, silently skips its first 1,000 records. The same holds on
the target: a remote topic deleted (and recreated by the next run's preparation) no longer holds what
the progress says was copied. Both must be detected, reported and repaired, never skipped.

Signals, strongest first: the topic ids the brokers report (Kafka 2.8+; stored with the progress in
record headers, see ``progress.StoredProgress``), then offsets: a source partition whose high watermark
is below the stored progress + 1, or a remote partition whose high watermark is below the offset right
after the last record copied into it. High watermarks, not last stable offsets: an open transaction must
never look like a truncation. Where a broker reports no topic ids, the last copied record's fingerprint
is compared with the record now at its offset: a recreated topic that grew past the old progress before
the next run holds another record there.
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition

from ..kafka.calls import note
from ..kafka.clients import bounded_reader
from .progress import StoredProgress, fingerprint
from .units import Reset, ResetEvent


def topic_ids(admin: Any, topics: list[str], timeout: float) -> dict[str, str | None]:
    """Topic id per topic name, None where the broker reports none (all zero) or the topic is unknown."""
    if not topics:
        return {}
    ids: dict[str, str | None] = {}
    futures = admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=timeout)
    for name, future in futures.items():
        try:
            uuid = future.result(timeout).topic_id
        except (KafkaException, FutureTimeout):
            ids[name] = None
            continue
        zero = uuid is None or (uuid.get_most_significant_bits() == 0 and uuid.get_least_significant_bits() == 0)
        ids[name] = None if zero else str(uuid)
    return ids


def fingerprint_offset(source_last: str | None) -> int | None:
    """The offset a stored fingerprint is about (its first field)."""
    head = (source_last or "").split(":", 1)[0]
    return int(head) if head.isdigit() else None


def fingerprints_now(
    consumer_config: dict[str, Any], wanted: dict[tuple[str, int], int], timeout: float
) -> dict[tuple[str, int], str | None]:
    """Fingerprint of the record now at each partition's given offset (None: no record there, or not read).

    One consumer for all partitions, read_uncommitted (whatever sits at that offset counts), one record each.
    """
    found: dict[tuple[str, int], str | None] = {}
    if not wanted:
        return found
    note("new consumer")
    consumer = Consumer(
        bounded_reader(
            consumer_config,
            **{
                "isolation.level": "read_uncommitted",
                "auto.offset.reset": "error",
                "fetch.max.bytes": 1 << 20,
                "max.partition.fetch.bytes": 1 << 16,
            },
        )
    )
    try:
        consumer.assign([TopicPartition(topic, partition, offset) for (topic, partition), offset in wanted.items()])
        deadline = time.monotonic() + timeout
        while len(found) < len(wanted) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.topic() is None:
                continue
            key = (message.topic(), message.partition())
            if key not in wanted or key in found:
                continue
            exact = message.error() is None and message.offset() == wanted[key]
            found[key] = fingerprint(message) if exact else None
            consumer.pause([TopicPartition(*key)])
    finally:
        consumer.close()
    return found


@dataclass(frozen=True)
class PartitionNow:
    """What the clusters say about one source partition and its remote partition right now."""

    topic: str
    partition: int
    remote_topic: str
    log_start: int
    high_watermark: int  # source, read_uncommitted
    source_topic_id: str | None
    target_topic_id: str | None
    target_high_watermark: int | None
    source_fingerprint: str | None = None  # of the record now at the stored fingerprint's offset


def find_reset(stored: StoredProgress, now: PartitionNow) -> tuple[str, str] | None:
    """(side, reason) when ``stored`` belongs to another incarnation of the source or remote topic."""
    if stored.source_topic_id and now.source_topic_id and stored.source_topic_id != now.source_topic_id:
        return "source", (
            f"the source topic was deleted and recreated (topic id {stored.source_topic_id} is now "
            f"{now.source_topic_id})"
        )
    if now.high_watermark < stored.offset + 1:
        return "source", (
            f"the source partition ends at offset {now.high_watermark}, before the stored progress "
            f"{stored.offset} + 1: the topic was deleted and recreated (or truncated)"
        )
    if stored.source_last and now.source_fingerprint and stored.source_last != now.source_fingerprint:
        return "source", (
            f"the record at offset {fingerprint_offset(stored.source_last)} is not the one that was copied "
            f"(fingerprint {stored.source_last}, now {now.source_fingerprint}): the topic was deleted and recreated"
        )
    if stored.target_topic_id and now.target_topic_id and stored.target_topic_id != now.target_topic_id:
        return "target", (
            f"the remote topic {now.remote_topic} was deleted and recreated (topic id {stored.target_topic_id} "
            f"is now {now.target_topic_id})"
        )
    if (
        stored.target_next is not None
        and now.target_high_watermark is not None
        and now.target_high_watermark < stored.target_next
    ):
        return "target", (
            f"the remote partition {now.remote_topic}[{now.partition}] ends at offset {now.target_high_watermark}, "
            f"before the {stored.target_next} offsets copied into it: it was deleted and recreated (or truncated)"
        )
    return None


def plan_reset(stored: StoredProgress, now: PartitionNow, truncation: str) -> tuple[ResetEvent, Reset | None] | None:
    """The event to report and, unless ``truncation`` is ``stop``, what the unit must do: copy the new
    incarnation from the source's log start (for a new remote topic: everything the source still has)."""
    found = find_reset(stored, now)
    if found is None:
        return None
    side, reason = found
    stop = truncation == "stop"
    action = "stopped" if stop else f"copying from source offset {now.log_start} (the source's log start)"
    event = ResetEvent(now.topic, now.partition, side, stored.offset, now.log_start, now.high_watermark, reason, action)
    return event, None if stop else Reset(stored.offset, now.log_start, keep_target_next=side == "source")


__all__ = ["PartitionNow", "find_reset", "fingerprint_offset", "fingerprints_now", "plan_reset", "topic_ids"]
