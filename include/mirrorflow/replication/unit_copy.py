"""One unit's copy (``UnitCopy``): the loop that reads a partition's records and produces their copies.

The copy loop takes consumer batches of a few thousand records (``tuning.CONSUME_BATCH``: less than the consumer has
read ahead, and never more than the unit still needs, so the call returns as soon as the unit's last record is there
instead of waiting out a timeout), and pauses the source partition as soon as that last record is in hand: a
consumer left at the end of a partition keeps fetching. Per record the loop only reads the message, produces it and
notes its source offset. Where each copy landed comes from delivery reports (``delivery.SpanReports``): the producer
is idempotent and writes one partition, so the broker appends the copies in the order they were sent, and the i-th
record sent is the one at the i-th lowest target offset reported. Exactly-once asks for a report of each consumer
batch's first and last record only (``delivery.ReportedBatch``), at-least-once for every record.

``UnitCopy`` is one piece: the copy loop, its spans and its transactions share the unit's state record by record;
what stands alone (reports, kept producers, reads, the shared transaction) lives in the sibling modules.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from ..kafka.errors import is_fenced, is_retriable, kafka_words
from ..wire import OffsetSync, source_offset_value
from . import tuning, unit_reads
from .delivery import (
    Fenced,
    PerRecordReports,
    ReportedBatch,
    SpanReports,
    UnitFailed,
    control_delivered,
    copied_runs,
    offset_syncs,
)
from .kept_clients import client_key, learn_topic, lent_consumer
from .lane_reader import LaneReader, OwnReader, PartitionReader
from .lane_transaction import LaneTransaction
from .producers import KEPT_PRODUCERS, let_go, new_producer, produce_syncs, syncs_producer, write_source_syncs
from .progress import StoredProgress, fingerprint
from .units import LossEvent, Run, UnitResult, UnitSpec


def maybe_fail(spec: UnitSpec, stage: str, records: int, producer: Producer) -> None:
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


class UnitCopy:
    """One unit's copy: records sent since the last checkpoint, and what was committed so far."""

    def __init__(
        self,
        spec: UnitSpec,
        *,
        reuse: bool = True,
        started: float | None = None,
        lane: LaneTransaction | None = None,
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
        self.broken = False  # fenced, or failed in a way that leaves the producer unusable
        # Exactly-once reports only each consumer batch's first and last record (``ReportedBatch``) until a span
        # needs more; at-least-once has no transaction to refuse a failed record, so it hears of every record.
        where = f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}"
        self.reports = SpanReports(where, per_record=not self.exactly_once)
        self.sent_total = 0
        self.bytes_total = 0
        self.last_message: Any = None  # the last record sent: its offset and fingerprint go with the progress
        self.source_last: str | None = None
        self.previous = -1  # last copied upstream offset before this unit's next run (-1: claim nothing)
        self.target_next: int | None = None
        self.last_checkpoint = time.monotonic()
        self.started = self.last_checkpoint if started is None else started  # its lane's start (``copy_units``)
        # Records per span: a transaction (exactly-once), or between progress checkpoints (at-least-once).
        self.span_records = (
            spec.max_records if self.exactly_once else min(spec.max_records, tuning.CHECKPOINT_EVERY_RECORDS)
        )

    @property
    def producer_broken(self) -> bool:
        """Fenced, or failed in a way that leaves the producer unusable (as the unit or a delivery report saw)."""
        return self.broken or self.reports.broken

    def ended(self, status: str, error: str, *, retriable: bool = False) -> UnitResult:
        """The result of a unit that stopped early: counts stay what was committed before."""
        self.result.status, self.result.error, self.result.retriable = status, error, retriable
        return self.result

    def drop_producer(self) -> None:
        """Let go of a producer that was not kept: purge what it still holds (a unit that failed against a dead
        target), whose delivery callbacks point back at this unit, so it is destroyed now and does not go on
        reconnecting, and logging, in a long-lived process (tests, an Airflow worker) until message.timeout.ms."""
        producer, self.producer = self.producer, None
        if producer is not None and not KEPT_PRODUCERS.holds(producer) and not self._lane_holds(producer):
            let_go(producer)

    def attempt(self) -> UnitResult:
        """Run the unit; the outcome, never an exception."""
        try:
            self.run()
            return self.result
        except Fenced:
            self.broken = True
            return self.ended("fenced", "fenced by a newer producer of this partition (a retry or another run)")
        except UnitFailed as exc:
            return self.ended("failed", str(exc), retriable=exc.retriable)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            if isinstance(error, KafkaError) and error.fatal():
                self.broken = True
            return self.ended("failed", f"{self.reports.where}: {kafka_words(error)}", retriable=is_retriable(error))
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
                syncs_producer(spec.syncs_producer)
        config = {**tuning.PRODUCER_DEFAULTS, **spec.target_producer, "enable.idempotence": True, "acks": "all"}
        if self.exactly_once:
            config["transactional.id"] = spec.transactional_id
        key = client_key(config)
        if self.lane is not None and self.lane.producer is not None and self.lane.key == key:
            # The transaction the lane's earlier units left open: this unit goes on in it.
            self.producer, self.reused, self.in_transaction = self.lane.producer, True, True
            kept = None
        else:
            kept = KEPT_PRODUCERS.take(key) if self.reuse else None
            self.producer = kept[0] if kept is not None else None
            self.reused = kept is not None
        self.probe = kept is not None and kept[1] >= tuning.PROBE_AFTER_IDLE_S
        self.key = key
        if self.producer is None:
            self.producer = new_producer(config, spec.remote_topic, spec.timeout_s)
            if self.exactly_once:
                # Fences zombies and waits for their transactions to end; a kept producer did this when it was made.
                self.producer.init_transactions(spec.timeout_s)
        if not self.exactly_once:
            self._copy()
            KEPT_PRODUCERS.keep(key, self.producer)
            return
        try:
            try:
                self._copy()
            except PerRecordReports as why:
                # Nothing of the open span becomes visible; the spans committed before it stay. The same records
                # are copied again from the stored progress, each with its own report, so the offsets stay exact
                # and a failure names its record.
                if not self._abort():
                    raise UnitFailed(f"{self.reports.where}: {why}") from None
                self._forget_span()
                self.reports.per_record = True
                self._copy()
        except (KafkaException, SystemError, UnitFailed, TimeoutError, Fenced) as exc:
            # A fenced producer fails in many places (confluent-kafka may even surface it as a SystemError
            # from a callback); aborting tells fenced (another producer owns the partition now) from failed.
            self._abort()
            raise exc from None
        if self.in_transaction:
            # Left open for the lane (this unit's last span, or nothing of its own: a unit with nothing to copy).
            return
        KEPT_PRODUCERS.keep(key, self.producer)  # only a producer whose transaction committed (or never began)

    def _abort(self) -> bool:
        """Abort the open transaction; False when the producer is left unusable. Raises ``Fenced`` when a newer
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
                raise Fenced() from None
            self.broken = True
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
        ``LaneTransaction``): it committed nothing, and is to be copied again."""
        self.result.void(f"{self.spec.topic}[{self.spec.partition}]: {why}")

    def _forget_span(self) -> None:
        """Drop what the aborted span sent, once the reports of its purged records are served (they would
        otherwise land in the next span's counts)."""
        assert self.producer is not None
        self.producer.flush(min(self.spec.timeout_s, 10))
        self.reports.forget()
        self.last_message = None

    def _copy(self) -> None:
        spec, result = self.spec, self.result
        stored = (
            self.lane.stored(spec, self.producer)
            if self.lane is not None and self.producer
            else unit_reads.stored(spec)
        )
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
        with lent_consumer(unit_reads.source_config(spec), lambda: unit_reads.source_consumer(spec)) as consumer:
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
        want = min(tuning.CONSUME_BATCH, spec.end - position)
        if self.sent_total:
            want = min(want, tuning.CONSUME_BYTES * self.sent_total // max(1, self.bytes_total))
        fault = spec.fault
        if fault is not None and fault.stage == "before-commit" and self.sent_total < fault.after_records:
            want = min(want, fault.after_records - self.sent_total)
        return max(1, want)

    def _copy_records(self, source: PartitionReader, start: int) -> int:
        """Copy from ``start`` up to ``spec.end`` or the unit's limits; return the next offset to copy."""
        spec, producer, reports = self.spec, self.producer, self.reports
        assert producer is not None
        end = spec.end
        position = start
        last_record = time.monotonic()
        first = True
        paused = False
        # A kept producer idle for a while: one record first, to learn at once whether it was fenced (once: not again
        # in a redo). Not for the units of a lane that follow each other (see ``tuning.PROBE_AFTER_IDLE_S``).
        probe = self.probe and not self.sent_total

        while True:
            messages = source.consume(1 if probe else self._batch_size(position), tuning.CONSUME_WAIT_S)
            reached_eof = not messages
            if messages:
                unit_reads.check_partition(messages, spec)
            if first and messages:
                offset = next((m.offset() for m in messages if m.error() is None), None)
                if offset is not None:
                    first = False
                    if offset > start:
                        position, limit = self._send_skipped(start, min(offset, end), position)
                        if limit:
                            return position
            if messages and not paused and unit_reads.last_offset(messages) >= end - 1:
                # The unit's last record is here: stop fetching now, not after producing the batch. A consumer at
                # the end of a partition keeps long-polling (and a broker that answers at once, like the embedded
                # test broker, turns that into thousands of fetches a second, on both sides).
                source.pause()
                paused = True
            done = 0
            while done < len(messages):
                # A batch is sent in slices that end where a span (a transaction, or at-least-once's checkpoint
                # interval) is full; the rest of the batch goes into the next span.
                room = max(1, self.span_records - len(reports.sent_offsets))
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
                if reports.errors:  # fail fast; first let every record sent so far have its report, to name the cause
                    if not reports.all_reported():
                        producer.flush(min(spec.timeout_s, 10))
                    reports.raise_failure()
                if reports.batches and reports.batches[-1].error is not None:
                    reports.batch_failed(reports.batches[-1].error)
                maybe_fail(spec, "before-commit", self.sent_total, producer)
                if stop is not None:
                    return stop
                if position >= end:
                    return end
                if self._span_full():
                    if time.monotonic() - self.started >= tuning.UNIT_SECONDS:
                        return position  # the unit's time is up: this span is its last
                    self._next_span(position)
                elif not self.exactly_once and time.monotonic() - self.last_checkpoint >= tuning.CHECKPOINT_EVERY_S:
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
        return len(self.reports.sent_offsets) >= self.span_records or self.reports.sent_bytes >= self.spec.max_bytes

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
        reports = self.reports
        sent_offsets = reports.sent_offsets
        note = sent_offsets.append
        before = len(sent_offsets)
        byte_room = spec.max_bytes - self.reports.sent_bytes
        if reports.per_record:
            first_report = middle_report = reports.delivered
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
                        raise reports.refused(h_offset, h_size, exc.args[0]) from None
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
                    raise reports.refused(h_offset, h_size, exc.args[0]) from None
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
        self.reports.sent_bytes += sent_bytes
        self.bytes_total += sent_bytes
        if last is not None:
            self.last_message = last
        if batch is not None and count:
            batch.count = count
            self.reports.batches.append(batch)

    def _send_skipped(self, begin: int, end: int, position: int) -> tuple[int, bool]:
        """Send the committed records a read_committed fetch from ``begin`` skipped (see ``unit_reads.skipped_committed``).

        Returns the next position and whether the unit's limits were reached. Rare: one record at a time.
        """
        spec = self.spec
        assert self.producer is not None
        for message in unit_reads.skipped_committed(spec, begin, end):
            offset = message.offset()
            key, value, headers = message.key(), message.value(), message.headers()
            size = len(key or b"") + len(value or b"") + (unit_reads.headers_size(headers) if headers else 0)
            kind, timestamp = message.timestamp()
            while True:
                try:
                    self.producer.produce(
                        spec.remote_topic,
                        value,
                        key,
                        partition=spec.partition,
                        on_delivery=self.reports.delivered,
                        timestamp=timestamp if kind and timestamp > 0 else 0,
                        headers=headers,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    raise self.reports.refused(offset, size, exc.args[0]) from None
            self.reports.sent_offsets.append(offset)
            self.sent_total += 1
            self.reports.sent_bytes += size
            self.bytes_total += size
            self.last_message = message
            position = offset + 1
            self.producer.poll(0)
            maybe_fail(spec, "before-commit", self.sent_total, self.producer)
            if self._span_full():
                return position, True
        return position, False

    def _checkpoint(self, position: int, last: bool = True) -> None:
        """Store progress up to ``position`` (exclusive) once every record before it is acknowledged.

        Exactly-once: progress (and syncs on the target) go into the open transaction, which commits here, or, for
        the ``last`` span of a unit that may leave it to its lane, later (``LaneTransaction``): such a span is not
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
            and lane.has_room(spec, len(self.reports.sent_offsets), self.reports.sent_bytes)
        ):
            maybe_fail(spec, "before-commit", self.sent_total, producer)
            # Its progress is stored, provisionally, after the lane's next flush.
            lane.leave(self, position, len(self.reports.sent_offsets), self.reports.sent_bytes)
            self.result.commit_seconds = round(self.result.commit_seconds + time.monotonic() - started, 3)
            return
        producer.flush(spec.timeout_s)
        if lane is not None:
            lane.store_left()  # the flush above delivered the spans the lane's earlier units left to it too
        runs, syncs = self.store_progress(position, producer)
        if self.exactly_once:
            maybe_fail(spec, "before-commit", self.sent_total, producer)
            try:
                producer.commit_transaction(spec.timeout_s)
                self.in_transaction = False
                if lane is not None and lane.pending:
                    lane.committed()  # the earlier units' spans were in this transaction too
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if self.reports.batches and isinstance(error, KafkaError) and error.txn_requires_abort():
                    # A record without a report of its own failed: copy the span again to name it.
                    raise PerRecordReports(f"the transaction failed ({kafka_words(error)})") from None
                raise
        else:
            producer.flush(spec.timeout_s)
            if self.reports.errors:
                self.reports.raise_failure()
        if spec.emit_syncs and not spec.syncs_on_target and not write_source_syncs(spec, syncs):
            syncs = []
        self.stored_span(position, runs, len(syncs) if spec.emit_syncs else 0)
        self.result.commit_seconds = round(self.result.commit_seconds + time.monotonic() - started, 3)

    def store_progress(self, position: int, producer: Producer) -> tuple[list[Run], list[OffsetSync]]:
        """Produce, with ``producer``, the progress record up to ``position`` (and the offset syncs, when they live on
        the target) for the records sent since the last checkpoint, every one of them reported; the runs they landed
        in and the syncs."""
        spec = self.spec
        downstream = self.reports.landed()
        maybe_fail(spec, "before-progress", self.sent_total, producer)
        runs = copied_runs(self.reports.sent_offsets, downstream)
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
            on_delivery=functools.partial(control_delivered, self.reports.errors, position - 1),
        )
        if spec.emit_syncs and spec.syncs_on_target:
            produce_syncs(producer, spec.syncs_topic, syncs)
        return runs, syncs

    def stored_span(self, position: int, runs: list[Run], syncs: int) -> None:
        """The span up to ``position`` is stored (provisionally, when a lane holds it): count it, start the next."""
        result = self.result
        sent_offsets = self.reports.sent_offsets
        result.records += len(sent_offsets)
        result.bytes += self.reports.sent_bytes
        if sent_offsets and result.first_offset is None:
            result.first_offset = sent_offsets[0]
        result.last_offset = self.last_message.offset() if self.last_message is not None else result.last_offset
        result.position = position
        result.runs.extend(runs)
        result.syncs += syncs
        if runs:
            self.previous = runs[-1].end_upstream
        self.reports.checkpointed()
        self.last_checkpoint = time.monotonic()
