"""What a failover does to each partition of a group, said the same way in rows, headings and the top line.

A translated offset alone does not tell an operator what happens. Three outcomes do:

* ``exact``: the group resumes on the target at the copy of the record it would read next: nothing is
  read twice, nothing is missing;
* ``re-read``: the translation is approximate: the group resumes up to N records early and reads them again;
* ``not-yet-copied``: the group committed past what the copy has reached (its *copied position*, the stored
  progress + 1). The records between the copied position and the committed offset are not on the target:
  they are missing there until copied, and lost if the source is gone. The group resumes at the end of the
  copy, so if they are copied later it reads them (again) from there.

``untranslated`` marks a partition no offset could be computed for (refused or no offset sync): it is not
moved. Everything here is pure (no cluster access) so the wording is unit-tested once and reused by the
Markdown report, the JSON report and the notification.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .plan import FailoverPlan, GroupMove, PartitionMove

Outcome = Literal["exact", "re-read", "not-yet-copied", "untranslated"]

EXACT: Outcome = "exact"
RE_READ: Outcome = "re-read"
NOT_YET_COPIED: Outcome = "not-yet-copied"
UNTRANSLATED: Outcome = "untranslated"


@dataclass(frozen=True)
class Classified:
    outcome: Outcome
    re_read_records: int
    missing_records: int


def classify(
    source_offset: int,
    target_offset: int | None,
    rereads: int,
    copied_position: int | None,
    proven_exact: bool = True,
) -> Classified:
    """The outcome of moving a group that committed ``source_offset`` to ``target_offset`` on the target.

    ``rereads`` is what the translation says; ``copied_position`` the next source offset the copy will copy
    (None: unknown). Past the copied position the translator's "re-reads" are records that are not on the
    target at all (it counts from the last copied record), so they are reported as missing instead; only
    what remains (a sync older than the copy's end) is a re-read. ``proven_exact=False`` (a kept checkpoint
    whose re-reads nothing can count) is never called exact: it is a re-read of an unknown number (0 records
    counted).
    """
    if target_offset is None:
        return Classified(UNTRANSLATED, 0, 0)
    missing = max(0, source_offset - copied_position) if copied_position is not None else 0
    re_read = max(0, rereads - missing)
    if missing:
        return Classified(NOT_YET_COPIED, re_read, missing)
    return Classified(RE_READ if re_read or not proven_exact else EXACT, re_read, 0)


def _n(value: int) -> str:
    return f"{value:,}"


def _records(count: int) -> str:
    return f"{_n(count)} record{'' if count == 1 else 's'}"


def _partitions(count: int) -> str:
    return f"{_n(count)} partition{'' if count == 1 else 's'}"


def age_text(seconds: float | None, source_reachable: bool | None) -> str:
    """How old the oldest missing record is, or why that is not known (the source is not read in a disaster)."""
    if seconds is not None:
        return f"oldest {seconds:,.0f} s old"
    if source_reachable is None:
        return "age unknown: the source is not read in a disaster"
    if source_reachable is False:
        return "age unknown: source unreachable"
    return "age unknown"


def outcome_text(p: PartitionMove, source_reachable: bool | None) -> str:
    """The Outcome cell of a row: ``exact``, ``re-reads N``, ``not yet copied: N records (oldest S s old)``."""
    if not p.outcome:  # a failover-log record written before outcomes existed: what it said then
        return p.kind + (f", may re-read {_n(p.rereads)}" if p.rereads else "")
    if p.outcome == UNTRANSLATED:
        return f"not translated ({p.kind})"
    if p.outcome == NOT_YET_COPIED:
        text = f"not yet copied: {_records(p.missing_records)} ({age_text(p.missing_age_seconds, source_reachable)})"
        return text + (f"; re-reads {_n(p.re_read_records)}" if p.re_read_records else "")
    if p.outcome == RE_READ:
        return f"re-reads {_n(p.re_read_records)}" if p.re_read_records else "re-reads an unknown number"
    return "exact"


def action_text(p: PartitionMove, dry_run: bool) -> str:
    """The Action cell: the offset the group ends at on the target, and whether this run writes it."""
    if p.action == "skip" or p.target_offset is None:
        return "not moved (no translation)"
    if p.action == "keep":
        if p.current == p.target_offset:
            return f"stays at {_n(p.target_offset)} (already there)"
        return f"stays at {_n(p.current or 0)} (already past {_n(p.target_offset)}; never moved back)"
    return f"{'would move' if dry_run else 'moves'} to {_n(p.target_offset)}"


@dataclass(frozen=True)
class Totals:
    """Counts over some partitions: how many are exact, re-read (and how much), not yet copied (and how much)."""

    partitions: int = 0
    exact: int = 0
    re_read_partitions: int = 0
    re_read_records: int = 0
    missing_partitions: int = 0
    missing_records: int = 0
    oldest_missing_s: float | None = None
    untranslated: int = 0
    unknown_re_reads: int = 0  # re-read partitions whose count is not known (kept checkpoints, syncs unreadable)

    def to_dict(self) -> dict[str, int | float | None]:
        return dict(self.__dict__)


def totals(partitions: Iterable[PartitionMove]) -> Totals:
    """Sum the rows as they are shown, so a heading or the top line can never disagree with its rows."""
    parts = list(partitions)
    missing = [p for p in parts if p.outcome == NOT_YET_COPIED]
    re_read = [p for p in parts if p.re_read_records]
    ages = [p.missing_age_seconds for p in missing if p.missing_age_seconds is not None]
    return Totals(
        partitions=len(parts),
        exact=sum(1 for p in parts if p.outcome == EXACT),
        re_read_partitions=len(re_read),
        re_read_records=sum(p.re_read_records for p in re_read),
        missing_partitions=len(missing),
        missing_records=sum(p.missing_records for p in missing),
        oldest_missing_s=max(ages) if ages and len(ages) == len(missing) else None,
        untranslated=sum(1 for p in parts if p.outcome == UNTRANSLATED),
        unknown_re_reads=sum(1 for p in parts if p.outcome == RE_READ and not p.re_read_records),
    )


def totals_text(t: Totals, source_reachable: bool | None) -> str:
    """``2 partitions: 1 exact, 1 not yet copied (2,584 records, oldest 812 s old)``: every row counted once."""
    parts = [f"{t.exact} exact"]
    if t.re_read_partitions:
        parts.append(f"{t.re_read_partitions} re-read ({_records(t.re_read_records)})")
    if t.unknown_re_reads:
        parts.append(f"{t.unknown_re_reads} re-read (how many not known)")
    if t.missing_partitions:
        age = age_text(t.oldest_missing_s, source_reachable)
        parts.append(f"{t.missing_partitions} not yet copied ({_records(t.missing_records)}, {age})")
    if t.untranslated:
        parts.append(f"{t.untranslated} not translated")
    return f"{_partitions(t.partitions)}: " + ", ".join(parts)


def group_heading(g: GroupMove, dry_run: bool, source_reachable: bool | None) -> str:
    """A group's heading: what happens to it, and its rows' totals (the same numbers as its rows)."""
    writes = any(p.action == "write" and p.target_offset is not None for p in g.partitions)
    if g.refused:
        status = f"refused: {g.refused}"
    elif not writes:
        status = "nothing to write: already at these offsets"
    else:
        status = "would move" if dry_run else ("moved" if g.applied else "not moved yet (pending)")
    return f"{g.group} ({status}; target state {g.target_state}): {totals_text(totals(g.partitions), source_reachable)}"


def top_line(plan: FailoverPlan) -> str:
    """One line telling the operator what to do, for this mode (planned, disaster, failback) and dry or real run."""
    moving = [g for g in plan.groups if g.refused is None]
    t = totals(p for g in moving for p in g.partitions)
    refused = len(plan.groups) - len(moving)
    tail = f" {refused} group(s) refused: see their headings (force includes active groups)." if refused else ""
    if not plan.groups:
        return "No group to move." + tail
    if not moving:
        return "No group moves:" + tail
    if t.missing_records:
        return _missing_advice(plan, t) + _re_read_clause(t) + tail
    if t.re_read_records:
        return (
            f"Nothing missing, but consumers re-read up to {_records(t.re_read_records)} in "
            f"{_partitions(t.re_read_partitions)} (approximate translations): their processing must tolerate "
            "duplicates." + _untranslated_clause(t) + tail
        )
    if t.unknown_re_reads:
        return (
            f"Nothing missing, but consumers may re-read an unknown number of records in "
            f"{_partitions(t.unknown_re_reads)} (checkpoints kept as they are; the offset syncs cannot count "
            "them): their processing must tolerate duplicates." + _untranslated_clause(t) + tail
        )
    if t.untranslated:
        return "Nothing re-read, nothing missing where translated." + _untranslated_clause(t) + tail
    return "Every group translates exactly: nothing re-read, nothing missing." + tail


def _missing_advice(plan: FailoverPlan, t: Totals) -> str:
    what = f"{_records(t.missing_records)} in {_partitions(t.missing_partitions)}"
    age = age_text(t.oldest_missing_s, plan.source_reachable)
    if plan.mode == "planned" and plan.dry_run:
        return (
            f"{what} are not copied yet ({age}): run the planned failover (dry run off), whose final copy drains "
            f"them first (stop the producers on the source), or accept {_records(t.missing_records)} missing on "
            "the target (a disaster failover now)."
        )
    if plan.mode == "planned":
        return (
            f"{what} were still not copied when the groups moved ({age}): producers or consumers kept running on "
            "the source; stop them and run the failover again (it is idempotent), or accept them missing."
        )
    if plan.mode == "failback":
        return f"{what} are not copied back yet ({age}): run the failback with dry run off (it copies back first)."
    if plan.dry_run:
        return (
            f"{what} were not copied before the source failed ({age}): if the source can come back, bring it back "
            f"and run a planned failover; otherwise accept {_records(t.missing_records)} missing on the target."
        )
    return f"{what} were not copied before the source failed ({age}): they are missing on the target."


def _re_read_clause(t: Totals) -> str:
    if not t.re_read_records:
        return ""
    return f" Besides, {_records(t.re_read_records)} in {_partitions(t.re_read_partitions)} are re-read."


def _untranslated_clause(t: Totals) -> str:
    return f" {_partitions(t.untranslated)} cannot be translated and are not moved." if t.untranslated else ""


__all__ = [
    "EXACT",
    "NOT_YET_COPIED",
    "RE_READ",
    "UNTRANSLATED",
    "Classified",
    "Outcome",
    "Totals",
    "action_text",
    "age_text",
    "classify",
    "group_heading",
    "outcome_text",
    "top_line",
    "totals",
    "totals_text",
]
