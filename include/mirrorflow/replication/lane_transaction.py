"""The transaction the units of a lane share (``LaneTransaction``), and what it needs of a unit (``SharedUnit``)."""

from __future__ import annotations

import contextlib
import time
from typing import Protocol

from confluent_kafka import KafkaException, Producer

from ..kafka.errors import kafka_words
from ..wire import OffsetSync
from . import unit_reads
from .delivery import Fenced, PerRecordReports, UnitFailed
from .producers import KEPT_PRODUCERS, let_go, write_source_syncs
from .progress import StoredProgress
from .units import Run, UnitResult, UnitSpec


class SharedUnit(Protocol):
    """A unit whose last span a ``LaneTransaction`` holds (``unit_copy.UnitCopy``)."""

    spec: UnitSpec
    result: UnitResult
    producer: Producer | None
    key: str

    def store_progress(self, position: int, producer: Producer) -> tuple[list[Run], list[OffsetSync]]: ...

    def stored_span(self, position: int, runs: list[Run], syncs: int) -> None: ...

    def uncommitted(self, why: str) -> None: ...


class LaneTransaction:
    """A transaction the small units of a lane share, so a thousand units of a few records cost a few commits.

    Why: a small unit's flush and commit are a large share of its time. The units of a lane share a ``transactional.id`` and run one after the other
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
        self.pending: list[SharedUnit] = []  # units whose last span is in the open transaction
        self.left: list[tuple[SharedUnit, int]] = []  # pending units whose progress is not stored yet, and its end
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
            self.known, self.known_by = unit_reads.stored_many(self.specs or [spec]), producer
        if where in self.known:
            return self.known.pop(where)
        return unit_reads.stored(spec)

    def leave(self, unit: SharedUnit, position: int, records: int, size: int) -> None:
        """``unit`` leaves its last span (``records``, ``size`` bytes, up to ``position``) to the lane, in the open
        transaction of its producer, unflushed: ``store_left`` stores its progress."""
        assert unit.producer is not None
        self.producer, self.key = unit.producer, unit.key
        self.records += records
        self.bytes += size
        self.pending.append(unit)
        self.left.append((unit, position))

    def store_left(self) -> None:
        """Store the progress of the spans left to the lane (``leave``) in the open transaction, once the lane's
        producer was flushed: one flush for all of them rather than one per unit, which was a small unit's largest
        cost. A span whose records failed fails the whole transaction: raised as the unit's failure,
        retriable (every pending unit is copied again, each with a transaction of its own, see ``share_transaction``).
        """
        left, self.left = self.left, []
        assert self.producer is not None or not left
        for unit, position in left:
            try:
                runs, syncs = unit.store_progress(position, self.producer)
            except (UnitFailed, PerRecordReports) as exc:
                where = f"{unit.spec.topic}[{unit.spec.partition}]"
                raise UnitFailed(f"the transaction it shared with {where} failed: {exc}", retriable=True) from None
            if unit.spec.emit_syncs and not unit.spec.syncs_on_target:
                self.source_syncs.append((unit.spec, syncs))
            unit.stored_span(position, runs, len(syncs) if unit.spec.emit_syncs else 0)  # provisional until the commit

    def has_room(self, spec: UnitSpec, records: int, size: int) -> bool:
        return self.records + records < spec.max_records and self.bytes + size < spec.max_bytes

    def committed(self) -> None:
        """The open transaction committed: the pending units' spans are theirs for good."""
        for spec, syncs in self.source_syncs:
            write_source_syncs(spec, syncs)
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
        except (KafkaException, UnitFailed, Fenced) as exc:
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(min(timeout, 30))
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
            why = kafka_words(error) if not isinstance(exc, Fenced) else "fenced by a newer producer of its id"
            self.aborted(f"the transaction this unit shared with later units of its lane failed: {why}")
            let_go(producer)
            return
        pending, key = self.pending, self.key  # before ``committed`` clears them
        self.committed()
        share = round((time.monotonic() - started) / max(1, len(pending)), 3)
        for unit in pending:
            unit.result.commit_seconds = round(unit.result.commit_seconds + share, 3)
        KEPT_PRODUCERS.keep(key, producer)

    def _clear(self) -> None:
        """Forget the open transaction (the progress read for the units still to come stays)."""
        self.producer, self.key, self.records, self.bytes = None, "", 0, 0
        self.pending, self.source_syncs, self.left = [], [], []
