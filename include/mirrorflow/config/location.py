"""Where mirrorflow finds its configuration and keeps its state: one environment variable each.

``MIRRORFLOW_CONFIG`` names the ``mm2.properties`` of every Airflow process (the DAG processor, workers, the
triggerer, the API server's Replication page): an absolute path, or one relative to ``AIRFLOW_HOME`` (Airflow's
own home, ``~/airflow`` when unset), because Airflow's processes share that and not a working directory. Unset,
it is ``$AIRFLOW_HOME/mm2.properties``. The CLI takes ``--config`` instead.

``MIRRORFLOW_HOME`` is the state folder: the package zips shipped to Spark and the local Spark Connect server's
record and log. Unset, it is ``$XDG_STATE_HOME/mirrorflow`` (``~/.local/state/mirrorflow``), outside any source
tree. It must be writable by the processes that run replication.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .problems import ConfigError, Problem

ENV_VAR = "MIRRORFLOW_CONFIG"
HOME_ENV_VAR = "MIRRORFLOW_HOME"
CONFIG_FILE_NAME = "mm2.properties"


class StateDirError(OSError):
    """The state folder cannot be created or written; the message names the variable and the path."""


def airflow_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$AIRFLOW_HOME``, else Airflow's own default ``~/airflow``."""
    value = (environ if environ is not None else os.environ).get("AIRFLOW_HOME", "").strip()
    return Path(value or "~/airflow").expanduser()


def config_path(environ: Mapping[str, str] | None = None, *, must_exist: bool = True) -> Path:
    """The configuration file ``MIRRORFLOW_CONFIG`` names (see the module docstring).

    ``must_exist``: a missing file raises ``ConfigError`` with one line naming the variable and the path tried.
    """
    env = environ if environ is not None else os.environ
    value = env.get(ENV_VAR, "").strip()
    given = Path(value).expanduser() if value else Path(CONFIG_FILE_NAME)
    path = given if given.is_absolute() else airflow_home(env) / given
    if must_exist and not path.is_file():
        how = f"{ENV_VAR}={value}" if value else f"{ENV_VAR} is not set, so the default"
        relative = "" if given.is_absolute() else " (relative to AIRFLOW_HOME)"
        raise ConfigError([Problem("error", f"{how}{relative}: no configuration file at {path}")])
    return path


def state_root(environ: Mapping[str, str] | None = None) -> Path:
    """The state folder (``MIRRORFLOW_HOME``); not created here (see :func:`state_dir`)."""
    env = environ if environ is not None else os.environ
    value = env.get(HOME_ENV_VAR, "").strip()
    if value:
        return Path(value).expanduser()
    xdg = env.get("XDG_STATE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path("~/.local/state").expanduser()) / "mirrorflow"


def state_dir(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """``<state folder>/<name>``, created if missing; ``StateDirError`` (one line) when it cannot be written."""
    path = state_root(environ) / name
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateDirError(f"{HOME_ENV_VAR}: cannot create {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise StateDirError(f"{HOME_ENV_VAR}: {path} is not writable by this user (uid {os.getuid()})")
    return path


__all__ = [
    "CONFIG_FILE_NAME",
    "ENV_VAR",
    "HOME_ENV_VAR",
    "StateDirError",
    "airflow_home",
    "config_path",
    "state_dir",
    "state_root",
]
