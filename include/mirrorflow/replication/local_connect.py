"""A Spark Connect server on this machine, started on first use and reused by every later run.

``mirrorflow replicate`` needs no extra step on one machine: without ``--remote`` or ``SPARK_REMOTE`` it
asks :func:`ensure_local_server` for an address, which starts the server shipped with pyspark (local
master, :func:`local_master`) the first time and returns the running one after that; ``mirrorflow local-spark
stop`` stops it (and, in a checkout, ``mirrorflow dev down``). It is recorded under ``$MIRRORFLOW_HOME/spark-connect``
(default ``~/.local/state/mirrorflow``, ``config.location``) and stopped by that record (its process session), never
by name.

The server's Python workers need confluent-kafka; mirrorflow itself reaches them with each session (the
package zip, ``connect.py``). With a local master they run this installation's Python; with a cluster master
(``SPARK=standalone make demo``, the standalone-cluster tests) the caller's ``PYSPARK_PYTHON`` is kept, as
spark-submit keeps it (:func:`spark_environment`).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..config.location import state_dir as _state_dir
from ..processes import SessionProcess, file_lock, free_port, port_is_free
from .connect import ConnectServerUnreachable
from .spark_env import spark_environment

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Spark Connect's own default port, when free: the address stays the same across restarts (Airflow's
#: ``spark_default`` connection in the demo names it).
PREFERRED_PORT = 15002
START_TIMEOUT_S = 120.0
#: Sessions idle this long are closed by the server (Spark's default is 60 min; a daily schedule would then
#: pay new Python workers every run). A closed session is replaced by the client anyway.
SESSION_TIMEOUT = "25h"


class LocalServerError(ConnectServerUnreachable):
    """The local Spark Connect server could not be started (the message carries its log's tail)."""


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    url: str | None
    pid: int | None
    log_file: Path


def state_dir() -> Path:
    """``$MIRRORFLOW_HOME/spark-connect``: the machine's server record and log."""
    return _state_dir("spark-connect")


def _process(directory: Path) -> SessionProcess:
    return SessionProcess(directory / "server.pid", directory / "server.log")


def _spark_submit() -> str:
    beside = Path(sys.executable).parent / "spark-submit"
    return str(beside) if beside.exists() else "spark-submit"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _url(port: int) -> str:
    return f"sc://127.0.0.1:{port}"


def local_master(cores: int | None = None) -> str:
    """``local[T,4]``: T task slots, twice the cores but at least 4, and a failed task retried up to 4 times.

    Why more slots than cores: a copy task waits on both clusters much of the time (fetches, acknowledgements,
    transaction commits), so on 2 cores two tasks at a time left the CPU half idle while the other partitions
    waited for a slot. Measured on 2 cores (1,000,000 x 1 KB records in 4 partitions, exactly-once):
    ``local[*]`` (2 slots) 25.0 s, ``local[4]`` 17.5 s.
    """
    return f"local[{max(4, 2 * (cores or os.cpu_count() or 1))},4]"


def server_command(port: int, master: str | None = None) -> list[str]:
    """The spark-submit call that runs pyspark's Spark Connect server on loopback port ``port``."""
    return [
        _spark_submit(),
        "--class",
        SERVER_CLASS,
        "--name",
        "mirrorflow Spark Connect",
        "--master",
        master or local_master(),
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        f"spark.connect.session.manager.defaultSessionTimeout={SESSION_TIMEOUT}",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
    ]


def status(directory: Path | None = None) -> ServerStatus:
    process = _process(directory or state_dir())
    record = process.record()
    if record is None or record.port is None:
        return ServerStatus(False, None, None, process.log_file)
    return ServerStatus(True, _url(int(record.port)), record.pid, process.log_file)


def ensure_local_server(
    timeout: float = START_TIMEOUT_S,
    *,
    directory: Path | None = None,
    progress: bool = True,
    master: str | None = None,
) -> str:
    """The ``sc://`` address of this machine's server, started now if it does not run (``LocalServerError``).

    ``directory`` holds its record and log (default :func:`state_dir`; tests use their own). ``master``: the
    server's Spark master (default :func:`local_master`), e.g. a standalone cluster's ``spark://127.0.0.1:PORT``.
    """
    machine_wide = directory is None  # the machine's own server gets the stable port; tests' servers any free one
    directory = directory or state_dir()
    process = _process(directory)
    with file_lock(directory):
        record = process.record()
        if record is None:
            port = PREFERRED_PORT if machine_wide and port_is_free("127.0.0.1", PREFERRED_PORT) else free_port()
            if progress:
                print(
                    f"starting a local Spark Connect server on port {port} (once; `mirrorflow local-spark stop` stops it)",
                    file=sys.stderr,
                    flush=True,
                )
            env = {**os.environ, **spark_environment(os.environ, keep_choices=master is not None)}
            env["SPARK_LOCAL_IP"] = "127.0.0.1"  # the server binds loopback (server_command): so does its driver
            record = process.start(server_command(port, master), env=env, port=port, banner=f"--- start {time.ctime()}")
        port = int(record.port or 0)
        deadline = time.monotonic() + timeout
        while not _answers(port):
            if not process.leader_alive():
                process.clear()
                raise LocalServerError(f"the local Spark Connect server exited:\n{process.tail()}")
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"the local Spark Connect server did not answer on port {port} within {timeout:.0f} s:\n"
                    f"{process.tail()}"
                )
            time.sleep(0.2)
    return _url(port)


def stop_local_server(timeout: float = 30.0, *, directory: Path | None = None) -> str:
    """Stop the server this machine started (by its recorded session); a detail line."""
    directory = directory or state_dir()
    with file_lock(directory):
        return _process(directory).stop(timeout)


__all__ = [
    "LocalServerError",
    "ServerStatus",
    "ensure_local_server",
    "local_master",
    "server_command",
    "status",
    "stop_local_server",
]
