"""The mirrorflow package zip shipped to Spark executors: reproducible, named by content, importable alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mirrorflow.replication.pyfiles import build_zip, package_zip, source_hash


def _package(root: Path, body: str) -> Path:
    pkg = root / "mirrorflow"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text(body)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "junk.py").write_text("raise SystemExit('cache shipped')")
    return pkg


def test_same_sources_same_bytes_and_a_change_changes_the_name(tmp_path: Path) -> None:
    pkg = _package(tmp_path / "a", "VALUE = 1\n")
    first, second = build_zip(tmp_path / "1.zip", pkg), build_zip(tmp_path / "2.zip", pkg)
    assert first.read_bytes() == second.read_bytes()  # fixed timestamps: rebuilt zips are identical
    before = source_hash(pkg)
    (pkg / "sub" / "mod.py").write_text("VALUE = 2\n")
    assert source_hash(pkg) != before


def test_the_zip_alone_imports_the_package(tmp_path: Path) -> None:
    pkg = _package(tmp_path / "src", "VALUE = 41 + 1\n")
    archive = build_zip(tmp_path / "m.zip", pkg)
    code = "import sys; sys.path.insert(0, sys.argv[1]); from mirrorflow.sub.mod import VALUE; print(VALUE)"
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, str(archive)], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "42"


def test_the_real_package_zip_is_cached_by_content(tmp_path: Path) -> None:
    first = package_zip(tmp_path)
    assert first.name == f"mirrorflow-{source_hash()}.zip"
    mtime = first.stat().st_mtime_ns
    assert package_zip(tmp_path) == first and first.stat().st_mtime_ns == mtime  # reused, not rebuilt


def test_old_versions_are_pruned_when_a_new_one_is_built(tmp_path: Path) -> None:
    import os

    stale, recent = tmp_path / "mirrorflow-0000000000000000.zip", tmp_path / "mirrorflow-1111111111111111.zip"
    stale.write_bytes(b"old")
    recent.write_bytes(b"recent")
    os.utime(stale, (1, 1))  # unused for a long time
    built = package_zip(tmp_path)
    assert built.exists() and recent.exists() and not stale.exists()
