"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file).

A build fails when the generated configuration reference no longer matches ``config/keys.py``, so a key added
without rewriting the page cannot reach the site.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from mirrorflow_dev.docs.reference import stale


def on_pre_build(config: Any) -> None:
    problem = stale(Path(config["docs_dir"]))
    if problem:
        raise PluginError(problem)
