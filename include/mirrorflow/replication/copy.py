"""Copy one work unit: the code that runs inside a Spark task.

Exactly-once: a transactional producer with a stable ``transactional.id`` per (flow, topic,
partition) first fences every older holder of that id (a retried or speculative Spark task, a killed
executor's zombie, a concurrent run), then re-reads the stored progress (read_committed), copies the
records and writes the progress record (and, when they live on the target, the offset syncs) in the
same transaction. Either all of it becomes visible or none of it does, so consumers reading
read_committed never see a duplicate or a gap, whatever failed and whenever.

At-least-once: an idempotent producer; progress is written only after every record before it is
acknowledged, so a failure can repeat records but never lose one. Progress is checkpointed inside a unit
too (``CHECKPOINT_EVERY_RECORDS``, ``CHECKPOINT_EVERY_S``), so a crash repeats at most that many records.

A unit is a chain of such transactions (or checkpoint intervals) over one partition, bounded in time
(``UNIT_SECONDS``): what a unit committed before a failure stays committed and counted.

Speed: the copy loop takes consumer batches of a few thousand records (``CONSUME_BATCH``: less than the
consumer has read ahead, and never more than the unit still needs, so the call returns as soon as the unit's last
record is there instead of waiting out a timeout), and
pauses the source partition as soon as that last record is in hand: a consumer left at the end of a partition
keeps fetching (the embedded test broker answers such fetches at once, so the loop costs CPU on both sides for as
long as the unit goes on producing). Per record the loop only reads the message,
produces it and notes its source offset. Where each copy landed comes from delivery reports: the producer is
idempotent and writes one partition, so the broker appends the copies in the order they were sent, and the i-th
record sent is the one at the i-th lowest target offset reported (see ``_runs``). Exactly-once asks for a report
of each consumer batch's first and last record only (``ReportedBatch``), at-least-once for every record.
Producers are kept per process between units (``KEEP_PRODUCERS``): a transactional one per
``transactional.id``, so a later unit of the same partition in the same process (a Spark Connect worker, a
later wave on the same Spark worker) skips ``init_transactions``; a kept producer first proves it still owns its
id with one record, and a fenced one is replaced by a new producer that fences the other holder, as every unit
did before.

Failures are worded in Kafka's terms (error name, topic, partition, offset) and marked retriable when
they are transient (a broker restarting, a leader moving), so the run retries the unit rather than fail.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..kafka.clients import BOUNDED_READER
from ..kafka.errors import is_fenced, is_retriable, kafka_words
from ..wire import OffsetSync, source_offset_value
from .delivery import (
    CONSEQUENTIAL,
    TOO_LARGE,
    PerRecordReports,
    ReportedBatch,
    control_delivered,
    copied_runs,
    offset_syncs,
)
from .kept_clients import KeptClients, client_key, close_consumer, close_kept_consumers, learn_topic, lent_consumer
from .lane_reader import LaneReader, OwnReader, PartitionReader
from .lanes import lane_plan, lanes
from .progress import StoredProgress, fingerprint, progress_since, progress_since_many, read_stored_progress
from .units import LossEvent, Run, UnitResult, UnitSpec

# The embedded test broker (noida-db) answers a fetch with a partition's whole backlog; a large
# receive limit lets librdkafka accept it. Harmless against Apache Kafka, which honours fetch sizes.
_RECEIVE_MAX = 200 * 1024 * 1024

CHECKPOINT_EVERY_S = 1.0
CHECKPOINT_EVERY_RECORDS = 10_000
"""At-least-once: a unit stores progress at least every second and every 10,000 records of a partition, so a
crash repeats at most 10,000 records per partition (fewer at low rates)."""

UNIT_SECONDS = 30.0
"""A unit copies its partition in spans: transactions of at most ``mirrorflow.unit.max.records`` and
``mirrorflow.unit.max.bytes`` (exactly-once), or that much between progress checkpoints (at-least-once). After a
span it goes on with the next one, on the same consumer and producer, until it reaches its end or has run this long;
then it returns to the driver, which logs progress, checks that it still holds the run lock and plans the next
wave. Why not a unit per span: each unit opens a consumer, reads the stored progress and costs the driver a Spark
job, and a broker that answers a fetch with a partition's whole backlog (the embedded test broker) sends the rest of
that backlog again to every new consumer (BENCHMARKS.md, "Figures behind the copier's settings")."""

#: How long one consume call waits when fewer records than asked are there (a transactional source's markers
#: and aborted records take offsets without being delivered); the unit's own timeout is counted across calls.
_CONSUME_WAIT_S = 0.1

#: librdkafka settings of the copier's clients unless the flow's client configuration sets them.
#: Producer: a longer linger lets batches fill (fewer, larger produce requests: less work for both ends); a
#: copy is never waiting on a single record, since the consumer hands them over by the thousand.
#: ``reconnect.backoff.ms``: librdkafka waits half of it (50 ms by default) between leaving the bootstrap
#: connection and connecting to the broker the metadata named, so a new producer pays that before
#: ``init_transactions`` can ask for its producer id; a unit of a few records is mostly such waits. Reconnecting after a failure still backs off
#: exponentially up to ``reconnect.backoff.max.ms``.
#: Consumer: a unit's own consumer has one partition, so a fetch may bring more of it than librdkafka's 1 MiB
#: default (a lane's consumer, ``lane_reader``, has many, within librdkafka's ``fetch.max.bytes``). Its
#: read-ahead is bounded (10,000 records or 32 MiB, against librdkafka's 100,000 and 64 MiB): a unit copies up to
#: an end offset, and records fetched past it are thrown away when the unit closes (on a live topic, every run
#: fetched up to 64 MiB the next run fetched again). A copier hands records to its producer far slower than
#: a fetch brings them, so it keeps a few seconds of work queued either way. On a broker that answers a fetch at
#: the end of a partition at once instead of waiting ``fetch.wait.max.ms`` (the embedded test broker does), a
#: consumer that had read ahead to the end sent empty fetches in a loop for as long as the copy took; the bound
#: ends that.
PRODUCER_DEFAULTS: dict[str, Any] = {"linger.ms": 20, "reconnect.backoff.ms": 20}
CONSUMER_DEFAULTS: dict[str, Any] = {
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "queued.min.messages": 10_000,
    "queued.max.messages.kbytes": 32 * 1024,
}

CONSUME_BATCH: int = CONSUMER_DEFAULTS["queued.min.messages"] // 2  # 5,000
CONSUME_BYTES: int = CONSUMER_DEFAULTS["queued.max.messages.kbytes"] * 1024 // 2  # 16 MiB
"""Records asked of the consumer per call: at most ``CONSUME_BATCH``, about ``CONSUME_BYTES`` at the unit's
record size so far, and never more than the unit still needs (so the call returns as soon as the last of them is
there). Both are half of the consumer's read-ahead (``CONSUMER_DEFAULTS``), so a call leaves records queued and
librdkafka does not fetch again while the unit is still working through what it has; at 50,000 records a call
emptied the queue each time, and a fetcher already at the partition's end then looped on empty fetches against a
broker that answers them at once (the embedded test broker). A call costs the same for one record as for
thousands, so smaller calls cost nothing measurable (BENCHMARKS.md, "Figures behind the copier's settings")."""

KEEP_PRODUCERS = 64
"""Idle record producers kept per process, as many as a family's ``TRANSACTION_SLOTS`` (least recently used dropped
first): each holds connections and a few librdkafka threads."""

PROBE_AFTER_IDLE_S = 1.0
"""A kept transactional producer idle this long (kept by an earlier wave or run) first sends one record and waits
for its report, to learn at once whether another process fenced it since, rather than after a span. The units of a
lane follow each other within milliseconds and skip that: the probe cost a round trip per unit, during which the
source consumer, at the end of its partition and not yet paused, fetched in a loop (a broker answering such fetches
at once turned that into ~1 core, measured on 1,000 partitions). A fenced producer is caught either way: nothing
it sends can commit, and the unit is copied again with a new producer (``copy_unit``)."""

UNIT_THREADS = 8
"""Units one process copies at once (threads): see :func:`copy_units`."""


class UnitFailed(Exception):
    """A unit failure already worded for the operator; ``retriable`` when a later attempt may succeed."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


class _Fenced(Exception):
    """A newer producer with this partition's transactional.id (a retry, a concurrent run) owns it now."""


def copy_unit(
    spec: UnitSpec,
    started: float | None = None,
    lane: _LaneTransaction | None = None,
    may_defer: bool = False,
    reader: LaneReader | None = None,
) -> UnitResult:
    """Run one unit and describe the outcome; never raises, so one bad partition cannot hide the others.

    ``started``: when its lane began (``copy_units``); the unit's ``UNIT_SECONDS`` count from there. ``lane``: the
    transaction its lane's earlier units left open, which it goes on in; ``may_defer``: it may leave its own last
    transaction open for the lane's next unit (see ``_LaneTransaction``); ``reader``: its lane's consumer.
    """
    started = time.monotonic() if started is None else started
    unit = _UnitCopy(spec, started=started, lane=lane, may_defer=may_defer, reader=reader)
    result = unit.attempt()
    unit.drop_producer()
    if unit.reused and unit.producer_broken and result.records == 0:
        # A producer kept from an earlier unit was fenced since (another process took the partition's id, e.g. a
        # retried task) or broke while idle. Nothing was committed: do what a unit always did, with a new producer.
        unit = _UnitCopy(spec, reuse=False, started=started, lane=lane, may_defer=may_defer, reader=reader)
        result = unit.attempt()
        unit.drop_producer()
    result.seconds = round(time.monotonic() - started, 3)
    return result


class _LaneTransaction:
    """A transaction the small units of a lane share, so 1,000 units of a few records cost 16 commits, not 1,000.

    Why: on 1,000 partitions with 10 new records each, a unit's flush and commit were half of its time
    (about 21 ms of a thread each). The units of a lane share a ``transactional.id`` and run one after the other
    (``copy_units``), so one transaction can hold several of them, as one MirrorMaker 2 task's transaction holds
    all its partitions. A unit that committed nothing before its last span and is not the last of its lane
    (``may_defer``) writes that span's records, progress and offset syncs into the transaction and leaves it open;
    the next unit goes on in it, and whichever unit commits next (or the lane, at its end) commits them all. The
    transaction stays within the first unit's ``max_records`` and ``max_bytes``. Exactly what a unit's own
    transaction guaranteed holds for the shared one: all of it becomes visible or none of it does. Until the commit
    the units' results are provisional; if the transaction is aborted (a later unit failed, or was fenced), each of
    them fails, retriably, having committed nothing, and the run copies them again. Offset syncs that go to the
    source cluster are written after the commit, as a unit's own are.
    """

    def __init__(self) -> None:
        self.producer: Producer | None = None
        self.key = ""
        self.records = 0
        self.bytes = 0
        self.pending: list[_UnitCopy] = []  # units whose last span is in the open transaction
        self.left: list[tuple[_UnitCopy, int]] = []  # pending units whose progress is not stored yet, and its end
        self.source_syncs: list[tuple[UnitSpec, list[OffsetSync]]] = []
        self.specs: list[UnitSpec] = []  # the lane's units (``copy_units``)
        self.known: dict[tuple[str, int], StoredProgress | None] = {}  # progress read for the units still to come
        self.known_by: Producer | None = None  # the producer that held the id when ``known`` was read

    def stored(self, spec: UnitSpec, producer: Producer) -> StoredProgress | None:
        """The stored progress of ``spec``'s partition, read once for the rest of the lane.

        Why: a unit must read its progress after its producer holds the partition's ``transactional.id`` (a zombie
        may have committed since the run planned); one read per unit was one of the per-unit costs that kept a
        wide family's run slow. Every unit of a lane has the same id, so once ``producer`` holds it no
        other producer can commit progress for any of them without fencing ``producer`` first, and then nothing it
        sends can commit: the answer read once holds for every later unit on that producer. A new producer (the one
        before was fenced or broke) reads again, for the whole lane (the answers of units already done are never
        asked for). Each answer is used once: a unit that reads again (a span copied again after an abort) reads
        what its own committed spans stored.
        """
        where = (spec.topic, spec.partition)
        if producer is not self.known_by:
            self.known, self.known_by = _stored_many(self.specs or [spec]), producer
        if where in self.known:
            return self.known.pop(where)
        return _stored(spec)

    def hand_over(self, unit: _UnitCopy, key: str, records: int, size: int) -> None:
        """``unit`` leaves its last span in the open transaction of its producer."""
        assert unit.producer is not None
        self.producer, self.key = unit.producer, key
        self.records += records
        self.bytes += size
        self.pending.append(unit)

    def leave(self, unit: _UnitCopy, position: int) -> None:
        """``unit`` leaves its last span, up to ``position``, to the lane unflushed: ``store_left`` stores it."""
        self.hand_over(unit, unit.key, len(unit.sent_offsets), unit.sent_bytes)
        self.left.append((unit, position))

    def store_left(self) -> None:
        """Store the progress of the spans left to the lane (``leave``) in the open transaction, once the lane's
        producer was flushed: one flush for all of them rather than one per unit, which was a unit's largest cost at
        10,000 partitions. A span whose records failed fails the whole transaction: raised as the unit's failure,
        retriable (every pending unit is copied again, each with a transaction of its own, see ``share_transaction``).
        """
        left, self.left = self.left, []
        assert self.producer is not None or not left
        for unit, position in left:
            try:
                runs, syncs = unit._store_progress(position, self.producer)
            except (UnitFailed, PerRecordReports) as exc:
                where = f"{unit.spec.topic}[{unit.spec.partition}]"
                raise UnitFailed(f"the transaction it shared with {where} failed: {exc}", retriable=True) from None
            if unit.spec.emit_syncs and not unit.spec.syncs_on_target:
                self.source_syncs.append((unit.spec, syncs))
            unit._committed(position, runs, len(syncs) if unit.spec.emit_syncs else 0)  # provisional until the commit

    def has_room(self, spec: UnitSpec, records: int, size: int) -> bool:
        return self.records + records < spec.max_records and self.bytes + size < spec.max_bytes

    def committed(self) -> None:
        """The open transaction committed: the pending units' spans are theirs for good."""
        for spec, syncs in self.source_syncs:
            _write_source_syncs(spec, syncs)
        self._clear()

    def aborted(self, reason: str) -> None:
        """The open transaction was aborted: every pending unit failed, retriably, having committed nothing."""
        for unit in self.pending:
            unit.uncommitted(f"{reason}; nothing of it was committed")
        self._clear()

    def commit(self, timeout: float) -> None:
        """At the end of a lane: commit what its last units left open, and keep the producer for later units."""
        producer = self.producer
        if producer is None:
            return
        started = time.monotonic()
        try:
            producer.flush(timeout)
            self.store_left()
            producer.commit_transaction(timeout)
        except (KafkaException, UnitFailed, _Fenced) as exc:
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(min(timeout, 30))
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
            why = kafka_words(error) if not isinstance(exc, _Fenced) else "fenced by a newer producer of its id"
            self.aborted(f"the transaction this unit shared with later units of its lane failed: {why}")
            _let_go(producer)
            return
        pending, key = self.pending, self.key  # before ``committed`` clears them
        self.committed()
        share = round((time.monotonic() - started) / max(1, len(pending)), 3)
        for unit in pending:
            unit.result.commit_seconds = round(unit.result.commit_seconds + share, 3)
        _KEPT_PRODUCERS.keep(key, producer)

    def _clear(self) -> None:
        """Forget the open transaction (the progress read for the units still to come stays)."""
        self.producer, self.key, self.records, self.bytes = None, "", 0, 0
        self.pending, self.source_syncs, self.left = [], [], []


def copy_units(specs: Sequence[UnitSpec], threads: int | None = None) -> list[UnitResult]:
    """Copy several units in this process at once, a lane per thread (``threads``); results in the order of
    ``specs``.

    Why: a unit with a few records to copy is all waiting, not work. ``init_transactions`` costs about 55 ms on a
    quiet broker (0.5 s when librdkafka's retry timer fires first), the stored progress read and the commit a few
    ms more, and librdkafka releases the GIL while it waits. One after the other, 1,000 partitions with a few new
    records each took 401 s in one process; overlapped, the waits are paid ``threads`` at a time. The
    units of a wave never share a partition, so order within a partition is unaffected. Units sharing a
    ``transactional.id`` (a lane, see ``lanes``) run one after the other, each with its own transactions on the
    lane's producer; a lane's units share ``UNIT_SECONDS``: once it is spent, the rest of the lane is left for the
    next wave (status ``deferred``), so a wave returns to the driver in about that time. A lane of several units with
    records to copy also shares one source consumer (``lane_reader.LaneReader``), as an MM2 task's partitions do.
    """
    threads = UNIT_THREADS if threads is None else threads
    results: list[UnitResult | None] = [None] * len(specs)

    def run_lane(lane: list[int]) -> None:
        started = time.monotonic()
        shared = _LaneTransaction()
        shared.specs = [specs[index] for index in lane]
        planned = lane_plan(shared.specs)
        with contextlib.ExitStack() as stack:
            reader = None
            if len(planned) > 1:
                first = shared.specs[0]
                try:
                    consumer = _source_consumer(first)  # not a kept one: see ``lane_reader``
                    stack.callback(close_consumer, consumer)
                    reader = LaneReader(consumer, planned)
                except KafkaException:
                    reader = None  # a source that does not answer: each unit meets it, and names it, on its own
            for n, index in enumerate(lane):
                spec = specs[index]
                if n and time.monotonic() - started >= UNIT_SECONDS:
                    results[index] = UnitResult(spec.topic, spec.partition, "deferred")
                else:
                    last = n == len(lane) - 1
                    results[index] = copy_unit(spec, started, shared, may_defer=not last, reader=reader)
        shared.commit(specs[lane[-1]].timeout_s)

    lanes_ = lanes(specs)
    if len(lanes_) <= 1 or threads <= 1:
        for lane in lanes_:
            # In a context of their own, as in the pool's threads: a unit's clients are not the run's (kafka_calls).
            contextvars.Context().run(run_lane, lane)
    else:
        with ThreadPoolExecutor(min(threads, len(lanes_)), thread_name_prefix="mirrorflow-unit") as pool:
            list(pool.map(run_lane, lanes_))
    return [result for result in results if result is not None]


def _maybe_fail(spec: UnitSpec, stage: str, records: int, producer: Producer) -> None:
    """The injectable fault: kill this process like a lost executor would die."""
    fault = spec.fault
    if fault is None or fault.stage != stage or records < fault.after_records:
        return
    marker = Path(fault.marker)
    if marker.exists():
        return
    producer.flush(30)  # the records reach the broker: an open transaction, or acknowledged records
    marker.write_text(f"{spec.topic}[{spec.partition}] killed after {records} records at {stage}\n")
    os._exit(137)


def _stored(spec: UnitSpec) -> StoredProgress | None:
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


def _stored_many(specs: Sequence[UnitSpec]) -> dict[tuple[str, int], StoredProgress | None]:
    """``_stored`` of several units at once: those whose run read the progress topic (``progress_from``) in one
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


def _check_partition(messages: list[Any], spec: UnitSpec) -> None:
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


def _headers_size(headers: list[tuple[str, bytes | None]]) -> int:
    return sum(len(k) + len(v or b"") for k, v in headers)


def _last_offset(messages: list[Any]) -> int:
    """Offset of the last record in a consumer batch (-1 when it holds only events such as end of partition)."""
    for message in reversed(messages):
        if message.error() is None:
            return int(message.offset())
    return -1


class _UnitCopy:
    """One unit's copy: records sent since the last checkpoint, and what was committed so far."""

    def __init__(
        self,
        spec: UnitSpec,
        *,
        reuse: bool = True,
        started: float | None = None,
        lane: _LaneTransaction | None = None,
        may_defer: bool = False,
        reader: LaneReader | None = None,
    ) -> None:
        self.spec = spec
        self.reader = reader  # the lane's consumer, if it has one (``copy_units``)
        self.exactly_once = spec.delivery == "exactly-once"
        self.result = UnitResult(spec.topic, spec.partition, "copied")
        self.producer: Producer | None = None
        self.reuse = reuse  # may take a producer kept from an earlier unit
        self.reused = False  # it did
        self.probe = False  # it had been idle long enough to check first that it still owns its id
        self.lane = lane if spec.delivery == "exactly-once" else None
        self.may_defer = may_defer and self.lane is not None and spec.share_transaction
        self.in_transaction = False  # a transaction of its producer is open (begun here, or left open by the lane)
        self.key = ""  # its producer's configuration (``kept_clients.client_key``)
        self.producer_broken = False  # fenced, or failed in a way that leaves the producer unusable
        self.sent_offsets: list[int] = []  # upstream offsets sent since the last checkpoint, in send order
        self.acked: list[int] = []  # target offsets of the records acknowledged since then, as reported
        self.failed = 0  # records reported failed since then
        self.errors: list[tuple[int, KafkaError, int]] = []  # (upstream, error, bytes)
        self.delivered = self._delivery_callback()
        # Exactly-once reports only each consumer batch's first and last record (``ReportedBatch``) until a span
        # needs more; at-least-once has no transaction to refuse a failed record, so it hears of every record.
        self.per_record = not self.exactly_once
        self.batches: list[ReportedBatch] = []  # this span's batches without a report per record
        self.sent_total = 0
        self.sent_bytes = 0  # bytes sent since the last checkpoint
        self.bytes_total = 0
        self.last_message: Any = None  # the last record sent: its offset and fingerprint go with the progress
        self.source_last: str | None = None
        self.previous = -1  # last copied upstream offset before this unit's next run (-1: claim nothing)
        self.target_next: int | None = None
        self.last_checkpoint = time.monotonic()
        self.started = self.last_checkpoint if started is None else started  # its lane's start (``copy_units``)
        # Records per span: a transaction (exactly-once), or between progress checkpoints (at-least-once).
        self.span_records = spec.max_records if self.exactly_once else min(spec.max_records, CHECKPOINT_EVERY_RECORDS)

    def ended(self, status: str, error: str, *, retriable: bool = False) -> UnitResult:
        """The result of a unit that stopped early: counts stay what was committed before."""
        self.result.status, self.result.error, self.result.retriable = status, error, retriable
        return self.result

    def drop_producer(self) -> None:
        """Let go of a producer that was not kept: purge what it still holds (a unit that failed against a dead
        target), whose delivery callbacks point back at this unit, so it is destroyed now and does not go on
        reconnecting, and logging, in a long-lived process (tests, an Airflow worker) until message.timeout.ms."""
        producer, self.producer = self.producer, None
        if producer is not None and not _KEPT_PRODUCERS.holds(producer) and not self._lane_holds(producer):
            _let_go(producer)

    def attempt(self) -> UnitResult:
        """Run the unit; the outcome, never an exception."""
        spec = self.spec
        try:
            self.run()
            return self.result
        except _Fenced:
            self.producer_broken = True
            return self.ended("fenced", "fenced by a newer producer of this partition (a retry or another run)")
        except UnitFailed as exc:
            return self.ended("failed", str(exc), retriable=exc.retriable)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            if isinstance(error, KafkaError) and error.fatal():
                self.producer_broken = True
            where = f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}"
            return self.ended("failed", f"{where}: {kafka_words(error)}", retriable=is_retriable(error))
        except TimeoutError as exc:
            return self.ended("failed", str(exc), retriable=True)
        except Exception as exc:  # noqa: BLE001 - reported per partition in the run report
            if self.in_transaction:
                # Whatever went wrong, nothing of the open transaction may commit: the lane would commit it at its
                # end, records without their progress (copied again by the next run: duplicates).
                with contextlib.suppress(Exception):
                    self._abort()
            return self.ended("failed", f"{type(exc).__name__}: {exc}")

    def run(self) -> None:
        spec = self.spec
        if spec.emit_syncs and not spec.syncs_on_target:
            # Made now, not at the first checkpoint: a new idempotent producer gets its producer id about 0.5 s
            # after it is created (librdkafka's retry timer), which then passes while this unit copies.
            with contextlib.suppress(KafkaException):
                _syncs_producer(spec.syncs_producer)
        config = {**PRODUCER_DEFAULTS, **spec.target_producer, "enable.idempotence": True, "acks": "all"}
        if self.exactly_once:
            config["transactional.id"] = spec.transactional_id
        key = client_key(config)
        if self.lane is not None and self.lane.producer is not None and self.lane.key == key:
            # The transaction the lane's earlier units left open: this unit goes on in it.
            self.producer, self.reused, self.in_transaction = self.lane.producer, True, True
            kept = None
        else:
            kept = _KEPT_PRODUCERS.take(key) if self.reuse else None
            self.producer = kept[0] if kept is not None else None
            self.reused = kept is not None
        self.probe = kept is not None and kept[1] >= PROBE_AFTER_IDLE_S
        self.key = key
        if self.producer is None:
            self.producer = _new_producer(config, spec.remote_topic, spec.timeout_s)
            if self.exactly_once:
                # Fences zombies and waits for their transactions to end; a kept producer did this when it was made.
                self.producer.init_transactions(spec.timeout_s)
        if not self.exactly_once:
            self._copy()
            _KEPT_PRODUCERS.keep(key, self.producer)
            return
        try:
            try:
                self._copy()
            except PerRecordReports as why:
                # Nothing of the open span becomes visible; the spans committed before it stay. The same records
                # are copied again from the stored progress, each with its own report, so the offsets stay exact
                # and a failure names its record.
                if not self._abort():
                    raise UnitFailed(f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}: {why}") from None
                self._forget_span()
                self.per_record = True
                self._copy()
        except (KafkaException, SystemError, UnitFailed, TimeoutError, _Fenced) as exc:
            # A fenced producer fails in many places (confluent-kafka may even surface it as a SystemError
            # from a callback); aborting tells fenced (another producer owns the partition now) from failed.
            self._abort()
            raise exc from None
        if self.in_transaction:
            # Left open for the lane (this unit's last span, or nothing of its own: a unit with nothing to copy).
            return
        _KEPT_PRODUCERS.keep(key, self.producer)  # only a producer whose transaction committed (or never began)

    def _abort(self) -> bool:
        """Abort the open transaction; False when the producer is left unusable. Raises ``_Fenced`` when a newer
        producer of this partition's id exists."""
        assert self.producer is not None
        self.in_transaction = False
        if self.lane is not None and self._lane_holds(self.producer):
            where = f"{self.spec.topic}[{self.spec.partition}]"
            self.lane.aborted(f"the transaction it shared with {where}, a later unit of its lane, was aborted")
        try:
            self.producer.abort_transaction(min(self.spec.timeout_s, 30))
        except KafkaException as abort_error:
            if is_fenced(abort_error.args[0]):
                raise _Fenced() from None
            self.producer_broken = True
            return False
        return True

    def _lane_holds(self, producer: Producer) -> bool:
        return self.lane is not None and self.lane.producer is producer

    def _begin(self) -> None:
        """Begin a transaction, unless one is open (left by the lane's earlier units)."""
        assert self.producer is not None
        if not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True

    def uncommitted(self, why: str) -> None:
        """The transaction that held this unit's last span was aborted after the unit returned (see
        ``_LaneTransaction``): it committed nothing, and is to be copied again."""
        result = self.result
        result.status = "failed"
        result.error = f"{self.spec.topic}[{self.spec.partition}]: {why}"
        result.retriable = True
        result.records = result.bytes = result.syncs = 0
        result.start = result.position = result.first_offset = result.last_offset = None
        result.runs = []
        result.loss, result.truncated, result.reset_applied = None, False, False

    def _forget_span(self) -> None:
        """Drop what the aborted span sent, once the reports of its purged records are served (they would
        otherwise land in the next span's counts)."""
        assert self.producer is not None
        self.producer.flush(min(self.spec.timeout_s, 10))
        self.sent_offsets.clear()  # in place: the delivery callback holds these lists
        self.acked.clear()
        self.errors.clear()
        self.batches.clear()
        self.failed, self.sent_bytes = 0, 0
        self.last_message = None

    def _copy(self) -> None:
        spec, result = self.spec, self.result
        stored = self.lane.stored(spec, self.producer) if self.lane is not None and self.producer else _stored(spec)
        start = stored.offset + 1 if stored is not None else spec.default_start
        self.previous = stored.offset if stored is not None else start - 1
        self.target_next = stored.target_next if stored is not None else None
        self.source_last = stored.source_last if stored is not None else None
        reset = spec.reset is not None and stored is not None and stored.offset == spec.reset.stored_offset
        if reset and spec.reset is not None:
            start, self.previous, result.reset_applied = spec.reset.start, -1, True
            self.target_next = self.target_next if spec.reset.keep_target_next else None
            self.source_last = None
        result.position = start
        if result.start is None:  # a span copied again (``PerRecordReports``) keeps the unit's first start
            result.start = start
        shared = self.reader.open(spec.topic, spec.partition, start) if self.reader is not None else None
        if shared is not None and not reset and 0 <= spec.log_start <= start < spec.end:
            if self.exactly_once:
                self._begin()
            position = self._copy_records(shared, start)
        else:
            copied = self._copy_alone(start, reset)
            if copied is None:
                return
            start, position = copied
        self._checkpoint(position)
        if result.records == 0 and not reset and position == start:
            result.status = "noop"

    def _copy_alone(self, start: int, reset: bool) -> tuple[int, int] | None:
        """Copy with a consumer of the partition alone, from ``start`` (or the log start, if records were lost); the
        start and the next offset to copy, or None when there is nothing to copy or a loss stops the partition."""
        spec, result = self.spec, self.result
        with lent_consumer(_source_config(spec), lambda: _source_consumer(spec)) as consumer:
            learn_topic(consumer, spec.topic, spec.timeout_s)
            log_start = spec.log_start
            if log_start < 0 or start < log_start:
                # Unknown, or records were lost: the broker's log start now (a loss names what is gone by now).
                tp = TopicPartition(spec.topic, spec.partition)
                log_start, _ = consumer.get_watermark_offsets(tp, spec.timeout_s)
            if start < log_start:
                action = "stopped" if spec.truncation == "stop" else "continued from log start"
                result.loss = LossEvent(spec.topic, spec.partition, start, log_start - 1, action)
                if spec.truncation == "stop":
                    result.status = "stopped"
                    return None
                # The records between the stored progress and the log start existed but were never copied,
                # so nothing may be claimed about what precedes this unit's first run.
                start = result.start = result.position = log_start
                self.previous = -1
            if start >= spec.end and not reset:
                result.status = "noop"
                return None
            source = OwnReader(consumer, spec.topic, spec.partition, start)
            if self.exactly_once:
                self._begin()
            position = self._copy_records(source, start) if start < spec.end else start
        return start, position

    def _batch_size(self, position: int) -> int:
        """Records to ask the consumer for: never past the unit's end, its record limit or a fault."""
        spec = self.spec
        want = min(CONSUME_BATCH, spec.end - position)
        if self.sent_total:
            want = min(want, CONSUME_BYTES * self.sent_total // max(1, self.bytes_total))
        fault = spec.fault
        if fault is not None and fault.stage == "before-commit" and self.sent_total < fault.after_records:
            want = min(want, fault.after_records - self.sent_total)
        return max(1, want)

    def _copy_records(self, source: PartitionReader, start: int) -> int:
        """Copy from ``start`` up to ``spec.end`` or the unit's limits; return the next offset to copy."""
        spec, producer = self.spec, self.producer
        assert producer is not None
        end = spec.end
        position = start
        last_record = time.monotonic()
        first = True
        paused = False
        # A kept producer idle for a while: one record first, to learn at once whether it was fenced (once: not again
        # in a redo). Not for the units of a lane that follow each other (see ``PROBE_AFTER_IDLE_S``).
        probe = self.probe and not self.sent_total

        while True:
            messages = source.consume(1 if probe else self._batch_size(position), _CONSUME_WAIT_S)
            reached_eof = not messages
            if messages:
                _check_partition(messages, spec)
            if first and messages:
                offset = next((m.offset() for m in messages if m.error() is None), None)
                if offset is not None:
                    first = False
                    if offset > start:
                        position, limit = self._send_skipped(start, min(offset, end), position)
                        if limit:
                            return position
            if messages and not paused and _last_offset(messages) >= end - 1:
                # The unit's last record is here: stop fetching now, not after producing the batch. A consumer at
                # the end of a partition keeps long-polling (and a broker that answers at once, like the embedded
                # test broker, turns that into thousands of fetches a second, on both sides).
                source.pause()
                paused = True
            done = 0
            while done < len(messages):
                # A batch is sent in slices that end where a span (a transaction, or at-least-once's checkpoint
                # interval) is full; the rest of the batch goes into the next span.
                room = max(1, self.span_records - len(self.sent_offsets))
                chunk = messages[done : done + room] if done or room < len(messages) else messages
                stop, eof, used = self._send(chunk, position)
                done += used
                reached_eof = reached_eof or eof
                if self.last_message is not None and self.last_message.offset() >= position:
                    position = self.last_message.offset() + 1
                    last_record = time.monotonic()
                producer.poll(0)
                if probe and self.sent_total:
                    producer.flush(spec.timeout_s)  # its report says whether this producer still owns the id
                    probe = False
                if self.errors:  # fail fast; first let every record sent so far have its report, to name the cause
                    if len(self.acked) + self.failed < len(self.sent_offsets):
                        producer.flush(min(spec.timeout_s, 10))
                    self._raise_delivery_failure()
                if self.batches and self.batches[-1].error is not None:
                    self._batch_failed(self.batches[-1].error)
                _maybe_fail(spec, "before-commit", self.sent_total, producer)
                if stop is not None:
                    return stop
                if position >= end:
                    return end
                if self._span_full():
                    if time.monotonic() - self.started >= UNIT_SECONDS:
                        return position  # the unit's time is up: this span is its last
                    self._next_span(position)
                elif not self.exactly_once and time.monotonic() - self.last_checkpoint >= CHECKPOINT_EVERY_S:
                    self._checkpoint(position)
            if reached_eof:
                # Under read_committed the position moves past aborted records and markers without delivering them.
                consumed_to = source.position()
                if first and consumed_to > start:
                    first = False
                    position, limit = self._send_skipped(start, min(consumed_to, end), position)
                    if limit:
                        return position
                if consumed_to >= end:
                    return end
                position = max(position, consumed_to) if consumed_to >= 0 else position
            if time.monotonic() - last_record > spec.timeout_s:
                raise TimeoutError(
                    f"{spec.topic}[{spec.partition}]: no records from the source for {spec.timeout_s:.0f} s "
                    f"at offset {position} (target end {spec.end})"
                )

    def _span_full(self) -> bool:
        """The records sent since the last checkpoint fill a span: its records or its bytes."""
        return len(self.sent_offsets) >= self.span_records or self.sent_bytes >= self.spec.max_bytes

    def _next_span(self, position: int) -> None:
        """Store progress up to ``position`` (commit the transaction) and go on in a new one."""
        self._checkpoint(position, last=False)
        if self.exactly_once:
            self._begin()

    def _send(self, messages: list[Any], position: int) -> tuple[int | None, bool, int]:
        """Produce a consumer batch in order: the hot loop, a few method calls per record.

        Returns the offset to end the unit at, if a message says so (the unit's end, records the source deleted
        under the reader), whether the batch held an end-of-partition event, and how many of the messages it
        used: it stops after the record that fills the span's bytes, and the caller sends the rest in the next.

        Each record is produced once the next one is accepted (or the loop ends), so the batch's last record
        is known when it is produced: only the first and the last of a batch get a delivery report when
        ``per_record`` is off (see ``ReportedBatch``).
        """
        spec, producer = self.spec, self.producer
        assert producer is not None
        end, remote, partition = spec.end, spec.remote_topic, spec.partition
        produce = producer.produce
        sent_offsets = self.sent_offsets
        note = sent_offsets.append
        before = len(sent_offsets)
        byte_room = spec.max_bytes - self.sent_bytes
        if self.per_record:
            first_report = middle_report = self.delivered
            batch = None
        else:
            batch = ReportedBatch()
            first_report, middle_report = batch.first, None
        sent_bytes = 0
        last = None
        stop = None
        eof = False
        failure: KafkaException | None = None
        used = 0
        # The record accepted last, not yet produced.
        h_value = h_key = h_headers = h_report = None
        h_timestamp = h_offset = h_size = -1
        for message in messages:
            used += 1
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    eof = True
                    continue
                if error.code() == KafkaError._AUTO_OFFSET_RESET:
                    self.result.truncated = True
                    stop = position if last is None else last.offset() + 1
                    break
                failure = KafkaException(error)
                break
            offset = message.offset()
            if offset >= end:
                stop = end
                break
            key, value, headers = message.key(), message.value(), message.headers()
            size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
            if headers:
                for name, header in headers:  # inline: a sum() over a generator costs more than the loop
                    size += len(name) + (len(header) if header is not None else 0)
            kind, timestamp = message.timestamp()  # kind 0: not available; timestamp 0: the producer's now
            if last is not None:
                while True:
                    try:
                        # Positional (topic, value, key, partition, callback, on_delivery, timestamp, headers).
                        produce(remote, h_value, h_key, partition, h_report, None, h_timestamp, h_headers)
                        break
                    except BufferError:
                        producer.poll(0.1)  # the local queue is full: let deliveries drain it
                    except KafkaException as exc:
                        self._record_batch(sent_offsets, before, sent_bytes, last, batch)
                        raise self._refused(h_offset, h_size, exc.args[0]) from None
                h_report = middle_report
            else:
                h_report = first_report
            h_value, h_key, h_headers, h_offset, h_size = value, key, headers, offset, size
            h_timestamp = timestamp if kind and timestamp > 0 else 0
            note(offset)
            sent_bytes += size
            last = message
            if sent_bytes >= byte_room:
                break
        if last is not None:
            if batch is not None:
                h_report = batch.last if h_report is None else batch.only
            while True:
                try:
                    produce(remote, h_value, h_key, partition, h_report, None, h_timestamp, h_headers)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as exc:
                    self._record_batch(sent_offsets, before, sent_bytes, last, batch)
                    raise self._refused(h_offset, h_size, exc.args[0]) from None
        self._record_batch(sent_offsets, before, sent_bytes, last, batch)
        if failure is not None:
            raise failure
        return stop, eof, used

    def _record_batch(
        self, sent_offsets: list[int], before: int, sent_bytes: int, last: Any, batch: ReportedBatch | None
    ) -> None:
        """Add what one consumer batch sent to the unit's counts."""
        count = len(sent_offsets) - before
        self.sent_total += count
        self.sent_bytes += sent_bytes
        self.bytes_total += sent_bytes
        if last is not None:
            self.last_message = last
        if batch is not None and count:
            batch.count = count
            self.batches.append(batch)

    def _send_skipped(self, begin: int, end: int, position: int) -> tuple[int, bool]:
        """Send the committed records a read_committed fetch from ``begin`` skipped (see ``_skipped_committed``).

        Returns the next position and whether the unit's limits were reached. Rare: one record at a time.
        """
        spec = self.spec
        assert self.producer is not None
        for message in _skipped_committed(spec, begin, end):
            offset = message.offset()
            key, value, headers = message.key(), message.value(), message.headers()
            size = len(key or b"") + len(value or b"") + (_headers_size(headers) if headers else 0)
            kind, timestamp = message.timestamp()
            while True:
                try:
                    self.producer.produce(
                        spec.remote_topic,
                        value,
                        key,
                        partition=spec.partition,
                        on_delivery=self.delivered,
                        timestamp=timestamp if kind and timestamp > 0 else 0,
                        headers=headers,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    raise self._refused(offset, size, exc.args[0]) from None
            self.sent_offsets.append(offset)
            self.sent_total += 1
            self.sent_bytes += size
            self.bytes_total += size
            self.last_message = message
            position = offset + 1
            self.producer.poll(0)
            _maybe_fail(spec, "before-commit", self.sent_total, self.producer)
            if self._span_full():
                return position, True
        return position, False

    def _delivery_callback(self) -> Any:
        """The one delivery callback of this unit's records: the target offset, or the error, of each."""
        acked = self.acked.append

        def delivered(err: KafkaError | None, message: Any) -> None:
            if err is None:
                acked(message.offset())
            else:
                self._failed(err, message)

        return delivered

    def _failed(self, err: KafkaError, message: Any) -> None:
        # Reports of one partition arrive in send order (librdkafka enqueues them as the broker answers each
        # batch, in order), so the number of reports before this one is its place among the records sent. Only
        # the wording of a failure depends on it; what is committed never does (see _runs).
        index = len(self.acked) + self.failed
        self.failed += 1
        upstream = self.sent_offsets[index] if index < len(self.sent_offsets) else -1
        # Keep the error object: formatting it inside librdkafka's callback can fail on a fenced producer.
        self.errors.append((upstream, err, len(message.key() or b"") + len(message.value() or b"")))

    def _refused(self, offset: int, size: int, error: Any) -> UnitFailed:
        spec = self.spec
        if is_fenced(error) or (isinstance(error, KafkaError) and error.fatal()):
            self.producer_broken = True
        if is_fenced(error):
            raise _Fenced()
        return UnitFailed(
            f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}: the copy of source offset {offset} "
            f"({size} bytes) was refused by the producer: {kafka_words(error)}",
            retriable=is_retriable(error),
        )

    def _checkpoint(self, position: int, last: bool = True) -> None:
        """Store progress up to ``position`` (exclusive) once every record before it is acknowledged.

        Exactly-once: progress (and syncs on the target) go into the open transaction, which commits here, or, for
        the ``last`` span of a unit that may leave it to its lane, later (``_LaneTransaction``): such a span is not
        even flushed here; the lane stores its progress after the next flush of the lane's producer, with the other
        spans left to it. At-least-once: records are flushed first, then progress is written and flushed.
        """
        spec, producer = self.spec, self.producer
        assert producer is not None
        started = time.monotonic()
        lane = self.lane
        if (
            last
            and self.may_defer
            and lane is not None
            and self.result.records == 0
            and lane.has_room(spec, len(self.sent_offsets), self.sent_bytes)
        ):
            _maybe_fail(spec, "before-commit", self.sent_total, producer)
            lane.leave(self, position)  # its progress is stored, provisionally, after the lane's next flush
            self.result.commit_seconds = round(self.result.commit_seconds + time.monotonic() - started, 3)
            return
        producer.flush(spec.timeout_s)
        if lane is not None:
            lane.store_left()  # the flush above delivered the spans the lane's earlier units left to it too
        runs, syncs = self._store_progress(position, producer)
        if self.exactly_once:
            _maybe_fail(spec, "before-commit", self.sent_total, producer)
            try:
                producer.commit_transaction(spec.timeout_s)
                self.in_transaction = False
                if lane is not None and lane.pending:
                    lane.committed()  # the earlier units' spans were in this transaction too
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if self.batches and isinstance(error, KafkaError) and error.txn_requires_abort():
                    # A record without a report of its own failed: copy the span again to name it.
                    raise PerRecordReports(f"the transaction failed ({kafka_words(error)})") from None
                raise
        else:
            producer.flush(spec.timeout_s)
            if self.errors:
                self._raise_delivery_failure()
        if spec.emit_syncs and not spec.syncs_on_target and not _write_source_syncs(spec, syncs):
            syncs = []
        self._committed(position, runs, len(syncs) if spec.emit_syncs else 0)
        self.result.commit_seconds = round(self.result.commit_seconds + time.monotonic() - started, 3)

    def _store_progress(self, position: int, producer: Producer) -> tuple[list[Run], list[OffsetSync]]:
        """Produce, with ``producer``, the progress record up to ``position`` (and the offset syncs, when they live on
        the target) for the records sent since the last checkpoint, every one of them reported; the runs they landed
        in and the syncs."""
        spec = self.spec
        downstream = self._landed()
        _maybe_fail(spec, "before-progress", self.sent_total, producer)
        runs = copied_runs(self.sent_offsets, downstream)
        syncs = offset_syncs(spec, runs, previous_upstream=self.previous)
        if downstream:
            self.target_next = downstream[-1] + 1
        if self.last_message is not None:
            self.source_last = fingerprint(self.last_message)
        progress = StoredProgress(
            position - 1, spec.source_topic_id, spec.target_topic_id, self.target_next, self.source_last
        )
        producer.produce(
            spec.progress_topic,
            key=spec.progress_key,
            value=source_offset_value(position - 1),
            partition=spec.progress_partition,
            headers=progress.headers(),
            on_delivery=functools.partial(control_delivered, self.errors, position - 1),
        )
        if spec.emit_syncs and spec.syncs_on_target:
            _produce_syncs(producer, spec.syncs_topic, syncs)
        return runs, syncs

    def _landed(self) -> list[int]:
        """Target offsets of the records sent since the last checkpoint, in send order (all of them reported)."""
        if self.errors or len(self.acked) != len(self.sent_offsets) - sum(b.count for b in self.batches):
            self._raise_delivery_failure()
        if not self.batches:
            return sorted(self.acked)
        ranges = []
        for batch in self.batches:
            if batch.error is not None:
                self._batch_failed(batch.error)
            landed = batch.landed()
            if landed is None:
                why = "a report missing" if batch.start < 0 or batch.end < 0 else "other records landed among them"
                raise PerRecordReports(f"the target offsets of {batch.count} record(s) are not proven ({why})")
            ranges.append(landed)
        # Records reported one by one (``_send_skipped``) were sent before any batch of the span.
        return [*sorted(self.acked), *itertools.chain.from_iterable(ranges)]

    def _batch_failed(self, error: KafkaError) -> None:
        """A batch's first or last record failed: fenced ends the unit; anything else is copied again with a
        report per record, which names the record that caused it."""
        if is_fenced(error):
            self.producer_broken = True
            raise _Fenced()
        if error.fatal():
            self.producer_broken = True
            raise KafkaException(error)
        raise PerRecordReports(f"the target refused a record ({kafka_words(error)})")

    def _committed(self, position: int, runs: list[Run], syncs: int) -> None:
        result = self.result
        result.records += len(self.sent_offsets)
        result.bytes += self.sent_bytes
        if self.sent_offsets and result.first_offset is None:
            result.first_offset = self.sent_offsets[0]
        result.last_offset = self.last_message.offset() if self.last_message is not None else result.last_offset
        result.position = position
        result.runs.extend(runs)
        result.syncs += syncs
        if runs:
            self.previous = runs[-1].end_upstream
        # Cleared in place: the delivery callback holds these lists.
        self.sent_offsets.clear()
        self.acked.clear()
        self.batches.clear()
        self.failed, self.sent_bytes = 0, 0
        self.last_checkpoint = time.monotonic()

    def _raise_delivery_failure(self) -> None:
        """The target refused or lost records: name the record that caused it, in Kafka's words."""
        if any(is_fenced(error) for _, error, _ in self.errors):
            self.producer_broken = True
            raise _Fenced()
        if any(error.fatal() for _, error, _ in self.errors):
            self.producer_broken = True
        spec = self.spec
        where = f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}"
        if not self.errors:
            missing = len(self.sent_offsets) - len(self.acked)
            raise UnitFailed(f"{where}: {missing} record(s) were not acknowledged by the target", retriable=True)
        upstream, error, size = min(self.errors, key=lambda item: (item[1].code() in CONSEQUENTIAL, item[0]))
        same = [item for item in self.errors if item[1].code() == error.code()]
        if error.code() in TOO_LARGE:
            # The broker refuses a whole batch for one oversized record: name the largest of them.
            upstream, error, size = max(same, key=lambda item: (item[2], -item[0]))
            reason = f"the record is {size} bytes; {kafka_words(error)}"
        else:
            reason = kafka_words(error)
        others = len(self.errors) - 1
        more = f" ({others} more record(s) of the same batch or transaction failed with it)" if others else ""
        raise UnitFailed(
            f"{where}: the target refused the copy of source offset {upstream}: {reason}{more}",
            retriable=is_retriable(error),
        )


def _let_go(producer: Producer) -> None:
    """Purge what a producer that will not be used again still holds, so it is destroyed now rather than going on
    reconnecting (and logging) until ``message.timeout.ms``."""
    with contextlib.suppress(KafkaException, RuntimeError):
        producer.purge()
        producer.flush(0)


def _flush_producer(producer: Producer) -> None:
    producer.flush(10)


_KEPT_PRODUCERS: KeptClients[Producer] = KeptClients(lambda: KEEP_PRODUCERS, _flush_producer)
"""Idle record producers for a later unit with the same configuration (and ``transactional.id``). Only producers
with nothing in flight and no open transaction are kept (a unit that ended normally); one that failed is dropped,
whatever its state."""
_SHARED_LOCK = threading.Lock()
"""Guards the offset-syncs producers: units of one process may run in threads."""


_SYNCS_PRODUCERS: dict[str, Producer] = {}


def _syncs_producer(config: dict[str, Any]) -> Producer:
    """One idempotent producer of offset syncs per configuration and process, kept across units.

    A new producer costs a connection and a producer id (about 0.25 s per unit on the embedded broker, half a
    small unit's time); Spark reuses its Python workers, so later units of a run skip that (the app, and with it
    its workers, ends with the run). In-process runs close them after each wave (``close_kept_clients``).
    Not for records: those go through the unit's own (transactional) producer.
    """
    key = client_key(config)
    with _SHARED_LOCK:
        producer = _SYNCS_PRODUCERS.get(key)
        if producer is None:
            producer = Producer({**PRODUCER_DEFAULTS, **config, "enable.idempotence": True, "acks": "all"})
            _SYNCS_PRODUCERS[key] = producer
    return producer


def close_kept_clients(timeout: float = 10.0) -> None:
    """Flush and drop the producers kept across units (offset syncs, and the idle record producers) and close the
    idle consumers, so a long-lived process (tests, an in-process run inside an Airflow worker) does not keep
    connections to clusters it no longer uses."""
    with _SHARED_LOCK:
        producers = [*_SYNCS_PRODUCERS.values()]
        _SYNCS_PRODUCERS.clear()
    for producer in [*producers, *_KEPT_PRODUCERS.drain()]:
        producer.flush(timeout)
    close_kept_consumers()


def _new_producer(config: dict[str, Any], topic: str, timeout: float) -> Producer:
    """A producer already connected to a broker the cluster's metadata named, so ``init_transactions`` gets a
    producer id at once.

    A producer made a moment ago is still moving from its bootstrap connection to the broker the metadata named
    (librdkafka lets the bootstrap connection go once it knows the cluster's brokers). ``init_transactions`` called
    then finds "no brokers available" and retries only when librdkafka's 500 ms timer fires. The first metadata
    request (for ``topic`` alone) is answered on the bootstrap connection; the second can only be answered by a
    named broker, so it returns once one is up. Not a request for the whole cluster's metadata, which also waits for
    that broker but costs in proportion to the cluster's partitions (see BENCHMARKS.md).
    """
    producer = Producer(config)
    producer.list_topics(topic, timeout=timeout)
    producer.list_topics(topic, timeout=timeout)
    return producer


def _write_source_syncs(spec: UnitSpec, syncs: list[OffsetSync]) -> bool:
    """Write offset syncs to the source cluster once the records they describe are committed; False when they were
    lost. Like MM2: a lost sync only costs translation precision, never a record."""
    try:
        syncs_producer = _syncs_producer(spec.syncs_producer)
        _produce_syncs(syncs_producer, spec.syncs_topic, syncs)
        syncs_producer.flush(spec.timeout_s)
    except (KafkaException, BufferError):
        with _SHARED_LOCK:
            _SYNCS_PRODUCERS.clear()  # a fresh producer next time
        return False
    return True


def _produce_syncs(producer: Producer, topic: str, syncs: list[OffsetSync]) -> None:
    for sync in syncs:
        producer.produce(topic, key=sync.key(), value=sync.value(), partition=0)


def _source_config(spec: UnitSpec, **overrides: Any) -> dict[str, Any]:
    """A bounded reader of the source partition (``clients.bounded_reader``: it reports the end of the partition and
    never waits out a long poll there) that never resets silently: an out-of-range position (retention deleted
    records) surfaces as an error, hence as a loss event."""
    return {
        "receive.message.max.bytes": _RECEIVE_MAX,
        **CONSUMER_DEFAULTS,
        **spec.source_consumer,
        **BOUNDED_READER,
        "auto.offset.reset": "error",
        **overrides,
    }


def _source_consumer(spec: UnitSpec, **overrides: Any) -> Consumer:
    """A new consumer of ``_source_config``; a unit's copy borrows a kept one (``kept_clients.lent_consumer``)."""
    return Consumer(_source_config(spec, **overrides))


def _read_range(spec: UnitSpec, begin: int, end: int, isolation: str) -> list[Any]:
    """Messages of ``spec.topic[spec.partition]`` with ``begin <= offset < end``, read from ``begin``."""
    consumer = _source_consumer(spec, **{"isolation.level": isolation})
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


def _skipped_committed(spec: UnitSpec, begin: int, end: int) -> list[Any]:
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
    consumer = _source_consumer(spec)
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(spec.topic, spec.partition), timeout=spec.timeout_s)
        return int(low)
    finally:
        consumer.close()
