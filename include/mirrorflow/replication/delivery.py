"""Delivery bookkeeping of a unit's copy: the reports of what it sent, where its records landed (from batch-end
delivery reports), the contiguous runs that makes, the MM2 offset syncs of those runs, and its failures worded in
Kafka's terms (error name, topic, partition, offset), retriable when they are transient."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ..kafka.errors import is_fenced, is_retriable, is_unreachable, kafka_words
from ..wire import CopiedRun, OffsetSync
from .units import Run, UnitSpec

# Delivery errors that are only the consequence of another record's failure (the batch or transaction
# went down with it): never the reason given for a failed unit when a root cause is known.
CONSEQUENTIAL = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT, KafkaError._STATE, KafkaError._FATAL}


TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}


def control_delivered(errors: list[Any], upstream: int, err: KafkaError | None, message: Any) -> None:
    """Delivery report of a progress record (one per checkpoint)."""
    # Keep the error object: formatting it inside librdkafka's callback can fail on a fenced producer.
    if err is not None:
        errors.append((upstream, err, len(message.key() or b"") + len(message.value() or b"")))


def copied_runs(upstream: Sequence[int], downstream: Sequence[int]) -> list[Run]:
    """Ranges where both sides advance by one; ``upstream[i]`` (sent in this order) landed at ``downstream[i]``.

    Both lists are strictly increasing: records are sent in source order, and ``downstream`` is the sorted
    target offsets the delivery reports gave. Pairing the i-th record sent with the i-th lowest target offset is
    exact because the idempotent producer writes one partition in send order (librdkafka's ordering guarantee,
    the one mirrorflow's per-partition order rests on), so the order reports arrive in does not matter.
    """
    n = len(upstream)
    if n != len(downstream):
        raise ValueError(f"{n} record(s) sent but {len(downstream)} target offset(s)")
    if n == 0:
        return []
    if upstream[-1] - upstream[0] == n - 1 and downstream[-1] - downstream[0] == n - 1:
        return [Run(upstream[0], downstream[0], upstream[-1], downstream[-1])]  # the usual case: one run
    runs: list[Run] = []
    first = 0
    for i in range(1, n):
        if upstream[i] != upstream[i - 1] + 1 or downstream[i] != downstream[i - 1] + 1:
            runs.append(Run(upstream[first], downstream[first], upstream[i - 1], downstream[i - 1]))
            first = i
    runs.append(Run(upstream[first], downstream[first], upstream[-1], downstream[-1]))
    return runs


class ReportedBatch:
    """Where one consumer batch's copies landed, from the delivery reports of its first and last record only.

    Why: a delivery report is a Python call and a message object per record, a share of the copier's cost per record
    worth saving (docs/performance.md). Exactly-once needs no report to learn that a record failed: librdkafka
    refuses to commit a transaction in which any record failed (an abortable error that names the cause). What the
    report gave is the record's target offset, and one batch's records need only two: the producer is idempotent and
    writes one partition in send order, so ``count`` records whose first landed at ``first`` and last at
    ``last = first + count - 1`` filled that range with nothing else between them, the i-th at ``first + i``.
    Anything else (a report missing or failed, another producer's records in between) is not guessed at: the
    unit aborts the transaction and copies the span again with a report per record (``PerRecordReports``).
    """

    __slots__ = ("count", "end", "error", "start")

    def __init__(self) -> None:
        self.count = 0
        self.start = -1  # target offset of its first record
        self.end = -1  # of its last record
        self.error: KafkaError | None = None

    def first(self, err: KafkaError | None, message: Any) -> None:
        if err is None:
            self.start = message.offset()
        else:
            self.error = self.error or err

    def last(self, err: KafkaError | None, message: Any) -> None:
        if err is None:
            self.end = message.offset()
        else:
            self.error = self.error or err

    def only(self, err: KafkaError | None, message: Any) -> None:
        self.first(err, message)
        self.last(err, message)

    def landed(self) -> range | None:
        """The target offsets of the batch's records in send order, or None when they are not proven."""
        if self.error is not None or self.start < 0 or self.end - self.start != self.count - 1:
            return None
        return range(self.start, self.end + 1)


class PerRecordReports(Exception):
    """The span's target offsets are not proven by its batches' end reports (see ``ReportedBatch``)."""


class UnitFailed(Exception):
    """A unit failure already worded for the operator; ``retriable`` when a later attempt may succeed."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


class Fenced(Exception):
    """A newer producer with this partition's transactional.id (a retry, a concurrent run) owns it now."""


class SpanReports:
    """The delivery reports of the records a unit sent since its last checkpoint (a span), and what they prove.

    ``sent_offsets`` holds the source offsets in send order, ``sent_bytes`` their size; ``acked`` the target offsets
    reported one by one; ``batches`` the consumer batches reported by their ends only (``ReportedBatch``);
    ``errors`` each failed record as (source offset, error, bytes). The lists are cleared in place: the delivery callback holds them. ``broken``
    is set once a report shows the producer fenced or fatally failed, so the unit does not keep it.
    """

    def __init__(self, where: str, *, per_record: bool) -> None:
        self.where = where  # "topic[partition] -> remote topic", for the failure's words
        self.per_record = per_record  # a report for every record, not only each batch's ends
        self.sent_offsets: list[int] = []
        self.sent_bytes = 0
        self.acked: list[int] = []
        self.failed = 0
        self.errors: list[tuple[int, KafkaError, int]] = []
        self.batches: list[ReportedBatch] = []
        self.broken = False
        acked = self.acked.append

        def delivered(err: KafkaError | None, message: Any) -> None:
            if err is None:
                acked(message.offset())
            else:
                self._failed(err, message)

        self.delivered = delivered
        """The one delivery callback of the unit's records reported one by one: the target offset, or the error."""

    def forget(self) -> None:
        """Drop everything of the span (an aborted span, once the reports of its purged records are served)."""
        self.checkpointed()
        self.errors.clear()

    def checkpointed(self) -> None:
        """The span is stored: start the next one."""
        self.sent_offsets.clear()
        self.acked.clear()
        self.batches.clear()
        self.failed = self.sent_bytes = 0

    def all_reported(self) -> bool:
        return len(self.acked) + self.failed >= len(self.sent_offsets)

    def _failed(self, err: KafkaError, message: Any) -> None:
        # Reports of one partition arrive in send order (librdkafka enqueues them as the broker answers each
        # batch, in order), so the number of reports before this one is its place among the records sent. Only
        # the wording of a failure depends on it; what is committed never does (see ``copied_runs``).
        index = len(self.acked) + self.failed
        self.failed += 1
        upstream = self.sent_offsets[index] if index < len(self.sent_offsets) else -1
        # Keep the error object: formatting it inside librdkafka's callback can fail on a fenced producer.
        self.errors.append((upstream, err, len(message.key() or b"") + len(message.value() or b"")))

    def refused(self, offset: int, size: int, error: Any) -> UnitFailed:
        """The producer refused to take the copy of source ``offset``; raises ``Fenced`` when it was fenced."""
        if is_fenced(error) or (isinstance(error, KafkaError) and error.fatal()):
            self.broken = True
        if is_fenced(error):
            raise Fenced()
        return UnitFailed(
            f"{self.where}: the copy of source offset {offset} ({size} bytes) was refused by the producer: "
            f"{kafka_words(error)}",
            retriable=is_retriable(error),
        )

    def landed(self) -> list[int]:
        """Target offsets of the records sent in the span, in send order (all of them reported)."""
        if self.errors or len(self.acked) != len(self.sent_offsets) - sum(b.count for b in self.batches):
            self.raise_failure()
        if not self.batches:
            return sorted(self.acked)
        ranges = []
        for batch in self.batches:
            if batch.error is not None:
                self.batch_failed(batch.error)
            landed = batch.landed()
            if landed is None:
                why = "a report missing" if batch.start < 0 or batch.end < 0 else "other records landed among them"
                raise PerRecordReports(f"the target offsets of {batch.count} record(s) are not proven ({why})")
            ranges.append(landed)
        # Records reported one by one (sent after a read_committed skip) were sent before any batch of the span.
        return [*sorted(self.acked), *itertools.chain.from_iterable(ranges)]

    def batch_failed(self, error: KafkaError) -> None:
        """A batch's first or last record failed: fenced ends the unit; anything else is copied again with a
        report per record, which names the record that caused it."""
        if is_fenced(error):
            self.broken = True
            raise Fenced()
        if error.fatal():
            self.broken = True
            raise KafkaException(error)
        if is_unreachable(error):
            raise PerRecordReports(f"the target did not acknowledge a batch ({kafka_words(error)})")
        raise PerRecordReports(f"the target refused a record ({kafka_words(error)})")

    def raise_failure(self) -> None:
        """The target refused or lost records: name the record that caused it, in Kafka's words."""
        if any(is_fenced(error) for _, error, _ in self.errors):
            self.broken = True
            raise Fenced()
        if any(error.fatal() for _, error, _ in self.errors):
            self.broken = True
        where = self.where
        if not self.errors:
            missing = len(self.sent_offsets) - len(self.acked)
            raise UnitFailed(f"{where}: {missing} record(s) were not acknowledged by the target", retriable=True)
        upstream, error, size = min(self.errors, key=lambda item: (item[1].code() in CONSEQUENTIAL, item[0]))
        if is_unreachable(error):
            # Nothing was refused: the target did not answer in time. Say which source records are not copied.
            offsets = sorted(u for u, _, _ in self.errors if u >= 0)
            left = f"source offsets {offsets[0]} to {offsets[-1]}" if offsets else "the span's records"
            raise UnitFailed(
                f"{where}: the target did not acknowledge {len(self.errors)} record(s) in time "
                f"({kafka_words(error)}): {left} are not copied; the next attempt copies them",
                retriable=True,
            )
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


__all__ = [
    "CONSEQUENTIAL",
    "TOO_LARGE",
    "Fenced",
    "PerRecordReports",
    "ReportedBatch",
    "SpanReports",
    "UnitFailed",
    "control_delivered",
    "copied_runs",
    "offset_syncs",
]
