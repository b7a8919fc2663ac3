"""DAG files parse fast: each in a fresh process, as Airflow's DAG processor parses them, timed by Airflow's DagBag.

A budget, not a benchmark: 2 s per file on the CI machine, far above the target (well under a second) so that a
loaded machine does not fail the suite, and far below Airflow's import timeout. The figures are in docs/performance.md
(``benchmarks/dag_parse.py``, which this test shares its measurement with).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mirrorflow_dev import CHECKOUT as REPO_ROOT
from mirrorflow_dev import EXAMPLE_CONFIG as DEFAULT_CONFIG

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
from dag_parse import BUDGET_S, dag_files, parse_file


@pytest.mark.parametrize("dag_file", dag_files(), ids=lambda p: p.name)
def test_each_dag_file_parses_within_the_budget(dag_file: Path, airflow_db: None) -> None:
    env = {**os.environ, "MIRRORFLOW_CONFIG": str(DEFAULT_CONFIG)}
    parse_file(dag_file, env)  # the first parse of a session pays cold files (.pyc written, disk cache)
    parsed = parse_file(dag_file, env)
    assert parsed.errors == {}
    assert parsed.seconds < BUDGET_S, f"{dag_file.name} took {parsed.seconds:.2f} s to parse (budget {BUDGET_S} s)"
    assert parsed.heavy == [], f"{dag_file.name} imports {parsed.heavy} at parse time: import them in the tasks"
    if dag_file.name != "mirrorflow_config.py":
        assert parsed.dags, f"{dag_file.name} made no DAG"
