"""Contiguous runs and the offset syncs written for them (pure functions of the copier)."""

from __future__ import annotations

from include.mirrorflow.replication.copy import _runs
from include.mirrorflow.replication.units import Run


def test_runs_split_where_either_side_jumps() -> None:
    pairs = [(0, 10), (1, 11), (2, 12), (5, 13), (6, 14), (7, 16)]
    assert _runs(pairs) == [Run(0, 10, 2, 12), Run(5, 13, 6, 14), Run(7, 16, 7, 16)]
    assert _runs([]) == []
