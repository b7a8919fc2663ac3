"""Durable progress in MirrorMaker 2's own place and format.

Progress is the Connect source offset MM2 stores in ``mm2-offsets.<source>.internal`` on the target:
key ``["MirrorSourceConnector",{"cluster":..,"partition":..,"topic":..}]``, value ``{"offset":N}``
(the last copied source offset), the key placed on the partition the Java client's partitioner picks.
Writing exactly that means mirrorflow resumes where an MM2 deployment stopped, and MM2 resumes where
mirrorflow stopped. Reads use read_committed so an aborted (fenced) unit's progress is never seen.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ..kafka.calls import note
from ..kafka.clients import bounded_reader
from ..wire import decode_source_offset_key, decode_source_offset_value, java_partition, source_offset_key
from .kept_clients import lent_consumer

_ABSENT = (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)


def progress_topic(source_alias: str) -> str:
    """Connect's worker offsets topic of the herder ``<source>-><target>``: always literal dots."""
    return f"mm2-offsets.{source_alias}.internal"


def progress_location(source_alias: str, topic: str, partition: int, num_partitions: int) -> tuple[bytes, int]:
    """The exact key bytes and the partition (Java murmur2) where this partition's progress lives."""
    key = source_offset_key(source_alias, topic, partition)
    return key, java_partition(key, num_partitions)


def _committed_config(consumer_config: dict[str, Any]) -> dict[str, Any]:
    """A bounded reader (``clients.bounded_reader``: reports the end of each partition, no long poll there) of
    committed records only."""
    return bounded_reader(consumer_config, **{"isolation.level": "read_committed"})


def _committed_reader(consumer_config: dict[str, Any]) -> Consumer:
    note("new consumer")
    return Consumer(_committed_config(consumer_config))


def read_messages(
    consumer_config: dict[str, Any],
    topic: str,
    partitions: Iterable[int],
    timeout: float,
    reached: dict[int, int] | None = None,
) -> Iterable[Any]:
    """Every message of the given partitions, from the beginning to the last stable offset.

    ``reached`` is filled with the position each partition was read up to (its last stable offset then): a record
    written later, a transaction open during the read included, is at that offset or after it (see
    :func:`progress_since`).
    """
    consumer = _committed_reader(consumer_config)
    try:
        ends: dict[int, int] = {}
        assignment = []
        for p in partitions:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            except KafkaException as exc:
                if exc.args[0].code() in _ABSENT:
                    continue  # a topic not created yet (no run wrote it) holds nothing
                raise
            if high > low:
                ends[p] = high
                assignment.append(TopicPartition(topic, p, low))
            elif reached is not None:
                reached[p] = high  # empty: nothing open either
        if not assignment:
            return
        consumer.assign(assignment)
        remaining = set(ends)
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                for p in list(remaining):
                    position = consumer.position([TopicPartition(topic, p)])[0].offset
                    if position >= ends[p]:
                        remaining.discard(p)
                        if reached is not None:
                            reached[p] = position
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    remaining.discard(message.partition())
                    if reached is not None:
                        reached[message.partition()] = message.offset()
                    continue
                raise RuntimeError(f"reading {topic}: {message.error()}")
            yield message
            if message.offset() + 1 >= ends[message.partition()]:
                remaining.discard(message.partition())
        if remaining:
            raise TimeoutError(f"reading {topic} partitions {sorted(remaining)} did not finish within {timeout:.0f} s")
    finally:
        consumer.close()


def read_partitions(
    consumer_config: dict[str, Any], topic: str, partitions: Iterable[int], timeout: float
) -> Iterable[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of the given partitions, from the beginning to the last stable offset."""
    for message in read_messages(consumer_config, topic, partitions, timeout):
        yield message.key(), message.value()


@dataclass(frozen=True)
class StoredProgress:
    """One partition's stored progress and the incarnation it belongs to.

    ``offset`` is MM2's value (the last copied source offset). The rest travels in record headers, which
    MM2's Connect offset reader ignores, so the key and value bytes stay exactly MM2's:
    ``source_topic_id``/``target_topic_id`` are the topic ids the brokers reported (None when the broker
    reports none, or MM2 wrote the record), ``target_next`` is the remote partition's offset right after
    the last copied record and ``source_last`` the fingerprint of the last copied source record (see
    :func:`fingerprint`), for brokers that report no topic ids. Together they tell a recreated or
    truncated topic from a normal resume.
    """

    offset: int
    source_topic_id: str | None = None
    target_topic_id: str | None = None
    target_next: int | None = None
    source_last: str | None = None
    # When the record was written (its timestamp, ms): when the copy last moved this partition. Not part of
    # the incarnation: two reads of the same progress compare equal whatever their timestamps.
    written_ms: int | None = field(default=None, compare=False)

    def headers(self) -> list[tuple[str, bytes]]:
        """The record headers that carry the incarnation (only the known parts)."""
        fields = {
            SOURCE_TOPIC_ID_HEADER: self.source_topic_id,
            TARGET_TOPIC_ID_HEADER: self.target_topic_id,
            TARGET_NEXT_HEADER: None if self.target_next is None else str(self.target_next),
            SOURCE_LAST_HEADER: self.source_last,
        }
        return [(name, value.encode()) for name, value in fields.items() if value is not None]

    @classmethod
    def from_message(
        cls, offset: int, headers: list[tuple[str, bytes | None]] | None, written_ms: int | None = None
    ) -> StoredProgress:
        found = {name: (value or b"").decode("utf-8", "replace") for name, value in headers or []}
        target_next = found.get(TARGET_NEXT_HEADER, "")
        return cls(
            offset,
            found.get(SOURCE_TOPIC_ID_HEADER) or None,
            found.get(TARGET_TOPIC_ID_HEADER) or None,
            int(target_next) if target_next.lstrip("-").isdigit() else None,
            found.get(SOURCE_LAST_HEADER) or None,
            written_ms,
        )


def fingerprint(message: Any) -> str:
    """``offset:crc32(key):crc32(value):timestamp`` of a record: the same record gives the same text.

    A topic recreated under the same name holds other records at the same offsets; comparing the record
    now at the last copied offset with this fingerprint tells the incarnations apart where the broker
    reports no topic ids. Cheap: computed once per checkpoint, for one record.
    """
    key, value = message.key() or b"", message.value() or b""
    return f"{message.offset()}:{zlib.crc32(key)}:{zlib.crc32(value)}:{message.timestamp()[1]}"


SOURCE_TOPIC_ID_HEADER = "mirrorflow.source.topic.id"
TARGET_TOPIC_ID_HEADER = "mirrorflow.target.topic.id"
TARGET_NEXT_HEADER = "mirrorflow.target.next"
SOURCE_LAST_HEADER = "mirrorflow.source.last"


def topic_partitions(consumer_config: dict[str, Any], topic: str, timeout: float) -> list[int]:
    """The partitions of ``topic`` (none when it does not exist: it is never created by asking)."""
    note("new consumer")
    probe = Consumer({**consumer_config, "enable.auto.commit": False, "allow.auto.create.topics": False})
    try:
        meta = probe.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        return sorted(meta.partitions) if meta is not None and meta.partitions else []
    finally:
        probe.close()


def read_stored_progress(
    consumer_config: dict[str, Any],
    topic: str,
    source_alias: str,
    partitions: Iterable[int] | None = None,
    timeout: float = 60.0,
    reached: dict[int, int] | None = None,
) -> dict[tuple[str, int], StoredProgress]:
    """Stored progress per (topic, partition) of ``source_alias``; later records win, tombstones clear.

    ``reached``: filled with where each progress partition was read up to (see :func:`read_messages`).
    """
    result: dict[tuple[str, int], StoredProgress] = {}
    if partitions is None:
        partitions = topic_partitions(consumer_config, topic, timeout)
    for message in read_messages(consumer_config, topic, partitions, timeout, reached):
        key = message.key()
        decoded = decode_source_offset_key(key) if key else None
        if decoded is None or decoded[0] != source_alias:
            continue
        progress = _stored_progress(message)
        if progress is None:
            result.pop((decoded[1], decoded[2]), None)
        else:
            result[(decoded[1], decoded[2])] = progress
    return result


def _stored_progress(message: Any) -> StoredProgress | None:
    """The progress a record of the progress topic stores; None for a tombstone (or a value that is no offset)."""
    value = message.value()
    offset = decode_source_offset_value(value) if value is not None else None
    if offset is None:
        return None
    stamp_type, stamp = message.timestamp()
    written = stamp if stamp_type and stamp >= 0 else None
    return StoredProgress.from_message(offset, message.headers(), written)


def progress_since(
    consumer_config: dict[str, Any],
    topic: str,
    partition: int,
    key: bytes,
    start: int,
    known: StoredProgress | None,
    timeout: float,
) -> StoredProgress | None:
    """The newest progress under ``key`` in ``topic[partition]``, reading only from ``start`` on.

    Why: a work unit must read its partition's progress after fencing older producers (a zombie may have committed
    since the run planned), but the run has just read the whole progress topic up to ``start`` (its ``reached``)
    and knows the answer there (``known``). Only what was written since can change it, and on a long-lived flow
    the whole partition is every checkpoint of a share of the flow's partitions since the last compaction: reading
    it from the beginning costs a unit more the older the flow is. Read committed, in order: the last record under ``key`` wins, a tombstone clears.
    """
    return progress_since_many(consumer_config, topic, {(partition, key): known}, {partition: start}, timeout)[
        (partition, key)
    ]


def progress_since_many(
    consumer_config: dict[str, Any],
    topic: str,
    known: dict[tuple[int, bytes], StoredProgress | None],
    starts: dict[int, int],
    timeout: float,
) -> dict[tuple[int, bytes], StoredProgress | None]:
    """``progress_since`` for several keys at once: (partition, key) -> the newest progress, each partition of
    ``topic`` read from ``starts[partition]`` to its end in one assignment (a lane's units read theirs together)."""
    result = dict(known)
    # A kept consumer (kept_clients): this runs once per work unit or lane, and a new consumer each time cost more
    # than the read. What it fetched for an earlier assignment is discarded when it is assigned again.
    with lent_consumer(_committed_config(consumer_config)) as consumer:
        consumer.assign([TopicPartition(topic, partition, start) for partition, start in starts.items()])
        open_ = set(starts)
        where = ", ".join(f"{topic}[{partition}] from offset {start}" for partition, start in starts.items())
        deadline = time.monotonic() + timeout
        while open_:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"reading {where}: no end within {timeout:g} s")
            message = consumer.poll(0.5)  # not consume(n): that waits for n messages, the end event counts as one
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"reading {where}: {error}")
            if message.partition() not in starts or message.topic() != topic:
                raise RuntimeError(
                    f"reading {where}: the consumer returned a message of {message.topic()}[{message.partition()}]"
                )
            if error is not None:
                open_.discard(message.partition())  # the end of that partition
                continue
            wanted = (message.partition(), message.key())
            if wanted in result:
                result[wanted] = _stored_progress(message)
    return result


def read_progress(
    consumer_config: dict[str, Any],
    topic: str,
    source_alias: str,
    partitions: Iterable[int] | None = None,
    timeout: float = 60.0,
) -> dict[tuple[str, int], int]:
    """Last copied offset per (topic, partition) of ``source_alias`` (see :func:`read_stored_progress`)."""
    stored = read_stored_progress(consumer_config, topic, source_alias, partitions, timeout)
    return {key: progress.offset for key, progress in stored.items()}


def read_tail(
    consumer_config: dict[str, Any], topic: str, partition: int = 0, count: int = 20, timeout: float = 15.0
) -> list[Any]:
    """The last ``count`` messages of a partition (fewer when shorter; none when empty or absent).

    For the newest state in a compacted internal topic (heartbeats, checkpoints) without reading all of it.
    """
    note("new consumer")
    consumer = Consumer(bounded_reader(consumer_config))
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].code() in _ABSENT:
                return []
            raise
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, partition, max(low, high - count))])
        tail: list[Any] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                break  # end of partition
            tail.append(message)
            if message.offset() + 1 >= high:
                break
        return tail
    finally:
        consumer.close()


def last_record_timestamp(
    consumer_config: dict[str, Any], topic: str, partition: int = 0, timeout: float = 15.0
) -> int | None:
    """Timestamp (ms) of the last record of a partition (None when empty or absent): how fresh an internal topic is."""
    return max((m.timestamp()[1] for m in read_tail(consumer_config, topic, partition, 20, timeout)), default=None)
