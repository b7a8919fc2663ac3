"""The failover report says what will happen: each row exact / re-reads N / not yet copied, headings and the
top line summed from the rows (a heading once said "up to 0 record(s) re-read" above rows of
2,460-2,615 records that were in fact not copied yet)."""

from __future__ import annotations

from typing import Any

import pytest

from mirrorflow.failover.outcome import (
    Classified,
    action_text,
    classify,
    group_heading,
    outcome_text,
    top_line,
    totals,
)
from mirrorflow.failover.plan import FailoverPlan, GroupMove, PartitionMove, plan_from_dict
from mirrorflow.failover.report import render_markdown, summary


def row(
    partition: int,
    source: int,
    target: int | None,
    *,
    kind: str = "exact",
    rereads: int = 0,
    copied: int | None = None,
    current: int | None = None,
    action: str = "write",
    age: float | None = None,
) -> PartitionMove:
    p = PartitionMove("primary.orders", partition, source, target, kind, rereads, current, action)
    p.assess(copied)
    p.missing_age_seconds = age if p.outcome == "not-yet-copied" else None
    return p


def plan(
    *groups: GroupMove, mode: Any = "planned", dry_run: bool = True, reachable: bool | None = True
) -> FailoverPlan:
    return FailoverPlan("primary->backup", mode, dry_run, "2026-11-23T05:00:00+00:00", reachable, 12.0, list(groups))


# --------------------------------------------------------------------------------------------- classify


@pytest.mark.parametrize(
    ("source", "target", "rereads", "copied", "expected"),
    [
        (11, 11, 0, 25, Classified("exact", 0, 0)),  # inside the copy, exact
        (25, 25, 0, 25, Classified("exact", 0, 0)),  # right at the copied position: nothing missing
        (500, 480, 30, 900, Classified("re-read", 30, 0)),  # approximate inside the copy
        # The demo: committed 9,336, copied to 6,752; the translator's "re-reads" are the missing records.
        (9336, 6752, 9336 - 6751 - 1, 6752, Classified("not-yet-copied", 0, 2584)),
        # An older sync than the copy's end: 10 records re-read before the 2,584 missing ones.
        (9336, 6742, 2594, 6752, Classified("not-yet-copied", 10, 2584)),
        (40, None, 0, 25, Classified("untranslated", 0, 0)),  # refused / no sync: never missing-or-exact
        (40, 25, 14, None, Classified("re-read", 14, 0)),  # copy position unknown: the translation alone
    ],
)
def test_classify(source: int, target: int | None, rereads: int, copied: int | None, expected: Classified) -> None:
    assert classify(source, target, rereads, copied) == expected


def test_row_texts_say_what_happens_and_where_the_group_ends() -> None:
    missing = row(0, 9336, 6752, kind="approximate", rereads=2584, copied=6752, age=812.4)
    assert (missing.outcome, missing.missing_records, missing.re_read_records) == ("not-yet-copied", 2584, 0)
    assert outcome_text(missing, True) == "not yet copied: 2,584 records (oldest 812 s old)"
    missing.missing_age_seconds = None  # a disaster: the source is not read
    assert (
        outcome_text(missing, None)
        == "not yet copied: 2,584 records (age unknown: the source is not read in a disaster)"
    )
    missing.missing_age_seconds = 812.4
    assert action_text(missing, dry_run=True) == "would move to 6,752"
    assert action_text(missing, dry_run=False) == "moves to 6,752"
    kept = row(1, 9336, 6752, kind="approximate", rereads=2584, copied=6752, current=6752, action="keep")
    assert action_text(kept, dry_run=True) == "stays at 6,752 (already there)"
    past = row(1, 100, 90, current=120, action="keep", copied=200)
    assert action_text(past, dry_run=True) == "stays at 120 (already past 90; never moved back)"
    assert outcome_text(row(2, 500, 480, kind="approximate", rereads=30, copied=900), True) == "re-reads 30"
    assert outcome_text(row(3, 11, 11, copied=25), True) == "exact"
    skipped = row(4, 3, None, kind="refused", action="skip", copied=25)
    assert (outcome_text(skipped, True), action_text(skipped, True)) == (
        "not translated (refused)",
        "not moved (no translation)",
    )


# ------------------------------------------------------------------------------ headings and the top line


def demo_group() -> GroupMove:
    """The demo's group: rows already synced to the target's group (keep), committed beyond the copy."""
    g = GroupMove("billing", "EMPTY")
    for partition, (committed, copied) in enumerate([(9336, 6752), (9400, 6800), (9100, 6640)]):
        n = committed - copied
        g.partitions.append(
            row(
                partition,
                committed,
                copied,
                kind="approximate",
                rereads=n,
                copied=copied,
                current=copied,
                action="keep",
                age=800.0 + partition,
            )
        )
    return g


def test_heading_agrees_with_its_rows_even_when_every_row_is_kept() -> None:
    g = demo_group()
    heading = group_heading(g, dry_run=True, source_reachable=True)
    assert heading == (
        "billing (nothing to write: already at these offsets; target state EMPTY): 3 partitions: 0 exact, "
        "3 not yet copied (7,644 records, oldest 802 s old)"
    )
    assert "re-read" not in heading  # nothing is re-read: the records are not on the target at all
    t = totals(g.partitions)
    assert (t.missing_records, t.missing_partitions, t.re_read_records, t.exact) == (2584 + 2600 + 2460, 3, 0, 0)


def test_heading_counts_exact_re_read_and_missing_rows() -> None:
    g = GroupMove("shipping", "EMPTY")
    g.partitions = [
        row(0, 11, 11, copied=25),
        row(1, 500, 480, kind="approximate", rereads=30, copied=900),
        row(2, 40, 25, kind="approximate", rereads=14, copied=25, age=3.2),
    ]
    assert group_heading(g, dry_run=False, source_reachable=True) == (
        "shipping (not moved yet (pending); target state EMPTY): 3 partitions: 1 exact, 1 re-read (30 records), "
        "1 not yet copied (15 records, oldest 3 s old)"
    )
    g.applied = True
    assert group_heading(g, dry_run=False, source_reachable=True).startswith("shipping (moved; ")


def test_top_line_planned_dry_run_with_missing_records_says_drain_or_accept() -> None:
    line = top_line(plan(demo_group()))
    assert line == (
        "7,644 records in 3 partitions are not copied yet (oldest 802 s old): run the planned failover "
        "(dry run off), whose final copy drains them first (stop the producers on the source), or accept "
        "7,644 records missing on the target (a disaster failover now)."
    )


def test_top_line_disaster_says_the_age_is_unknown_and_what_is_lost() -> None:
    g = GroupMove("billing", "EMPTY")
    g.partitions = [row(0, 40, 25, kind="checkpoint", copied=25)]
    dry = top_line(plan(g, mode="disaster", reachable=None))
    assert dry.startswith("15 records in 1 partition were not copied before the source failed (age unknown: ")
    assert dry.endswith("otherwise accept 15 records missing on the target.")
    real = top_line(plan(g, mode="disaster", dry_run=False, reachable=None))
    assert real.endswith("they are missing on the target.")


def test_top_line_when_everything_is_exact_or_only_re_read() -> None:
    exact = GroupMove("a", "EMPTY", [row(0, 11, 11, copied=25), row(1, 17, 17, copied=25)])
    assert top_line(plan(exact)) == "Every group translates exactly: nothing re-read, nothing missing."
    reread = GroupMove("b", "EMPTY", [row(0, 500, 480, kind="approximate", rereads=30, copied=900)])
    assert top_line(plan(exact, reread)).startswith(
        "Nothing missing, but consumers re-read up to 30 records in 1 partition"
    )


def test_refused_groups_do_not_count_in_the_top_line() -> None:
    refused = demo_group()
    refused.refused = "active on backup (STABLE); set force to include it"
    exact = GroupMove("a", "EMPTY", [row(0, 11, 11, copied=25)])
    assert top_line(plan(exact, refused)) == (
        "Every group translates exactly: nothing re-read, nothing missing. "
        "1 group(s) refused: see their headings (force includes active groups)."
    )
    assert top_line(plan()) == "No group to move."


# ------------------------------------------------------------------------------------ Markdown and JSON


def test_markdown_puts_the_advice_first_and_rows_agree() -> None:
    text = render_markdown(plan(demo_group()))
    lines = text.splitlines()
    assert lines[0] == "# Failover primary->backup (planned, dry run)"
    assert lines[2].startswith("**7,644 records in 3 partitions are not copied yet")
    assert (
        "## billing (nothing to write: already at these offsets; target state EMPTY): 3 partitions: 0 exact, 3 not yet copied"
        in text
    )
    assert (
        "| primary.orders | 0 | 9,336 | 6,752 | 6,752 | not yet copied: 2,584 records (oldest 800 s old) | 6,752 "
        "| stays at 6,752 (already there) |"
    ) in lines
    assert "up to 0 record(s) re-read" not in text and "approximate" not in text


def test_json_keeps_the_structured_fields_and_reads_back() -> None:
    p = plan(demo_group())
    data = p.to_dict()
    first = data["groups"][0]["partitions"][0]
    assert {k: first[k] for k in ("outcome", "re_read_records", "missing_records", "missing_age_seconds")} == {
        "outcome": "not-yet-copied",
        "re_read_records": 0,
        "missing_records": 2584,
        "missing_age_seconds": 800.0,
    }
    assert render_markdown(plan_from_dict(data)) == render_markdown(p)
    verdict = summary(p)
    assert verdict["totals"]["missing_records"] == 7644 and verdict["advice"] == top_line(p)


def test_an_old_failover_log_entry_without_outcomes_still_reads() -> None:
    """Records written before outcomes existed lack the new fields: the defaults keep them readable."""
    old = {
        "flow": "primary->backup",
        "mode": "disaster",
        "dry_run": False,
        "started_at": "2026-01-01T00:00:00+00:00",
        "source_reachable": None,
        "checkpoints_age_s": 3.0,
        "groups": [
            {
                "group": "g",
                "target_state": "EMPTY",
                "partitions": [
                    {
                        "remote_topic": "primary.orders",
                        "partition": 0,
                        "source_offset": 5,
                        "target_offset": 5,
                        "kind": "checkpoint",
                        "rereads": 0,
                        "current": None,
                        "action": "write",
                    }
                ],
                "refused": None,
                "applied": True,
            }
        ],
        "notes": [],
        "seconds": 1.0,
    }
    assert plan_from_dict(old).groups[0].partitions[0].outcome == ""
    assert "| primary.orders | 0 | 5 | - | 5 |" in render_markdown(plan_from_dict(old))


def test_a_kept_checkpoint_whose_re_reads_cannot_be_counted_is_never_exact() -> None:
    """A disaster with the offset syncs on the lost source: a kept checkpoint's re-reads are not known (0 counted)."""
    kept = row(0, 100, 97, kind="checkpoint", rereads=0, copied=200)
    assert (kept.outcome, kept.re_read_records) == ("re-read", 0)
    assert outcome_text(kept, False) == "re-reads an unknown number"
    exact = row(1, 50, 50, copied=200)
    t = totals([kept, exact])
    assert (t.exact, t.unknown_re_reads, t.re_read_partitions) == (1, 1, 0)
    text = top_line(plan(GroupMove("g", "EMPTY", [kept, exact]), mode="disaster", reachable=False))
    assert text.startswith("Nothing missing, but consumers may re-read an unknown number of records in 1 partition")
    assert "translates exactly" not in text
