"""Offset translation: exact inside, before and right after copied runs; MM2's rule (and why) elsewhere."""

from __future__ import annotations

import random

import pytest

from mirrorflow.checkpoints import translate
from mirrorflow.checkpoints.translate import OffsetTranslator
from mirrorflow.wire import CopiedRun, OffsetSync


def run_syncs(topic: str, start_u: int, start_d: int, end_u: int, prev_u: int = -1) -> list[OffsetSync]:
    """The two syncs the copier writes for a run (first and last record), as they come off the wire."""
    end_d = start_d + (end_u - start_u)
    run = CopiedRun(start_u, start_d, prev_u, -1)
    return [
        OffsetSync.decode(s.key(), s.value())
        for s in (OffsetSync(topic, 0, start_u, start_d, run), OffsetSync(topic, 0, end_u, end_d, run))
    ]


def translator(*syncs: list[OffsetSync]) -> OffsetTranslator:
    return OffsetTranslator().add_all([s for group in syncs for s in group])


def test_offsets_inside_a_run_translate_exactly() -> None:
    t = translator(run_syncs("t", 0, 0, 99))
    for upstream in (0, 1, 50, 99):
        result = t.translate("t", 0, upstream)
        assert (result.downstream, result.kind, result.rereads) == (upstream, "exact", 0)


def test_a_gap_before_a_run_and_the_end_of_a_run_are_exact() -> None:
    # unit 1 copied upstream 0..9 to 0..9 (then a commit marker at 10); upstream 10..12 were markers/aborted,
    # unit 2 copied 13..20 to 11..18 and says its previous copied record was upstream 9
    t = translator(run_syncs("t", 0, 0, 9), run_syncs("t", 13, 11, 20, prev_u=9))
    assert [(u, t.translate("t", 0, u).downstream) for u in (10, 11, 12, 13)] == [
        (10, 11),
        (11, 11),
        (12, 11),
        (13, 11),
    ]
    assert {t.translate("t", 0, u).kind for u in (10, 11, 12, 13)} == {"exact"}
    end = t.translate("t", 0, 21)  # consumed everything copied: resume right after the last copy
    assert (end.downstream, end.kind) == (19, "exact")


def test_beyond_what_was_copied_falls_back_to_mm2s_rule_and_counts_rereads() -> None:
    t = translator(run_syncs("t", 0, 0, 9))
    ahead = t.translate("t", 0, 15)  # the group read records 10..14 that are not copied yet
    assert (ahead.downstream, ahead.kind, ahead.rereads) == (10, "approximate", 5)


def test_syncs_written_by_mm2_translate_as_mm2_does() -> None:
    mm2 = translator([OffsetSync("t", 0, 100, 40), OffsetSync("t", 0, 201, 140)])
    assert (mm2.translate("t", 0, 100).downstream, mm2.translate("t", 0, 100).kind) == (40, "exact")
    approx = mm2.translate("t", 0, 150)
    assert (approx.downstream, approx.kind, approx.rereads) == (41, "approximate", 49)
    refused = mm2.translate("t", 0, 99)
    assert (refused.downstream, refused.kind) == (None, "refused")
    assert mm2.translate("other", 0, 5).kind == "unavailable"


def test_an_unknown_previous_record_does_not_claim_the_gap() -> None:
    # the first run after a loss event claims no predecessor: offsets before it are not exact
    t = translator(run_syncs("t", 0, 0, 9), run_syncs("t", 50, 10, 60))
    gap = t.translate("t", 0, 30)
    assert gap.kind == "approximate" and gap.downstream == 10 and gap.rereads == 20


def test_a_recreated_topic_forgets_the_old_runs() -> None:
    t = translator(run_syncs("t", 0, 0, 99), run_syncs("t", 0, 500, 9))
    assert t.translate("t", 0, 5).downstream == 505
    assert t.translate("t", 0, 50).kind == "approximate"  # upstream 50 of the new log is not copied yet


def test_failback_inverts_the_copied_runs() -> None:
    # upstream 0..9 -> downstream 0..9 (marker at 10), upstream 13..20 -> downstream 11..18 (marker at 19)
    t = translator(run_syncs("t", 0, 0, 9), run_syncs("t", 13, 11, 20, prev_u=9))
    assert [(d, t.translate_back("t", 0, d).downstream) for d in (0, 5, 9, 10, 11, 18, 19, 20)] == [
        (0, 0),
        (5, 5),
        (9, 9),
        (10, 13),
        (11, 13),
        (18, 20),
        (19, 21),
        (20, 21),
    ]
    assert {t.translate_back("t", 0, d).kind for d in (0, 10, 19)} == {"exact"}
    assert t.translate_back("other", 0, 3).kind == "unavailable"


def test_an_offset_right_after_a_trailing_commit_marker_is_exact() -> None:
    # one transaction copied upstream 0..5 to 0..5; its commit marker is upstream 6 and the log's last entry, so
    # a group that consumed everything commits 7. No later run vouches for the marker: the copy's progress does.
    t = translator(run_syncs("t", 0, 0, 5))
    assert (t.translate("t", 0, 7).kind, t.translate("t", 0, 7).downstream) == ("approximate", 6)  # syncs alone
    t.note_progress("t", 0, 6, 6)  # read the source to upstream 6; the next target offset is 6 (nothing copied)
    after = t.translate("t", 0, 7)
    assert (after.downstream, after.kind, after.rereads, after.basis) == (6, "exact", 0, "copied runs")
    beyond = t.translate("t", 0, 8)  # upstream 7 has not been read by the copy: it may be a record
    assert (beyond.downstream, beyond.kind, beyond.rereads) == (6, "approximate", 2)


def test_progress_that_does_not_continue_the_last_run_claims_nothing() -> None:
    t = translator(run_syncs("t", 0, 0, 5))
    t.note_progress("t", 0, 6, 9)  # something landed downstream after the run (MM2, another copy): no claim
    assert t.translate("t", 0, 7).kind == "approximate"
    t.note_progress("t", 0, 6, None)  # MM2's progress has no target_next header: no claim either
    assert t.translate("t", 0, 7).kind == "approximate"


def test_every_translation_names_its_basis() -> None:
    runs = translator(run_syncs("t", 0, 0, 9))
    assert runs.translate("t", 0, 5).basis == "copied runs"
    assert runs.translate("t", 0, 10).basis == "copied runs"  # right after the last copied record
    assert runs.translate("t", 0, 15).basis == "offset syncs"  # beyond the copy: MM2's rule on the run's end sync
    mm2 = translator([OffsetSync("t", 0, 100, 40), OffsetSync("t", 0, 201, 140)])
    assert [mm2.translate("t", 0, u).basis for u in (100, 150)] == ["offset syncs", "offset syncs"]
    assert mm2.translate("t", 0, 99).basis == ""  # refused: nothing answered


def test_failback_in_a_range_mm2_copied_goes_back_from_the_syncs() -> None:
    # MM2 synced upstream 100 -> 40 and 201 -> 140; mirrorflow's runs say nothing there.
    mm2 = translator([OffsetSync("t", 0, 100, 40), OffsetSync("t", 0, 201, 140)])
    pinned = mm2.translate_back("t", 0, 140)  # the group's next record is the copy of upstream 201
    assert (pinned.downstream, pinned.kind, pinned.basis) == (201, "exact", "offset syncs")
    between = mm2.translate_back("t", 0, 90)  # it consumed the copy of 100 (at 40) and 49 records after it
    assert (between.downstream, between.kind, between.rereads, between.basis) == (
        101,
        "approximate",
        49,
        "offset syncs",
    )
    assert mm2.translate_back("t", 0, 39).downstream is None  # before every sync kept: nothing known
    runs = translator(run_syncs("t", 0, 0, 9))  # runs answer first
    assert runs.translate_back("t", 0, 5).basis == "copied runs"


def test_the_latest_run_end_is_kept_through_replacements_and_evictions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The latest run end (asked for every sync read) is kept rather than searched for, and stays what a search
    over the runs kept gives while runs are added, re-read with a shorter end, replaced and evicted."""
    monkeypatch.setattr(translate, "MAX_RUNS_PER_PARTITION", 4)
    rng = random.Random(7)
    runs = translate._PartitionRuns()
    for _ in range(2000):
        start_u = rng.randrange(0, 60)
        end_u = start_u + rng.randrange(0, 20)
        start_d = rng.choice([start_u, start_u + 1])
        if rng.random() < 0.05:
            runs.clear()
        runs.add(translate._Run(start_u, start_d, end_u, start_d + (end_u - start_u), -1))
        assert runs.latest_end() == max((r.end_u for r in runs.runs.values()), default=-1)
        assert runs.starts == sorted(runs.runs) and len(runs.starts) <= 4


def test_many_runs_of_one_partition_translate_as_before() -> None:
    """A long-lived partition (one run per copy, a thousand copies): every run stays, and offsets translate exactly."""
    syncs = []
    for r in range(1000):
        syncs += run_syncs("t", 10 * r, 11 * r, 10 * r + 8, prev_u=10 * r - 2 if r else -1)
    t = translator(syncs)
    assert t.translate("t", 0, 10 * 500 + 3) == translate._exact_at(
        5003, 11 * 500 + 3, "inside a contiguous copied run"
    )
    assert t.translate("t", 0, 10 * 999 + 9).downstream == 11 * 999 + 9  # right after the last copied record
