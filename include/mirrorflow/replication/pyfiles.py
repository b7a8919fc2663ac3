"""The ``mirrorflow`` package as one zip, shipped with every Spark job so that workers need not have it.

Why: a Spark cluster's executors run on machines with their own Python (chosen with ``PYSPARK_PYTHON`` /
``spark.pyspark.python``) that has confluent-kafka but not this repository.  The copy code they run (and the
pickled work units they unpickle) lives in ``mirrorflow``, so the package travels with the job: spark-submit's
``--py-files`` and Spark Connect's ``addArtifacts(..., pyfile=True)`` put the zip on the executors' ``sys.path``.

The zip is built from the package this process imports (the checkout's ``include/mirrorflow`` for an editable
install, site-packages otherwise): the ``.py`` files only, at fixed timestamps, so the same sources give the
same bytes.  It is named after a hash of those sources and kept, so a scheduled run reuses it: a run pays a
hash of the sources (about 1 MB, a few milliseconds), and the build (tens of milliseconds) only when the code
changed.  The name changing with the code is also what lets a long-lived Spark Connect session know whether
it already has this version (``connect.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import zipfile
from pathlib import Path

from ..config.location import state_dir

#: Fixed timestamp of every entry (the zip format's earliest): identical sources, identical bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)

#: Zips of other versions older than this are removed when a new version is built (a run that started with one
#: has long uploaded it by then).
KEEP_OLD_S = 24 * 3600


def package_dir() -> Path:
    """The directory of the ``mirrorflow`` package this process imports."""
    import mirrorflow

    return Path(mirrorflow.__file__).resolve().parent


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def source_hash(root: Path | None = None) -> str:
    """SHA-256 (16 hex digits) over the package's ``.py`` files, their paths and bytes."""
    root = root or package_dir()
    digest = hashlib.sha256()
    for path in _sources(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """Where the zips are kept: ``$MIRRORFLOW_HOME/pyfiles`` (``config.location``); ``StateDirError`` naming the
    folder when it cannot be written."""
    return state_dir("pyfiles")


def build_zip(target: Path, root: Path | None = None) -> Path:
    """Write the package's ``.py`` files as ``mirrorflow/...`` entries to ``target`` (atomically)."""
    root = root or package_dir()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in _sources(root):
            info = zipfile.ZipInfo(f"mirrorflow/{path.relative_to(root).as_posix()}", _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    tmp.replace(target)  # a concurrent run either sees the whole zip or builds its own identical one
    return target


def package_zip(directory: Path | None = None) -> Path:
    """``mirrorflow-<hash>.zip`` of the current sources in ``directory`` (default :func:`cache_dir`), built now
    only if that version is not there yet."""
    root = package_dir()
    directory = directory or cache_dir()
    target = directory / f"mirrorflow-{source_hash(root)}.zip"
    if not target.exists():
        build_zip(target, root)
        _prune(directory, keep=target)
    return target


def _prune(directory: Path, keep: Path) -> None:
    """Remove other versions' zips not used for :data:`KEEP_OLD_S` (a code change each time would pile them up)."""
    cutoff = time.time() - KEEP_OLD_S
    for old in directory.glob("mirrorflow-*.zip"):
        with contextlib.suppress(OSError):
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()


__all__ = ["build_zip", "cache_dir", "package_dir", "package_zip", "source_hash"]
