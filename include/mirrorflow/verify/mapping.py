"""Which source offset became which target offset: copied runs from the offset syncs, and chunks cut at them.

Why runs: records keep their order but not their offsets (transaction markers and aborted records take offsets
on each side, and differently), so comparing "source offset N with target offset N" means nothing. The copy's
offset syncs carry the copied runs (``wire.CopiedRun``): source ``start_u..end_u`` landed at target
``start_d..end_d``, one to one. A run start is an anchor: the source record ``start_u`` *is* at target offset
``start_d``. Chunks are cut at anchors, so each chunk compares "the source's committed records in ``[a, b)``"
with "the target's committed records in ``[ta, tb)``" in order, and anything in between on the target (a
record another producer wrote, a duplicated range, a record the copy never wrote) shows as a difference of that
chunk. Anchors need not be complete: a run expired from the syncs only makes a chunk longer. MM2's syncs (no
run) pin one record each and are anchors too.

A new run that overlaps copied offsets (a range copied again after its progress was lost, at-least-once; a
topic recreated, copied again from its start) supersedes what older runs say from its start on: those parts are
dropped, and what older runs say before it is kept. Translation keeps only the newest copy of a record
(``checkpoints.translate`` drops all older runs); verification must also know where the older copies are, so that
they fall inside a chunk and show as records the target holds twice, not outside every chunk, unseen.

What comes before the first chunk on the target is compared too when nothing can legitimately be there
(``plan_spans``' ``target_start``): the whole source partition is verified from offset 0, so every target record
must be the copy of one of its records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..wire import OffsetSync


@dataclass(frozen=True)
class Anchor:
    """Source record ``upstream`` was copied to target offset ``downstream``; a run goes on to ``end_*``."""

    upstream: int
    downstream: int
    end_upstream: int
    end_downstream: int

    def target_of(self, upstream: int) -> int | None:
        """Where ``upstream`` landed when it lies in this run (one to one), else None."""
        if self.upstream <= upstream <= self.end_upstream:
            return self.downstream + (upstream - self.upstream)
        return None


@dataclass(frozen=True)
class Span:
    """One chunk: source ``[source_begin, source_end)`` against target ``[target_begin, target_end)``.

    ``*_fetch`` (at most the begin): where the reader starts fetching; records before the begin are skipped.
    Fetching from the gap before a run (a transaction marker) rather than a transaction's first record is what
    every broker serves the same way.
    """

    source_begin: int
    source_end: int
    target_begin: int
    target_end: int
    source_fetch: int
    target_fetch: int
    begin_is_record: bool = True  # the begins are a copied record (an anchor, or inside a run), not a gap
    end_is_record: bool = True  # the ends are the next chunk's first copied record (False: the copied end)


@dataclass(frozen=True)
class Unverifiable:
    """Source offsets ``first..last`` that cannot be compared, and why (never counted as a difference)."""

    first: int
    last: int
    reason: str


def runs_by_partition(syncs: Iterable[OffsetSync]) -> dict[tuple[str, int], list[Anchor]]:
    """Anchors per source partition, sorted, from the offset syncs in topic order (see the module docstring)."""
    found: dict[tuple[str, int], dict[int, Anchor]] = {}
    for sync in syncs:
        runs = found.setdefault((sync.topic, sync.partition), {})
        latest = max((a.end_upstream for a in runs.values()), default=-1)
        if sync.run is None:
            pinned = runs.get(sync.upstream_offset)
            if sync.upstream_offset < latest or (pinned is not None and pinned.downstream != sync.downstream_offset):
                _supersede(runs, sync.upstream_offset)  # an upstream rewind: MM2 copying again
            pin = Anchor(sync.upstream_offset, sync.downstream_offset, sync.upstream_offset, sync.downstream_offset)
            runs.setdefault(sync.upstream_offset, pin)
            continue
        start_u, start_d = sync.run.run_start_upstream, sync.run.run_start_downstream
        known = runs.get(start_u)
        if (known is None and start_u <= latest) or (known is not None and known.downstream != start_d):
            _supersede(runs, start_u)  # copied again from start_u: older copies from there on are not the copy
            known = None
        if known is None or known.end_upstream < sync.upstream_offset:
            runs[start_u] = Anchor(start_u, start_d, sync.upstream_offset, sync.downstream_offset)
    return {key: [runs[u] for u in sorted(runs)] for key, runs in found.items() if runs}


def _supersede(runs: dict[int, Anchor], upstream: int) -> None:
    """Drop what ``runs`` say from source offset ``upstream`` on: runs starting there or later go, a run across it
    ends just before it (one to one, so its end on the target follows)."""
    for start, anchor in list(runs.items()):
        if start >= upstream:
            del runs[start]
        elif anchor.end_upstream >= upstream:
            last = upstream - 1
            runs[start] = Anchor(start, anchor.downstream, last, anchor.downstream + (last - start))


def plan_spans(
    anchors: list[Anchor], start: int, end: int, target_end: int, chunk_records: int, target_start: int | None = None
) -> tuple[list[Span], list[Unverifiable]]:
    """Chunks covering source ``[start, end)`` (the copied range both sides hold), cut at anchors about every
    ``chunk_records`` source offsets, the last one ending at ``target_end`` on the target (so records after the
    last copy are compared too: there should be none). What no anchor reaches is unverifiable.

    ``target_start``: the remote partition's log start, when every target record must be the copy of a source
    record from ``start`` on (the whole source partition is verified from offset 0: no source record was ever
    before it). The first chunk then begins there on the target, so records before the first known copy (a range
    copied twice, records another producer wrote before the copy began) are compared, not skipped. A target log
    start past 0 extends only a first chunk that begins inside a run: its first copy is known, and anything before
    it on the target copies nothing; before an unanchored gap, the target's retention may have deleted copies of
    some of the gap's records, which would make the rest look misplaced. A partition with no anchor at all stays
    unverifiable: nothing says where its copy began (a copy that started at the source's end copied nothing before).
    """
    if start >= end:
        return [], []
    usable = [a for a in anchors if a.end_upstream >= start and a.upstream < end]
    if not usable:
        return [], [Unverifiable(start, end - 1, "no copied run in the offset syncs covers these offsets")]
    gaps: list[Unverifiable] = []
    first = usable[0]
    inside = first.target_of(start)
    previous = [a for a in anchors if a.end_upstream < start]
    on_record = True
    if inside is not None:
        begin_u, begin_d = start, inside
    elif start < first.upstream and previous:
        begin_u, begin_d = start, first.downstream  # in the gap after a known run: what lies there is compared
        on_record = False
    else:
        if start < first.upstream:
            gaps.append(
                Unverifiable(start, first.upstream - 1, "no copied run in the offset syncs covers these offsets")
            )
        begin_u, begin_d = first.upstream, first.downstream
    fetch_d = max(previous[-1].end_downstream + 1, begin_d - 1) if previous and inside is None else begin_d
    if target_start is not None and target_start < begin_d and (inside is not None or target_start == 0):
        begin_u, begin_d, fetch_d, on_record, gaps = start, target_start, target_start, False, []
    spans: list[Span] = []
    cuts = [cut for cut in _cuts(usable, begin_u, chunk_records) if begin_u < cut[0] < end]
    for upstream, downstream, fetch in cuts:
        spans.append(Span(begin_u, upstream, begin_d, downstream, begin_u, min(fetch_d, begin_d), on_record))
        begin_u, begin_d, fetch_d, on_record = upstream, downstream, fetch, True
    spans.append(
        Span(begin_u, end, begin_d, max(target_end, begin_d), begin_u, min(fetch_d, begin_d), on_record, False)
    )
    return spans, gaps


def _cuts(anchors: list[Anchor], begin: int, chunk_records: int) -> list[tuple[int, int, int]]:
    """(source, target, target fetch) cut points after ``begin``: at run starts once a chunk holds about
    ``chunk_records`` source offsets, and inside a run longer than twice that."""
    cuts: list[tuple[int, int, int]] = []
    last = begin
    before: Anchor | None = None
    for anchor in anchors:
        if anchor.upstream > last and anchor.upstream - last >= chunk_records:
            # From the offset before the run (a transaction's marker, on an exactly-once copy) unless the previous
            # run ends right there: a fetch then never starts at a transaction's first record (see ``Span``).
            contiguous = before is not None and before.end_downstream == anchor.downstream - 1
            fetch = anchor.downstream if contiguous or anchor.downstream == 0 else anchor.downstream - 1
            cuts.append((anchor.upstream, anchor.downstream, fetch))
            last = anchor.upstream
        while anchor.end_upstream - last >= 2 * chunk_records:
            last = max(last, anchor.upstream) + chunk_records
            downstream = anchor.downstream + (last - anchor.upstream)
            cuts.append((last, downstream, downstream))
        before = anchor
    return cuts


__all__ = ["Anchor", "Span", "Unverifiable", "plan_spans", "runs_by_partition"]
