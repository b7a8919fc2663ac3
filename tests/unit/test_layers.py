"""The layer contract of ``pyproject.toml`` (import-linter) holds, and it fails on an upward import or a cycle.

The failing cases run import-linter on a copy of the packages with one import added, so they prove the contract
catches what it is for, not only that today's code passes it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mirrorflow_dev import CHECKOUT

PACKAGES = {
    "mirrorflow": CHECKOUT / "include" / "mirrorflow",
    "mirrorflow_airflow": CHECKOUT / "include" / "mirrorflow_airflow",
    "mirrorflow_dev": CHECKOUT / "dev" / "mirrorflow_dev",
}


def lint_imports(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the packages under ``root``, not the installed ones: ``-S`` skips site's ``.pth`` files (the
    editable install's finder would find the checkout), and site-packages is appended for import-linter itself."""
    site_packages = sysconfig.get_paths()["purelib"]
    probe = (
        f"import sys; sys.path[:0] = [{str(root)!r}]; sys.path.append({site_packages!r}); "
        "from importlinter.cli import lint_imports; "
        f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True, no_logo=True))"
    )
    return subprocess.run(
        [sys.executable, "-S", "-c", probe], cwd=root, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    for name, source in PACKAGES.items():
        shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CHECKOUT / "pyproject.toml", tmp_path / "pyproject.toml")  # its [tool.importlinter], as is
    return tmp_path


def test_the_checkout_keeps_every_contract(copy: Path) -> None:
    done = lint_imports(copy, copy / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "said"),
    [
        # an upward import: the Kafka primitives reaching for the status page's module
        ("mirrorflow/kafka/calls.py", "from mirrorflow import status", "mirrorflow.kafka.calls -> mirrorflow.status"),
        # a cycle between two modules of a package (run already imports units)
        (
            "mirrorflow/replication/units.py",
            "from mirrorflow.replication import run",
            "no import cycles between the modules of a package BROKEN",
        ),
        # Airflow in the library
        ("mirrorflow/wire/__init__.py", "import airflow", "mirrorflow.wire -> airflow"),
    ],
)
def test_a_deliberate_violation_breaks_its_contract(copy: Path, module: str, line: str, said: str) -> None:
    path = copy / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402\n")
    done = lint_imports(copy, copy / "pyproject.toml")
    assert done.returncode == 1
    assert said in done.stdout, done.stdout
