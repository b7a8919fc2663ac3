"""The library installs as ``mirrorflow``: importable from any directory, no top-level ``include``, and the product
(``mirrorflow``, ``mirrorflow_airflow``) never imports the development tooling (``mirrorflow_dev``)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_mirrorflow_imports_from_any_directory_and_include_does_not() -> None:
    probe = (
        "import importlib.util, mirrorflow, mirrorflow.cli; "
        "print(mirrorflow.__file__); print(importlib.util.find_spec('include') is None)"
    )
    with tempfile.TemporaryDirectory() as elsewhere:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installation alone, as a user has it
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    where, no_include = done.stdout.split()
    assert Path(where) == REPO_ROOT / "include" / "mirrorflow" / "__init__.py"  # the code stays in include/
    assert no_include == "True"  # nothing named `include` to collide with an Airflow project's include/ folder


def test_nothing_imports_the_old_name() -> None:
    found = subprocess.run(
        ["git", "grep", "-n", "include[.]mirrorflow", "--", "*.py", "*.toml", "*.yaml", "*.md"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.stdout == "", found.stdout


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_the_product_never_imports_the_development_tooling() -> None:
    product = [
        *(REPO_ROOT / "include" / "mirrorflow").rglob("*.py"),
        *(REPO_ROOT / "include" / "mirrorflow_airflow").rglob("*.py"),
    ]
    assert len(product) > 90
    offenders = {
        str(path.relative_to(REPO_ROOT)): sorted(
            m for m in _imported_modules(path) if m.split(".")[0] == "mirrorflow_dev"
        )
        for path in product
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert not (REPO_ROOT / "include" / "mirrorflow_dev").exists()
