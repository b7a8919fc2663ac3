"""Make configuration errors visible in Airflow: as an import error naming file, line and key.

Airflow shows an exception raised while a DAG file is parsed as an *import error* on its DAG list page.
``dags/mirrorflow_config.py`` calls :func:`raise_config_errors`, and does nothing else, so a broken
``mm2.properties`` is reported there, once, while ``dags/mirror.py`` still loads the DAGs of the flows
that are fine.
"""

from __future__ import annotations

from pathlib import Path

from mirrorflow.config import load_config
from mirrorflow.config.location import config_path


def raise_config_errors(config_file: str | Path | None = None) -> None:
    """Raise ``ConfigError`` (every problem with file:line) if the configuration has any error."""
    load_config(Path(config_file) if config_file else config_path())
