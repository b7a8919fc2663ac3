"""The environment every mirrorflow Airflow process runs with: the demo's server and the tests' ``dag.test()``.

Why one function: Airflow reads its settings from ``AIRFLOW__SECTION__KEY`` variables, and the demo
server, its task processes (which start ``spark-submit``) and pytest must agree on all of them: this
checkout's dags/ (the provider comes installed), a loopback-only API, log servers on free ports (their defaults,
0.0.0.0:8793/8794, would clash between a demo and a test run), a stable JWT secret, a known admin
login, and the venv first on PATH so that ``airflow`` and ``spark-submit`` are this project's.

Secrets (the JWT secret, the admin password, the demo's PostgreSQL password) are generated once, stored
with mode 0600, and never printed; the returned mapping redacts them in its ``repr``, including the password
inside the database URL.

The metadata database: SQLite under the Airflow home unless a URL is given.  Tests use that throwaway
SQLite database (``dag.test()``, a reset per session); the demo passes its PostgreSQL server's URL and runs
the LocalExecutor on it, because SQLite's single writer lock made UI clicks fail with HTTP 500 while tasks ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from mirrorflow.redact import REDACTED, redact_mapping
from mirrorflow.replication.spark_env import spark_environment
from mirrorflow_dev import CHECKOUT
from mirrorflow_dev.devcluster import free_port

__all__ = [
    "ADMIN_USER",
    "API_HOST",
    "DAGBAG_IMPORT_TIMEOUT",
    "DAG_FILE_PROCESSOR_TIMEOUT",
    "AirflowEnvironment",
    "admin_login",
    "airflow_environment",
    "jwt_secret",
    "passwords_file",
    "read_private",
    "redact_url",
    "write_private_once",
]

API_HOST = "127.0.0.1"
ADMIN_USER = "admin"

#: Spark connection used by the mirror DAGs' SparkSubmitOperator: local mode, driver in the task process.
SPARK_CONNECTION = json.dumps({"conn_type": "spark", "host": "local[*]", "extra": {"deploy-mode": "client"}})

#: Seconds between looks for new DAG files, and between re-parses of one file (a new config shows quickly).
DAG_REFRESH_SECONDS = 10
DAG_REPARSE_SECONDS = 15

#: Seconds one DAG file may take to import before Airflow gives up on it (Airflow's default: 30).  Under load
#: on a 2-core machine the DAG files once took 20-44 s and live DAGs were deactivated with "DagBag import
#: timeout"; parsing is meant to take well under a second, and this is the ceiling for a starved machine.
DAGBAG_IMPORT_TIMEOUT = 120
#: Seconds the DAG processor gives the process parsing one file (Airflow's default: 50).  Longer than the
#: import timeout, so that a slow file fails with the import timeout's message (file and seconds) instead of
#: the parsing process being killed without one.
DAG_FILE_PROCESSOR_TIMEOUT = DAGBAG_IMPORT_TIMEOUT + 30

#: The executor on a real database: tasks run as local processes, several at once.
DATABASE_EXECUTOR = "LocalExecutor"

_JWT_SECRET_FILE = "jwt_secret"
_PASSWORDS_FILE = "passwords.json"
_JWT_SECRET_BYTES = 64


#: ``scheme://user:PASSWORD@``: the password part of a URL.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:)[^@/\s]+@")


def redact_url(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` URL in it replaced."""
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}@", text)


class AirflowEnvironment(dict[str, str]):
    """A process environment whose ``repr`` hides secrets (the JWT secret, passwords, tokens, URL passwords)."""

    def __repr__(self) -> str:
        safe = {k: redact_url(v) if isinstance(v, str) else v for k, v in redact_mapping(self).items()}
        return f"{type(self).__name__}({safe!r})"

    __str__ = __repr__


# --------------------------------------------------------------------------
# Secrets stored under the Airflow home
# --------------------------------------------------------------------------


def write_private_once(path: Path, make: Callable[[], str]) -> None:
    """Create ``path`` (mode 0600) with ``make()`` unless it exists; atomic, so concurrent callers agree."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(make())
    try:
        os.link(tmp, path)  # fails if another process created it first: theirs wins
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def read_private(path: Path) -> str:
    """The text of a secret file, made private (0600) again if someone widened its mode."""
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    return path.read_text()


def jwt_secret(home: Path) -> str:
    """The JWT secret of this Airflow home: 64 random bytes as hex, generated once."""
    path = Path(home) / _JWT_SECRET_FILE
    write_private_once(path, lambda: secrets.token_hex(_JWT_SECRET_BYTES) + "\n")
    return read_private(path).strip()


def passwords_file(home: Path) -> Path:
    """The simple auth manager's passwords file (JSON ``{"admin": "..."}``), created with a random password."""
    path = Path(home) / _PASSWORDS_FILE
    write_private_once(path, lambda: json.dumps({ADMIN_USER: secrets.token_urlsafe(12)}) + "\n")
    return path


def admin_login(home: Path) -> tuple[str, str]:
    """``(user, password)`` of the Airflow admin of this home (the demo prints it; nothing else should)."""
    path = passwords_file(home)
    passwords = json.loads(read_private(path) or "{}")
    if ADMIN_USER not in passwords:
        raise ValueError(f"{path} has no password for user '{ADMIN_USER}'; delete the file to get a new one")
    return ADMIN_USER, str(passwords[ADMIN_USER])


# --------------------------------------------------------------------------
# The environment
# --------------------------------------------------------------------------


def _log_server_ports(api_port: int) -> tuple[int, int]:
    """Two distinct free ports, different from the API port, for the worker and triggerer log servers."""
    ports: list[int] = []
    while len(ports) < 2:
        port = free_port(API_HOST)
        if port != api_port and port not in ports:
            ports.append(port)
    return ports[0], ports[1]


def _airflow_settings(home: Path, api_port: int) -> dict[str, str]:
    base_url = f"http://{API_HOST}:{api_port}"
    worker_logs, trigger_logs = _log_server_ports(api_port)
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(CHECKOUT / "dags"),
        # The Replication page comes with the installed provider (no plugins folder); the connection form's Test
        # button is off in Airflow unless enabled.
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__API__HOST": API_HOST,
        "AIRFLOW__API__PORT": str(api_port),
        # Without a base URL, task processes look for the execution API on localhost:8080.
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret(home),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(home)),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker_logs),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_logs),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": str(DAG_REFRESH_SECONDS),
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(DAG_REPARSE_SECONDS),
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": str(DAGBAG_IMPORT_TIMEOUT),
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(DAG_FILE_PROCESSOR_TIMEOUT),
    }


def _database_settings(home: Path, database_url: str | None) -> dict[str, str]:
    """PostgreSQL (or any URL given) with the LocalExecutor; else SQLite in ``home``, named explicitly so that an
    ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` inherited from the caller's shell never points a test at a real
    database."""
    if database_url:
        return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url, "AIRFLOW__CORE__EXECUTOR": DATABASE_EXECUTOR}
    return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}


def spark_connect_connection(url: str) -> str:
    """The ``spark_default`` connection (JSON) naming the Spark Connect server at ``sc://HOST:PORT``."""
    host, _, port = url.removeprefix("sc://").rstrip("/").rpartition(":")
    return json.dumps({"conn_type": "spark_connect", "host": f"sc://{host}", "port": int(port)})


def _runtime_settings(config_path: Path, env: Mapping[str, str], spark_url: str | None) -> dict[str, str]:
    return {
        "MIRRORFLOW_CONFIG": str(Path(config_path).absolute()),
        "AIRFLOW_CONN_SPARK_DEFAULT": spark_connect_connection(spark_url) if spark_url else SPARK_CONNECTION,
        **spark_environment(env, keep_choices=False),
    }


def airflow_environment(
    home: Path,
    *,
    api_port: int,
    config_path: Path,
    base: Mapping[str, str] | None = None,
    spark_url: str | None = None,
    database_url: str | None = None,
) -> dict[str, str]:
    """A full environment (a copy of ``base``, default ``os.environ``) for Airflow processes of ``home``.

    Creates ``home``, its JWT secret and its passwords file if they do not exist yet.  The metadata
    database is ``database_url`` (the demo's PostgreSQL, with the LocalExecutor), else SQLite under ``home``.
    The log-server ports are free ports chosen now, so call this shortly before starting the processes.
    ``spark_url``: the Spark Connect server the replicate tasks use (the demo's); without it, ``spark_default``
    is spark-submit in local mode.
    """
    home = Path(home).absolute()
    home.mkdir(parents=True, exist_ok=True)
    env = AirflowEnvironment(os.environ if base is None else base)
    env.update(_airflow_settings(home, api_port))
    env.update(_database_settings(home, database_url))
    env.update(_runtime_settings(config_path, env, spark_url))
    return env
