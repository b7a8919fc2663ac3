"""Delivery bookkeeping of a unit's copy: where its records landed (from batch-end delivery reports), the contiguous
runs that makes, and the MM2 offset syncs of those runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError

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

    Why: a delivery report is a Python call and a message object per record, about 1 us of the copier's ~8 us
    per record. Exactly-once needs no report to learn that a record failed: librdkafka refuses to
    commit a transaction in which any record failed (an abortable error that names the cause). What the report
    gave is the record's target offset, and one batch's records need only two: the producer is idempotent and
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
    "PerRecordReports",
    "ReportedBatch",
    "control_delivered",
    "copied_runs",
    "offset_syncs",
]
