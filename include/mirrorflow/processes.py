"""Background processes we start ourselves, and only ever stop through what we recorded about them.

Why this exists: the development clusters (``devcluster``), the demo's Airflow server and its
traffic producer all run as background processes that outlive the command that started them.  They
share one set of rules, kept here once:

* Each process is started in a new session (``setsid``), so its group and session id equal its
  PID, and every child it spawns (a broker binary, Airflow's scheduler and task processes) can be
  reached through that id.
* A PID file records the PID, the group/session id and the kernel start time.  A process is "ours"
  only if a live member of the recorded group/session has the recorded (PID, start time), or
  carries an owner marker we chose (a data dir on its command line, an environment value).  A PID
  recycled by the kernel is therefore never signalled.
* Nothing is ever looked up or stopped by name: other engineers, demos and test sessions run the
  same programs on the same machine.

Everything here reads Linux ``/proc``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

__all__ = [
    "PidRecord",
    "ProcStat",
    "ProcessControlError",
    "SessionProcess",
    "all_pids",
    "children",
    "cmdline",
    "environ_value",
    "file_lock",
    "free_port",
    "group_members",
    "is_live",
    "log_tail",
    "port_is_free",
    "port_owner",
    "proc_stat",
    "reap",
    "session_members",
    "signal_group",
    "spawn_session",
    "wait_group_vanished",
]


class ProcessControlError(RuntimeError):
    """A recorded process could not be stopped; the message names the processes left."""


# --------------------------------------------------------------------------
# /proc
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this project needs."""

    state: str
    ppid: int
    pgid: int
    session: int
    start_time: int  # clock ticks after boot


def proc_stat(pid: int) -> ProcStat | None:
    """Parsed /proc/<pid>/stat, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(
            state=rest[0], ppid=int(rest[1]), pgid=int(rest[2]), session=int(rest[3]), start_time=int(rest[19])
        )
    except (IndexError, ValueError):
        return None


def cmdline(pid: int) -> str:
    """The command line of ``pid`` joined by spaces, or "" if unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def environ_value(pid: int, key: str) -> str | None:
    """The value of ``key`` in the environment ``pid`` was started with (None if absent or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = key.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def is_live(stat: ProcStat | None) -> bool:
    """A process that exists and is not a zombie (zombies hold no port and do no work)."""
    return stat is not None and stat.state not in ("Z", "X")


def all_pids() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def _members(match: Callable[[ProcStat], bool]) -> list[int]:
    found = []
    for pid in all_pids():
        stat = proc_stat(pid)
        if stat is not None and is_live(stat) and match(stat):
            found.append(pid)
    return found


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    return _members(lambda st: st.pgid == pgid)


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid`` (several process groups, e.g. Airflow task processes)."""
    return _members(lambda st: st.session == sid)


def children(pid: int) -> list[int]:
    """Live direct children of ``pid``."""
    return _members(lambda st: st.ppid == pid)


# --------------------------------------------------------------------------
# Starting, reaping, signalling
# --------------------------------------------------------------------------

#: Popen objects of the processes started by this process, by PID.  Kept so that they are not
#: garbage-collected while running (which warns) and so that their exit status is collected
#: through Popen, not behind its back.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def spawn_session(
    cmd: Sequence[str],
    *,
    log_file: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    banner: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new session, stdout and stderr appended to ``log_file`` (after ``banner``)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        if banner:
            log.write(f"\n{banner}\n".encode())
            log.flush()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own session and group: reach every child through them
            close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child, so it does not linger as a zombie."""
    proc = _CHILDREN.get(pid)
    if proc is not None:
        if proc.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def wait_group_vanished(pgid: int, timeout: float, leader: int | None = None) -> bool:
    """Wait until even zombies of group ``pgid`` are reaped (True), or ``timeout`` passes (False).

    Exited processes whose parent already died linger until init reaps them; ``leader`` is reaped here if it is our
    child.
    """
    deadline = time.monotonic() + timeout
    while True:
        if leader is not None:
            reap(leader)
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


# --------------------------------------------------------------------------
# PID files
# --------------------------------------------------------------------------


def _coerce(type_name: object, value: object) -> object:
    """JSON value -> field value, by the field's (string) annotation: ints and strings are checked."""
    if value is None:
        return None
    text = str(type_name)
    if text.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(f"not an integer: {value!r}")
        return int(value)
    if text.startswith("str"):
        return str(value)
    return value


@dataclass(frozen=True)
class PidRecord:
    """What we know about a process we started: written as JSON next to its log.

    ``pgid`` is also its session id (the process was started with ``setsid``).  Subclasses add
    fields (keep them optional or give them defaults); ``load`` fills them by name.
    """

    pid: int
    pgid: int
    start_time: int
    started_at: str = ""
    port: int | None = None

    @classmethod
    def for_process(cls, pid: int, **fields: Any) -> Self:
        """A record for a session leader we just started (pgid == pid), stamped with its start time."""
        stat = proc_stat(pid)
        fields.setdefault("started_at", _dt.datetime.now(_dt.UTC).isoformat())
        return cls(pid=pid, pgid=pid, start_time=stat.start_time if stat else 0, **fields)

    @classmethod
    def load(cls, path: Path) -> Self | None:
        """The record in ``path``, or None if it is missing or unreadable."""
        try:
            raw = json.loads(path.read_text())
            values: dict[str, object] = {}
            for field in dataclasses.fields(cls):
                value = raw.get(field.name)
                if value is None and field.default is dataclasses.MISSING:
                    raise KeyError(field.name)
                values[field.name] = _coerce(field.type, value) if value is not None else field.default
            return cls(**values)  # type: ignore[arg-type]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")
        tmp.replace(path)  # atomic: a reader never sees half a record


# --------------------------------------------------------------------------
# One recorded background session
# --------------------------------------------------------------------------


class SessionProcess:
    """A command run in its own session, recorded in ``pid_file``, stopped through that session only.

    Stopping signals every process group of the recorded session: programs like Airflow move their
    task processes into groups of their own (still in our session), and those must stop too.
    ``owner_env`` (KEY, VALUE) is an environment entry the command is started with; it proves
    ownership when the recorded leader has exited but its children still run.
    """

    def __init__(self, pid_file: Path, log_file: Path, *, owner_env: tuple[str, str] | None = None) -> None:
        self.pid_file = pid_file
        self.log_file = log_file
        self.owner_env = owner_env

    def start(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None = None,
        port: int | None = None,
        banner: str | None = None,
    ) -> PidRecord:
        """Start ``cmd`` (``env`` must contain ``owner_env``) and record it."""
        if self.owner_env is not None:
            env = {**env, self.owner_env[0]: self.owner_env[1]}
        proc = spawn_session(cmd, log_file=self.log_file, cwd=cwd, env=env, banner=banner)
        record = PidRecord.for_process(proc.pid, port=port)
        record.save(self.pid_file)
        return record

    def record(self) -> PidRecord | None:
        """The PID record if a process of its session is still ours and alive, else None."""
        record = PidRecord.load(self.pid_file)
        if record is None:
            return None
        reap(record.pid)
        for pid in session_members(record.pgid):
            stat = proc_stat(pid)
            if stat is not None and (pid, stat.start_time) == (record.pid, record.start_time):
                return record
            if self.owner_env is not None and environ_value(pid, self.owner_env[0]) == self.owner_env[1]:
                return record
        return None

    def running(self) -> bool:
        return self.record() is not None

    def leader_alive(self) -> bool:
        """True while the recorded leader itself runs (a dead leader with live children is a failure)."""
        record = self.record()
        if record is None:
            return False
        stat = proc_stat(record.pid)
        return is_live(stat) and stat is not None and stat.start_time == record.start_time

    def stop(self, timeout: float = 60) -> str:
        """SIGTERM every group of the session, SIGKILL what is left after ``timeout``; a detail line."""
        record = self.record()
        if record is None:
            self.clear()
            return "not running"
        t0 = time.monotonic()
        if self._terminate(record, signal.SIGTERM, t0 + timeout):
            detail = f"stopped in {time.monotonic() - t0:.1f} s"
        else:
            self._terminate(record, signal.SIGKILL, time.monotonic() + 10)
            left = session_members(record.pgid)
            if left:
                raise ProcessControlError(f"processes {left} of session {record.pgid} survived SIGKILL")
            detail = f"killed after {timeout:.0f} s (did not stop on SIGTERM)"
        wait_group_vanished(record.pgid, 3.0, leader=record.pid)
        self.clear()
        return detail

    def _terminate(self, record: PidRecord, sig: int, deadline: float) -> bool:
        """Signal each group of the session (again for groups that appear meanwhile); True once none is left."""
        signalled: set[int] = set()
        while True:
            reap(record.pid)
            members = session_members(record.pgid)
            if not members:
                return True
            for pgid in {st.pgid for pid in members if (st := proc_stat(pid)) is not None} - signalled:
                signal_group(pgid, sig)
                signalled.add(pgid)
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def tail(self, lines: int = 30, marker: str | None = None) -> str:
        return log_tail(self.log_file, marker=marker, lines=lines)


# --------------------------------------------------------------------------
# Locks, ports and logs
# --------------------------------------------------------------------------


@contextlib.contextmanager
def file_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory/.lock`` (created if needed), so two commands cannot race."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def port_is_free(host: str, port: int) -> bool:
    """True if a server could listen on ``host:port`` right now.

    SO_REUSEADDR mirrors what servers set, so a port whose old connections sit
    in TIME_WAIT counts as free, while one with a listener does not.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            # 0A = LISTEN, 07 = CLOSE (bound but not listening)
            if local_port == port and fields[3] in ("0A", "07") and fields[9] != "0":
                inodes.add(fields[9])
    return inodes


def port_owner(port: int) -> str | None:
    """Best-effort description of the process holding a TCP port, e.g. ``pid 12 (nginx)``.

    Reads /proc/net/tcp{,6} for the socket inode and then looks for it among
    the open files of every process we may inspect.  Returns None when unknown.
    """
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for pid in all_pids():
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in targets:
                        return f"pid {pid} ({(cmdline(pid) or '?')[:120]})"
        except OSError:
            continue
    return None


def log_tail(path: Path, *, marker: str | None = None, lines: int = 20, noise: Sequence[str] = ()) -> str:
    """The last ``lines`` non-empty lines of ``path`` after the last ``marker`` line, indented for messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "  (no log)"
    body = text.splitlines()
    if marker and marker in text:
        body = text[text.rfind(marker) :].splitlines()[1:]
    kept = [ln for ln in body if ln.strip() and not any(m in ln for m in noise)]
    tail = kept[-lines:] or ["(empty)"]
    return "\n".join(f"  {ln}" for ln in tail)


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port that is free to listen on now.

    Ports are drawn below the kernel's ephemeral range when possible: outgoing
    connections and ``bind(0)`` (which noida-db uses for its control port) only
    take ports from that range, so a port chosen here cannot be grabbed by
    them between choosing it and starting a server on it.  Ports in ``avoid`` are never returned.
    """
    reserved = set(avoid)
    low, _high = _ephemeral_range()
    if low > 11000:
        for _ in range(200):
            port = random.randint(10000, low - 1)
            if port not in reserved and port_is_free(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
