"""``SPARK=standalone make demo``: the demo's Spark work on a Spark standalone cluster instead of local mode.

Why: the default demo runs one local-mode Spark Connect server, the lightest thing that works.  A user who will
run mirrorflow on a Spark cluster can watch it on one here: a master and two workers on 127.0.0.1
(``mirrorflow_dev.sparkcluster``, the same tooling the standalone-cluster tests use), and a Spark Connect server
whose master is that cluster, which the mirror DAGs' ``spark_default`` connection names.  The master's web UI
shows the workers, the Connect application and each run's jobs.

Everything lives under the demo's directory (``spark-standalone/``, ``spark-connect-standalone/``) and is
stopped by recorded PID with the rest of the demo (``make demo-stop``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mirrorflow.replication import local_connect
from mirrorflow_dev.sparkcluster import SparkStandalone

#: The environment variable choosing the demo's Spark: ``local`` (default) or ``standalone``.
SPARK_ENV = "SPARK"
MODES = ("local", "standalone")

Out = Callable[[str], None]


def spark_mode() -> str:
    """``$SPARK`` (``local`` when unset); ValueError naming the allowed values otherwise."""
    mode = os.environ.get(SPARK_ENV, "").strip().lower() or "local"
    if mode not in MODES:
        raise ValueError(f"{SPARK_ENV}={mode!r}: use {' or '.join(MODES)} (e.g. SPARK=standalone make demo)")
    return mode


def cluster(root: Path) -> SparkStandalone:
    return SparkStandalone(root / "spark-standalone")


def connect_dir(root: Path) -> Path:
    return root / "spark-connect-standalone"


def standalone_up(root: Path, out: Out, started: Callable[[str, Callable[[], str]], None]) -> str:
    """The cluster and its Spark Connect server, started unless they run; the server's ``sc://`` address.

    ``started(name, stop)`` registers what this call started, so a failed demo start stops it again."""
    standalone = cluster(root)
    was_running = standalone.status().running
    if not was_running:
        out("starting a Spark standalone cluster: a master and two workers on 127.0.0.1 (about 30 s)...")
    status = standalone.up()
    if not was_running:
        started("Spark standalone cluster", standalone.down)
    out(f"  Spark standalone master {status.master_url} ({status.detail}); web UI {status.web_ui}")
    server_was_running = local_connect.status(connect_dir(root)).running
    if not server_was_running:
        out("starting the Spark Connect server on that cluster (about 20 s)...")
    url = local_connect.ensure_local_server(directory=connect_dir(root), progress=False, master=status.master_url)
    if not server_was_running:
        started(
            "Spark Connect server (standalone)", lambda: local_connect.stop_local_server(directory=connect_dir(root))
        )
    out(f"  Spark Connect at {url} on the standalone cluster: the replicate tasks submit their work units there")
    return url


def standalone_down(root: Path, out: Out) -> None:
    """Stop the Connect server, then the workers and the master (recorded PIDs; nothing running is fine)."""
    out(f"Spark Connect server (standalone): {local_connect.stop_local_server(directory=connect_dir(root))}")
    out(f"Spark standalone cluster: {cluster(root).down()}")


def web_ui(root: Path) -> str | None:
    """The master's web UI address while the demo's standalone cluster runs, else None."""
    status = cluster(root).status()
    return status.web_ui if status.running else None


__all__ = ["SPARK_ENV", "connect_dir", "spark_mode", "standalone_down", "standalone_up", "web_ui"]
