"""A Spark standalone cluster on loopback for development, tests and ``SPARK=standalone make demo``.

Why this exists: mirrorflow's Spark work had only ever run in Spark local mode, where every Python process
shares the checkout and the venv.  A real cluster's executors run on other machines with their own Python and
without the repository, and they can disappear mid-job.  pyspark's wheel ships ``bin/spark-class``, so a real
master (``org.apache.spark.deploy.master.Master``) and real workers (``org.apache.spark.deploy.worker.Worker``)
can run here without a Spark distribution: the tests and the demo use them to prove that the library travels
with the job and that a lost worker loses nothing.

Developer tooling, not product code.  It follows ``devcluster``'s process rules:

* each daemon runs in its own session (``setsid``), recorded in a PID file with its kernel start time, and is
  stopped through that record (its process group: the worker's executors and their Python workers are its
  children), never by name;
* ports are free ones chosen at start, on 127.0.0.1 only;
* each worker starts from a scratch directory (its cwd and work dir) with an environment whose ``PYTHONPATH``
  is empty and whose ``PATH`` does not lead to this venv: what its executors import must come with the job.

Memory is kept small (daemons 256 MB of heap, each worker offers 1 GB to executors, 2 cores each): the
machines this runs on have 2 cores shared with two brokers and Airflow.

Layout under ``state_dir``::

    cluster.json        master port, web UI port, worker ports (written at ``up``)
    master/pid, master/master.log
    worker-<n>/pid, worker-<n>/worker.log, worker-<n>/work/   (the worker's cwd and SPARK_WORKER_DIR)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorflow.processes import SessionProcess, file_lock, signal_group
from mirrorflow_dev.devcluster import free_port, state_root

__all__ = [
    "MASTER_CLASS",
    "WORKER_CLASS",
    "SparkClusterError",
    "SparkStandalone",
    "StandaloneStatus",
    "WorkerInfo",
    "bare_python",
    "default_state_dir",
    "spark_home",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

#: Heap of the master and worker daemons themselves (Spark's default is 1 GB each).
DAEMON_MEMORY = "256m"
#: What each worker offers its executors: one executor of Spark's default 1 GB heap.
WORKER_MEMORY = "1g"
WORKER_CORES = 2

#: Environment entries a worker must not inherit: they would give its executors this checkout or this venv.
_NOT_INHERITED = (
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_REMOTE",
    "SPARK_CONF_DIR",
    "MIRRORFLOW_CONFIG",
    "MIRRORFLOW_CONFIG_OVERRIDES",
)


class SparkClusterError(RuntimeError):
    """The standalone cluster could not be started or inspected; the message names the daemon and its log."""


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as this module started it: its index, PID, ports and scratch directory."""

    index: int
    pid: int | None
    port: int
    webui_port: int
    directory: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class StandaloneStatus:
    """``master_url`` (``spark://127.0.0.1:PORT``) and ``web_ui`` are None when the master does not run."""

    running: bool
    master_url: str | None
    web_ui: str | None
    master_pid: int | None
    workers: tuple[WorkerInfo, ...]
    alive_workers: int
    detail: str = ""


def default_state_dir() -> Path:
    """``$MIRRORFLOW_HOME/spark-standalone`` (default ``<repo>/.mirrorflow/spark-standalone``)."""
    return state_root() / "spark-standalone"


def spark_home() -> Path:
    """pyspark's own directory: it has ``bin/spark-class`` and ``jars/``, all a standalone daemon needs."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise SparkClusterError(f"{home} has no bin/spark-class: is pyspark installed from its wheel?")
    return home


def bare_python(directory: Path) -> Path:
    """A Python for the workers as a user's cluster has one: confluent-kafka (and pyarrow, pandas) but not
    mirrorflow.  A venv at ``directory`` (made once) whose only addition is this venv's site-packages as a plain
    path entry: a ``.pth`` file does not process the ``.pth`` files of the directory it adds, so this venv's
    editable install of mirrorflow (a ``.pth``) is not seen."""
    import site
    import subprocess

    python = directory / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
        packages = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        (directory / "lib" / version / "site-packages" / "borrowed.pth").write_text(packages + "\n")
    return python


def _without_venv(path: str) -> str:
    """``PATH`` without this interpreter's directory: the workers must not find this venv's python first."""
    venv_bin = str(Path(sys.executable).parent)
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and p != venv_bin)


class SparkStandalone:
    """Start, stop and inspect one master and ``workers`` workers on 127.0.0.1, by recorded PID only."""

    def __init__(self, state_dir: Path | None = None, *, workers: int = 2, cores: int = WORKER_CORES) -> None:
        self.state_dir = Path(state_dir or default_state_dir()).absolute()
        self.worker_count = workers
        self.cores = cores

    # -- paths and records -------------------------------------------------------------------------

    @property
    def _ports_file(self) -> Path:
        return self.state_dir / "cluster.json"

    def _master(self) -> SessionProcess:
        return SessionProcess(self.state_dir / "master" / "pid", self.state_dir / "master" / "master.log")

    def _worker_dir(self, index: int) -> Path:
        return self.state_dir / f"worker-{index}"

    def _worker(self, index: int) -> SessionProcess:
        directory = self._worker_dir(index)
        return SessionProcess(directory / "pid", directory / "worker.log")

    def _ports(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self._ports_file.read_text()))
        except (OSError, ValueError):
            return {}

    # -- public API ---------------------------------------------------------------------------------

    def up(self, timeout: float = 120.0) -> StandaloneStatus:
        """Start the master and the workers unless they run; wait until every worker registered (else stop what
        this call started and raise ``SparkClusterError`` with the daemon's log tail)."""
        with file_lock(self.state_dir):
            if self._master().running():
                status = self._status(self._ports())
                if status.alive_workers >= self.worker_count:
                    return dataclasses.replace(status, detail="already running")
                self._stop_all(timeout=30)
            t0 = time.monotonic()
            ports = {"master": free_port(), "webui": free_port()}
            ports["workers"] = [[free_port(), free_port()] for _ in range(self.worker_count)]
            self._ports_file.parent.mkdir(parents=True, exist_ok=True)
            self._ports_file.write_text(json.dumps(ports, indent=2) + "\n")
            try:
                self._start_master(ports)
                self._await(lambda: self._master_json(ports) is not None, "master", self._master(), t0 + timeout)
                for index in range(self.worker_count):
                    self._start_worker(index, ports)
                self._await(lambda: self._alive(ports) >= self.worker_count, "workers to register", None, t0 + timeout)
            except BaseException:
                with contextlib.suppress(Exception):
                    self._stop_all(timeout=15)
                raise
            status = self._status(ports)
            return dataclasses.replace(status, detail=f"started in {time.monotonic() - t0:.1f} s")

    def down(self, timeout: float = 30.0) -> str:
        """Stop the workers (with their executors) and the master through their recorded sessions."""
        with file_lock(self.state_dir):
            return self._stop_all(timeout)

    def status(self) -> StandaloneStatus:
        return self._status(self._ports())

    def kill_worker(self, index: int) -> int:
        """SIGKILL worker ``index``'s process group (the worker, its executor, their Python workers), as if its
        machine died; returns the worker's PID."""
        record = self._worker(index).record()
        if record is None:
            raise SparkClusterError(f"worker {index} does not run")
        signal_group(record.pgid, signal.SIGKILL)
        return record.pid

    def workers_json(self) -> list[dict[str, Any]]:
        """The master's view of its workers (``/json/``: id, host, port, state, cores, ...)."""
        data = self._master_json(self._ports())
        return list(data.get("workers", [])) if data else []

    # -- internals ----------------------------------------------------------------------------------

    def _env(self, work_dir: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        conf_dir = self.state_dir / "conf"  # empty: no spark-defaults.conf or log4j file from anywhere else
        conf_dir.mkdir(parents=True, exist_ok=True)
        env.update(
            {
                "PATH": _without_venv(os.environ.get("PATH", "/usr/bin:/bin")),
                "SPARK_HOME": str(spark_home()),
                "SPARK_CONF_DIR": str(conf_dir),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                "SPARK_WORKER_DIR": str(work_dir),
                "SPARK_LOG_DIR": str(work_dir),
                "SPARK_NO_DAEMONIZE": "1",
            }
        )
        return env

    def _spark_class(self, main_class: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main_class, *args]

    def _start_master(self, ports: dict[str, Any]) -> None:
        directory = self.state_dir / "master"
        directory.mkdir(parents=True, exist_ok=True)
        cmd = self._spark_class(
            MASTER_CLASS, "--host", "127.0.0.1", "--port", str(ports["master"]), "--webui-port", str(ports["webui"])
        )
        self._master().start(cmd, env=self._env(directory), cwd=directory, port=ports["master"], banner=_banner(cmd))

    def _start_worker(self, index: int, ports: dict[str, Any]) -> None:
        port, webui = ports["workers"][index]
        work = self._worker_dir(index) / "work"
        work.mkdir(parents=True, exist_ok=True)
        cmd = self._spark_class(
            WORKER_CLASS,
            f"spark://127.0.0.1:{ports['master']}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(webui),
            "--cores",
            str(self.cores),
            "--memory",
            WORKER_MEMORY,
            "--work-dir",
            str(work),
        )
        self._worker(index).start(cmd, env=self._env(work), cwd=work, port=port, banner=_banner(cmd))

    def _master_json(self, ports: dict[str, Any]) -> dict[str, Any] | None:
        if "webui" not in ports:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ports['webui']}/json/", timeout=2) as answer:
                return dict(json.load(answer))
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def _alive(self, ports: dict[str, Any]) -> int:
        data = self._master_json(ports) or {}
        return sum(1 for w in data.get("workers", []) if w.get("state") == "ALIVE")

    def _await(self, ready: Any, what: str, process: SessionProcess | None, deadline: float) -> None:
        processes = [self._master()] + [self._worker(i) for i in range(self.worker_count)]
        while not ready():
            for proc in [process] if process else processes:
                if proc.pid_file.exists() and not proc.leader_alive():
                    raise SparkClusterError(
                        f"{proc.log_file.parent.name} exited while waiting for {what}:\n{proc.tail(20)}"
                    )
            if time.monotonic() > deadline:
                tail = (process or processes[-1]).tail(20)
                raise SparkClusterError(f"Spark standalone: timed out waiting for {what}:\n{tail}")
            time.sleep(0.3)

    def _status(self, ports: dict[str, Any]) -> StandaloneStatus:
        master = self._master().record()
        workers = []
        for index, (port, webui) in enumerate(ports.get("workers", [])):
            record = self._worker(index).record()
            workers.append(WorkerInfo(index, record.pid if record else None, port, webui, self._worker_dir(index)))
        running = master is not None
        return StandaloneStatus(
            running=running,
            master_url=f"spark://127.0.0.1:{ports['master']}" if running else None,
            web_ui=f"http://127.0.0.1:{ports['webui']}" if running else None,
            master_pid=master.pid if master else None,
            workers=tuple(workers),
            alive_workers=self._alive(ports) if running else 0,
            detail="running" if running else "not running",
        )

    def _stop_all(self, timeout: float) -> str:
        """Workers first (their executors go with them), then the master; one detail line."""
        details = []
        for index in range(self.worker_count):
            details.append(f"worker-{index} {self._worker(index).stop(timeout)}")
        details.append(f"master {self._master().stop(timeout)}")
        return ", ".join(details)


def _banner(cmd: list[str]) -> str:
    return f"=== mirrorflow sparkcluster: starting at {time.ctime()}: {' '.join(cmd)}"
