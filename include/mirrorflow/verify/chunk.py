"""One chunk of a partition: what is verified (``ChunkSpec``), what was found (``ChunkResult``), each side's records.

Why chunks are read where they run and not on the driver: a chunk's source records of ``[source_begin,
source_end)`` and target records of ``[target_begin, target_end)`` are read by the task that verifies it, with
confluent-kafka, which returns only counts, two digests and (when they differ) the first difference. Records never
pass through the Spark driver, so verification scales with the executors, as the copy does.

Each side is read ``read_committed`` (aborted records and transaction markers are not records) into a ``_Range``,
which folds it into its digest batch by batch. Many ranges share one consumer (``reader``): the first pass only
digests. A chunk whose digests differ is read again here, both sides in lockstep (``_Side``, a consumer each), until
they first differ; then ``LOOKAHEAD`` more records per side are kept to classify the difference
(``compare.first_difference``). A source whose log start passed the chunk's begin (retention) makes the chunk
*unverifiable*, never *different*: what is gone cannot be compared.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from ..kafka.clients import RECEIVE_MAX, bounded_reader
from .compare import LOOKAHEAD, Difference, first_difference
from .records import Fields, encode_fields, new_digest

#: Records taken from the consumer per call at most (what it already holds: see ``next_batch``).
BATCH = 20_000

#: The longest a reader blocks in one poll while it waits for records (it returns as soon as any arrive).
POLL_S = 0.5


@dataclass(frozen=True)
class ChunkSpec:
    """What one chunk verifies (plain values: it travels to executors by pickling)."""

    index: int
    topic: str
    remote_topic: str
    partition: int
    source_begin: int
    source_end: int
    target_begin: int
    target_end: int
    source_fetch: int
    target_fetch: int
    begin_is_record: bool  # both begins are a copied record (an anchor or inside a run), not a gap
    source_consumer: dict[str, Any]
    target_consumer: dict[str, Any]
    timeout_s: float = 60.0
    lookahead: int = LOOKAHEAD
    end_is_record: bool = False  # the ends are the next chunk's first record: a difference at the end names them
    source_low: int = 0  # each side's log start when the plan was made: reading starts no earlier
    target_low: int = 0


@dataclass
class ChunkResult:
    """Counts, digests and the first difference of one chunk (``difference`` as ``Difference.to_dict()``)."""

    index: int
    topic: str
    partition: int
    source_begin: int
    source_end: int
    target_begin: int
    target_end: int
    source_records: int = 0
    target_records: int = 0
    source_digest: str = ""
    target_digest: str = ""
    difference: dict[str, Any] | None = None
    unverifiable: str | None = None  # why this chunk could not be compared (the source's retention)
    error: str | None = None
    seconds: float = 0.0

    @property
    def identical(self) -> bool:
        return (
            not self.error
            and not self.unverifiable
            and self.source_records == self.target_records
            and self.source_digest == self.target_digest
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def new_result(spec: ChunkSpec) -> ChunkResult:
    """An empty result for ``spec`` (its ranges, nothing read yet)."""
    return ChunkResult(
        spec.index, spec.topic, spec.partition, spec.source_begin, spec.source_end, spec.target_begin, spec.target_end
    )


class _Truncated(Exception):
    """The side's log start passed the offsets to read: those records are gone."""

    def __init__(self, log_start: int) -> None:
        super().__init__(log_start)
        self.log_start = log_start


class _TargetTruncated(_Truncated):
    """The target's log start passed the chunk's target begin (its own retention deleted the copies)."""


def record_failure(result: ChunkResult, spec: ChunkSpec, exc: BaseException) -> None:
    """Put what stopped a chunk into its result: records retention deleted (unverifiable), else an error."""
    if isinstance(exc, _TargetTruncated):
        result.unverifiable = (
            f"the target's log starts at {exc.log_start}, after {spec.target_begin}: its copies were deleted "
            "on the target (retention)"
        )
    elif isinstance(exc, _Truncated):
        result.unverifiable = (
            f"the source's log starts at {exc.log_start}: records from {spec.source_begin} were deleted on the "
            "source (retention) before they could be compared"
        )
    else:
        result.error = (
            f"{spec.topic}[{spec.partition}] offsets {spec.source_begin}..{spec.source_end - 1}: "
            f"{type(exc).__name__}: {exc}"
        )


class _Range:
    """One side of a chunk: its committed records in ``[begin, end)``, in order, digested as they are handed in.

    Whoever reads the partition hands its records in (``take``) and its end-of-partition position (``reached``);
    ``done`` once the range is complete, ``failure`` when it cannot be (truncated, an error). Records are kept for
    the lockstep comparison only while ``keep``.
    """

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        partition: int,
        begin: int,
        end: int,
        expect_record: bool,
        timeout: float,
    ) -> None:
        self.config, self.topic, self.partition = config, topic, partition
        self.begin, self.end, self.timeout, self.expect_record = begin, end, timeout, expect_record
        self.digest = new_digest()
        self.count = 0
        self.done = begin >= end
        self.failure: BaseException | None = None
        self.offsets: list[int] = []  # kept records not yet compared (see keep)
        self.recs: list[Fields] = []
        self.pos = 0
        self.keep = True  # buffer records for the comparison (off once the first difference is known)
        self.start = begin  # where a reader starts fetching it (at most ``begin``)
        self._first = True

    def available(self) -> int:
        return len(self.recs) - self.pos

    def take(self, messages: list[Any]) -> None:
        """Fold in consumed records of this partition (in offset order, no events); records outside ``[begin,
        end)`` are dropped, and one at or past ``end - 1`` completes the range."""
        begin, end = self.begin, self.end
        if messages and (messages[0].offset() < begin or messages[-1].offset() >= end - 1):
            self.done = self.done or messages[-1].offset() >= end - 1
            messages = [m for m in messages if begin <= m.offset() < end]
        self._add(messages)

    def reached(self, position: int) -> None:
        """The partition's end-of-partition event, the reader at ``position``: complete when that is past the end
        (a range ending in a transaction marker or aborted records learns it only so)."""
        if position >= self.end and not self.done:
            self.done = True
            self._add([])

    def _add(self, messages: list[Any]) -> None:
        if self._first and (messages or self.done):
            self._first = False
            first = messages[0].offset() if messages else self.end
            if self.expect_record and first > self.begin:
                messages = _skipped(self.config, self.topic, self.partition, self.begin, first, self.timeout) + messages
        if not messages:
            return
        # Columns, one comprehension each: no Python function call per record (a comprehension of tuples transposed
        # by zip(*...) cost several times as much).
        keys = [m.key() for m in messages]
        values = [m.value() for m in messages]
        headers = [m.headers() for m in messages]
        stamps = [m.timestamp() for m in messages]
        self.digest.add_columns(keys, values, headers, stamps)
        self.count += len(messages)
        if self.keep:
            if self.pos:
                del self.offsets[: self.pos], self.recs[: self.pos]
                self.pos = 0
            self.offsets += [m.offset() for m in messages]
            self.recs += zip(keys, values, headers, [stamp for _, stamp in stamps], strict=True)


class _Side(_Range):
    """A ``_Range`` with a consumer of its own, read a batch at a time (``fill``): the lockstep comparison."""

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        partition: int,
        begin: int,
        end: int,
        fetch: int,
        expect_record: bool,
        timeout: float,
    ) -> None:
        super().__init__(config, topic, partition, begin, end, expect_record, timeout)
        self._consumer: Consumer | None = None
        if not self.done:
            self._consumer = consumer(config)
            low, _high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            if begin < low:
                self.close()
                raise _Truncated(low)
            self._consumer.assign([TopicPartition(topic, partition, max(min(fetch, begin), low))])
        self._last_progress = time.monotonic()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def fill(self) -> None:
        """Read one more batch: digest it, and keep it for comparison while ``keep``; sets ``done`` at the end."""
        if self.done or self._consumer is None:
            return
        consumer = self._consumer
        batch = next_batch(consumer, min(POLL_S, self.timeout))
        events = [m for m in batch if m.error() is not None]
        messages = [m for m in batch if m.error() is None] if events else batch
        self.take(messages)  # before the events: an end-of-partition event follows the records it comes after
        for event in events:
            error = event.error()
            if error.code() == KafkaError._PARTITION_EOF:
                self.reached(consumer.position([TopicPartition(self.topic, self.partition)])[0].offset)
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                low, _ = consumer.get_watermark_offsets(TopicPartition(self.topic, self.partition), self.timeout)
                raise _Truncated(low)
            else:
                raise RuntimeError(f"reading {self.topic}[{self.partition}]: {error.name()} ({error.str()})")
        if batch:
            self._last_progress = time.monotonic()
        elif time.monotonic() - self._last_progress > self.timeout:
            position = consumer.position([TopicPartition(self.topic, self.partition)])[0].offset
            raise TimeoutError(
                f"reading {self.topic}[{self.partition}]: no progress for {self.timeout:.0f} s at offset {position} "
                f"(reading up to {self.end})"
            )
        if self.done:
            self.close()


def next_batch(consumer: Consumer, wait: float) -> list[Any]:
    """What ``consumer`` holds now (messages and events, at most ``BATCH``), waiting up to ``wait`` s only while it
    holds nothing.

    Why not ``consume(BATCH, timeout)``: that returns early only once ``BATCH`` messages arrived, so a range with
    fewer records left to read waited the whole timeout, call after call, on each side of every chunk, whatever its
    size. ``poll`` returns as soon as anything arrives; the rest of what librdkafka
    already fetched is then taken without waiting.
    """
    first = consumer.poll(wait)
    if first is None:
        return []
    return [first, *consumer.consume(BATCH - 1, 0)]


def consumer(config: dict[str, Any]) -> Consumer:
    """A read_committed bounded reader (``clients.bounded_reader``) that never resets silently: a position
    retention deleted is an error."""
    return Consumer(
        bounded_reader(
            {"receive.message.max.bytes": RECEIVE_MAX, "max.partition.fetch.bytes": 8 * 1024 * 1024, **config},
            **{"isolation.level": "read_committed", "auto.offset.reset": "error"},
        )
    )


def _skipped(config: dict[str, Any], topic: str, partition: int, begin: int, first: int, timeout: float) -> list[Any]:
    """Committed records in ``[begin, first)`` a read_committed fetch starting at ``begin`` did not deliver.

    ``begin`` is known to hold a copied record, so a first delivered offset above it means the broker skipped
    committed records: the embedded test broker does when a fetch starts inside a committed transaction (Apache
    Kafka never does). A fetch from an earlier offset finds them: earlier offsets are tried, doubling the
    distance back to the log start, as the copier does (``replication.unit_reads.skipped_committed``). Rare.
    """
    reader = consumer(config)
    try:
        low, _ = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
    finally:
        reader.close()
    back = 1
    while True:
        start = max(low, begin - back)
        found = [m for m in _read_plain(config, topic, partition, start, first, timeout) if m.offset() >= begin]
        if found or start == low:
            return found
        back *= 2


def _read_plain(
    config: dict[str, Any], topic: str, partition: int, start: int, end: int, timeout: float
) -> Iterator[Any]:
    reader = consumer(config)
    try:
        reader.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            if message.error() or message.offset() >= end:
                return
            yield message
    finally:
        reader.close()


def _sides(spec: ChunkSpec) -> tuple[_Side, _Side]:
    """Both sides of a chunk, positioned; ``_Truncated`` from the target is re-raised as ``_TargetTruncated``."""
    source = _Side(
        spec.source_consumer,
        spec.topic,
        spec.partition,
        spec.source_begin,
        spec.source_end,
        spec.source_fetch,
        spec.begin_is_record,
        spec.timeout_s,
    )
    try:
        target = _Side(
            spec.target_consumer,
            spec.remote_topic,
            spec.partition,
            spec.target_begin,
            spec.target_end,
            spec.target_fetch,
            spec.begin_is_record,
            spec.timeout_s,
        )
    except _Truncated as exc:
        source.close()
        raise _TargetTruncated(exc.log_start) from None
    return source, target


def name_difference(spec: ChunkSpec, result: ChunkResult) -> None:
    """Read a chunk whose digests differ again, both sides in lockstep, and put its first difference in ``result``
    (never raises: a failure is the result's ``error``). Only such chunks pay it: keeping and comparing every record
    in the first pass cost about a tenth more, for nothing when the copy is right."""
    try:
        source, target = _sides(spec)
        try:
            result.difference = _compare(source, target, spec.lookahead, spec.end_is_record)
        finally:
            source.close()
            target.close()
    except Exception as exc:  # noqa: BLE001 - reported per chunk; the driver turns it into exit code 2
        record_failure(result, spec, exc)


def _compare(source: _Side, target: _Side, lookahead: int, end_is_record: bool) -> dict[str, Any] | None:
    """Compare in lockstep until the first difference; classify it (None when the chunk is identical)."""
    while True:
        if not source.available() and not source.done:
            source.fill()
            continue
        if not target.available() and not target.done:
            target.fill()
            continue
        n = min(source.available(), target.available())
        if n == 0:
            if not source.available() and not target.available():
                return None  # both sides ended together: identical
            break
        a = source.recs[source.pos : source.pos + n]
        b = target.recs[target.pos : target.pos + n]
        if a == b:
            source.pos += n
            target.pos += n
            continue
        k = next(i for i in range(n) if a[i] != b[i])
        source.pos += k
        target.pos += k
        break
    for side in (source, target):
        while side.available() < lookahead and not side.done:
            side.fill()
    window = [
        [
            (offset, encode_fields(record))
            for offset, record in zip(
                side.offsets[side.pos : side.pos + lookahead], side.recs[side.pos : side.pos + lookahead], strict=True
            )
        ]
        for side in (source, target)
    ]
    done = [side.done and side.available() <= lookahead for side in (source, target)]
    difference = first_difference(
        window[0],
        window[1],
        source_done=done[0],
        target_done=done[1],
        source_next=source.end if end_is_record else None,
        target_next=target.end if end_is_record else None,
    )
    if difference.kind == "differs" and difference.count is None and not all(done):
        return (_beyond_lookahead(source, target) or difference).to_dict()
    return difference.to_dict()


def _beyond_lookahead(source: _Side, target: _Side) -> Difference | None:
    """A missing or extra range longer than the look-ahead: where the target's record reappears in the source
    (source records missing), else where the source's record reappears in the target (extra records).

    Streams the rest of the chunk once per side, keeping one batch at a time: only chunks that differ pay it.
    """
    first_source, first_target = source.offsets[source.pos], target.offsets[target.pos]
    found = _scan(source, target.recs[target.pos])
    if found is not None:
        count, last = found
        return Difference("missing", first_source, first_target, count, source_last=last)
    found = _scan(target, source.recs[source.pos])
    if found is not None:
        count, last = found
        return Difference("extra", first_source, first_target, count, target_last=last)
    return None


def _scan(side: _Side, wanted: Fields) -> tuple[int, int] | None:
    """(records before ``wanted``, offset of the last of them), searching this side after its current record."""
    skipped, last = 1, side.offsets[side.pos]  # the differing record itself comes first
    side.pos += 1
    while True:
        for i in range(side.pos, len(side.recs)):
            if side.recs[i] == wanted:
                return skipped, last
            skipped, last = skipped + 1, side.offsets[i]
        side.pos = len(side.recs)  # the next fill drops what was scanned
        if side.done:
            return None
        side.fill()


__all__ = ["ChunkResult", "ChunkSpec", "consumer", "name_difference", "new_result", "next_batch", "record_failure"]
