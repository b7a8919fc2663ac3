"""Contiguous runs and the offset syncs written for them (pure functions of the copier)."""

from __future__ import annotations

import pytest

from mirrorflow.replication.delivery import copied_runs as _runs
from mirrorflow.replication.units import Run


def test_runs_split_where_either_side_jumps() -> None:
    upstream, downstream = [0, 1, 2, 5, 6, 7], [10, 11, 12, 13, 14, 16]
    assert _runs(upstream, downstream) == [Run(0, 10, 2, 12), Run(5, 13, 6, 14), Run(7, 16, 7, 16)]
    assert _runs([], []) == []


def test_one_run_when_both_sides_are_contiguous() -> None:
    assert _runs(list(range(100, 200)), list(range(7, 107))) == [Run(100, 7, 199, 106)]
    assert _runs([4], [9]) == [Run(4, 9, 4, 9)]


def test_a_gap_on_one_side_only_splits() -> None:
    # Neither side is contiguous, on one side only, or both: split at every jump.
    assert _runs([0, 2, 3], [0, 1, 3]) == [Run(0, 0, 0, 0), Run(2, 1, 2, 1), Run(3, 3, 3, 3)]
    assert _runs([0, 1, 3], [5, 7, 8]) == [Run(0, 5, 0, 5), Run(1, 7, 1, 7), Run(3, 8, 3, 8)]


def test_counts_must_match() -> None:
    with pytest.raises(ValueError, match="2 record"):
        _runs([1, 2], [5])
