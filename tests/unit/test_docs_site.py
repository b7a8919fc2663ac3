"""The documentation site: the generated configuration reference matches ``config/keys.py``, and the strict build
fails on what it is there to catch (a stale reference, a broken link, a page left out of the navigation).

Why this exists: a reference typed by hand next to the code drifts from it; a generated one only stays true if
something fails when it is not regenerated. The build tests run MkDocs itself on a copy of the site.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow.config import keys
from mirrorflow_dev.docs import reference

REPO = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")


def _page() -> str:
    return reference.PAGE.read_text(encoding="utf-8")


def test_the_checked_in_reference_is_what_the_keys_render() -> None:
    assert reference.stale() is None, reference.stale()


def test_the_reference_lists_every_key_with_its_default() -> None:
    page = _page()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", page, re.MULTILINE)}
    every = [*keys.CONNECTOR_KEYS.values(), *keys.TOP_LEVEL_KEYS.values()]
    for spec in every:
        assert spec.name in rows, f"{spec.name} is missing from {reference.PAGE.name}"
        if spec.default:
            assert f"`{spec.default}`" in rows[spec.name], spec.name
    for name in [*keys.FAMILY_ATTRIBUTES, *keys.CLIENT_KEYS, *keys.DEPRECATED_ALIASES]:
        assert name in rows, f"{name} is missing from {reference.PAGE.name}"
    assert rows["mirrorflow.delivery"].count("`exactly-once`") == 2  # the default, and one of the choices
    assert "1 to 2,147,483,647" in rows["mirrorflow.unit.max.records"]
    assert "not 0" in rows["replication.factor"]
    for prefix in keys.WORKER_PREFIXES:
        assert f"`{prefix}`" in page


def test_a_changed_key_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = keys.CONNECTOR_KEYS["mirrorflow.delivery"]
    monkeypatch.setitem(keys.CONNECTOR_KEYS, spec.name, type(spec)(**{**spec.__dict__, "doc": "changed"}))
    problem = reference.stale()
    assert problem is not None
    assert "docs/configuration/reference.md is out of date" in problem
    assert "python -m mirrorflow_dev.docs.reference" in problem


def _site_copy(tmp_path: Path) -> Path:
    """The site's sources (mkdocs.yml, docs/, the hooks) in ``tmp_path``, as the build sees them."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    (root / "dev" / "mirrorflow_dev" / "docs").mkdir(parents=True)
    shutil.copy(
        REPO / "dev" / "mirrorflow_dev" / "docs" / "mkdocs_hooks.py",
        root / "dev" / "mirrorflow_dev" / "docs" / "mkdocs_hooks.py",
    )
    return root


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(root / "site")],
        cwd=root,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    root = _site_copy(tmp_path)
    done = _build(root)
    assert done.returncode == 0, done.stderr
    built = (root / "site" / "configuration" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "mirrorflow.unit.max.records" in built


def test_the_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    root = _site_copy(tmp_path)
    with (root / "docs" / "index.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the missing page](no-such-page.md).\n")
    done = _build(root)
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr


def test_the_strict_build_fails_on_a_page_left_out_of_the_navigation(tmp_path: Path) -> None:
    root = _site_copy(tmp_path)
    (root / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    done = _build(root)
    assert done.returncode != 0
    assert "orphan.md" in done.stderr


def test_the_strict_build_fails_on_a_stale_reference(tmp_path: Path) -> None:
    root = _site_copy(tmp_path)
    page = root / "docs" / "configuration" / "reference.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| `mirrorflow.delivery` |", "| `delivery` |"))
    done = _build(root)
    assert done.returncode != 0
    assert "docs/configuration/reference.md is out of date" in done.stderr
