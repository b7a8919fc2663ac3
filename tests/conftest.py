"""Shared pytest fixtures: a pair of throwaway local Kafka clusters, and unique topics.

Why a session-scoped pair: starting a noida-db broker takes well under a
second, but tests create uniquely named topics, so sharing one pair of
clusters across the session is safe and keeps the suite fast.  The clusters run
on free ports (never the demo's 19092/29092) with their state under pytest's
tmp dir, so a test run never touches a developer's `mirrorflow dev up` clusters.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mirrorflow.config.location import DEFAULT_CONFIG
from mirrorflow.demo.airflow_env import airflow_environment
from mirrorflow.devcluster import ClusterSpec, DevClusters, free_port
from tests.kafka_helpers import create_topic, unique_topic_name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "integration: needs real local Kafka clusters (noida-db); starts brokers on free ports",
    )
    _configure_airflow()


def _configure_airflow() -> None:
    """A throwaway AIRFLOW_HOME for the session, set before any test module imports airflow.

    Airflow reads its configuration once, at import; tests must never touch a developer's or the
    demo's Airflow home, and the DAG and plugin folders must be this checkout's.
    """
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-airflow-"))
    atexit.register(shutil.rmtree, home, True)
    os.environ.update(airflow_environment(home, api_port=free_port(), config_path=DEFAULT_CONFIG))


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A fresh Airflow metadata database (SQLite in the session's AIRFLOW_HOME), made once per session."""
    from airflow.utils.db import resetdb

    resetdb()


@dataclass(frozen=True)
class KafkaClusters:
    """The session's two independent clusters: bootstrap strings, specs and their manager."""

    primary: str
    backup: str
    specs: tuple[ClusterSpec, ...]
    state_dir: Path
    manager: DevClusters


def distinct_free_ports(count: int) -> list[int]:
    """``count`` different free ports (free_port() alone could return one twice)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _stop_quietly(manager: DevClusters, timeout: float) -> None:
    """Safety net for atexit: stop what is still recorded as running, never raise."""
    with contextlib.suppress(Exception):
        manager.down(timeout=timeout)


def _sigterm_as_interrupt() -> Callable[[], None]:
    """Turn SIGTERM into KeyboardInterrupt while the clusters run; return an undo function.

    A CI runner or a developer stopping pytest with SIGTERM would otherwise kill
    it at once, skipping teardown and atexit, and orphan the brokers.  As a
    KeyboardInterrupt, pytest stops the session and runs fixture teardown.  Only
    done when nobody else handles SIGTERM, and only from the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"received signal {signum}: stopping the test session")

    signal.signal(signal.SIGTERM, handler)

    def undo() -> None:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return undo


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaClusters]:
    """Two independent local Kafka clusters, ``primary`` and ``backup``, for the whole session."""
    state_dir = tmp_path_factory.mktemp("kafka-clusters")
    primary_port, backup_port = distinct_free_ports(2)
    specs = (ClusterSpec("primary", primary_port), ClusterSpec("backup", backup_port))
    manager = DevClusters(state_dir, specs)
    # If the session dies without running fixture teardown (an exception
    # escaping pytest, sys.exit from a plugin), the brokers must not outlive it.
    # down() only signals process groups recorded in this state dir.
    atexit.register(_stop_quietly, manager, 10.0)
    undo_sigterm = _sigterm_as_interrupt()
    try:
        manager.up(timeout=60)
        yield KafkaClusters(
            primary=specs[0].bootstrap,
            backup=specs[1].bootstrap,
            specs=specs,
            state_dir=state_dir,
            manager=manager,
        )
    finally:
        try:
            manager.down(timeout=30)
        finally:
            undo_sigterm()
            atexit.unregister(_stop_quietly)


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server for the session (the replication engine of the DAGs and the CLI): its sc:// URL.

    Started the way ``mirrorflow replicate`` starts its local one, with its record and log under pytest's tmp
    dir, so a developer's own server is never touched; stopped by that record at the end.
    """
    from mirrorflow.replication.local_connect import ensure_local_server, stop_local_server

    directory = tmp_path_factory.mktemp("spark-connect")
    atexit.register(lambda: stop_local_server(directory=directory))
    try:
        yield ensure_local_server(directory=directory, progress=False)
    finally:
        stop_local_server(directory=directory)


TopicFactory = Callable[..., str]


@pytest.fixture
def topic_factory(request: pytest.FixtureRequest) -> TopicFactory:
    """Create uniquely named topics: ``topic_factory(bootstrap, partitions=1, config=None) -> name``.

    Names look like ``t-<test-name>-<uuid8>`` so that a broker listing shows
    which test made a topic, and tests sharing a cluster never collide.
    """

    def make(cluster_bootstrap: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        name = unique_topic_name(request.node.name)
        return create_topic(cluster_bootstrap, name, partitions=partitions, config=config)

    return make


class _Webhook(BaseHTTPRequestHandler):
    """A local webhook receiver: alerts and failover notifications are POSTed here in tests."""

    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        type(self).received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(URL with a secret-looking path, the JSON documents received so far)."""
    _Webhook.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/s3cr3t", _Webhook.received
    finally:
        server.shutdown()
        server.server_close()
