"""Shared pytest fixtures: a pair of throwaway local Kafka clusters, and unique topics.

Why a session-scoped pair: starting a noida-db broker takes well under a
second, but tests create uniquely named topics, so sharing one pair of
clusters across the session is safe and keeps the suite fast.  The clusters run
on free ports (never the demo's 19092/29092) with their state under pytest's
tmp dir, so a test run never touches a developer's `mirrorflow dev up` clusters.

``MIRRORFLOW_TEST_CLUSTERS="primary=HOST:PORT,backup=HOST:PORT"`` runs the same
tests against two existing clusters instead (a user's Apache Kafka, say): the
session then starts and stops no broker, and tests that must stop one (marked
``stops_brokers``), that test the embedded brokers themselves (``embedded_brokers``)
or that write topics of fixed names (``fixed_names``) are skipped with the reason.
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
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorflow.replication.producers import close_kept_clients
from mirrorflow_dev import EXAMPLE_CONFIG as DEFAULT_CONFIG
from mirrorflow_dev.demo.airflow_env import airflow_environment
from mirrorflow_dev.devcluster import ClusterSpec, DevClusters, free_port
from mirrorflow_dev.loopback_http import serving
from tests.kafka_helpers import create_topic, unique_topic_name

#: The variable that points the integration tests at existing clusters (see the module docstring).
TEST_CLUSTERS_VARIABLE = "MIRRORFLOW_TEST_CLUSTERS"
#: The cluster names the variable must give, in the order tests use them.
TEST_CLUSTER_NAMES = ("primary", "backup")


def parse_test_clusters(value: str, variable: str = TEST_CLUSTERS_VARIABLE) -> dict[str, str]:
    """``{"primary": bootstrap, "backup": bootstrap}`` from ``primary=HOST:PORT,backup=HOST:PORT``.

    A cluster with several brokers lists them after its name: ``primary=h1:9092,h2:9092,backup=h3:9092``
    (an item without ``=`` is one more broker of the cluster before it). Why so strict: a typo must stop
    the session with the variable and the bad part named, before any test writes to a cluster the user
    did not mean (or silently falls back to starting embedded brokers).
    """

    def bad(part: str, why: str) -> ValueError:
        return ValueError(
            f"{variable}={value!r}: {why} in {part!r}; expected "
            f'{variable}="primary=HOST:PORT,backup=HOST:PORT" (extra brokers of a cluster after its own, '
            "comma-separated: primary=h1:9092,h2:9092,backup=h3:9092)"
        )

    clusters: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            raise bad(raw, "empty item")
        if "=" in item:
            name, _, broker = (part.strip() for part in item.partition("="))
            if name not in TEST_CLUSTER_NAMES:
                raise bad(item, f"unknown cluster name {name!r} (the names are {', '.join(TEST_CLUSTER_NAMES)})")
            if name in clusters:
                raise bad(item, f"cluster {name!r} given twice")
            current = clusters.setdefault(name, [])
        else:
            if current is None:
                raise bad(item, "a broker before any cluster name")
            broker = item
        host, colon, port = broker.rpartition(":")
        if not colon or not host or any(c.isspace() or c in "=/" for c in host):
            raise bad(broker or item, "not HOST:PORT")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise bad(broker, f"port {port!r} is not a number from 1 to 65535")
        current.append(broker)
    missing = [name for name in TEST_CLUSTER_NAMES if name not in clusters]
    if missing:
        raise bad(value, f"no {' and no '.join(missing)} cluster")
    bootstraps = {name: ",".join(clusters[name]) for name in TEST_CLUSTER_NAMES}
    shared = set(clusters["primary"]) & set(clusters["backup"])
    if shared:
        raise bad(
            ", ".join(sorted(shared)),
            "the same broker in primary and backup (the tests need two independent clusters)",
        )
    return bootstraps


def external_test_clusters(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The clusters ``MIRRORFLOW_TEST_CLUSTERS`` names, or None (unset or blank: embedded brokers)."""
    value = (os.environ if environ is None else environ).get(TEST_CLUSTERS_VARIABLE, "")
    return parse_test_clusters(value) if value.strip() else None


#: Clusters found not to answer, with the message: asked once per session, not once per test.
_SILENT: dict[str, str] = {}


def answers_metadata(name: str, bootstrap: str, timeout: float = 30.0) -> None:
    """Fail (the test, or the session fixture and so every test using it) naming the variable and the cluster
    if ``bootstrap`` does not answer.

    Why here rather than in the test: otherwise every integration test would fail on its own timeouts, one
    after the other, with nothing saying the variable points at a cluster that is not there.
    """
    if bootstrap not in _SILENT:
        client = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
        try:
            client.list_topics(timeout=timeout)
            return
        except KafkaException as error:
            _SILENT[bootstrap] = (
                f"{TEST_CLUSTERS_VARIABLE}: cluster {name!r} at {bootstrap} did not answer a metadata request "
                f"within {timeout:.0f} s: {error}"
            )
    pytest.fail(_SILENT[bootstrap], pytrace=False)


#: Why each marker's tests are skipped on existing clusters (shown by ``pytest -ra``).
EXTERNAL_SKIPS = {
    "stops_brokers": "stops, restarts or freezes a broker, and the clusters {variable} names are not the suite's to stop",
    "embedded_brokers": (
        "tests the embedded noida-db brokers themselves (mirrorflow dev, their own state dirs), not {variable} clusters"
    ),
    "fixed_names": (
        "writes topics or groups of fixed names (the demo's orders.eu, customers, order-service, ...), which may be "
        "real ones on the clusters {variable} names"
    ),
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "integration: needs real Kafka clusters: the embedded noida-db pair started on free ports, "
        f"or the two clusters {TEST_CLUSTERS_VARIABLE} names",
    )
    config.addinivalue_line(
        "markers",
        "stops_brokers: stops, restarts or freezes a broker of its own; skipped when "
        f"{TEST_CLUSTERS_VARIABLE} points the suite at existing clusters",
    )
    config.addinivalue_line(
        "markers",
        "embedded_brokers: tests the embedded noida-db brokers (mirrorflow dev) themselves; skipped when "
        f"{TEST_CLUSTERS_VARIABLE} points the suite at existing clusters",
    )
    config.addinivalue_line(
        "markers",
        "fixed_names: writes topics or groups of fixed names (the demo's); skipped when "
        f"{TEST_CLUSTERS_VARIABLE} points the suite at existing clusters",
    )
    try:
        external_test_clusters()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    _configure_airflow()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On existing clusters, skip what must stop a broker or tests the embedded ones, saying why."""
    external = external_test_clusters()
    if external is None:
        return
    for item in items:
        for marker, reason in EXTERNAL_SKIPS.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{TEST_CLUSTERS_VARIABLE} is set: {reason.format(variable=TEST_CLUSTERS_VARIABLE)}"
                    )
                )
                break


def _configure_airflow() -> None:
    """A throwaway AIRFLOW_HOME for the session, set before any test module imports airflow.

    Airflow reads its configuration once, at import; tests must never touch a developer's or the
    demo's Airflow home, and the DAG folder must be this checkout's.
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
    """The session's two independent clusters: bootstrap strings, and (embedded only) specs and their manager.

    ``external`` is True when ``MIRRORFLOW_TEST_CLUSTERS`` gave them: ``specs``, ``state_dir`` and
    ``manager`` are then None, as the session owns no broker to stop; a test that needs them is marked
    ``stops_brokers`` (or ``embedded_brokers``) and is skipped there.
    """

    primary: str
    backup: str
    specs: tuple[ClusterSpec, ...] | None
    state_dir: Path | None
    manager: DevClusters | None
    external: bool = False


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


@pytest.fixture(autouse=True)
def _no_kept_clients_between_tests() -> Iterator[None]:
    """Clients a test's units kept in this process (``replication.kept_clients``) go with the test: a later test
    may stop the brokers they are connected to, and an idle client would go on reconnecting and logging."""
    yield
    close_kept_clients()


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaClusters]:
    """Two independent Kafka clusters, ``primary`` and ``backup``, for the whole session.

    Embedded noida-db brokers started here, or the existing clusters ``MIRRORFLOW_TEST_CLUSTERS`` names,
    which are only checked to answer: nothing is started, stopped or cleaned up on them.
    """
    external = external_test_clusters()
    if external is not None:
        for name, bootstrap in external.items():
            answers_metadata(name, bootstrap)
        undo_sigterm = _sigterm_as_interrupt()  # nothing of ours to stop on them, but the Spark server and such
        try:
            yield KafkaClusters(external["primary"], external["backup"], None, None, None, external=True)
        finally:
            undo_sigterm()
        return
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


@contextlib.contextmanager
def own_clusters(state_dir: Path) -> Iterator[KafkaClusters]:
    """A pair of clusters for a test (or module) that wants its own: fresh embedded ones, or the existing ones.

    Embedded: two new noida-db brokers under ``state_dir``, stopped at the end, so the test's internal
    topics (``heartbeats``, progress, the failover log) see no other test's records. On
    ``MIRRORFLOW_TEST_CLUSTERS``: the clusters it names, shared with every other test and run, so a test
    using this must give its flows cluster aliases of its own (``unique_alias``) and never assume a topic
    it did not create is empty; stopping a broker needs ``manager`` and the ``stops_brokers`` marker.
    """
    external = external_test_clusters()
    if external is not None:
        for name, bootstrap in external.items():
            answers_metadata(name, bootstrap)
        yield KafkaClusters(external["primary"], external["backup"], None, None, None, external=True)
        return
    ports = distinct_free_ports(2)
    specs = (ClusterSpec("primary", ports[0]), ClusterSpec("backup", ports[1]))
    manager = DevClusters(state_dir, specs)
    manager.up(timeout=60)
    try:
        yield KafkaClusters(specs[0].bootstrap, specs[1].bootstrap, specs, state_dir, manager)
    finally:
        manager.down(timeout=30)


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
    with serving(_Webhook) as base:
        yield f"{base}/hooks/s3cr3t", _Webhook.received
