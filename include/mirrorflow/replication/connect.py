"""Work units on a Spark Connect server: a long-lived Spark application that takes a run's units at once.

Why: a spark-submit per run pays a JVM, a SparkContext and Python workers every tick (5-20 s on two cores),
which made a 30 s schedule impossible. A Spark Connect server pays them once; a run is then a gRPC client
(about 0.4 s to connect) submitting one small job (about 0.4 s with warm workers) whose tasks copy the units
with confluent-kafka, exactly as the spark-submit app's tasks do (the very same :func:`copy_unit`).

Shape of the job: ``range(n)`` in ``n`` partitions, one per task share (``copy.task_shares``): a unit per task
while a wave has at most ``copy.TASK_UNITS`` lanes (the units of a wave never share a partition, so order is kept),
else whole lanes spread over that many tasks, each copying its share a few lanes at a time (``copy.copy_units``), so
a thousand partitions are not a thousand Spark tasks. Mapped with ``mapInArrow`` to the pickled ``UnitResult``s.
The units travel inside the function's closure, never through a DataFrame column a UI could show.

The ``mirrorflow`` package goes with the work: its zip (``pyfiles``) is added to the session as a Python artifact
once, so the server's executors need only a Python with confluent-kafka, not this repository. The session id is
derived from the flow family *and* the zip's content hash: a changed library gets a fresh session (and fresh
Python workers, which would otherwise keep the old modules imported), an unchanged one finds its zip already
there (a session setting records it: one cheap call instead of an upload per run).

Each flow family uses its own stable Spark Connect session id, so the server keeps that session (and its
Python workers, which keep their imports and connections) warm between runs, and a run can stop what a
killed earlier run of the same family left running there. A session the server has closed (idle timeout,
restart) is replaced by a fresh one. Records never pass through the driver.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

from .copy import copy_units, task_shares
from .pyfiles import package_zip
from .units import UnitResult, UnitSpec

log = logging.getLogger("mirrorflow.replicate")

#: Namespace of the session ids derived from a flow family (any fixed UUID; never change it: the server
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


def session_id_for(key: str) -> str:
    """The stable Spark Connect session id of a flow family (``key`` such as ``primary->backup/orders``)."""
    return str(uuid.uuid5(SESSION_NAMESPACE, key))


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
    """The function each Spark task runs: copy the units of the shares whose numbers arrive, return their pickled
    results by unit index."""

    def copy_batches(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            indexes = [i for share in batch.column(0).to_pylist() for i in shares[share]]
            results = [pickle.dumps(r) for r in copy_units([pickle.loads(payload[i]) for i in indexes])]
            yield pa.RecordBatch.from_pydict({"index": indexes, "result": results})

    return copy_batches


class SparkConnectExecutor:
    """Run units as Spark tasks on a Spark Connect server; connects on the first wave that has units.

    A run with nothing to copy never contacts the server, so it costs what the run's own planning costs.
    """

    def __init__(self, url: str | Callable[[], str], session_key: str) -> None:
        """``url``: the server's ``sc://`` address, or a function giving it (called on first use: the CLI's local
        server is started only by a run that has something to copy, after the clusters answered)."""
        self._url = url
        self.session_key = session_key
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

    def session(self) -> Any:
        """The Spark Connect session, connected on first use (the time counts as the run's ``engine`` phase)."""
        if self._session is None:
            started = time.monotonic()
            with self._step("package"):
                check_answers(self.url)
                package = package_zip()
            version = package.stem.removeprefix("mirrorflow-")
            self._session = self._connect(session_id_for(f"{self.session_key}@{version}"))
            if self._closed_by_server():
                log.info("Spark Connect session of %s was closed by the server; opening a new one", self.session_key)
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
        """Interrupt jobs still running in this flow family's session: an earlier run's client died (a killed
        Airflow task) while the server went on copying its units. This run holds the family's lock, so nothing
        else may copy the family now; exactly-once would fence them anyway, but at-least-once would race them."""
        leftover = self._session.interruptAll()
        if leftover:
            log.warning(
                "interrupted %d Spark job(s) an earlier run of %s left running on %s (its client died); waiting "
                "%.0f s for their tasks to stop",
                len(leftover),
                self.session_key,
                public_url(self.url),
                TASK_KILL_WAIT_S,
            )
            time.sleep(TASK_KILL_WAIT_S)

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]:
        if not units:
            return []
        session = self.session()
        payload = [pickle.dumps(unit) for unit in units]
        shares = task_shares(units)
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
    "public_url",
    "server_address",
    "session_id_for",
    "with_session_id",
]
