"""A local PostgreSQL server for the demo's Airflow metadata database, started and stopped by the demo itself.

Why this exists: on SQLite, Airflow serialises every write behind one file lock, so a UI click (trigger,
unpause) that arrives while the scheduler and a running task write gets ``database is locked`` and an
HTTP 500.  Airflow recommends PostgreSQL; the compose topology already uses it, and the demo now does too.

Where the binaries come from: the PyPI wheel ``pgserver`` ships PostgreSQL 16's server binaries
(``pgserver/pginstall/bin``: initdb, postgres, pg_ctl) inside the wheel, so ``make install`` brings them
with no system package, no Docker and no download at run time.  Only the binaries are used, not
pgserver's Python API: that API daemonises the server with pg_ctl (outside our recorded session), listens
on a Unix socket only and stops the server when the Python process that asked for it exits, whereas the
demo's server must outlive ``make demo`` and be stopped by ``make demo-stop`` through a recorded PID, like
every other demo process (:class:`~mirrorflow.processes.SessionProcess`).

Files under ``root`` (the demo uses ``.mirrorflow/demo/postgres``): ``data/`` (the cluster, made once by
initdb), ``postgres.log`` (the server's output, appended per start), ``pid`` (the record of the running
server, with its port), ``port`` (the last port used, tried first next time so that a running Airflow finds
its database again), ``password`` (generated once, mode 0600, never printed) and ``run/`` (the Unix socket).

PostgreSQL refuses to run as root.  When the demo runs as root (containers, CI), initdb and the server run
as the unprivileged user ``nobody``, which then owns ``data/`` and ``run/``; the directories above
``root`` must be traversable by it (the error says which one is not).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import signal
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from mirrorflow.processes import SessionProcess, port_is_free, reap, wait_group_vanished
from mirrorflow_dev.demo.airflow_env import read_private, write_private_once
from mirrorflow_dev.devcluster import free_port

__all__ = [
    "DB_NAME",
    "DB_USER",
    "PostgresError",
    "PostgresServer",
    "PostgresStart",
    "RunAs",
    "initdb_command",
    "postgres_bin_dir",
    "run_as",
    "server_command",
]

HOST = "127.0.0.1"
#: The PostgreSQL role (a superuser made by initdb) and the database Airflow uses.
DB_USER = "mirrorflow"
DB_NAME = "airflow"
#: The unprivileged user the server runs as when we are root.
ROOT_FALLBACK_USER = "nobody"

#: Server settings for a small local metadata database.  Airflow's scheduler, DAG processor, triggerer,
#: API server and task processes each keep a connection pool; 200 leaves room under load.
#: ``synchronous_commit=off`` keeps commits from waiting for the disk on a busy laptop: a crash of the
#: machine may lose the last fraction of a second of commits, never corrupt the database.
SERVER_SETTINGS = {"max_connections": "200", "shared_buffers": "64MB", "synchronous_commit": "off"}

_START_MARKER = "=== mirrorflow: starting postgres"
_INITDB_MARKER = "=== mirrorflow: initdb"
_LOG_TAIL_LINES = 20
_POLL_SECONDS = 0.5
#: The longest Unix socket path Linux accepts (sun_path is 108 bytes with the terminating NUL).
_MAX_SOCKET_PATH = 107
#: Runs a command as another user: drop groups, gid, uid, then exec (so the PID stays the recorded one).
_EXEC_AS = (
    "import os, sys; os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[1])); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)


class PostgresError(RuntimeError):
    """The PostgreSQL server could not be set up, started or reached; the message names its log."""


@dataclass(frozen=True)
class RunAs:
    """The system user the server runs as when we are root (PostgreSQL refuses root)."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class PostgresStart:
    """What :meth:`PostgresServer.start` did: the port, whether this call started the server, seconds taken."""

    port: int
    started: bool
    seconds: float


# --------------------------------------------------------------------------
# Commands (pure: unit-tested without a server)
# --------------------------------------------------------------------------


def postgres_bin_dir() -> Path:
    """``pgserver/pginstall/bin`` of the installed ``pgserver`` wheel, found without importing it.

    Importing pgserver would create its runtime directories and lock files; only its binaries are needed.
    """
    spec = importlib.util.find_spec("pgserver")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / "pginstall" / "bin"
        if (candidate / "postgres").is_file():
            return candidate
    raise PostgresError(
        "PostgreSQL's binaries were not found: the 'pgserver' package (which ships them) is not installed in "
        f"{sys.prefix}. Run `make install`."
    )


def run_as() -> RunAs | None:
    """None normally; ``nobody`` when this process is root (PostgreSQL's server and initdb refuse root)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(ROOT_FALLBACK_USER)
    except KeyError:
        raise PostgresError(
            f"running as root, and PostgreSQL refuses root: it would run as '{ROOT_FALLBACK_USER}', "
            "but this system has no such user. Run the demo as an ordinary user."
        ) from None
    return RunAs(ROOT_FALLBACK_USER, entry.pw_uid, entry.pw_gid)


def as_user(user: RunAs | None, cmd: list[str]) -> list[str]:
    """``cmd``, run as ``user`` when given (through this Python, which execs it: the PID stays the same)."""
    if user is None:
        return cmd
    return [sys.executable, "-c", _EXEC_AS, str(user.uid), str(user.gid), *cmd]


def initdb_command(bin_dir: Path, data_dir: Path, password_file: Path) -> list[str]:
    """initdb for a new cluster: superuser ``DB_USER`` with the password in ``password_file``, password
    authentication (scram-sha-256) for every connection, UTF-8, the C locale (exists everywhere)."""
    return [
        str(bin_dir / "initdb"),
        "-D",
        str(data_dir),
        "-U",
        DB_USER,
        f"--pwfile={password_file}",
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
        "--no-instructions",
    ]


def socket_dir_option(socket_dir: Path, port: int) -> str:
    """``socket_dir`` for ``-k``, or "" (no Unix socket: TCP only) when the socket path would be too long."""
    return str(socket_dir) if len(str(socket_dir / f".s.PGSQL.{port}")) <= _MAX_SOCKET_PATH else ""


def server_command(bin_dir: Path, data_dir: Path, port: int, socket_dir: Path) -> list[str]:
    """The server in the foreground (so that our recorded PID is the postmaster), on 127.0.0.1:``port`` only."""
    cmd = [
        str(bin_dir / "postgres"),
        "-D",
        str(data_dir),
        "-h",
        HOST,
        "-p",
        str(port),
        "-k",
        socket_dir_option(socket_dir, port),
    ]
    for key, value in SERVER_SETTINGS.items():
        cmd += ["-c", f"{key}={value}"]
    return cmd


def database_url(port: int, password: str, database: str = DB_NAME) -> str:
    """The SQLAlchemy URL Airflow uses (psycopg2 driver). It contains the password: never print it."""
    quoted = urllib.parse.quote(password, safe="")
    return f"postgresql+psycopg2://{DB_USER}:{quoted}@{HOST}:{port}/{database}"


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class PostgresServer:
    """One local PostgreSQL cluster under ``root``, run in its own recorded session."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self._process = SessionProcess(
            self.root / "pid", self.root / "postgres.log", owner_env=("MIRRORFLOW_POSTGRES", str(self.root))
        )

    # -- where things are --------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self._process.log_file

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def password_file(self) -> Path:
        return self.root / "password"

    @property
    def _port_file(self) -> Path:
        return self.root / "port"

    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    # -- state -------------------------------------------------------------------

    def running(self) -> bool:
        return self._process.running()

    @property
    def pid(self) -> int | None:
        record = self._process.record()
        return record.pid if record is not None else None

    @property
    def port(self) -> int | None:
        """The port of the running server, else None."""
        record = self._process.record()
        return record.port if record is not None else None

    def password(self) -> str:
        """The superuser's password: generated once (0600), before initdb uses it."""
        if self.initialized() and not self.password_file.exists():
            raise PostgresError(
                f"{self.password_file} is missing, so the database in {self.data_dir} cannot be logged in to. "
                f"Delete {self.data_dir} to start over with an empty database."
            )
        write_private_once(self.password_file, lambda: secrets.token_urlsafe(24) + "\n")
        return read_private(self.password_file).strip()

    def database_url(self) -> str:
        """Airflow's SQLAlchemy URL of the running server (contains the password: never print it)."""
        port = self.port
        if port is None:
            raise PostgresError(f"PostgreSQL of {self.root} is not running")
        return database_url(port, self.password())

    # -- lifecycle ---------------------------------------------------------------

    def start(self, timeout: float = 120) -> PostgresStart:
        """Start the server unless it runs (initdb first if needed), wait until the database ``airflow`` answers.

        A server this call started and that does not become ready is stopped again; the error says so
        and names the log.
        """
        t0 = time.monotonic()
        deadline = t0 + timeout
        record = self._process.record()
        if record is not None and record.port is not None:
            self._wait_ready(record.port, deadline)
            return PostgresStart(record.port, False, time.monotonic() - t0)
        port = self._launch(deadline)
        try:
            self._wait_ready(port, deadline)
        except BaseException as exc:
            detail = self.stop(timeout=30)
            if isinstance(exc, PostgresError):
                raise PostgresError(f"{exc}\nStopped the PostgreSQL server this start began ({detail}).") from None
            raise
        return PostgresStart(port, True, time.monotonic() - t0)

    def _launch(self, deadline: float) -> int:
        bin_dir = postgres_bin_dir()
        user = run_as()
        self._prepare_directories(user)
        password = self.password()
        if not self.initialized():
            self._initdb(bin_dir, user, password, deadline)
        port = self._choose_port()
        self._process.start(
            as_user(user, server_command(bin_dir, self.data_dir, port, self.socket_dir)),
            env=_server_environment(),
            cwd=self.root,
            port=port,
            banner=f"{_START_MARKER} on {HOST}:{port} at {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
        )
        self._port_file.write_text(f"{port}\n")
        return port

    def _choose_port(self) -> int:
        """The last port used if it is free (a running Airflow keeps its URL), else a free one."""
        try:
            last = int(self._port_file.read_text().strip())
        except (OSError, ValueError):
            last = 0
        if 0 < last < 65536 and port_is_free(HOST, last):
            return last
        return free_port(HOST)

    def _prepare_directories(self, user: RunAs | None) -> None:
        """``root``, ``data/`` and ``run/``; as root, owned by the server's user and reachable by it."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.data_dir.exists() and not self.initialized() and any(self.data_dir.iterdir()):
            raise PostgresError(
                f"{self.data_dir} is neither empty nor a PostgreSQL data directory (an interrupted initdb?). "
                "Delete it and start again."
            )
        for directory in (self.data_dir, self.socket_dir):
            directory.mkdir(mode=0o700, exist_ok=True)
        if user is None:
            return
        self.root.chmod(self.root.stat().st_mode | 0o011)  # traversable, not listable: the password stays private
        for directory in (self.data_dir, self.socket_dir):
            if directory.stat().st_uid != user.uid:
                os.chown(directory, user.uid, user.gid)
        _check_reachable(self.root, user)

    def _initdb(self, bin_dir: Path, user: RunAs | None, password: str, deadline: float) -> None:
        """Create the cluster; the password reaches initdb through a private file its user can read."""
        pwfile = self.root / ".initdb-password"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(password + "\n")
        try:
            if user is not None:
                os.chown(pwfile, user.uid, user.gid)
            cmd = as_user(user, initdb_command(bin_dir, self.data_dir, pwfile))
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_file, "ab") as log:
                log.write(f"\n{_INITDB_MARKER} {self.data_dir}\n".encode())
                log.flush()
                result = subprocess.run(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_server_environment(),
                    timeout=max(10.0, deadline - time.monotonic()),
                    check=False,
                )
        except subprocess.TimeoutExpired:
            raise PostgresError(f"initdb did not finish in time.\n{self._log_hint(_INITDB_MARKER)}") from None
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise PostgresError(f"initdb failed (exit {result.returncode}).\n{self._log_hint(_INITDB_MARKER)}")

    def _wait_ready(self, port: int, deadline: float) -> None:
        """Until a login works; then make sure the database ``airflow`` exists."""
        while True:
            if not self._process.leader_alive():
                raise PostgresError(f"the PostgreSQL server exited during startup.\n{self._log_hint()}")
            problem = self._try_login(port)
            if problem is None:
                return
            if time.monotonic() >= deadline:
                raise PostgresError(
                    f"PostgreSQL on {HOST}:{port} did not accept a login in time ({problem}).\n{self._log_hint()}"
                )
            time.sleep(_POLL_SECONDS)

    def _try_login(self, port: int) -> str | None:
        """None once the database ``airflow`` exists and answers (created on first start), else why not."""
        import psycopg2
        from psycopg2 import sql

        try:
            conn = psycopg2.connect(
                host=HOST, port=port, user=DB_USER, password=self.password(), dbname="postgres", connect_timeout=3
            )
            try:
                conn.autocommit = True  # CREATE DATABASE refuses to run inside a transaction
                with conn.cursor() as cur:
                    cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
                    if cur.fetchone() is None:
                        cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
            finally:
                conn.close()
        except psycopg2.Error as exc:
            text = str(exc).strip()
            return text.splitlines()[0] if text else type(exc).__name__
        return None

    def stop(self, timeout: float = 60) -> str:
        """Fast shutdown (SIGINT to the recorded postmaster: clients are disconnected, data is written);
        whatever is left after ``timeout`` gets SIGTERM, then SIGKILL, by session.  A detail line."""
        record = self._process.record()
        if record is None:
            self._process.clear()
            return "not running"
        t0 = time.monotonic()
        if self._process.leader_alive():
            try:
                os.kill(record.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            reap(record.pid)
            if wait_group_vanished(record.pgid, timeout, leader=record.pid):
                self._process.clear()
                return f"stopped in {time.monotonic() - t0:.1f} s"
        return self._process.stop(timeout=10)

    def _log_hint(self, marker: str = _START_MARKER) -> str:
        return f"Read {self.log_file}; its last lines:\n{self._process.tail(_LOG_TAIL_LINES, marker=marker)}"


def _server_environment() -> dict[str, str]:
    """The server's environment: the C locale (the one initdb was told), nothing of the caller's PG* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update({"LC_ALL": "C", "LANG": "C"})
    return env


def _check_reachable(root: Path, user: RunAs) -> None:
    """Every directory above ``root`` must let ``user`` through (x for others), or the server cannot start."""
    for directory in root.parents:
        mode = directory.stat()
        reachable = (
            mode.st_mode & 0o001
            or (mode.st_uid == user.uid and mode.st_mode & 0o100)
            or (mode.st_gid == user.gid and mode.st_mode & 0o010)
        )
        if not reachable:
            raise PostgresError(
                f"PostgreSQL runs as '{user.name}' here (it refuses to run as root) and cannot reach {root}: "
                f"{directory} is not traversable by other users. `chmod o+x {directory}`, or set MIRRORFLOW_HOME "
                "to a directory below a traversable path."
            )
