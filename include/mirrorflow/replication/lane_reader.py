"""Where a unit's source records come from: a consumer of its partition alone, or one consumer for its whole lane.

Why a lane reader: the units of a lane copy one partition after the other (``copy.copy_units``). With a consumer
assigned to one partition at a time, every unit paid its own assignment, fetch start and end-of-partition round
trip, and each fetch carried one partition: on a wide flow with a few new records per partition that was most of
a run. A MirrorMaker 2 task instead has one consumer for all its partitions, and every fetch carries all of them.
``LaneReader`` does that for a lane: its consumer is assigned every partition the lane plans to copy, each at the
offset the run planned from, and what a fetch brings is kept per partition until that partition's unit takes it.

The lane's consumer is a new one, closed with the lane, never a kept one: librdkafka's consumer thread looks at
every partition of every topic its client has known each time it wakes, and a consumer kept across lanes in a
long-lived Spark worker comes to know every topic of a wide flow, so that cost grew with the whole flow's width.

A unit reads through its lane's reader only where the reader's position is exactly the unit's start (the stored
progress read after fencing, see ``lane_transaction.LaneTransaction.stored``): anything else (progress written since the run
planned, a reset, records deleted under the plan) takes a consumer of its own (``OwnReader``), as before. The
reader keeps at most ``BUFFER_BYTES`` for the units still to come; past that it pauses their partitions until the
unit reading now is done, and it pauses a partition once it has fetched up to the unit's planned end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, TopicPartition

BUFFER_BYTES = 16 * 1024 * 1024
"""Bytes of records a lane reader holds for the units after the one reading now (the consumer's own read-ahead,
``queued.max.messages.kbytes``, is on top)."""

PULL_RECORDS = 5_000
"""Records a lane reader asks its consumer for per call (``Consumer.consume``)."""


class PartitionReader(Protocol):
    """The records of one partition, as a unit's copy loop reads them (``unit_copy.UnitCopy._copy_records``)."""

    def consume(self, count: int, timeout: float) -> list[Any]:
        """Up to ``count`` messages of the partition (records and its events), waiting at most ``timeout``."""

    def pause(self) -> None:
        """Stop fetching the partition: what the unit needs is fetched."""

    def position(self) -> int:
        """The offset after the last message handed to the unit (past aborted records and transaction markers)."""


class OwnReader:
    """A consumer assigned to the unit's partition alone, from ``start``."""

    def __init__(self, consumer: Consumer, topic: str, partition: int, start: int) -> None:
        self._consumer = consumer
        self._tp = TopicPartition(topic, partition)
        consumer.assign([TopicPartition(topic, partition, start)])

    def consume(self, count: int, timeout: float) -> list[Any]:
        return self._consumer.consume(count, timeout=timeout)

    def pause(self) -> None:
        self._consumer.pause([self._tp])

    def position(self) -> int:
        return int(self._consumer.position([self._tp])[0].offset)


class LaneReader:
    """One consumer for the partitions a lane plans to copy: ``planned`` maps ``(topic, partition)`` to the planned
    ``(start, end)``; only partitions with records to copy (``start < end``) belong there."""

    def __init__(self, consumer: Consumer, planned: dict[tuple[str, int], tuple[int, int]]) -> None:
        self._consumer = consumer
        self._planned = dict(planned)  # the partitions whose unit has not opened yet
        self._ends = {key: end for key, (_, end) in planned.items()}
        self._buffers: dict[tuple[str, int], deque[Any]] = {key: deque() for key in planned}
        self._bytes: dict[tuple[str, int], int] = dict.fromkeys(planned, 0)
        self._held = 0  # bytes in every buffer
        self._done: set[tuple[str, int]] = set()  # fetched up to the planned end, or given up: paused for good
        self._waiting: set[tuple[str, int]] = set()  # paused until the unit reading now is done (``BUFFER_BYTES``)
        self._current: tuple[str, int] | None = None
        consumer.assign([TopicPartition(topic, partition, start) for (topic, partition), (start, _) in planned.items()])

    def open(self, topic: str, partition: int, start: int) -> PartitionReader | None:
        """The reader of ``topic[partition]`` from ``start`` for its unit, or None when the lane's consumer is not
        there (not planned, or planned from another offset): the unit then reads with a consumer of its own."""
        key = (topic, partition)
        previous, self._current = self._current, None
        if previous is not None and previous != key:
            self._forget(previous)
        if self._waiting and self._held < BUFFER_BYTES // 2:
            self._pause_or_resume(list(self._waiting - self._done), pause=False)
            self._waiting.clear()
        planned = self._planned.pop(key, None)
        if planned is None or planned[0] != start:
            self._forget(key)
            return None
        self._current = key
        if key in self._waiting:
            self._waiting.discard(key)
            self._pause_or_resume([key], pause=False)
        return _LanePartition(self, key)

    def _forget(self, key: tuple[str, int]) -> None:
        """A unit is done with its partition (or never reads it here): stop fetching it and drop what is held."""
        self._stop_fetching(key)
        self._held -= self._bytes.pop(key, 0)
        self._buffers.pop(key, None)

    def take(self, key: tuple[str, int], count: int, timeout: float) -> list[Any]:
        """Up to ``count`` held messages of ``key``; when none are held, what the consumer has queued now, and if
        that holds none of ``key`` either, a wait of up to ``timeout`` for ``count`` more (of any partition)."""
        buffer = self._buffers[key]
        if not buffer:
            self._pull(key, PULL_RECORDS, 0)
        if not buffer:
            self._pull(key, count, timeout)
        taken = [buffer.popleft() for _ in range(min(count, len(buffer)))]
        size = sum(_size(message) for message in taken)
        self._held -= size
        self._bytes[key] -= size
        return taken

    def _pull(self, key: tuple[str, int], count: int, timeout: float) -> None:
        """One ``consume`` of the lane's consumer, each message into its partition's buffer. A message of no
        partition (an error of the consumer itself) goes to the partition asking, whose unit raises it."""
        for message in self._consumer.consume(count, timeout=timeout):
            topic, partition = message.topic(), message.partition()
            where = (topic, partition) if topic is not None and partition is not None and partition >= 0 else key
            buffer = self._buffers.get(where)
            if buffer is None:
                continue  # a partition given up on (``_forget``): fetched before it was paused
            buffer.append(message)
            size = _size(message)
            self._bytes[where] += size
            self._held += size
            error = message.error()
            if where in self._done or (error is not None and error.code() != KafkaError._PARTITION_EOF):
                continue
            # Fetched up to its planned end (its last record, or the end of the partition there): fetch no more.
            last = message.offset() if error is None else message.offset() - 1
            if last >= self._ends[where] - 1:
                self._stop_fetching(where)
        if self._held > BUFFER_BYTES:
            full = [other for other in self._buffers if other != key and other not in self._done | self._waiting]
            self._waiting.update(full)
            self._pause_or_resume(full, pause=True)

    def pause(self, key: tuple[str, int]) -> None:
        self._stop_fetching(key)

    def _stop_fetching(self, key: tuple[str, int]) -> None:
        """Pause a partition of this reader for good (once: a paused partition is in ``_done``)."""
        if key in self._ends and key not in self._done:
            self._done.add(key)
            self._pause_or_resume([key], pause=True)

    def position(self, key: tuple[str, int]) -> int:
        """The next offset the unit is handed: a held record's, else the consumer's position."""
        for message in self._buffers[key]:
            if message.error() is None:
                return int(message.offset())
        return int(self._consumer.position([TopicPartition(*key)])[0].offset)

    def _pause_or_resume(self, keys: Sequence[tuple[str, int]], *, pause: bool) -> None:
        if keys:
            tps = [TopicPartition(topic, partition) for topic, partition in keys]
            (self._consumer.pause if pause else self._consumer.resume)(tps)


def _size(message: Any) -> int:
    """A message's key and value bytes: what a reader holds of it."""
    key, value = message.key(), message.value()
    return (len(key) if key is not None else 0) + (len(value) if value is not None else 0)


class _LanePartition:
    """One partition of a ``LaneReader``, read by its unit."""

    def __init__(self, reader: LaneReader, key: tuple[str, int]) -> None:
        self._reader = reader
        self._key = key

    def consume(self, count: int, timeout: float) -> list[Any]:
        return self._reader.take(self._key, count, timeout)

    def pause(self) -> None:
        self._reader.pause(self._key)

    def position(self) -> int:
        return self._reader.position(self._key)


__all__ = ["BUFFER_BYTES", "LaneReader", "OwnReader", "PartitionReader"]
