"""Work units on a Spark Connect server: a long-lived Spark application that takes a run's units at once.

Why: a spark-submit per run pays a JVM, a SparkContext and Python workers every tick, which made a 30 s schedule
impossible (docs/performance.md). A Spark Connect server pays them once; a run is then a gRPC client submitting one
small job whose tasks copy the units with confluent-kafka, exactly as the spark-submit app's tasks do (the very same
:func:`copy_unit`).

Shape of the job: ``range(n)`` in ``n`` partitions, one per task share (``lanes.task_shares``): a unit per task
while a wave has at most ``lanes.TASK_UNITS`` lanes (the units of a wave never share a partition, so order is kept),
else whole lanes spread over that many tasks, each copying its share a few lanes at a time (``copy.copy_units``), so
a thousand partitions are not a thousand Spark tasks. Mapped with ``mapInArrow`` to the pickled ``UnitResult``s.
The units travel inside the function's closure, never through a DataFrame column a UI could show.

The ``mirrorflow`` package goes with the work: its zip (``pyfiles``) is added to the session as a Python artifact
once, so the server's executors need only a Python with confluent-kafka, not this repository. The session id is
derived from the zip's content hash too (:func:`session_identity`): a changed library gets a fresh session (and
fresh Python workers, which would otherwise keep the old modules imported), an unchanged one finds its zip already
there (a session setting records it: one cheap call instead of an upload per run).

Each flow family *on its two clusters* uses its own stable Spark Connect session id, so the server keeps that
session (and its Python workers, which keep their imports and connections) warm between runs, and a run can stop
what a killed earlier run of the same family on the same clusters left running there. The clusters are part of it
because one server is shared by flows, teams and deployments whose cluster aliases may coincide (two files naming
different clusters ``east`` and ``west``): a run's start must never interrupt another deployment's job. A session
the server has closed (idle timeout, restart) is replaced by a fresh one. Records never pass through the driver.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from .copy import copy_units
from .lanes import task_shares
from .pyfiles import package_zip
from .units import UnitResult, UnitSpec

log = logging.getLogger("mirrorflow.replicate")

#: Namespace of the session ids derived from a session identity (any fixed UUID; never change it: the server
#: keeps a closed session's id for a while and refuses to reopen it).
SESSION_NAMESPACE = uuid.UUID("6f2b7f0e-3a55-4c1e-9b1f-6d4f4a6c2e11")

#: How long to wait for the server's port before saying it does not answer (the gRPC client alone would retry
#: for minutes).
ANSWER_TIMEOUT_S = 5.0


#: Session setting naming the package zip already added to the session as a Python artifact.
PACKAGE_CONF = "spark.mirrorflow.package"

#: After interrupting a job, how long its Python tasks may still run: Spark kills a task's Python worker
#: ``spark.python.task.killTimeout`` (2 s) after the interrupt.
TASK_KILL_WAIT_S = 3.0


class ConnectServerUnreachable(RuntimeError):
    """The Spark Connect server does not accept connections (message names its address, never a token)."""


def server_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``sc://host:port/;params`` URL (15002, Spark's default, when no port is given)."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ValueError(f"a Spark Connect address looks like sc://HOST:PORT, not '{public_url(url)}'")
    return parsed.hostname, parsed.port or 15002


def public_url(url: str) -> str:
    """The URL without its parameters (``token=`` is a secret): what logs and errors may show."""
    return url.split(";", 1)[0].rstrip("/")


def with_session_id(url: str, session_id: str) -> str:
    """``url`` with ``session_id`` added, unless the user's URL already names one."""
    if "session_id=" in url:
        return url
    if ";" in url:
        return f"{url};session_id={session_id}"
    return f"{url.rstrip('/')}/;session_id={session_id}"


#: Kafka's port when a bootstrap server names none (librdkafka's default too).
DEFAULT_KAFKA_PORT = 9092


def cluster_identity(client_config: Mapping[str, Any]) -> str:
    """Which cluster a client configuration reaches: its bootstrap servers, normalised (``host:port`` items without
    protocol prefix, lower case, default port added, each once, sorted). Only they are read, so no SASL or SSL setting
    can reach a session identity or a log line.

    Why not the cluster id the brokers report (``describe_cluster``): it is not unique in practice (the embedded
    noida-db brokers report one fixed id for every cluster; KRaft clusters formatted from a copied quickstart share
    its id), which would bring back the shared session this prevents, and it costs a request per run. Its advantage,
    surviving an edit of the bootstrap list, matters only when a run killed before the edit left a job behind: the
    first run after it opens a new session and leaves that job to end within its units' time limit (exactly-once
    fences it). One cluster named by different addresses in two files gets two sessions: the safe side.
    """
    servers = str(client_config.get("bootstrap.servers") or client_config.get("metadata.broker.list") or "")
    items: set[str] = set()
    for raw in re.split(r"[,\s]+", servers):
        item = raw.rpartition("://")[2].rpartition("@")[2].rstrip("/").lower()
        if not item:
            continue
        if item.startswith("["):  # [IPv6]:port
            host, _, port = item.partition("]")
            host, port = host + "]", port.removeprefix(":")
        elif item.count(":") == 1:
            host, _, port = item.partition(":")
        else:  # a host without port, or a bare IPv6 address (no port can be told from it)
            host, port = item, ""
        items.add(f"{host.rstrip('.')}:{port or DEFAULT_KAFKA_PORT}")
    return ",".join(sorted(items))


def session_identity(name: str, source: Mapping[str, Any], target: Mapping[str, Any], version: str) -> str:
    """What a Spark Connect session stands for: ``name`` (the work, such as ``east->west/orders``), the clusters its
    jobs read and write (client configurations of the source and target side: :func:`cluster_identity`) and the
    package ``version``: ``east->west/orders h1:9092,h2:9092->h3:9092@<version>``.

    The one way to build it: callers (CLI, verify, Airflow operators) name only the work, and the executor adds the
    clusters of the units or chunks it is given. A run's start interrupts the jobs of its own session only, so two
    deployments whose cluster aliases coincide never cancel each other's jobs.
    """
    return f"{name} {cluster_identity(source)}->{cluster_identity(target)}@{version}"


def session_id_for(identity: str) -> str:
    """The stable Spark Connect session id (a UUID, as Spark Connect requires) of a :func:`session_identity`."""
    return str(uuid.uuid5(SESSION_NAMESPACE, identity))


def check_answers(url: str, timeout: float = ANSWER_TIMEOUT_S) -> None:
    """Raise ``ConnectServerUnreachable`` unless the server's port accepts a connection within ``timeout``."""
    host, port = server_address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        raise ConnectServerUnreachable(
            f"the Spark Connect server {public_url(url)} does not answer ({exc.strerror or exc}); nothing "
            "committed is lost: the next run resumes from the stored progress"
        ) from None


def _copy_partition(payload: Sequence[bytes], shares: Sequence[Sequence[int]]) -> Any:
    """The function each Spark task runs: copy the units of the shares whose numbers arrive (``payload[n]``: the
    pickled units of share ``n``), return their pickled results by unit index."""

    def copy_batches(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            numbers = batch.column(0).to_pylist()
            indexes = [i for share in numbers for i in shares[share]]
            units = [unit for share in numbers for unit in pickle.loads(payload[share])]
            results = [pickle.dumps(r) for r in copy_units(units)]
            yield pa.RecordBatch.from_pydict({"index": indexes, "result": results})

    return copy_batches


class SparkConnectExecutor:
    """Run units as Spark tasks on a Spark Connect server; connects on the first wave that has units.

    A run with nothing to copy never contacts the server, so it costs what the run's own planning costs.
    """

    def __init__(self, url: str | Callable[[], str], session_key: str) -> None:
        """``url``: the server's ``sc://`` address, or a function giving it (called on first use: the CLI's local
        server is started only by a run that has something to copy, after the clusters answered).

        ``session_key``: the work, such as ``flow/family`` or ``flow/verify``. The session's identity adds the
        clusters of the work it is given and the package version (:func:`session_identity`), when it is first
        needed: a run with nothing to copy computes nothing and asks no cluster anything more."""
        self._url = url
        self.session_key = session_key
        self.session_identity: str | None = None  # known once the session is first needed
        self._clusters: tuple[str, str] | None = None  # (source, target) of that identity
        self.engine_seconds = 0.0
        # Where the engine phase went (client import, session, leftover jobs, package): a slow start names its step.
        self.engine_steps: dict[str, float] = {}
        self._session: Any = None
        self._tag = f"mirrorflow-{uuid.uuid4().hex[:12]}"

    def _connect(self, session_id: str) -> Any:
        # The Connect client itself: the classic builder would refuse while a classic SparkContext runs here.
        with self._step("client import"):  # pyspark's Connect client imports pandas, pyarrow and gRPC
            from pyspark.sql.connect.client.retries import DefaultPolicy
            from pyspark.sql.connect.session import SparkSession

        with self._step("session"):
            session = SparkSession.builder.remote(with_session_id(self.url, session_id)).create()
            # pyspark retries an unavailable server for 10 minutes or more; a run fails within ~20 s instead (the
            # DAG's retries and the next schedule come back to it) and never hangs an Airflow slot.
            session.client.set_retry_policies(
                [DefaultPolicy(max_retries=8, initial_backoff=200, backoff_multiplier=2.0, max_backoff=5000)]
            )
            session.addTag(self._tag)
        return session

    @property
    def url(self) -> str:
        if callable(self._url):
            self._url = self._url()
        return self._url

    def session(self, source: Mapping[str, Any], target: Mapping[str, Any]) -> Any:
        """The Spark Connect session of this work between these clusters (the source and target side's client
        configurations, as the units or chunks carry them), connected on first use (the time counts as the run's
        ``engine`` phase).

        An executor serves one pair of clusters: asked for another, it raises ``ValueError`` rather than run their
        jobs in a session whose start interrupts what it finds there."""
        clusters = (cluster_identity(source), cluster_identity(target))
        if self._clusters is not None and clusters != self._clusters:
            raise ValueError(
                f"the Spark Connect executor of {self.session_key} serves {'->'.join(self._clusters)}, "
                f"not {'->'.join(clusters)}: use an executor per flow"
            )
        if self._session is None:
            started = time.monotonic()
            with self._step("package"):
                check_answers(self.url)
                package = package_zip()
            version = package.stem.removeprefix("mirrorflow-")
            self._clusters = clusters
            self.session_identity = session_identity(self.session_key, source, target, version)
            self._session = self._connect(session_id_for(self.session_identity))
            if self._closed_by_server():
                log.info(
                    "Spark Connect session of %s was closed by the server; opening a new one", self.session_identity
                )
                self._session = self._connect(str(uuid.uuid4()))
            with self._step("leftover jobs"):
                self._stop_leftover_jobs()
            with self._step("package"):
                self._ship_package(package)
            self.engine_seconds += time.monotonic() - started
            log.info(
                "Spark Connect %s: session ready in %.2f s (%s)",
                public_url(self.url),
                self.engine_seconds,
                ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.engine_steps.items()),
            )
        return self._session

    def _closed_by_server(self) -> bool:
        """One cheap call: a session the server closed (idle timeout, restart) fails it; anything else re-raises."""
        with self._step("session"):
            try:
                _ = self._session.version
            except Exception as exc:  # only a closed session is answered here; anything else re-raises
                if "SESSION_CLOSED" not in str(exc) and "INVALID_HANDLE" not in str(exc):
                    raise
                return True
        return False

    @contextlib.contextmanager
    def _step(self, name: str) -> Iterator[None]:
        """Add the block's seconds to ``engine_steps[name]``."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.engine_steps[name] = round(self.engine_steps.get(name, 0.0) + time.monotonic() - started, 3)

    def _ship_package(self, package: Any) -> None:
        """Add the package zip to the session unless the session already has it (``PACKAGE_CONF``)."""
        if self._session.conf.get(PACKAGE_CONF, "") == package.name:
            return
        started = time.monotonic()
        self._session.addArtifacts(str(package), pyfile=True)
        self._session.conf.set(PACKAGE_CONF, package.name)
        log.info("Spark Connect: added %s to the session in %.2f s", package.name, time.monotonic() - started)

    def _stop_leftover_jobs(self) -> None:
        """Interrupt jobs still running in this session, which only the same work on the same clusters uses: an
        earlier run's client died (a killed Airflow task) while the server went on copying its units. This run holds
        the family's lock, so nothing else may copy the family now; exactly-once would fence them anyway, but
        at-least-once would race them."""
        leftover = self._session.interruptAll()
        if leftover:
            log.warning(
                "interrupted %d Spark job(s) an earlier run of %s left running on %s (its client died); waiting "
                "%.0f s for their tasks to stop",
                len(leftover),
                self.session_identity,
                public_url(self.url),
                TASK_KILL_WAIT_S,
            )
            time.sleep(TASK_KILL_WAIT_S)

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]:
        if not units:
            return []
        session = self.session(units[0].source_consumer, units[0].target_producer)  # a run's units share them
        shares = task_shares(units)
        # A share's units pickled together: the settings every unit of a run shares (client configurations, topic
        # names) are written once per share, not once per unit (a wide run's task binary grew with its units).
        payload = [pickle.dumps([units[i] for i in share]) for share in shares]
        # A task per share: a range of as many numbers as partitions gives each partition one number.
        frame = session.range(0, len(shares), 1, len(shares)).mapInArrow(
            _copy_partition(payload, shares), "index long, result binary"
        )
        try:
            rows = sorted(frame.collect(), key=lambda row: row["index"])
        except BaseException:  # Ctrl-C, a failed job: the server would otherwise finish the other tasks
            check_answers(self.url)  # a server that died mid-copy: say so in one line (nothing to interrupt)
            self.interrupt()
            raise
        if len(rows) != len(units):
            raise RuntimeError(f"Spark Connect returned {len(rows)} result(s) for {len(units)} work unit(s)")
        return [pickle.loads(row["result"]) for row in rows]

    def interrupt(self) -> None:
        """Stop this run's Spark jobs (the task is being killed): the server would otherwise finish them."""
        if self._session is not None:
            try:
                self._session.interruptTag(self._tag)
            except Exception as exc:  # noqa: BLE001 - best effort while being killed
                log.warning("could not interrupt the Spark Connect jobs: %s", exc)

    def close(self) -> None:
        """Close the connection but keep the server-side session (and its warm Python workers) for the next run."""
        if self._session is not None:
            self._session.client.close()
            self._session = None


__all__ = [
    "ConnectServerUnreachable",
    "SparkConnectExecutor",
    "check_answers",
    "cluster_identity",
    "public_url",
    "server_address",
    "session_id_for",
    "session_identity",
    "with_session_id",
]
