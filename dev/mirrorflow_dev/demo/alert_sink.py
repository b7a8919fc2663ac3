"""A local webhook receiver for the demo: every alert mirrorflow POSTs becomes one JSON line in a file.

Why this exists: without ``mirrorflow.alerts.webhook.url`` an alert is a WARNING line in a task log that
nobody reads, so a demo user never sees one. This receiver gives the demo a channel you can watch
(``tail -f .mirrorflow/demo/alerts.jsonl``) with the real delivery path: the heartbeats DAG's webhook POST.

It is a standard-library ``http.server`` on 127.0.0.1 only, run as a background process in its own
session like the demo's other processes (:class:`~mirrorflow.processes.SessionProcess`: a PID
file, stopped through the recorded session only, never by name). ``POST`` any path: the JSON body is
appended to the file as one line with ``received_at`` added (the request path is not kept: a webhook path
often carries a token). ``GET /`` answers with the count, for the start-up check.

    sink = AlertSink(demo_root)
    url, alerts_file = sink.start()   # set mirrorflow.alerts.webhook.url = url
    ...
    sink.stop()

Run by hand: ``python -m mirrorflow_dev.demo.alert_sink --port 8099 --file /tmp/alerts.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from mirrorflow.processes import SessionProcess, port_is_free
from mirrorflow_dev import CHECKOUT
from mirrorflow_dev.devcluster import free_port, state_root

__all__ = ["ALERTS_FILE", "AlertSink", "AlertSinkError", "SinkEndpoint", "default_root", "main", "serve"]

HOST = "127.0.0.1"
#: The file, under the demo's state directory.
ALERTS_FILE = "alerts.jsonl"
#: A body larger than this is refused (413): an alert is a few hundred bytes.
MAX_BODY = 1024 * 1024
_OWNER_ENV = "MIRRORFLOW_DEMO_ALERT_SINK"
_PATH = "/alerts"


class AlertSinkError(RuntimeError):
    """The receiver did not start; the message names its log."""


@dataclass(frozen=True)
class SinkEndpoint:
    """Where the demo's alerts go: the URL to configure, and the file they end up in."""

    url: str
    file: Path


def default_root() -> Path:
    """The demo's state directory, ``$MIRRORFLOW_HOME/demo`` (default ``<repo>/.mirrorflow/demo``), as the stack's."""
    return (state_root() / "demo").absolute()


# --------------------------------------------------------------------------
# The server (runs in the background process)
# --------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """Appends each POSTed JSON document to ``alerts_file`` as one line (one lock: lines never interleave)."""

    alerts_file: ClassVar[Path]
    lock: ClassVar[threading.Lock] = threading.Lock()
    server_version = "mirrorflow-alert-sink"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._answer(413, "too large\n")
            return
        body = self.rfile.read(length)
        try:
            document = json.loads(body)
        except ValueError:
            self._answer(400, "not JSON\n")
            return
        received = datetime.now(UTC).isoformat(timespec="milliseconds")
        line = (
            {"received_at": received, **document}
            if isinstance(document, dict)
            else {"received_at": received, "body": document}
        )
        text = json.dumps(line, sort_keys=False) + "\n"
        with self.lock, open(self.alerts_file, "a", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())  # a line the sender got a 204 for is on disk
        summary = line.get("message") or line.get("kind") or "document"
        print(f"{received} {summary}", flush=True)
        self._answer(204, "")

    def do_GET(self) -> None:
        try:
            with open(self.alerts_file, encoding="utf-8") as lines:
                count = sum(1 for _ in lines)
        except OSError:
            count = 0
        self._answer(200, f"mirrorflow demo alert sink: {count} alert(s) in {self.alerts_file}\n")

    def _answer(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per alert is printed above; request lines would name the path (a token, maybe)


def serve(port: int, alerts_file: Path) -> None:
    """Serve until SIGTERM or SIGINT (then close the socket and return)."""
    alerts_file.parent.mkdir(parents=True, exist_ok=True)
    alerts_file.touch()
    handler = type("Handler", (_Handler,), {"alerts_file": alerts_file})
    server = ThreadingHTTPServer((HOST, port), handler)

    def stop(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()  # shutdown() blocks: not in the handler

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"alert sink listening on http://{HOST}:{port}{_PATH}, writing {alerts_file}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mirrorflow demo: write POSTed alerts to a JSON-lines file")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", type=Path, required=True)
    args = parser.parse_args(argv)
    serve(args.port, args.file)
    return 0


# --------------------------------------------------------------------------
# Starting and stopping it (from the demo)
# --------------------------------------------------------------------------


class AlertSink:
    """The demo's alert receiver under ``root`` (the demo state directory): ``alerts.jsonl``, ``alert-sink/``."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.alerts_file = self.root / ALERTS_FILE
        directory = self.root / "alert-sink"
        self.process = SessionProcess(
            directory / "pid", directory / "alert-sink.log", owner_env=(_OWNER_ENV, str(directory))
        )

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def endpoint(self) -> SinkEndpoint | None:
        """The running receiver's URL and file; None when it does not run."""
        record = self.process.record()
        if record is None or record.port is None:
            return None
        return SinkEndpoint(f"http://{HOST}:{record.port}{_PATH}", self.alerts_file)

    def start(self, port: int | None = None, timeout: float = 15.0) -> SinkEndpoint:
        """Start the receiver unless it runs (then its endpoint as it is); waits until it answers.

        ``port`` None: the last one it used if still free (the configured URL stays valid across restarts),
        else a free one. A receiver that does not answer within ``timeout`` is stopped, and the error names
        its log.
        """
        running = self.endpoint()
        if running is not None:
            return running
        if port is None:
            previous = self._previous_port()
            port = previous if previous is not None and port_is_free(HOST, previous) else free_port(HOST)
        cmd = [
            sys.executable,
            "-m",
            "mirrorflow_dev.demo.alert_sink",
            "--port",
            str(port),
            "--file",
            str(self.alerts_file),
        ]
        pythonpath = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath}
        self.process.start(
            cmd, env=env, cwd=CHECKOUT, port=port, banner=f"=== mirrorflow demo alert sink on port {port}"
        )
        self._port_file().write_text(f"{port}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.process.leader_alive():
                break
            if _answers(port):
                return SinkEndpoint(f"http://{HOST}:{port}{_PATH}", self.alerts_file)
            time.sleep(0.05)
        self.process.stop(timeout=5)
        raise AlertSinkError(
            f"the demo alert sink did not answer on {HOST}:{port} within {timeout:.0f} s; its log "
            f"{self.log_file}:\n{self.process.tail(10)}"
        )

    def stop(self, timeout: float = 10.0) -> str:
        """Stop it through its recorded session: ``stopped in ...`` or ``not running``."""
        return self.process.stop(timeout=timeout)

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert received so far (oldest first)."""
        try:
            lines = self.alerts_file.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def _port_file(self) -> Path:
        return self.process.pid_file.with_name("port")

    def _previous_port(self) -> int | None:
        try:
            return int(self._port_file().read_text().strip())
        except (OSError, ValueError):
            return None


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
