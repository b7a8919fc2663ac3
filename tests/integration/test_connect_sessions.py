"""Deployments sharing one Spark Connect server: a run's start interrupts only what a killed earlier run of the same
work on the same clusters left running, never another deployment's job behind the same cluster aliases."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.kafka.clients import client_properties
from mirrorflow.replication import connect
from mirrorflow.replication.connect import SparkConnectExecutor
from mirrorflow.replication.run import replicate
from tests.kafka_helpers import create_topic, own_records, produce, read_all, unique_alias

pytestmark = pytest.mark.integration

#: The most a blocked job waits for its release; the test releases it long before (or interrupts it).
BLOCK_CAP_S = 300.0
#: How long the test waits for a job's task to start, or a job's thread to end, before failing (never asserted).
WAIT_S = 180.0


def deployment(east: str, west: str, east_bootstrap: str, west_bootstrap: str, prefix: str) -> MirrorConfig:
    """One deployment's file: the flow ``east->west`` of the topics ``<prefix>-*``, aliases as given."""
    return parse_config(
        f"clusters = {east}, {west}\n{east}.bootstrap.servers = {east_bootstrap}\n"
        f"{west}.bootstrap.servers = {west_bootstrap}\n{east}->{west}.enabled = true\n"
        f"{east}->{west}.topics = {prefix}-.*\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
    )


def clusters_of(config: MirrorConfig, east: str, west: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The source and target client configurations the flow's units carry."""
    flow = config.flow(east, west)
    return client_properties(flow, "source", "consumer"), client_properties(flow, "target", "producer")


def blocked_until(started: Path, release: Path) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A Spark task that marks ``started``, then waits for ``release`` to exist (at most ``BLOCK_CAP_S``) and says
    whether it was released. It runs on the server's Python workers, which share this machine's files."""
    started_path, release_path, cap = str(started), str(release), BLOCK_CAP_S

    def wait(batches: Iterator[Any]) -> Iterator[Any]:
        import os
        import time

        import pyarrow as pa

        open(started_path, "w").close()
        deadline = time.monotonic() + cap
        while not os.path.exists(release_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"released": [os.path.exists(release_path)] * batch.num_rows})

    return wait


class BlockedJob:
    """A one-task job in ``session`` that runs until released, collected in a thread of its own."""

    def __init__(self, session: Any, directory: Path) -> None:
        directory.mkdir()
        self.started, self.release = directory / "started", directory / "release"
        self.rows: list[Any] | None = None
        self.error: BaseException | None = None
        frame = session.range(0, 1, 1, 1).mapInArrow(blocked_until(self.started, self.release), "released boolean")
        self._thread = threading.Thread(target=self._collect, args=(frame,), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.started.exists():
            assert self._thread.is_alive(), f"the blocked job ended before its task started: {self.error}"
            assert time.monotonic() < deadline, "the blocked job's task did not start on the Spark Connect server"
            time.sleep(0.05)

    def _collect(self, frame: Any) -> None:
        try:
            self.rows = frame.collect()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc

    def finish(self) -> None:
        """Release the task and wait for the job's end."""
        self.release.touch()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the blocked job did not end after its release"


def test_a_run_start_never_interrupts_another_deployments_job_behind_the_same_aliases(
    kafka_clusters: Any, spark_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two deployments name their clusters ``east`` and ``west``, for swapped clusters, and share one server. While
    one's job runs, the other's run starts its session (interrupting its own leftover jobs) and copies: the first
    job must go on to its end. A later start of the *same* work on the *same* clusters does stop such a job (what a
    killed run left behind), which shows the start really interrupts what its session holds."""
    east, west, prefix = unique_alias("east"), unique_alias("west"), f"sessions-{uuid.uuid4().hex[:8]}"
    first = deployment(east, west, kafka_clusters.primary, kafka_clusters.backup, prefix)
    second = deployment(east, west, kafka_clusters.backup, kafka_clusters.primary, prefix)
    work = f"{east}->{west}/*"  # the very name both deployments' CLI runs give their sessions
    # One package version for every run here, as on a deployed installation: the package is zipped from this
    # checkout, and a source edited meanwhile would give the rerun a session of its own (by design).
    package = connect.package_zip()
    monkeypatch.setattr(connect, "package_zip", lambda: package)

    first_executor = SparkConnectExecutor(spark_connect, work)
    second_executor = SparkConnectExecutor(spark_connect, work)
    rerun_executor = SparkConnectExecutor(spark_connect, work)
    try:
        first_session = first_executor.session(*clusters_of(first, east, west))
        with pytest.raises(ValueError, match="use an executor per flow"):
            first_executor.session(*clusters_of(second, east, west))
        job = BlockedJob(first_session, tmp_path / "first")

        topic = create_topic(kafka_clusters.backup, f"{prefix}-orders", partitions=2)
        produce(kafka_clusters.backup, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(20)])
        report = replicate(second, f"{east}->{west}", None, second_executor)
        assert report.ok and own_records(report) == 20, report.to_dict()
        assert "leftover jobs" in second_executor.engine_steps  # its session started, and looked for them
        assert sorted(r.value for r in read_all(kafka_clusters.primary, f"{east}.{topic}")) == sorted(
            b"v%d" % i for i in range(20)
        )

        job.finish()
        assert job.error is None, f"the other deployment's session start interrupted this job: {job.error}"
        assert [row["released"] for row in job.rows or []] == [True]
        assert second_executor.session_identity != first_executor.session_identity

        leftover = BlockedJob(first_session, tmp_path / "leftover")
        rerun_executor.session(*clusters_of(first, east, west))  # same work, same clusters: a rerun
        assert rerun_executor.session_identity == first_executor.session_identity
        leftover.finish()
        assert leftover.error is not None and "OPERATION_CANCELED" in str(leftover.error), (
            f"a rerun on the same clusters did not stop the job left in its session: {leftover.rows}"
        )
    finally:
        for executor in (first_executor, second_executor, rerun_executor):
            executor.close()
