"""Copy one work unit: the code that runs inside a Spark task.

Exactly-once: a transactional producer with a stable ``transactional.id`` per (flow, topic,
partition) first fences every older holder of that id (a retried or speculative Spark task, a killed
executor's zombie, a concurrent run), then re-reads the stored progress (read_committed), copies the
records and writes the progress record (and, when they live on the target, the offset syncs) in the
same transaction. Either all of it becomes visible or none of it does, so consumers reading
read_committed never see a duplicate or a gap, whatever failed and whenever.

At-least-once: an idempotent producer; progress is written only after every record is acknowledged,
so a failure can repeat records but never lose one.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..wire import CopiedRun, OffsetSync, source_offset_value
from .progress import read_progress
from .units import LossEvent, Run, UnitResult, UnitSpec

# The test broker answers a fetch with a partition's whole backlog (see platform notes); a large
# receive limit lets librdkafka accept it. Harmless against Apache Kafka, which honours fetch sizes.
_RECEIVE_MAX = 200 * 1024 * 1024


def copy_unit(spec: UnitSpec) -> UnitResult:
    """Run one unit and describe the outcome; never raises, so one bad partition cannot hide the others."""
    started = time.monotonic()
    try:
        result = _copy(spec)
    except KafkaException as exc:
        fenced = _is_fenced(exc.args[0] if exc.args else None)
        # Fenced: a newer holder of this partition's transactional.id (a retry, a concurrent run) owns it now.
        result = UnitResult(spec.topic, spec.partition, "fenced" if fenced else "failed", error=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported per partition in the run report
        result = UnitResult(spec.topic, spec.partition, "failed", error=f"{type(exc).__name__}: {exc}")
    result.seconds = round(time.monotonic() - started, 3)
    return result


_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def _is_fenced(error: object) -> bool:
    """True for the errors a transactional producer gets once a newer holder of its id exists."""
    return isinstance(error, KafkaError) and error.code() in _FENCED


def _delivered(
    store: list[tuple[int, int]], errors: list[Any], upstream: int, err: KafkaError | None, message: Any
) -> None:
    # Keep the error object: formatting it inside librdkafka's callback can fail on a fenced producer.
    if err is not None:
        errors.append((upstream, err))
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


def _stored_position(spec: UnitSpec) -> tuple[int, int | None]:
    stored = read_progress(
        spec.target_consumer, spec.progress_topic, spec.source_alias, [spec.progress_partition], timeout=spec.timeout_s
    ).get((spec.topic, spec.partition))
    return (stored + 1 if stored is not None else spec.default_start), stored


def _copy(spec: UnitSpec) -> UnitResult:
    exactly_once = spec.delivery == "exactly-once"
    producer_config = {**spec.target_producer, "enable.idempotence": True, "acks": "all"}
    if exactly_once:
        producer_config["transactional.id"] = spec.transactional_id
    producer = Producer(producer_config)
    if not exactly_once:
        return _copy_with(spec, producer, exactly_once)
    producer.init_transactions(spec.timeout_s)  # fences zombies and waits for their transactions to end
    try:
        return _copy_with(spec, producer, exactly_once)
    except (KafkaException, SystemError) as exc:
        # A fenced producer fails in many places (confluent-kafka may even surface it as a SystemError
        # from a callback); aborting tells fenced (another producer owns the partition now) from failed.
        try:
            producer.abort_transaction(10)
        except KafkaException as abort_error:
            if _is_fenced(abort_error.args[0]):
                return UnitResult(spec.topic, spec.partition, "fenced", error="fenced by a newer producer")
        raise exc from None


def _copy_with(spec: UnitSpec, producer: Producer, exactly_once: bool) -> UnitResult:
    start, stored = _stored_position(spec)
    result = UnitResult(spec.topic, spec.partition, "copied", start=start, position=start)
    consumer = _source_consumer(spec)
    pairs: list[tuple[int, int]] = []
    errors: list[Any] = []
    try:
        log_start, _ = consumer.get_watermark_offsets(TopicPartition(spec.topic, spec.partition), spec.timeout_s)
        if start < log_start:
            action = "stopped" if spec.truncation == "stop" else "continued from log start"
            result.loss = LossEvent(spec.topic, spec.partition, start, log_start - 1, action)
            if spec.truncation == "stop":
                result.status = "stopped"
                return result
            start = result.start = result.position = log_start
        if start >= spec.end:
            result.status = "noop"
            return result
        tp = TopicPartition(spec.topic, spec.partition, start)
        consumer.assign([tp])
        if exactly_once:
            producer.begin_transaction()
        position = _copy_records(spec, consumer, producer, pairs, errors, result, start)
    finally:
        consumer.close()
    producer.flush(spec.timeout_s)
    if errors or len(pairs) != result.records:
        if exactly_once and any(_is_fenced(err) for _, err in errors):
            return UnitResult(spec.topic, spec.partition, "fenced", start=start, error="fenced by a newer producer")
        if exactly_once:
            producer.abort_transaction(spec.timeout_s)
        detail = "; ".join(f"offset {u}: {e.str()}" for u, e in errors[:3]) or "records were not all acknowledged"
        result.status, result.error, result.records = "failed", detail, 0
        return result
    _maybe_fail(spec, "before-progress", result.records, producer)
    result.runs = _runs(pairs)
    result.position = position
    # After a loss the records between the stored progress and the log start existed but were never
    # copied, so nothing may be claimed about what precedes this unit's first run.
    previous = -1 if result.loss is not None else (start - 1 if stored is None else stored)
    syncs = offset_syncs(spec, result.runs, previous_upstream=previous)
    producer.produce(
        spec.progress_topic,
        key=spec.progress_key,
        value=source_offset_value(position - 1),
        partition=spec.progress_partition,
    )
    if spec.emit_syncs and spec.syncs_on_target:
        _produce_syncs(producer, spec.syncs_topic, syncs)
    if exactly_once:
        _maybe_fail(spec, "before-commit", result.records, producer)
        try:
            producer.commit_transaction(spec.timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                producer.abort_transaction(spec.timeout_s)
            result.status = "fenced" if _is_fenced(error) else "failed"
            result.error, result.records, result.bytes = str(error), 0, 0
            return result
    else:
        producer.flush(spec.timeout_s)
    if spec.emit_syncs and not spec.syncs_on_target:
        # Like MM2: syncs on the source cluster are written after the commit; a lost sync only costs precision.
        syncs_producer = Producer({**spec.syncs_producer, "enable.idempotence": True, "acks": "all"})
        _produce_syncs(syncs_producer, spec.syncs_topic, syncs)
        syncs_producer.flush(spec.timeout_s)
    result.syncs = len(syncs) if spec.emit_syncs else 0
    return result


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


def _copy_records(
    spec: UnitSpec,
    consumer: Consumer,
    producer: Producer,
    pairs: list[tuple[int, int]],
    errors: list[Any],
    result: UnitResult,
    start: int,
) -> int:
    """Copy from ``start`` up to ``spec.end`` or the unit's limits; return the next offset to copy."""
    position = start
    last_progress = time.monotonic()
    tp = TopicPartition(spec.topic, spec.partition)
    first = True

    def forward(message: Any) -> bool:
        """Produce one record; True when the unit's limits are reached."""
        nonlocal position, last_progress
        offset = message.offset()
        ts_type, ts = message.timestamp()
        extra: dict[str, Any] = {} if ts_type == TIMESTAMP_NOT_AVAILABLE or ts < 0 else {"timestamp": ts}
        headers = message.headers()
        producer.produce(
            spec.remote_topic,
            key=message.key(),
            value=message.value(),
            partition=spec.partition,
            headers=headers,
            on_delivery=functools.partial(_delivered, pairs, errors, offset),
            **extra,
        )
        producer.poll(0)
        result.records += 1
        result.bytes += (
            len(message.key() or b"")
            + len(message.value() or b"")
            + sum(len(k) + len(v or b"") for k, v in headers or [])
        )
        result.first_offset = offset if result.first_offset is None else result.first_offset
        result.last_offset = offset
        position = offset + 1
        last_progress = time.monotonic()
        _maybe_fail(spec, "before-commit", result.records, producer)
        return result.records >= spec.max_records or result.bytes >= spec.max_bytes

    while True:
        messages = consumer.consume(500, timeout=0.5)
        reached_eof = not messages
        for message in messages:
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    reached_eof = True
                    continue
                if message.error().code() == KafkaError._AUTO_OFFSET_RESET:
                    result.truncated = True
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
        if time.monotonic() - last_progress > spec.timeout_s:
            raise TimeoutError(
                f"no records from {spec.topic}[{spec.partition}] for {spec.timeout_s:.0f} s "
                f"at offset {position} (target end {spec.end})"
            )
