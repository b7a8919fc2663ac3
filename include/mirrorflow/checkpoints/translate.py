"""Offset translation: exact wherever the copy was contiguous, MM2's rule elsewhere, and saying which.

MM2 pins one record per offset sync and translates any other committed offset with the "+1 rule", so
a failed-over consumer re-reads up to ``offset.lag.max`` records (more for old syncs). mirrorflow's
syncs carry the copied run they end (see ``wire.CopiedRun``): every committed upstream offset inside
a run, in the gap just before it, or right after its last record maps to one downstream offset with
no re-read and no skip. Only where no run says anything (syncs written by MM2, runs expired from the
bounded history, offsets the copy has not reached) does translation fall back to MM2's 64-slot store
and rule, and then the result says how many records a consumer may re-read at most.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ..wire import OffsetSync
from .syncstore import OffsetSyncStore, Sync

Kind = Literal["exact", "approximate", "refused", "unavailable"]

#: Where a translation came from, as reports and ``mirrorflow translate`` name it.
COPIED_RUNS = "copied runs"
OFFSET_SYNCS = "offset syncs"
EXISTING_CHECKPOINT = "existing checkpoint"

#: Copied runs kept per partition (newest win). 4096 runs of 12 bytes... about 200 KiB per partition at most.
MAX_RUNS_PER_PARTITION = 4096


@dataclass(frozen=True)
class Translation:
    """Where a consumer that committed ``upstream`` on the source resumes on the target."""

    upstream: int
    downstream: int | None  # None when refused or unavailable
    kind: Kind
    rereads: int = 0  # most records a consumer resuming at ``downstream`` may read a second time
    reason: str = ""
    basis: str = ""  # COPIED_RUNS, OFFSET_SYNCS or EXISTING_CHECKPOINT ("" when nothing answered)


class _Run(NamedTuple):
    """One copied run (see ``wire.CopiedRun``): a tuple, since a read of the offset syncs builds one per sync."""

    start_u: int
    start_d: int
    end_u: int
    end_d: int
    prev_u: int  # -1: unknown


class _PartitionRuns:
    """The copied runs of one source partition, by start; the latest run end is kept, not searched for.

    Why kept: every sync read asks for it (a rewind clears the runs), and a partition of a long-lived flow holds up
    to ``MAX_RUNS_PER_PARTITION`` runs: a search per sync made reading the offset syncs quadratic in the runs.
    """

    __slots__ = ("_latest_end", "runs", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []  # sorted run starts (upstream)
        self.runs: dict[int, _Run] = {}
        self._latest_end: int | None = -1  # None: a run holding it was replaced or dropped, search again

    def add(self, run: _Run) -> None:
        known = self.runs.get(run.start_u)
        if known is None:
            bisect.insort(self.starts, run.start_u)
        elif known.end_u > run.end_u and known.start_d == run.start_d:
            return  # the run's start sync read after its end sync: keep the longer view
        elif run.end_u < known.end_u == self._latest_end:
            self._latest_end = None  # the latest end shrinks: search again (a longer run only raises it, below)
        self.runs[run.start_u] = run
        if self._latest_end is not None:
            self._latest_end = max(self._latest_end, run.end_u)
        while len(self.starts) > MAX_RUNS_PER_PARTITION:
            dropped = self.runs.pop(self.starts.pop(0))
            if dropped.end_u == self._latest_end:
                self._latest_end = None

    def clear(self) -> None:
        self.starts.clear()
        self.runs.clear()
        self._latest_end = -1

    def latest_end(self) -> int:
        if self._latest_end is None:
            self._latest_end = max((r.end_u for r in self.runs.values()), default=-1)
        return self._latest_end

    def around(self, upstream: int) -> tuple[_Run | None, _Run | None]:
        """The run starting at or before ``upstream`` (latest such), and the first run starting after it."""
        i = bisect.bisect_right(self.starts, upstream)
        before = self.runs[self.starts[i - 1]] if i > 0 else None
        after = self.runs[self.starts[i]] if i < len(self.starts) else None
        return before, after


class OffsetTranslator:
    """Offset syncs of one flow (read in topic order) turned into translations per source partition."""

    def __init__(self, *, must_read_to_end: bool = False) -> None:
        # MM2 keeps the whole startup history only when its checkpoints loaded (``!checkpointsLoadedOk``):
        # every checkpoint run here reads the checkpoints topic first, so the full history is kept.
        self.store = OffsetSyncStore(must_read_to_end=must_read_to_end)
        self._runs: dict[tuple[str, int], _PartitionRuns] = {}
        # Per source partition: (last source offset the copy read, target offset right after its last copy).
        self._read_to: dict[tuple[str, int], tuple[int, int]] = {}
        self.syncs_read = 0

    def note_progress(self, topic: str, partition: int, offset: int, target_next: int | None) -> None:
        """Feed the copy's stored progress: it read the source up to ``offset``, its last copy ended at ``target_next - 1``.

        Why: a transaction's commit marker after the last copied record leaves a gap the syncs cannot see (the
        next run, which would vouch for it, does not exist yet), so a group that consumed everything commits an
        offset two past the last copied record. The progress record says the copy read past the marker, and its
        ``target_next`` header says nothing was copied since the run ended. MM2's progress has no such header:
        then nothing is claimed.
        """
        if target_next is not None:
            self._read_to[(topic, partition)] = (offset, target_next)

    def add(self, sync: OffsetSync) -> None:
        """Feed one sync (MM2's or mirrorflow's), in the order of the offset-syncs topic."""
        run = sync.run
        self.add_offsets(
            sync.topic,
            sync.partition,
            sync.upstream_offset,
            sync.downstream_offset,
            None
            if run is None
            else (run.run_start_upstream, run.run_start_downstream, run.previous_upstream, run.previous_downstream),
        )

    def add_offsets(
        self, topic: str, partition: int, upstream: int, downstream: int, run: tuple[int, int, int, int] | None
    ) -> None:
        """:meth:`add` from a sync's decoded fields (``run``: start upstream, start downstream, previous upstream,
        previous downstream), for readers that decode records without building an ``OffsetSync`` each."""
        self.syncs_read += 1
        self.store.add(topic, partition, upstream, downstream)
        runs = self._runs.get((topic, partition))
        if runs is None:
            runs = self._runs[(topic, partition)] = _PartitionRuns()
        if run is None:
            if upstream < runs.latest_end():
                runs.clear()  # an upstream rewind (topic recreated): older runs describe another log
            return
        start_u, start_d, previous_u, _previous_d = run
        if start_u <= runs.latest_end() and start_u not in runs.runs:
            # A new run overlapping copied offsets: a rewind or a re-copy; older runs no longer hold.
            runs.clear()
        runs.add(_Run(start_u, start_d, upstream, downstream, previous_u))

    def add_all(self, syncs: Iterable[OffsetSync]) -> OffsetTranslator:
        for sync in syncs:
            self.add(sync)
        self.store.finish_initial_read()
        return self

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(set(self._runs) | set(self.store.partitions()))

    def translate(self, topic: str, partition: int, upstream: int) -> Translation:
        """Translate a committed offset (the next record the group would read) of a source partition."""
        runs = self._runs.get((topic, partition))
        if runs is None or not runs.runs:
            return self._mm2(topic, partition, upstream)
        exact = _exact(runs, upstream, self._read_to.get((topic, partition)))
        if exact is not None:
            return exact
        fallback = self._mm2(topic, partition, upstream)
        before, _ = runs.around(upstream)
        if before is not None and (fallback.downstream is None or before.end_u - upstream > -fallback.rereads - 1):
            # The run history keeps every recent run end, MM2's store only about one per power of two back:
            # the closest copied record before U gives the smallest re-read under the same +1 rule.
            return Translation(
                upstream,
                before.end_d + 1,
                "approximate",
                rereads=upstream - before.end_u - 1,
                reason=f"one past the last copied record before it (upstream {before.end_u})",
                basis=COPIED_RUNS,
            )
        return fallback

    def translate_back(self, topic: str, partition: int, downstream: int) -> Translation:
        """Failback: an offset on the remote copy of ``topic`` back to ``topic``'s own offset (see below).

        Where no copied run answers (a range MM2 copied), the offset syncs do, conservatively: see
        :func:`_back_from_syncs`.
        """
        back = _translate_back(self._runs.get((topic, partition)), downstream)
        if back.downstream is not None:
            return back
        history = self.store.history(topic, partition)
        from_syncs = None if history is None else _back_from_syncs(history.syncs(), downstream)
        return from_syncs or back

    def _mm2(self, topic: str, partition: int, upstream: int) -> Translation:
        downstream = self.store.translate_mm2(topic, partition, upstream)
        if downstream is None:
            return Translation(upstream, None, "unavailable", reason="no offset sync for this partition")
        if downstream < 0:
            return Translation(upstream, None, "refused", reason="older than every offset sync kept")
        sync = self.store.lookup(topic, partition, upstream)
        assert sync is not None
        if sync.upstream == upstream:
            return Translation(
                upstream, downstream, "exact", reason="an offset sync pins this record", basis=OFFSET_SYNCS
            )
        return Translation(
            upstream,
            downstream,
            "approximate",
            rereads=upstream - sync.upstream - 1,
            reason=f"MM2 rule: one past the sync at upstream {sync.upstream}",
            basis=OFFSET_SYNCS,
        )


def _translate_back(runs: _PartitionRuns | None, downstream: int) -> Translation:
    """Failback: a group's offset on the *remote* topic (target side) back to the source topic's offset.

    The inverse of :meth:`OffsetTranslator.translate`, from the same copied runs: inside a run it is
    exact; between two runs (transaction markers downstream) it is the next run's first upstream offset;
    right after the last copied record it is the next upstream offset (records the source got but the
    copy never saw have not been consumed, so the group reads them). Without runs it refuses: MM2's
    syncs cannot be inverted safely. The result's ``upstream`` field holds the downstream input.
    """
    if runs is None or not runs.runs:
        return Translation(downstream, None, "unavailable", reason="no copied run for this partition")
    ordered = sorted(runs.runs.values(), key=lambda r: r.start_d)
    previous: _Run | None = None
    for run in ordered:
        if run.start_d <= downstream <= run.end_d:
            return Translation(
                downstream,
                run.start_u + (downstream - run.start_d),
                "exact",
                reason="inside a copied run",
                basis=COPIED_RUNS,
            )
        if downstream < run.start_d:
            if previous is not None and previous.end_d < downstream:
                return Translation(
                    downstream, run.start_u, "exact", reason="between two copied runs", basis=COPIED_RUNS
                )
            if previous is None:
                return Translation(downstream, None, "refused", reason="before every copied run kept")
            break
        previous = run
    last = ordered[-1]
    if downstream == last.end_d + 1 or (previous is last and downstream > last.end_d):
        return Translation(
            downstream, last.end_u + 1, "exact", reason="after the last copied record", basis=COPIED_RUNS
        )
    return Translation(downstream, None, "refused", reason="no copied run covers this offset")


def _back_from_syncs(syncs: list[Sync], downstream: int) -> Translation | None:
    """Failback from MM2's syncs: the closest sync at or before a group's offset on the remote topic.

    A group at downstream offset D consumed every record before D. A sync (u, d) with d < D says the copy of
    source record u lies before D, and the copy is in source order, so every source record up to u was
    consumed: the group resumes at u + 1 on the source, re-reading at most the ``D - 1 - d`` records copied in
    between (the inverse of MM2's +1 rule). A sync at exactly D pins the next record the group reads: exact.
    """
    usable = [s for s in syncs if s.downstream <= downstream]
    if not usable:
        return None
    sync = max(usable, key=lambda s: s.downstream)
    if sync.downstream == downstream:
        return Translation(
            downstream, sync.upstream, "exact", reason="an offset sync pins this record", basis=OFFSET_SYNCS
        )
    return Translation(
        downstream,
        sync.upstream + 1,
        "approximate",
        rereads=downstream - 1 - sync.downstream,
        reason=f"one past the sync at downstream {sync.downstream} (upstream {sync.upstream})",
        basis=OFFSET_SYNCS,
    )


def _exact(runs: _PartitionRuns, upstream: int, read_to: tuple[int, int] | None = None) -> Translation | None:
    """The exact translation the copied runs (and the copy's stored progress, ``read_to``) allow, if any."""
    before, after = runs.around(upstream)
    if before is not None and upstream <= before.end_u:
        return _exact_at(upstream, before.start_d + (upstream - before.start_u), "inside a contiguous copied run")
    if after is not None and after.prev_u >= 0 and after.prev_u < upstream:
        # No committed record lies between the previous copied record and the next run's start.
        return _exact_at(upstream, after.start_d, "in the gap before a copied run")
    if before is None:
        return None
    if upstream == before.end_u + 1:
        # The group consumed exactly up to the last copied record: everything after it downstream is new.
        return _exact_at(upstream, before.end_d + 1, "right after the last copied record")
    if after is None and read_to is not None and _read_past(before, upstream, read_to):
        return _exact_at(
            upstream,
            before.end_d + 1,
            f"right after the last copied record; the copy read on to upstream {read_to[0]} and found no record "
            "to copy (transaction markers, aborted records)",
        )
    return None


def _read_past(last: _Run, upstream: int, read_to: tuple[int, int]) -> bool:
    """Whether the copy read the source up to ``upstream - 1`` and copied nothing after ``last``.

    ``read_to`` is the stored progress: (last source offset read, target offset right after the last copy).
    Its ``target_next`` equal to one past the run's end means no copy landed after the run (MM2 resuming
    the copy would overwrite the progress without that header), so source offsets in ``(last.end_u,
    read_to[0]]`` hold nothing a consumer reads: transaction markers or aborted records.
    """
    read_offset, target_next = read_to
    return target_next == last.end_d + 1 and last.end_u < upstream <= read_offset + 1


def _exact_at(upstream: int, downstream: int, reason: str) -> Translation:
    return Translation(upstream, downstream, "exact", reason=reason, basis=COPIED_RUNS)


__all__ = [
    "COPIED_RUNS",
    "EXISTING_CHECKPOINT",
    "MAX_RUNS_PER_PARTITION",
    "OFFSET_SYNCS",
    "OffsetTranslator",
    "Translation",
]
