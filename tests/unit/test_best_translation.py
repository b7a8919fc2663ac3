"""The best valid answer between a fresh translation and the checkpoint already on the target (``best.choose``)."""

from __future__ import annotations

from mirrorflow.checkpoints.best import BestTranslator, choose, valid_for
from mirrorflow.checkpoints.emit import should_emit
from mirrorflow.checkpoints.translate import OffsetTranslator, Translation
from mirrorflow.wire import Checkpoint, OffsetSync
from tests.unit.test_translate import run_syncs


def cp(upstream: int, downstream: int) -> Checkpoint:
    return Checkpoint("g", "A.t", 0, upstream, downstream)


def approx(upstream: int, downstream: int, rereads: int) -> Translation:
    return Translation(upstream, downstream, "approximate", rereads, "MM2 rule", "offset syncs")


def test_an_mm2_checkpoint_beats_a_sync_translation_that_lost_precision() -> None:
    # Group g-a [0]: committed 10,000; MM2's checkpoint says 9,697; today's syncs only give 1.
    best = choose(approx(10_000, 1, 9_999), cp(10_000, 9_697), 10_000)
    assert (best.downstream, best.kind, best.basis, best.rereads) == (9_697, "checkpoint", "existing checkpoint", 303)
    assert "for this very committed offset" in best.reason


def test_exact_beats_everything_even_a_higher_checkpoint() -> None:
    exact = Translation(50, 40, "exact", 0, "inside a contiguous copied run", "copied runs")
    assert choose(exact, cp(50, 45), 50) is exact


def test_the_higher_valid_downstream_wins_and_a_tie_names_the_fresh_translation() -> None:
    fresh = approx(500, 480, 19)
    assert choose(fresh, cp(500, 470), 500) is fresh
    assert choose(fresh, cp(500, 480), 500) is fresh  # as good, and it knows its re-reads
    assert not should_emit(cp(500, 480), fresh)  # but the equal checkpoint is not written again
    better = choose(fresh, cp(500, 490), 500)
    assert (better.downstream, better.basis, better.rereads) == (490, "existing checkpoint", 9)


def test_a_checkpoint_for_an_earlier_offset_is_valid_a_later_one_is_not() -> None:
    # MM2 keeps (9,000 -> 8,990) when the group moves to 9,500 but its translation gets no better.
    fresh = approx(9_500, 100, 9_399)
    kept = choose(fresh, cp(9_000, 8_990), 9_500)
    assert (kept.downstream, kept.basis) == (8_990, "existing checkpoint")
    assert kept.rereads == 9_399 - (8_990 - 100)
    assert "for upstream 9000" in kept.reason
    # Rewound to 8,000: a checkpoint for 9,000 could skip 8,000..8,999, so it is not an answer.
    assert not valid_for(cp(9_000, 8_990), 8_000)
    assert choose(approx(8_000, 100, 7_899), cp(9_000, 8_990), 8_000).basis == "offset syncs"


def test_a_checkpoint_answers_when_nothing_else_does() -> None:
    refused = Translation(10, None, "refused", reason="older than every offset sync kept")
    assert choose(refused, cp(10, 7), 10).downstream == 7
    alone = choose(None, cp(10, 7), 10)  # no syncs readable (a disaster with the syncs on the source)
    assert (alone.downstream, alone.kind, alone.rereads, alone.basis) == (7, "checkpoint", 0, "existing checkpoint")
    assert "not known" in alone.reason
    # MM2's store was cleared by a restart's rewind (first sync kept: upstream 5,850 at 6,000): 3,000 is refused,
    # the checkpoint at 2,930 answers, re-reads counted from the kept sync as if one record per offset.
    old = choose(Translation(3_000, None, "refused"), cp(3_000, 2_930), 3_000, reference=(5_850, 6_000))
    assert (old.downstream, old.rereads, old.basis) == (2_930, 3_000 - (5_850 + 2_930 - 6_000), "existing checkpoint")
    assert choose(refused, None, 10) is refused
    assert choose(None, None, 10).kind == "unavailable"
    assert choose(approx(10, 4, 5), Checkpoint("g", "A.t", 0, 10, -1), 10).basis == "offset syncs"  # not valid


def test_emission_never_writes_a_worse_checkpoint_nor_the_same_one_again() -> None:
    previous = cp(10_000, 9_697)
    assert not should_emit(previous, choose(approx(10_000, 1, 9_999), previous, 10_000))  # the checkpoint is kept
    assert not should_emit(previous, approx(10_000, 9_000, 999))  # worse: never written over it
    assert should_emit(previous, approx(10_000, 9_800, 199))  # better for the same offset
    assert should_emit(previous, approx(9_000, 1, 8_999))  # the group was rewound: MM2 writes it
    assert should_emit(None, approx(5, 1, 3))  # the first checkpoint
    assert not should_emit(None, Translation(5, None, "refused"))


def test_the_best_translator_resolves_a_checkpoint_the_copy_has_since_reached_exactly() -> None:
    translator = OffsetTranslator().add_all(run_syncs("t", 0, 0, 99))
    stale = Checkpoint("g", "A.t", 0, 50, 30)  # written before the copy got to 50: approximate then
    best = BestTranslator(translator, {("g", "A.t", 0): stale})
    now = best.resolve(stale, "t")
    assert (now.downstream, now.kind, now.basis) == (50, "exact", "copied runs")
    live = best.translate("g", "t", "A.t", 0, 60)
    assert (live.downstream, live.kind) == (60, "exact")
    assert BestTranslator(None, {}).translate("g", "t", "A.t", 0, 60).kind == "unavailable"


def test_mm2_syncs_and_checkpoints_together_never_worse_than_the_checkpoint() -> None:
    # An MM2 store that kept only the first and the latest sync: translating 10,000 falls back to the first.
    translator = OffsetTranslator().add_all([OffsetSync("t", 0, 0, 0), OffsetSync("t", 0, 20_000, 19_400)])
    checkpoints = {("g", "A.t", 0): cp(10_000, 9_697)}
    answer = BestTranslator(translator, checkpoints).translate("g", "t", "A.t", 0, 10_000)
    assert (answer.downstream, answer.basis, answer.rereads) == (9_697, "existing checkpoint", 303)
    other = BestTranslator(translator, checkpoints).translate("h", "t", "A.t", 0, 10_000)  # another group's
    assert (other.downstream, other.basis) == (1, "offset syncs")
