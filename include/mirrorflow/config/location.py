"""Which configuration file the DAGs, the demo and the Spark app use.

One environment variable, ``MIRRORFLOW_CONFIG``, names it for every process (the Airflow DAG
processor, workers, the demo); a relative path is taken from the repository root, because Airflow's
processes do not share a working directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "MIRRORFLOW_CONFIG"

#: The repository root (include/mirrorflow/config/location.py is three levels below it).
REPO_ROOT = Path(__file__).resolve().parents[3]

DEFAULT_CONFIG = REPO_ROOT / "include" / "config" / "mm2.properties"


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$MIRRORFLOW_CONFIG`` (relative to the repository root) or the example configuration."""
    value = (environ if environ is not None else os.environ).get(ENV_VAR, "").strip()
    if not value:
        return DEFAULT_CONFIG
    path = Path(value).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path


__all__ = ["DEFAULT_CONFIG", "ENV_VAR", "REPO_ROOT", "config_path"]
