"""What the first difference of a chunk is: missing, extra, or a record whose fields differ.

Why a resync search: two sequences that stop agreeing can do so because the target lacks records (a range the
copy skipped), holds records the source never had (another producer, a duplicated range), or holds a different
record in place (a changed header). Comparing position by position only says "they differ at i"; looking ahead
for the nearest point where both sides agree again says which, and how many records. The look-ahead is bounded
(``LOOKAHEAD`` records per side), so a chunk task's memory stays bounded whatever the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .records import differing_fields

#: Records per side kept after the first difference to find where the sides agree again.
LOOKAHEAD = 2_000


@dataclass(frozen=True)
class Difference:
    """The first difference in a chunk, by source and target offset.

    ``kind``: ``missing`` (source records absent on the target: ``source_offsets`` first..last, ``target_offset``
    the target record that comes instead, None at the end), ``extra`` (target records with no source record:
    ``target_offsets`` first..last, ``source_offset`` the source record they come before, None at the end) or
    ``differs`` (``fields`` of the record at ``source_offset`` / ``target_offset`` differ; ``count`` records on
    each side until they agree again, when found). ``count`` is how many records, when the sides agree again
    within the look-ahead; None when they do not (the chunk is different from there on).
    """

    kind: str
    source_offset: int | None
    target_offset: int | None
    count: int | None = None
    source_last: int | None = None  # missing: the last missing source offset
    target_last: int | None = None  # extra: the last extra target offset
    fields: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line a person reads: which offsets, and what."""
        many = "" if self.count is None else f"{self.count} record(s)"
        if self.kind == "missing":
            span = _span(self.source_offset, self.source_last)
            where = (
                "at the end of the target"
                if self.target_offset is None
                else f"before target offset {self.target_offset}"
            )
            return f"missing on the target: source offset(s) {span} {f'({many}) ' if many else ''}{where}".strip()
        if self.kind == "extra":
            span = _span(self.target_offset, self.target_last)
            where = (
                "after the last source record"
                if self.source_offset is None
                else f"before source offset {self.source_offset}"
            )
            return f"extra on the target: target offset(s) {span} {f'({many}) ' if many else ''}with no source record, {where}"
        fields = ", ".join(self.fields) or "content"
        return f"differs: source offset {self.source_offset} vs target offset {self.target_offset}: {fields}" + (
            f" ({many} on each side)" if many and self.count != 1 else ""
        )


def _span(first: int | None, last: int | None) -> str:
    return str(first) if last is None or last == first else f"{first}..{last}"


def first_difference(
    source: Sequence[tuple[int, bytes]],
    target: Sequence[tuple[int, bytes]],
    *,
    source_done: bool,
    target_done: bool,
    source_next: int | None = None,
    target_next: int | None = None,
) -> Difference:
    """Classify the difference that starts at ``source[0]`` / ``target[0]`` (they differ, or one side is empty).

    ``source``/``target``: (offset, encoded record) from the first differing position on, at most ``LOOKAHEAD``
    each; ``*_done``: that side has no records after the ones given (so a side that ran out is final); ``*_next``:
    the offset of the record that follows the chunk on that side, when there is one (a range missing at a chunk's
    end comes before the next chunk's first target record).
    """
    if not target:
        return _missing(source, len(source), target_next, complete=source_done)
    if not source:
        return _extra(target, len(target), source_next, complete=target_done)
    p, q = _resync(source, target)
    if p is None or q is None:
        if target_done and len(target) < len(source) and not source_done:
            return _missing(source, None, target[0][0], complete=False)
        return Difference(
            "differs", source[0][0], target[0][0], None, fields=differing_fields(source[0][1], target[0][1])
        )
    if q == 0:
        return _missing(source, p, target[0][0], complete=True)
    if p == 0:
        return _extra(target, q, source[0][0], complete=True)
    return Difference(
        "differs",
        source[0][0],
        target[0][0],
        p if p == q else None,
        fields=differing_fields(source[0][1], target[0][1]),
    )


def _missing(
    source: Sequence[tuple[int, bytes]], count: int | None, target_offset: int | None, *, complete: bool
) -> Difference:
    last = source[count - 1][0] if count else source[-1][0]
    return Difference("missing", source[0][0], target_offset, count if complete else None, source_last=last)


def _extra(
    target: Sequence[tuple[int, bytes]], count: int | None, source_offset: int | None, *, complete: bool
) -> Difference:
    last = target[count - 1][0] if count else target[-1][0]
    return Difference("extra", source_offset, target[0][0], count if complete else None, target_last=last)


def _resync(source: Sequence[tuple[int, bytes]], target: Sequence[tuple[int, bytes]]) -> tuple[int | None, int | None]:
    """The nearest (p, q), smallest p + q, where ``source[p]`` equals ``target[q]`` (p or q may be 0, not both).

    A record equal on both sides where they first differ would not be a difference, so (0, 0) never occurs.
    Each side is indexed once (first occurrence of each encoding), so this is linear in the look-ahead.
    """
    in_target: dict[bytes, int] = {}
    for i, (_, data) in enumerate(target):
        in_target.setdefault(data, i)
    in_source: dict[bytes, int] = {}
    for i, (_, data) in enumerate(source):
        in_source.setdefault(data, i)
    best: tuple[int, int] | None = None
    for p, (_, data) in enumerate(source):
        if best is not None and p >= sum(best):
            break
        q = in_target.get(data)
        if q is not None and (p, q) != (0, 0) and (best is None or p + q < sum(best)):
            best = (p, q)
    for q, (_, data) in enumerate(target):
        if best is not None and q >= sum(best):
            break
        p = in_source.get(data)
        if p is not None and (p, q) != (0, 0) and (best is None or p + q < sum(best)):
            best = (p, q)
    return best if best is not None else (None, None)


__all__ = ["LOOKAHEAD", "Difference", "first_difference"]
