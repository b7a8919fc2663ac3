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

Failures are worded in Kafka's terms (error name, topic, partition, offset) and marked retriable when
they are transient (a broker restarting, a leader moving), so the run retries the unit rather than fail.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..wire import CopiedRun, OffsetSync, source_offset_value
from .progress import StoredProgress, fingerprint, read_stored_progress
from .units import LossEvent, Run, UnitResult, UnitSpec

# The test broker answers a fetch with a partition's whole backlog (see platform notes); a large
# receive limit lets librdkafka accept it. Harmless against Apache Kafka, which honours fetch sizes.
_RECEIVE_MAX = 200 * 1024 * 1024

CHECKPOINT_EVERY_S = 1.0
CHECKPOINT_EVERY_RECORDS = 10_000
"""At-least-once: a unit stores progress at least every second and every 10,000 records of a partition, so a
crash repeats at most 10,000 records per partition (fewer at low rates)."""

_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)

# Errors Kafka itself does not flag retriable but that a broker restart or a moving leader produces.
_TRANSIENT = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._WAIT_COORD,
    KafkaError._RESOLVE,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.CONCURRENT_TRANSACTIONS,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.INVALID_TXN_STATE,
    KafkaError.UNKNOWN_PRODUCER_ID,
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
}

# Delivery errors that are only the consequence of another record's failure (the batch or transaction
# went down with it): never the reason given for a failed unit when a root cause is known.
_CONSEQUENTIAL = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT, KafkaError._STATE, KafkaError._FATAL}


_TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}


class UnitFailed(Exception):
    """A unit failure already worded for the operator; ``retriable`` when a later attempt may succeed."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


class _Fenced(Exception):
    """A newer producer with this partition's transactional.id (a retry, a concurrent run) owns it now."""


def kafka_words(error: object) -> str:
    """A Kafka error as its name and description (``MSG_SIZE_TOO_LARGE (Broker: Message size too large)``)."""
    if isinstance(error, KafkaError):
        return f"{error.name()} ({error.str()})"
    return str(error)


def is_retriable(error: object) -> bool:
    """True for errors a later attempt of the same unit may not meet (transient broker conditions)."""
    if not isinstance(error, KafkaError):
        return False
    if error.code() in _FENCED or error.fatal():
        return False
    return bool(error.retriable()) or error.code() in _TRANSIENT


def copy_unit(spec: UnitSpec) -> UnitResult:
    """Run one unit and describe the outcome; never raises, so one bad partition cannot hide the others."""
    started = time.monotonic()
    unit = _UnitCopy(spec)
    try:
        unit.run()
        result = unit.result
    except _Fenced:
        result = unit.ended("fenced", "fenced by a newer producer of this partition (a retry or another run)")
    except UnitFailed as exc:
        result = unit.ended("failed", str(exc), retriable=exc.retriable)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        where = f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}"
        result = unit.ended("failed", f"{where}: {kafka_words(error)}", retriable=is_retriable(error))
    except TimeoutError as exc:
        result = unit.ended("failed", str(exc), retriable=True)
    except Exception as exc:  # noqa: BLE001 - reported per partition in the run report
        result = unit.ended("failed", f"{type(exc).__name__}: {exc}")
    result.seconds = round(time.monotonic() - started, 3)
    return result


def _is_fenced(error: object) -> bool:
    """True for the errors a transactional producer gets once a newer holder of its id exists."""
    return isinstance(error, KafkaError) and error.code() in _FENCED


def _delivered(
    store: list[tuple[int, int]], errors: list[Any], upstream: int, err: KafkaError | None, message: Any
) -> None:
    # Keep the error object: formatting it inside librdkafka's callback can fail on a fenced producer.
    if err is not None:
        errors.append((upstream, err, len(message.key() or b"") + len(message.value() or b"")))
    else:
        store.append((upstream, message.offset()))


def _runs(pairs: list[tuple[int, int]]) -> list[Run]:
    """Split (upstream, downstream) pairs into ranges where both sides advance by one."""
    runs: list[Run] = []
    for upstream, downstream in sorted(pairs):
        last = runs[-1] if runs else None
        if last and upstream == last.end_upstream + 1 and downstream == last.end_downstream + 1:
            runs[-1] = Run(last.start_upstream, last.start_downstream, upstream, downstream)
        else:
            runs.append(Run(upstream, downstream, upstream, downstream))
    return runs


def offset_syncs(spec: UnitSpec, runs: list[Run], previous_upstream: int) -> list[OffsetSync]:
    """MM2 offset syncs at the first and the last record of every contiguous run (so at every gap).

    Each carries mirrorflow's run extension (ignored by MM2's readers) so a later translation can be
    exact anywhere inside a run and across the gap to the previous one.
    """
    syncs: list[OffsetSync] = []
    prev_u, prev_d = previous_upstream, -1
    for run in runs:
        ext = CopiedRun(run.start_upstream, run.start_downstream, prev_u, prev_d)
        syncs.append(OffsetSync(spec.topic, spec.partition, run.start_upstream, run.start_downstream, ext))
        if run.end_upstream != run.start_upstream:
            syncs.append(OffsetSync(spec.topic, spec.partition, run.end_upstream, run.end_downstream, ext))
        prev_u, prev_d = run.end_upstream, run.end_downstream
    return syncs


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
    return read_stored_progress(
        spec.target_consumer, spec.progress_topic, spec.source_alias, [spec.progress_partition], timeout=spec.timeout_s
    ).get((spec.topic, spec.partition))


class _UnitCopy:
    """One unit's copy: records sent since the last checkpoint, and what was committed so far."""

    def __init__(self, spec: UnitSpec) -> None:
        self.spec = spec
        self.exactly_once = spec.delivery == "exactly-once"
        self.result = UnitResult(spec.topic, spec.partition, "copied")
        self.producer: Producer | None = None
        self.pairs: list[tuple[int, int]] = []  # (upstream, downstream) acknowledged since the last checkpoint
        self.errors: list[tuple[int, KafkaError, int]] = []  # (upstream, error, bytes)
        self.sent = 0  # records sent since the last checkpoint
        self.sent_total = 0
        self.sent_bytes = 0
        self.sent_first: int | None = None
        self.last_message: Any = None  # the last record sent: its offset and fingerprint go with the progress
        self.source_last: str | None = None
        self.previous = -1  # last copied upstream offset before this unit's next run (-1: claim nothing)
        self.target_next: int | None = None
        self.last_checkpoint = time.monotonic()

    def ended(self, status: str, error: str, *, retriable: bool = False) -> UnitResult:
        """The result of a unit that stopped early: counts stay what was committed before."""
        self.result.status, self.result.error, self.result.retriable = status, error, retriable
        return self.result

    def run(self) -> None:
        spec = self.spec
        config = {**spec.target_producer, "enable.idempotence": True, "acks": "all"}
        if self.exactly_once:
            config["transactional.id"] = spec.transactional_id
        self.producer = Producer(config)
        if not self.exactly_once:
            self._copy()
            return
        self.producer.init_transactions(spec.timeout_s)  # fences zombies and waits for their transactions to end
        try:
            self._copy()
        except (KafkaException, SystemError, UnitFailed, TimeoutError, _Fenced) as exc:
            # A fenced producer fails in many places (confluent-kafka may even surface it as a SystemError
            # from a callback); aborting tells fenced (another producer owns the partition now) from failed.
            try:
                self.producer.abort_transaction(min(spec.timeout_s, 30))
            except KafkaException as abort_error:
                if _is_fenced(abort_error.args[0]):
                    raise _Fenced() from None
            raise exc from None

    def _copy(self) -> None:
        spec, result = self.spec, self.result
        stored = _stored(spec)
        start = stored.offset + 1 if stored is not None else spec.default_start
        self.previous = stored.offset if stored is not None else start - 1
        self.target_next = stored.target_next if stored is not None else None
        self.source_last = stored.source_last if stored is not None else None
        reset = spec.reset is not None and stored is not None and stored.offset == spec.reset.stored_offset
        if reset and spec.reset is not None:
            start, self.previous, result.reset_applied = spec.reset.start, -1, True
            self.target_next = self.target_next if spec.reset.keep_target_next else None
            self.source_last = None
        result.start = result.position = start
        consumer = _source_consumer(spec)
        try:
            log_start, _ = consumer.get_watermark_offsets(TopicPartition(spec.topic, spec.partition), spec.timeout_s)
            if start < log_start:
                action = "stopped" if spec.truncation == "stop" else "continued from log start"
                result.loss = LossEvent(spec.topic, spec.partition, start, log_start - 1, action)
                if spec.truncation == "stop":
                    result.status = "stopped"
                    return
                # The records between the stored progress and the log start existed but were never copied,
                # so nothing may be claimed about what precedes this unit's first run.
                start = result.start = result.position = log_start
                self.previous = -1
            if start >= spec.end and not reset:
                result.status = "noop"
                return
            consumer.assign([TopicPartition(spec.topic, spec.partition, start)])
            if self.exactly_once:
                self.producer.begin_transaction()  # type: ignore[union-attr]
            position = self._copy_records(consumer, start) if start < spec.end else start
        finally:
            consumer.close()
        self._checkpoint(position)
        if result.records == 0 and not reset and position == start:
            result.status = "noop"

    def _copy_records(self, consumer: Consumer, start: int) -> int:
        """Copy from ``start`` up to ``spec.end`` or the unit's limits; return the next offset to copy."""
        spec, producer = self.spec, self.producer
        assert producer is not None
        position = start
        last_record = time.monotonic()
        tp = TopicPartition(spec.topic, spec.partition)
        first = True

        def forward(message: Any) -> bool:
            """Produce one record; True when the unit's limits are reached."""
            nonlocal position, last_record
            offset = message.offset()
            ts_type, ts = message.timestamp()
            extra: dict[str, Any] = {} if ts_type == TIMESTAMP_NOT_AVAILABLE or ts < 0 else {"timestamp": ts}
            headers = message.headers()
            size = (
                len(message.key() or b"")
                + len(message.value() or b"")
                + sum(len(k) + len(v or b"") for k, v in headers or [])
            )
            self._produce(message, offset, size, headers, extra)
            self.sent += 1
            self.sent_total += 1
            self.sent_bytes += size
            self.sent_first = offset if self.sent_first is None else self.sent_first
            self.last_message = message
            position = offset + 1
            last_record = time.monotonic()
            _maybe_fail(spec, "before-commit", self.sent_total, producer)
            if not self.exactly_once and (
                self.sent >= CHECKPOINT_EVERY_RECORDS or time.monotonic() - self.last_checkpoint >= CHECKPOINT_EVERY_S
            ):
                self._checkpoint(position)
            copied = self.result.records + self.sent
            return copied >= spec.max_records or self.result.bytes + self.sent_bytes >= spec.max_bytes

        while True:
            messages = consumer.consume(500, timeout=0.5)
            reached_eof = not messages
            for message in messages:
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        reached_eof = True
                        continue
                    if message.error().code() == KafkaError._AUTO_OFFSET_RESET:
                        self.result.truncated = True
                        return position
                    raise KafkaException(message.error())
                if first and message.offset() > start:
                    for missed in _skipped_committed(spec, start, min(message.offset(), spec.end)):
                        if forward(missed):
                            return position
                first = False
                if message.offset() >= spec.end:
                    return spec.end
                if forward(message):
                    return position
            if reached_eof:
                # Under read_committed the position moves past aborted records and markers without delivering them.
                consumed_to = consumer.position([tp])[0].offset
                if first and consumed_to > start:
                    first = False
                    for missed in _skipped_committed(spec, start, min(consumed_to, spec.end)):
                        if forward(missed):
                            return position
                if consumed_to >= spec.end:
                    return spec.end
                position = max(position, consumed_to) if consumed_to >= 0 else position
            if time.monotonic() - last_record > spec.timeout_s:
                raise TimeoutError(
                    f"{spec.topic}[{spec.partition}]: no records from the source for {spec.timeout_s:.0f} s "
                    f"at offset {position} (target end {spec.end})"
                )

    def _produce(self, message: Any, offset: int, size: int, headers: Any, extra: dict[str, Any]) -> None:
        """Send one record to the same partition of the remote topic; a full local queue waits for room."""
        spec, producer = self.spec, self.producer
        assert producer is not None
        while True:
            try:
                producer.produce(
                    spec.remote_topic,
                    key=message.key(),
                    value=message.value(),
                    partition=spec.partition,
                    headers=headers,
                    on_delivery=functools.partial(_delivered, self.pairs, self.errors, offset),
                    **extra,
                )
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                error = exc.args[0]
                raise UnitFailed(
                    f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}: the copy of source offset {offset} "
                    f"({size} bytes) was refused by the producer: {kafka_words(error)}",
                    retriable=is_retriable(error),
                ) from None
        producer.poll(0)

    def _checkpoint(self, position: int) -> None:
        """Store progress up to ``position`` (exclusive) once every record before it is acknowledged.

        Exactly-once: progress (and syncs on the target) go into the open transaction, which commits here.
        At-least-once: records are flushed first, then progress is written and flushed.
        """
        spec, producer = self.spec, self.producer
        assert producer is not None
        started = time.monotonic()
        producer.flush(spec.timeout_s)
        if self.errors or len(self.pairs) != self.sent:
            self._raise_delivery_failure()
        _maybe_fail(spec, "before-progress", self.sent_total, producer)
        runs = _runs(self.pairs)
        syncs = offset_syncs(spec, runs, previous_upstream=self.previous)
        if self.pairs:
            self.target_next = max(downstream for _, downstream in self.pairs) + 1
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
            on_delivery=functools.partial(_delivered, [], self.errors, position - 1),
        )
        if spec.emit_syncs and spec.syncs_on_target:
            _produce_syncs(producer, spec.syncs_topic, syncs)
        if self.exactly_once:
            _maybe_fail(spec, "before-commit", self.sent_total, producer)
            producer.commit_transaction(spec.timeout_s)
        else:
            producer.flush(spec.timeout_s)
            if self.errors:
                self._raise_delivery_failure()
        if spec.emit_syncs and not spec.syncs_on_target:
            # Like MM2: syncs on the source cluster are written after the commit; a lost sync only costs precision.
            try:
                syncs_producer = _syncs_producer(spec.syncs_producer)
                _produce_syncs(syncs_producer, spec.syncs_topic, syncs)
                syncs_producer.flush(spec.timeout_s)
            except (KafkaException, BufferError):
                _SYNCS_PRODUCERS.clear()  # a fresh producer next time; these syncs are lost, the copy is not
                syncs = []
        self._committed(position, runs, len(syncs) if spec.emit_syncs else 0)
        self.result.commit_seconds = round(self.result.commit_seconds + time.monotonic() - started, 3)

    def _committed(self, position: int, runs: list[Run], syncs: int) -> None:
        result = self.result
        result.records += self.sent
        result.bytes += self.sent_bytes
        if self.sent_first is not None and result.first_offset is None:
            result.first_offset = self.sent_first
        result.last_offset = self.last_message.offset() if self.last_message is not None else result.last_offset
        result.position = position
        result.runs.extend(runs)
        result.syncs += syncs
        if runs:
            self.previous = runs[-1].end_upstream
        self.pairs, self.sent, self.sent_bytes, self.sent_first = [], 0, 0, None
        self.last_checkpoint = time.monotonic()

    def _raise_delivery_failure(self) -> None:
        """The target refused or lost records: name the record that caused it, in Kafka's words."""
        if any(_is_fenced(error) for _, error, _ in self.errors):
            raise _Fenced()
        spec = self.spec
        where = f"{spec.topic}[{spec.partition}] -> {spec.remote_topic}"
        if not self.errors:
            missing = self.sent - len(self.pairs)
            raise UnitFailed(f"{where}: {missing} record(s) were not acknowledged by the target", retriable=True)
        upstream, error, size = min(self.errors, key=lambda item: (item[1].code() in _CONSEQUENTIAL, item[0]))
        same = [item for item in self.errors if item[1].code() == error.code()]
        if error.code() in _TOO_LARGE:
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


_SYNCS_PRODUCERS: dict[str, Producer] = {}


def _syncs_producer(config: dict[str, Any]) -> Producer:
    """One idempotent producer of offset syncs per configuration and process, kept across units.

    A new producer costs a connection and a producer id (about 0.25 s per unit on the embedded broker, half a
    small unit's time); Spark reuses its Python workers, so later units of a run skip that (the app, and with it
    its workers, ends with the run). In-process runs close them after each wave (``close_shared_producers``).
    Not for records: those go through the unit's own (transactional) producer.
    """
    key = repr(sorted(config.items()))
    producer = _SYNCS_PRODUCERS.get(key)
    if producer is None:
        producer = _SYNCS_PRODUCERS[key] = Producer({**config, "enable.idempotence": True, "acks": "all"})
    return producer


def close_shared_producers(timeout: float = 10.0) -> None:
    """Flush and drop the producers kept across units, so a long-lived process (tests, an in-process run
    inside an Airflow worker) does not keep connections to clusters it no longer uses."""
    for producer in _SYNCS_PRODUCERS.values():
        producer.flush(timeout)
    _SYNCS_PRODUCERS.clear()


def _produce_syncs(producer: Producer, topic: str, syncs: list[OffsetSync]) -> None:
    for sync in syncs:
        producer.produce(topic, key=sync.key(), value=sync.value(), partition=0)


def _source_consumer(spec: UnitSpec, **overrides: Any) -> Consumer:
    """A consumer of the source partition that reports end of partition and never resets silently:
    an out-of-range position (retention deleted records) surfaces as an error, hence as a loss event."""
    return Consumer(
        {
            "receive.message.max.bytes": _RECEIVE_MAX,
            **spec.source_consumer,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            **overrides,
        }
    )


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
