"""Local Kafka clusters for development and tests, backed by ``noida-db``.

Why this exists: replication needs *two* independent clusters (a source and a
target), and this project's machines have neither Docker nor an Apache Kafka
distribution.  The PyPI package ``noida-db`` ships a single Kafka-compatible
broker binary; each instance with its own data dir and port is one independent
cluster.  This module starts, stops and inspects such instances so that the CLI
(``mirrorflow dev up|down|status``) and the test suite share one careful
implementation.

Process handling rules, and why:

* ``noida-db`` (the console script) runs the real broker binary as a *child*
  process.  Signalling only the script orphans the broker, so every instance is
  started in its own session/process group and stopped by signalling the group.
* Processes are only ever stopped through the PID/PGID recorded in our own PID
  file, never by name: other engineers, demos and test sessions may run their
  own brokers on the same machine.
* The PID file also records each process' kernel start time, so that a PID
  recycled by the kernel after a reboot or a crash is never mistaken for ours.

Caveat: ``noida-db`` is a development stand-in.  Code under test must rely only
on what the Kafka protocol promises (see docs on its quirks), not on what this
broker happens to do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mirrorflow.config.location import state_root
from mirrorflow.processes import (
    PidRecord,
    children,
    cmdline,
    file_lock,
    group_members,
    log_tail,
    port_is_free,
    port_owner,
    proc_stat,
    reap,
    signal_group,
    spawn_session,
    wait_group_vanished,
)
from mirrorflow.processes import (
    free_port as _free_port,
)

__all__ = [
    "DEFAULT_CLUSTERS",
    "ClusterSpec",
    "ClusterStatus",
    "DevClusterError",
    "DevClusters",
    "default_state_dir",
    "find_noida_binary",
    "free_port",
    "state_root",
    "wait_for_kafka",
]


#: Lines of the broker log shown in error messages.
_LOG_TAIL_LINES = 20

#: A harmless loader warning the noida-db binary prints on every start; hidden
#: from error messages so that it does not send people on a wrong track.
_NOISE_MARKERS = ("weak version `GLIBC_",)

#: Marker written to the broker log before each start, so that the tail shown
#: on failure belongs to the latest attempt only.
_START_MARKER = "=== mirrorflow devcluster: starting"


class DevClusterError(RuntimeError):
    """A local development cluster could not be started, stopped or inspected.

    The message is meant to be shown to a person as is (CLI and test output),
    so it names the cluster alias, the port and what to do next.
    """


@dataclass(frozen=True)
class ClusterSpec:
    """Where one local cluster listens; ``alias`` names it in paths and messages."""

    alias: str
    port: int
    host: str = "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` string for Kafka clients."""
        return f"{self.host}:{self.port}"


#: The clusters ``mirrorflow dev up`` starts; fixed ports so that a demo's
#: configuration can name them.  Tests use free ports instead.
DEFAULT_CLUSTERS: tuple[ClusterSpec, ...] = (
    ClusterSpec("primary", 19092),
    ClusterSpec("backup", 29092),
)


@dataclass(frozen=True)
class ClusterStatus:
    """What is known about one local cluster after ``up``, ``down`` or ``status``.

    ``running`` means our recorded process group is alive; ``answers`` means the
    broker replied to a Kafka metadata request.  ``detail`` is a one-line,
    human-readable summary ("started in 0.3 s", "already running", ...).
    """

    alias: str
    bootstrap: str
    running: bool
    pid: int | None
    answers: bool
    data_dir: Path
    pgid: int | None = None
    log_file: Path | None = None
    detail: str = ""


# --------------------------------------------------------------------------
# Locating things
# --------------------------------------------------------------------------


def default_state_dir() -> Path:
    """``$MIRRORFLOW_HOME/dev`` if set, else ``<repo>/.mirrorflow/dev``.

    Kept inside the repository by default so that a developer's clusters are
    easy to find and to wipe, and never shared between two checkouts.
    """
    return state_root() / "dev"


def find_noida_binary() -> Path:
    """The ``noida-db`` executable: next to the running interpreter, else on PATH.

    The interpreter's own directory comes first so that the venv's copy wins
    over anything else installed on the machine.
    """
    beside = Path(sys.executable).parent / "noida-db"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("noida-db")
    if found:
        return Path(found)
    raise DevClusterError(
        "the 'noida-db' executable was not found (looked next to "
        f"{sys.executable} and on PATH). It provides the local Kafka-compatible "
        "broker for development: run `make install`, or `pip install noida-db` "
        "in this project's virtualenv."
    )


# --------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free to listen on now, never one of the demo's fixed ports (so tests never collide with a demo);
    see :func:`mirrorflow.processes.free_port`."""
    return _free_port(host, avoid={spec.port for spec in DEFAULT_CLUSTERS})


# --------------------------------------------------------------------------
# Kafka readiness
# --------------------------------------------------------------------------


def _tcp_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _metadata_ok(bootstrap: str, timeout: float) -> bool:
    """True if the broker answers a Kafka metadata request within ``timeout``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    host, _, port = bootstrap.rpartition(":")
    # A TCP probe first: it is cheap, and librdkafka would otherwise log a
    # "connection refused" line for every attempt against a broker still starting.
    if not _tcp_answers(host or "127.0.0.1", int(port), timeout=min(timeout, 1.0)):
        return False
    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 2000, "allow.auto.create.topics": False}
    )
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def wait_for_kafka(bootstrap: str, timeout: float) -> None:
    """Block until a Kafka metadata request to ``bootstrap`` succeeds.

    Raises DevClusterError after ``timeout`` seconds.  Readiness is judged by a
    real metadata answer, not by an open port, because a broker may accept
    connections before it can serve requests.
    """
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if _metadata_ok(bootstrap, timeout=max(0.5, min(remaining, 5.0))):
            return
        if time.monotonic() >= deadline:
            raise DevClusterError(f"Kafka at {bootstrap} did not answer a metadata request within {timeout:.0f} s")
        time.sleep(0.1)


# --------------------------------------------------------------------------
# The manager
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _PidRecord(PidRecord):
    """A broker's PID file: the ``noida-db`` wrapper, plus the broker binary it spawned once known."""

    broker_pid: int | None = None
    broker_start_time: int | None = None


class DevClusters:
    """Start, stop and inspect independent local Kafka clusters (one noida-db each).

    Layout under ``state_dir``, per cluster alias::

        <alias>/data        the broker's data (kept across down/up)
        <alias>/broker.log  the broker's stdout and stderr, appended per start
        <alias>/pid         JSON: pid, pgid, port, started_at, start_time, ...

    ``up`` and ``down`` are idempotent and hold a file lock on the state dir, so
    two concurrent invocations (say, a CLI and a test) cannot race.
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        specs: Sequence[ClusterSpec] = DEFAULT_CLUSTERS,
        *,
        probe_timeout: float = 2.0,
    ) -> None:
        aliases = [spec.alias for spec in specs]
        if len(set(aliases)) != len(aliases):
            raise ValueError(f"cluster aliases must be unique: {aliases}")
        ports = [(spec.host, spec.port) for spec in specs]
        if len(set(ports)) != len(ports):
            raise ValueError(f"cluster ports must be unique: {[spec.bootstrap for spec in specs]}")
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.specs: tuple[ClusterSpec, ...] = tuple(specs)
        self.probe_timeout = probe_timeout

    # -- paths -------------------------------------------------------------

    def cluster_dir(self, spec: ClusterSpec) -> Path:
        return (self.state_dir / spec.alias).absolute()

    def data_dir(self, spec: ClusterSpec) -> Path:
        return self.cluster_dir(spec) / "data"

    def log_file(self, spec: ClusterSpec) -> Path:
        return self.cluster_dir(spec) / "broker.log"

    def pid_file(self, spec: ClusterSpec) -> Path:
        return self.cluster_dir(spec) / "pid"

    # -- public API ----------------------------------------------------------

    def up(self, timeout: float = 60) -> list[ClusterStatus]:
        """Start every cluster that is not already running; wait until all answer.

        All-or-nothing: ports are checked for every cluster before anything is
        started, and if one cluster fails to come up, the clusters this call
        started are stopped again before DevClusterError is raised.  Clusters
        that were already running are left alone.
        """
        deadline = time.monotonic() + timeout
        with self._locked():
            to_start: list[ClusterSpec] = []
            results: dict[str, ClusterStatus] = {}
            for spec in self.specs:
                record = self._owned_record(spec)
                if record is not None:
                    results[spec.alias] = self._await_existing(spec, record, deadline)
                    continue
                self._clear_stale(spec)
                if not port_is_free(spec.host, spec.port):
                    owner = port_owner(spec.port)
                    by = f" by {owner}" if owner else " by another process"
                    raise DevClusterError(
                        f"cannot start cluster '{spec.alias}': port {spec.port} on {spec.host} is already "
                        f"in use{by}. Stop that process, or give '{spec.alias}' another port."
                    )
                to_start.append(spec)
            binary = find_noida_binary() if to_start else Path()
            started: list[ClusterSpec] = []
            try:
                launched: list[tuple[ClusterSpec, float]] = []
                for spec in to_start:
                    launched.append((spec, self._launch(spec, binary)))
                    started.append(spec)
                for spec, t0 in launched:
                    results[spec.alias] = self._await_started(spec, t0, deadline)
            except BaseException:
                with contextlib.suppress(Exception):
                    self._stop(started, timeout=10)
                raise
            return [results[spec.alias] for spec in self.specs]

    def down(self, timeout: float = 60) -> list[ClusterStatus]:
        """Stop every cluster we started, through its recorded process group only.

        SIGTERM lets the broker save its data (seconds per GB); after
        ``timeout`` the group gets SIGKILL.  A cluster that is not running is
        not an error.
        """
        with self._locked():
            return self._stop(self.specs, timeout)

    def status(self) -> list[ClusterStatus]:
        """Report each cluster: running (our process group alive) and answering (metadata ok)."""
        out = []
        for spec in self.specs:
            record = self._owned_record(spec)
            if record is None:
                detail = "not running"
                if not port_is_free(spec.host, spec.port):
                    owner = port_owner(spec.port)
                    detail += f" (port {spec.port} is in use by {owner or 'another process'})"
                out.append(self._status(spec, None, answers=False, detail=detail))
                continue
            answers = _metadata_ok(spec.bootstrap, timeout=self.probe_timeout)
            detail = "running" if answers else "running but not answering Kafka requests"
            out.append(self._status(spec, record, answers=answers, detail=detail))
        return out

    # -- internals -------------------------------------------------------------

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return file_lock(self.state_dir)

    def _status(self, spec: ClusterSpec, record: _PidRecord | None, *, answers: bool, detail: str) -> ClusterStatus:
        return ClusterStatus(
            alias=spec.alias,
            bootstrap=spec.bootstrap,
            running=record is not None,
            pid=record.pid if record else None,
            answers=answers,
            data_dir=self.data_dir(spec),
            pgid=record.pgid if record else None,
            log_file=self.log_file(spec),
            detail=detail,
        )

    def _owned_record(self, spec: ClusterSpec) -> _PidRecord | None:
        """The PID record if its process group is still ours and alive, else None.

        Ours means: a live member of the recorded group is a process we
        started (same PID *and* same kernel start time), or runs with our data
        dir on its command line.  Anything else is a recycled PID/PGID.
        """
        record = _PidRecord.load(self.pid_file(spec))
        if record is None:
            return None
        known = {(record.pid, record.start_time)}
        if record.broker_pid is not None and record.broker_start_time is not None:
            known.add((record.broker_pid, record.broker_start_time))
        data_dir = str(self.data_dir(spec))
        for pid in group_members(record.pgid):
            stat = proc_stat(pid)
            if stat is not None and (pid, stat.start_time) in known:
                return record
            if data_dir in cmdline(pid):
                return record
        return None

    def _clear_stale(self, spec: ClusterSpec) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pid_file(spec).unlink()

    def _launch(self, spec: ClusterSpec, binary: Path) -> float:
        """Start one broker in its own process group; record it; return the launch time."""
        cluster_dir = self.cluster_dir(spec)
        data_dir = self.data_dir(spec)
        data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(binary),
            "start",
            "--only",
            "kafka",
            "--host",
            spec.host,
            "--kafka-port",
            str(spec.port),
            "--data-dir",
            str(data_dir),
        ]
        now = _dt.datetime.now(_dt.UTC)
        banner = f"{_START_MARKER} '{spec.alias}' at {now.isoformat()}: {' '.join(cmd)}"
        # Own session and group: signal the script *and* the broker it spawns.
        proc = spawn_session(cmd, log_file=self.log_file(spec), cwd=cluster_dir, banner=banner)
        record = _PidRecord.for_process(proc.pid, port=spec.port, started_at=now.isoformat())
        record.save(self.pid_file(spec))
        return time.monotonic()

    def _note_broker_pid(self, spec: ClusterSpec) -> None:
        """Record the broker binary's PID too, so ownership survives the wrapper's death."""
        record = _PidRecord.load(self.pid_file(spec))
        if record is None or record.broker_pid is not None:
            return
        for child in children(record.pid):
            stat = proc_stat(child)
            if stat is not None and stat.pgid == record.pgid:
                updated = dataclasses.replace(record, broker_pid=child, broker_start_time=stat.start_time)
                updated.save(self.pid_file(spec))
                return

    def _await_started(self, spec: ClusterSpec, t0: float, deadline: float) -> ClusterStatus:
        record = _PidRecord.load(self.pid_file(spec))
        assert record is not None
        while True:
            if not group_members(record.pgid):
                reap(record.pid)
                self._clear_stale(spec)
                raise DevClusterError(
                    f"cluster '{spec.alias}' (noida-db on port {spec.port}) exited during startup.\n"
                    f"Last lines of {self.log_file(spec)}:\n{self._log_tail(spec)}"
                )
            remaining = deadline - time.monotonic()
            if _metadata_ok(spec.bootstrap, timeout=max(0.5, min(remaining, 2.0))):
                self._note_broker_pid(spec)
                record = _PidRecord.load(self.pid_file(spec)) or record
                took = time.monotonic() - t0
                return self._status(spec, record, answers=True, detail=f"started in {took:.1f} s")
            if time.monotonic() >= deadline:
                raise DevClusterError(
                    f"cluster '{spec.alias}' (noida-db, pid {record.pid}) did not answer Kafka metadata "
                    f"requests on {spec.bootstrap} in time.\n"
                    f"Last lines of {self.log_file(spec)}:\n{self._log_tail(spec)}"
                )
            time.sleep(0.05)

    def _await_existing(self, spec: ClusterSpec, record: _PidRecord, deadline: float) -> ClusterStatus:
        """A cluster already running: fine if it answers (possibly still starting)."""
        if record.port != spec.port:
            raise DevClusterError(
                f"cluster '{spec.alias}' is already running on port {record.port} (pid {record.pid}), "
                f"not on the requested port {spec.port}; run `down` first."
            )
        while True:
            remaining = deadline - time.monotonic()
            if _metadata_ok(spec.bootstrap, timeout=max(0.5, min(remaining, 2.0))):
                return self._status(spec, record, answers=True, detail="already running")
            if time.monotonic() >= deadline or self._owned_record(spec) is None:
                raise DevClusterError(
                    f"cluster '{spec.alias}' is running (pid {record.pid}) but does not answer Kafka "
                    f"requests on {spec.bootstrap}; run `down` and `up` again.\n"
                    f"Last lines of {self.log_file(spec)}:\n{self._log_tail(spec)}"
                )
            time.sleep(0.1)

    def _stop(self, specs: Sequence[ClusterSpec], timeout: float) -> list[ClusterStatus]:
        """Stop the given clusters in parallel: signal all of them first, then wait for each."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        records: dict[str, _PidRecord] = {}
        for spec in specs:
            record = self._owned_record(spec)
            if record is None:
                self._clear_stale(spec)  # stale or absent PID file: nothing of ours runs
            else:
                records[spec.alias] = record
                self._terminate(record)
        details: dict[str, str] = {}
        for spec in specs:
            record = records.get(spec.alias)
            if record is None:
                details[spec.alias] = "not running"
                continue
            if self._wait_stopped(record, deadline):
                details[spec.alias] = f"stopped in {time.monotonic() - t0:.1f} s"
                continue
            self._signal_group(record.pgid, signal.SIGKILL)
            if not self._wait_stopped(record, time.monotonic() + 10):
                raise DevClusterError(
                    f"cluster '{spec.alias}': process group {record.pgid} survived SIGKILL; "
                    f"processes left: {group_members(record.pgid)}"
                )
            details[spec.alias] = f"killed after {timeout:.0f} s (did not stop on SIGTERM; recent data may be lost)"
        for spec in specs:
            record = records.get(spec.alias)
            if record is not None:
                # Exited processes may linger briefly as zombies until their parent (init,
                # when up() ran in another process) reaps them: about 1.5 s on these
                # machines.  Wait a little so that the PGID is really gone on return.
                self._wait_group_vanished(record, min(5.0, max(1.0, deadline - time.monotonic())))
                self._clear_stale(spec)
        return [self._status(spec, None, answers=False, detail=details[spec.alias]) for spec in specs]

    def _terminate(self, record: _PidRecord) -> None:
        """Ask the cluster's process group to stop (SIGTERM).

        While the ``noida-db`` wrapper (the group leader) is alive, the broker it
        spawned is signalled first and the wrapper is left to reap it and exit
        by itself: signalling the whole group at once kills the wrapper
        instantly, orphaning the broker, which then lingers as a zombie until
        init collects it (1.5-2 s on these machines).  The rest of the group
        gets SIGTERM in ``_wait_stopped`` once the broker is gone.
        """
        members = group_members(record.pgid)
        others = [pid for pid in members if pid != record.pid]
        if record.pid in members and others:
            for pid in others:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        else:
            self._signal_group(record.pgid, signal.SIGTERM)

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        try:
            signal_group(pgid, sig)
        except PermissionError as exc:  # pragma: no cover - not ours after all
            raise DevClusterError(f"not allowed to signal process group {pgid}: {exc}") from exc

    def _wait_stopped(self, record: _PidRecord, deadline: float) -> bool:
        """True once no live process is left in the group; False at ``deadline``."""
        group_termed = False
        while True:
            reap(record.pid)  # the wrapper is our child when up() ran in this process
            members = group_members(record.pgid)
            if not members:
                return True
            if not group_termed and all(pid == record.pid for pid in members):
                # The broker is gone; whatever is left of the group is told to stop too.
                self._signal_group(record.pgid, signal.SIGTERM)
                group_termed = True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    @staticmethod
    def _wait_group_vanished(record: _PidRecord, timeout: float) -> bool:
        return wait_group_vanished(record.pgid, timeout, leader=record.pid)

    def _log_tail(self, spec: ClusterSpec) -> str:
        return log_tail(self.log_file(spec), marker=_START_MARKER, lines=_LOG_TAIL_LINES, noise=_NOISE_MARKERS)
