"""The replication engine against real clusters and real Spark: content, resume, faults, growth, loss."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewPartitions

from mirrorflow.config import MirrorConfig, load_config, parse_config
from mirrorflow.kafka.clients import client_properties
from mirrorflow.replication.connect import SparkConnectExecutor
from mirrorflow.replication.executor import LocalExecutor, SparkExecutor, UnitExecutor
from mirrorflow.replication.progress import progress_topic
from mirrorflow.replication.remote_report import released_report
from mirrorflow.replication.run import PHASES, replicate
from mirrorflow.wire import (
    OffsetSync,
    decode_source_offset_key,
    decode_source_offset_value,
    java_partition,
)
from tests.kafka_helpers import admin, create_topic, own_records, produce, read_all

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the module: 2 cores, a failed task retried up to 4 times."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("mirrorflow-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYTHONPATH", str(REPO))
        .getOrCreate()
    )
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
    # Airflow's logging setup has closed its stream: a "--- Logging error ---" dump on every run.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(params=["spark-context", "spark-connect"])
def spark_engine(request: pytest.FixtureRequest) -> Iterator[UnitExecutor]:
    """Spark tasks from both engines: the SparkContext of a spark-submit app, and a Spark Connect server."""
    if request.param == "spark-context":
        yield SparkExecutor(request.getfixturevalue("spark"))
        return
    executor = SparkConnectExecutor(request.getfixturevalue("spark_connect"), f"tests/{uuid.uuid4().hex}")
    yield executor
    executor.close()


def make_config(clusters: Any, prefix: str, extra: str = "") -> MirrorConfig:
    return parse_config(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}-.*\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        f"offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n{extra}"
    )


def replicate_on_connect(config: MirrorConfig, spark_connect: str) -> Any:
    """One run of ``primary->backup`` on a Spark Connect session of its own, closed after."""
    executor = SparkConnectExecutor(spark_connect, f"tests/{uuid.uuid4().hex}")
    try:
        return replicate(config, "primary->backup", None, executor)
    finally:
        executor.close()


def prefix() -> str:
    return f"rep-{uuid.uuid4().hex[:8]}"


def committed(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None, tuple, int | None]]:
    """(partition, key, value, headers, timestamp) of every committed record, in partition order."""
    return [(r.partition, r.key, r.value, tuple(r.headers), r.timestamp) for r in read_all(bootstrap, topic)]


def transactional_writes(bootstrap: str, topic: str, batches: list[tuple[list[dict[str, Any]], bool]]) -> None:
    """Write batches in transactions, committing or aborting each: offsets get gaps (markers, aborts)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for records, commit in batches:
        producer.begin_transaction()
        for r in records:
            producer.produce(topic, **r)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def test_byte_for_byte_copy_with_spark(kafka_clusters: Any, spark_engine: UnitExecutor) -> None:
    p = prefix()
    keyed = create_topic(kafka_clusters.primary, f"{p}-keyed", partitions=3)
    txn = create_topic(kafka_clusters.primary, f"{p}-txn", partitions=2)
    records = []
    hour_ago = int(time.time() * 1000) - 3_600_000  # explicit, but within the default 7-day retention
    for i in range(60):
        records.append(
            {
                "key": None if i % 7 == 0 else b"key-%d" % (i % 5),
                "value": None if i % 11 == 0 else bytes([i, 0, 255 - i]) * (i % 4 + 1),
                "headers": [("h", b"\x00\x01"), ("h", b"second"), ("bin", bytes(range(i % 8))), ("none", None)],
                "partition": i % 3,
                "timestamp": hour_ago + i * 1000,
            }
        )
    produce(kafka_clusters.primary, keyed, records)
    transactional_writes(
        kafka_clusters.primary,
        txn,
        [
            ([{"key": b"a%d" % i, "value": b"ok%d" % i, "partition": i % 2} for i in range(10)], True),
            ([{"key": b"x%d" % i, "value": b"aborted%d" % i, "partition": i % 2} for i in range(5)], False),
            ([{"key": b"b%d" % i, "value": b"ok-again%d" % i, "partition": i % 2} for i in range(7)], True),
            ([{"key": b"y", "value": b"aborted-last", "partition": 1}], False),
        ],
    )
    config = make_config(kafka_clusters, p, "mirrorflow.unit.max.records = 8\n")
    report = replicate(config, "primary->backup", None, spark_engine)
    assert report.ok, report.errors
    for topic in (keyed, txn):
        assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)
    # Only this test's topics: a run over every family also carries the source's `heartbeats` (as MM2 does),
    # which other tests of the session may have written to.
    assert sum(part.records for part in report.partitions if part.topic in (keyed, txn)) == 60 + 17
    assert all(part.lag == 0 for part in report.partitions)
    # Ranges were copied in bounded transactions (8 records each): each commit marker takes a target offset.
    offsets = [r.offset for r in read_all(kafka_clusters.backup, f"primary.{keyed}", partition=0)]
    assert len(offsets) == 20 and offsets[-1] - offsets[0] >= len(offsets) + 1, offsets
    assert not any(b"aborted" in (r.value or b"") for r in read_all(kafka_clusters.backup, f"primary.{txn}"))


def test_resume_copies_only_new_records_and_progress_is_mm2s(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-resume", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(20)])
    config = make_config(kafka_clusters, p)
    first = replicate(config, "primary->backup", None, LocalExecutor())
    assert first.ok and own_records(first) == 20
    produce(kafka_clusters.primary, topic, [{"value": b"w%d" % i, "partition": i % 2} for i in range(6)])
    second = replicate(config, "primary->backup", None, LocalExecutor())
    assert second.ok and own_records(second) == 6
    assert own_records(replicate(config, "primary->backup", None, LocalExecutor())) == 0
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)

    # Progress: MM2's exact key bytes, {"offset": last copied}, on the murmur2 partition.
    progress = read_all(kafka_clusters.backup, progress_topic("primary"))
    partitions = len(admin(kafka_clusters.backup).list_topics(timeout=10).topics[progress_topic("primary")].partitions)
    latest: dict[int, int] = {}
    for record in progress:
        decoded = decode_source_offset_key(record.key)
        if decoded and decoded[1] == topic:
            assert decoded[0] == "primary"
            assert record.key == b'["MirrorSourceConnector",{"cluster":"primary","partition":%d,"topic":"%s"}]' % (
                decoded[2],
                topic.encode(),
            )
            assert record.partition == java_partition(record.key, partitions)
            latest[decoded[2]] = decode_source_offset_value(record.value)
            assert record.value == b'{"offset":%d}' % latest[decoded[2]]
    assert latest == {0: 12, 1: 12}


def test_a_run_that_starts_where_an_aborted_transaction_ended_copies_the_next_one(kafka_clusters: Any) -> None:
    """The first run stops after an aborted transaction; the next one starts at a committed transaction."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-t", partitions=1)
    config = make_config(kafka_clusters, p)
    transactional_writes(
        kafka_clusters.primary, topic, [([{"value": b"ok-%d" % i} for i in range(4)], True), ([{"value": b"x"}], False)]
    )
    assert own_records(replicate(config, "primary->backup", None, LocalExecutor())) == 4
    transactional_writes(kafka_clusters.primary, topic, [([{"value": b"later-%d" % i} for i in range(3)], True)])
    second = replicate(config, "primary->backup", None, LocalExecutor())
    assert own_records(second) == 3 and second.lag == 0
    copied = [r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")]
    assert copied == [b"ok-0", b"ok-1", b"ok-2", b"ok-3", b"later-0", b"later-1", b"later-2"]


def test_offset_syncs_cover_run_starts_ends_and_gaps(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-syncs", partitions=1)
    transactional_writes(
        kafka_clusters.primary,
        topic,
        [
            ([{"value": b"a%d" % i} for i in range(5)], True),  # offsets 0-4, marker 5
            ([{"value": b"x"}], False),  # 6 aborted, marker 7
            ([{"value": b"b%d" % i} for i in range(3)], True),  # offsets 8-10, marker 11
        ],
    )
    config = make_config(kafka_clusters, p)
    assert replicate(config, "primary->backup", None, LocalExecutor()).ok
    syncs = [
        OffsetSync.decode(r.key, r.value) for r in read_all(kafka_clusters.backup, "mm2-offset-syncs.primary.internal")
    ]
    mine = [(s.upstream_offset, s.downstream_offset) for s in syncs if s.topic == topic]
    assert mine == [(0, 0), (4, 4), (8, 5), (10, 7)]
    run = [s.run for s in syncs if s.topic == topic][-1]
    assert run is not None and (run.run_start_upstream, run.run_start_downstream) == (8, 5)
    assert (run.previous_upstream, run.previous_downstream) == (4, 4)


def test_offset_syncs_stay_exact_when_another_producer_writes_the_remote_partition(kafka_clusters: Any) -> None:
    """Exactly-once learns where a batch landed from its first and last record's reports only; a foreign writer
    between them must never make a sync claim a wrong record (the span is then copied again, reported per record)."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-shared", partitions=1)
    remote = create_topic(kafka_clusters.backup, f"primary.{topic}", partitions=1)
    count = 10_000
    pad = b"." * 4000  # a consumer batch spans several produce requests, so foreign records can land inside it
    produce(kafka_clusters.primary, topic, [b"r%d" % i + pad for i in range(count)])
    stop = threading.Event()

    def foreign() -> None:
        producer = Producer({"bootstrap.servers": kafka_clusters.backup, "linger.ms": 0})
        n = 0
        while not stop.is_set():
            producer.produce(remote, value=b"foreign-%d" % n, partition=0)
            producer.poll(0)
            n += 1
            time.sleep(0.0005)
        producer.flush(30)

    writer = threading.Thread(target=foreign)
    writer.start()
    try:
        report = replicate(
            make_config(kafka_clusters, p, "mirrorflow.unit.max.records = 3000\n"),
            "primary->backup",
            None,
            LocalExecutor(),
        )
    finally:
        stop.set()
        writer.join(60)
    assert report.ok and own_records(report) == count, report.errors
    landed = {r.offset: r.value for r in read_all(kafka_clusters.backup, remote)}
    copies = [v for _, v in sorted(landed.items()) if v is not None and not v.startswith(b"foreign-")]
    assert copies == [b"r%d" % i + pad for i in range(count)]  # each record once, in order
    assert len(landed) > count  # the other producer did write in between
    syncs = [
        OffsetSync.decode(r.key, r.value) for r in read_all(kafka_clusters.backup, "mm2-offset-syncs.primary.internal")
    ]
    mine = [s for s in syncs if s.topic == topic]
    assert mine and all(landed[s.downstream_offset] == b"r%d" % s.upstream_offset + pad for s in mine)
    # A run (from its start sync to the next sync) claims every offset between: each claim must hold.
    for start, end in itertools.pairwise(mine):
        if end.run is not None and end.run.run_start_upstream == start.upstream_offset != end.upstream_offset:
            for i in range(end.upstream_offset - start.upstream_offset + 1):
                assert landed[start.downstream_offset + i] == b"r%d" % (start.upstream_offset + i) + pad


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_killed_task_is_retried_without_gap(
    kafka_clusters: Any, spark_engine: UnitExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delivery: str
) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-fault", partitions=2)
    produce(
        kafka_clusters.primary,
        topic,
        [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(200)],
    )
    stage = "before-commit" if delivery == "exactly-once" else "before-progress"
    marker = tmp_path / "fault-fired"
    monkeypatch.setenv("MIRRORFLOW_FAULT", json.dumps({"after_records": 40, "marker": str(marker), "stage": stage}))
    config = make_config(kafka_clusters, p, f"mirrorflow.delivery = {delivery}\nmirrorflow.unit.max.records = 60\n")
    report = replicate(config, "primary->backup", None, spark_engine)
    assert marker.exists(), "the fault hook did not fire"
    monkeypatch.delenv("MIRRORFLOW_FAULT")
    again = replicate(config, "primary->backup", None, spark_engine)
    assert report.ok and again.ok, (report.errors, again.errors)
    source = committed(kafka_clusters.primary, topic)
    target = committed(kafka_clusters.backup, f"primary.{topic}")
    if delivery == "exactly-once":
        assert target == source  # no duplicate, no gap
        # the killed attempt really wrote: its records sit in an aborted transaction
        assert len(read_all(kafka_clusters.backup, f"primary.{topic}", isolation="read_uncommitted")) > len(source)
    else:
        assert set(target) >= set(source)  # no gap
        for partition in (0, 1):  # order kept, duplicates only as repeated runs
            values = [r[2] for r in target if r[0] == partition]
            assert sorted(set(values), key=values.index) == [r[2] for r in source if r[0] == partition]


def test_what_a_lost_executor_committed_is_counted(
    kafka_clusters: Any, spark_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit killed after its first transaction committed: the retried task reports only what it copied itself."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-lost", partitions=1)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i, "partition": 0} for i in range(100)])
    marker = tmp_path / "fault-fired"
    monkeypatch.setenv("MIRRORFLOW_FAULT", json.dumps({"after_records": 50, "marker": str(marker)}))
    config = make_config(kafka_clusters, p, "mirrorflow.unit.max.records = 30\n")
    report = replicate_on_connect(config, spark_connect)
    assert marker.exists(), "the fault hook did not fire"
    assert report.ok, report.errors
    assert own_records(report) == 100  # 30 committed by the lost attempt, 70 by the retry
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)


def test_a_wide_topic_killed_while_a_lane_transaction_is_open_loses_nothing_and_repeats_nothing(
    kafka_clusters: Any, spark_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 partitions share 16 transactional ids: small units of a lane leave their spans in one open transaction
    (``copy._LaneTransaction``). The task is killed while such a transaction holds earlier units' records; the
    retried task fences it (aborted), and every partition ends up copied exactly once, offset syncs exact."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-wide", partitions=40)
    # Partitions 0-15 (each the first unit of its lane) get 3 records; the later units of a lane 10, and the fault
    # fires at a unit's 8th record: in a later unit, while the first unit's span waits in the open transaction.
    records = [
        {"key": b"k%d" % i, "value": b"p%d-r%d" % (partition, i), "partition": partition}
        for partition in range(40)
        for i in range(3 if partition < 16 else 10)
    ]
    produce(kafka_clusters.primary, topic, records)
    marker = tmp_path / "fault-fired"
    monkeypatch.setenv("MIRRORFLOW_FAULT", json.dumps({"after_records": 8, "marker": str(marker)}))
    config = make_config(kafka_clusters, p)
    report = replicate_on_connect(config, spark_connect)
    assert marker.exists(), "the fault hook did not fire"
    assert report.ok, report.errors
    assert own_records(report) == len(records)
    source = committed(kafka_clusters.primary, topic)
    assert committed(kafka_clusters.backup, f"primary.{topic}") == source  # no duplicate, no gap
    # The killed attempt really wrote: its records sit in an aborted transaction.
    assert len(read_all(kafka_clusters.backup, f"primary.{topic}", isolation="read_uncommitted")) > len(source)
    landed = {(r.partition, r.offset): r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")}
    syncs = [
        sync
        for r in read_all(kafka_clusters.backup, "mm2-offset-syncs.primary.internal")
        if (sync := OffsetSync.decode(r.key, r.value)).topic == topic
    ]
    assert {s.partition for s in syncs} == set(range(40))
    assert all(landed[(s.partition, s.downstream_offset)].endswith(b"-r%d" % s.upstream_offset) for s in syncs)


def test_new_topics_and_partitions_are_picked_up(kafka_clusters: Any) -> None:
    p = prefix()
    first = create_topic(kafka_clusters.primary, f"{p}-grow", partitions=1)
    produce(kafka_clusters.primary, first, [b"a", b"b"])
    config = make_config(kafka_clusters, p)
    assert own_records(replicate(config, "primary->backup", None, LocalExecutor())) == 2
    source_admin = admin(kafka_clusters.primary)
    source_admin.create_partitions([NewPartitions(first, 3)])[first].result(30)
    second = create_topic(kafka_clusters.primary, f"{p}-new", partitions=2)
    produce(kafka_clusters.primary, first, [{"value": b"p2", "partition": 2}])
    produce(kafka_clusters.primary, second, [{"value": b"n", "partition": 1}])
    report = replicate(config, "primary->backup", None, LocalExecutor())
    assert report.ok and own_records(report) == 2
    topics = admin(kafka_clusters.backup).list_topics(timeout=10).topics
    assert len(topics[f"primary.{first}"].partitions) == 3 and len(topics[f"primary.{second}"].partitions) == 2
    assert committed(kafka_clusters.backup, f"primary.{first}") == committed(kafka_clusters.primary, first)
    assert committed(kafka_clusters.backup, f"primary.{second}") == committed(kafka_clusters.primary, second)


@pytest.mark.parametrize("truncation", ["continue", "stop"])
def test_truncation_is_reported(kafka_clusters: Any, truncation: str) -> None:
    from confluent_kafka import TopicPartition

    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-trunc", partitions=1)
    produce(kafka_clusters.primary, topic, [b"%d" % i for i in range(10)])
    config = make_config(kafka_clusters, p, f"mirrorflow.truncation = {truncation}\n")
    assert own_records(replicate(config, "primary->backup", None, LocalExecutor())) == 10
    produce(kafka_clusters.primary, topic, [b"%d" % i for i in range(10, 20)])
    source_admin = admin(kafka_clusters.primary)
    deleted = source_admin.delete_records([TopicPartition(topic, 0, 15)])
    for future in deleted.values():
        future.result(30)
    report = replicate(config, "primary->backup", None, LocalExecutor())
    assert report.loss_events == [
        {
            "topic": topic,
            "partition": 0,
            "first_missing": 10,
            "last_missing": 14,
            "action": "stopped" if truncation == "stop" else "continued from log start",
        }
    ]
    values = [r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")]
    if truncation == "continue":
        assert report.ok and values == [b"%d" % i for i in list(range(10)) + list(range(15, 20))]
        syncs = [
            OffsetSync.decode(r.key, r.value)
            for r in read_all(kafka_clusters.backup, "mm2-offset-syncs.primary.internal")
        ]
        after_loss = [s.run for s in syncs if s.topic == topic and s.upstream_offset == 15]
        assert after_loss and after_loss[0].previous_upstream == -1  # no exactness claimed across lost records
    else:
        assert not report.ok and values == [b"%d" % i for i in range(10)]
        assert any("DATA LOSS" in e for e in report.errors)


class _DeletesBeforeTheFirstWave(LocalExecutor):
    """Retention at the worst moment: records deleted after the run planned (it knows the old log start), before
    its first unit fetches."""

    def __init__(self, bootstrap: str, topic: str, before: int) -> None:
        self.bootstrap, self.topic, self.before, self.waves = bootstrap, topic, before, 0

    def run(self, units: Any) -> Any:
        from confluent_kafka import TopicPartition

        self.waves += 1
        if self.waves == 1:
            client = admin(self.bootstrap)  # held until answered: a dropped client never completes its futures
            for future in client.delete_records([TopicPartition(self.topic, 0, self.before)]).values():
                future.result(30)
        return super().run(units)


def test_records_deleted_after_the_plan_are_reported_as_lost_in_the_same_run(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-late-trunc", partitions=1)
    produce(kafka_clusters.primary, topic, [b"%d" % i for i in range(10)])
    config = make_config(kafka_clusters, p)
    assert own_records(replicate(config, "primary->backup", None, LocalExecutor())) == 10
    produce(kafka_clusters.primary, topic, [b"%d" % i for i in range(10, 20)])
    executor = _DeletesBeforeTheFirstWave(kafka_clusters.primary, topic, 15)
    report = replicate(config, "primary->backup", None, executor)
    # The first unit met an out-of-range fetch (the plan's log start was 0); the second asked and reported.
    assert executor.waves == 2
    assert report.ok and own_records(report) == 5
    assert report.loss_events == [
        {"topic": topic, "partition": 0, "first_missing": 10, "last_missing": 14, "action": "continued from log start"}
    ]
    values = [r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")]
    assert values == [b"%d" % i for i in list(range(10)) + list(range(15, 20))]


def cli_config(tmp_path: Path, clusters: Any, p: str) -> Path:
    """A configuration file with family ``cli`` = topic ``<p>-cli``."""
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {p}-.*\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
        f"primary->backup.mirrorflow.families = cli\nprimary->backup.mirrorflow.family.cli.topics = {p}-cli\n"
    )
    return config_file


def replicate_cli(config_file: Path, report_file: Path, *engine: str) -> subprocess.CompletedProcess[str]:
    """``mirrorflow replicate`` of family ``cli`` with the given engine options."""
    exe = Path(sys.executable).parent / "mirrorflow"
    command = [str(exe), "replicate", "--config", str(config_file), "--flow", "primary->backup", "--family", "cli"]
    return subprocess.run(
        [*command, "--report", str(report_file), *engine], capture_output=True, text=True, timeout=300, check=False
    )


def test_replicate_cli_runs_the_spark_app(kafka_clusters: Any, tmp_path: Path) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cli", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"c%d" % i, "partition": i % 2} for i in range(30)])
    report_file = tmp_path / "report.json"
    result = replicate_cli(cli_config(tmp_path, kafka_clusters, p), report_file, "--master", "local[2]")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    report = json.loads(report_file.read_text())
    assert report["ok"] and report["records"] == 30 and report["family"] == "cli"
    # Where the time went, every phase of a Spark run, in order.
    assert list(report["phases"]) == list(PHASES) and all(v >= 0 for v in report["phases"].values())
    assert "  phases: submit " in result.stdout
    assert {(p_["partition"], p_["records"], p_["lag"]) for p_ in report["partitions"]} == {(0, 15, 0), (1, 15, 0)}
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)


def test_replicate_cli_submits_its_units_to_spark_connect(
    kafka_clusters: Any, spark_connect: str, tmp_path: Path
) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cli", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"c%d" % i, "partition": i % 2} for i in range(30)])
    config_file, report_file = cli_config(tmp_path, kafka_clusters, p), tmp_path / "report.json"
    result = replicate_cli(config_file, report_file, "--remote", spark_connect)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    report = json.loads(report_file.read_text())
    assert report["ok"] and report["records"] == 30
    assert list(report["phases"]) == list(PHASES) and report["phases"]["engine"] > 0  # connected to the server
    # The engine phase names its steps: a slow start shows whether the client import or the server was slow.
    steps = report["engine_steps"]
    assert set(steps) == {"package", "client import", "session", "leftover jobs"}
    assert sum(steps.values()) <= report["phases"]["engine"] + 0.01 and steps["client import"] > 0
    assert "  engine: package " in result.stdout
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)

    # Nothing new: the run never contacts the Spark Connect server (its cost is the run's own planning).
    result = replicate_cli(config_file, report_file, "--remote", spark_connect)
    assert result.returncode == 0, result.stderr[-4000:]
    quiet = json.loads(report_file.read_text())
    assert quiet["ok"] and quiet["records"] == 0 and quiet["phases"]["engine"] == 0 and quiet["engine_steps"] == {}

    produce(kafka_clusters.primary, topic, [{"value": b"d%d" % i, "partition": i % 2} for i in range(10)])
    result = replicate_cli(config_file, report_file, "--remote", spark_connect)  # the flow family's session again
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(report_file.read_text())["records"] == 10
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)


def test_replicate_cli_names_an_unreachable_spark_connect_server(kafka_clusters: Any, tmp_path: Path) -> None:
    from mirrorflow_dev.devcluster import free_port

    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cli", partitions=1)
    produce(kafka_clusters.primary, topic, [b"a", b"b"])
    config_file, report_file = cli_config(tmp_path, kafka_clusters, p), tmp_path / "report.json"
    dead = f"sc://127.0.0.1:{free_port()}"
    result = replicate_cli(config_file, report_file, "--remote", f"{dead}/;token=s3cret")
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: the Spark Connect server {dead} does not answer") and "s3cret" not in line
    assert json.loads(report_file.read_text())["errors"] == [line.removeprefix("error: ")]
    # Nothing half done: the lock is free and everything is copied by the next run.
    result = replicate_cli(config_file, report_file, "--in-process")
    assert result.returncode == 0, result.stderr[-4000:]
    assert [r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")] == [b"a", b"b"]


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_two_concurrent_runs_never_both_write(kafka_clusters: Any, delivery: str) -> None:
    import threading

    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-race", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"r%d" % i, "partition": i % 2} for i in range(400)])
    config = make_config(kafka_clusters, p, f"mirrorflow.unit.max.records = 25\nmirrorflow.delivery = {delivery}\n")
    reports: list[Any] = []
    runs = [
        threading.Thread(target=lambda: reports.append(replicate(config, "primary->backup", None, LocalExecutor())))
        for _ in range(2)
    ]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(300)
    assert len(reports) == 2
    # Either the second run waited for the lock and found nothing new, or it gave up naming the lock.
    assert all(r.ok or r.errors == [r.errors[0]] and "another run holds the lock" in r.errors[0] for r in reports)
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)
    assert sum(r.records for r in reports) == 400  # each record copied by exactly one of the two runs


def test_continuous_mode_keeps_copying_until_the_time_is_up(kafka_clusters: Any) -> None:
    import threading

    from mirrorflow.replication.continuous import replicate_continuously

    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cont", partitions=1)
    produce(kafka_clusters.primary, topic, [b"first"])
    config = make_config(kafka_clusters, p, "mirrorflow.poll.interval = 1s\n")
    late = threading.Timer(2.0, lambda: produce(kafka_clusters.primary, topic, [b"late"]))
    late.start()
    report = replicate_continuously(config, "primary->backup", None, LocalExecutor(), duration_s=6)
    late.join()
    assert report.ok and report.batches >= 3 and own_records(report) == 2
    assert [r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")] == [b"first", b"late"]


def test_sigterm_stops_continuous_replication_after_its_batch_with_the_lock_released(
    kafka_clusters: Any, tmp_path: Path
) -> None:
    """A service manager's SIGTERM: the batch in progress finishes, the report is written, the lock is released (the
    next run does not wait for it), and the exit code is that of a run whose time was up."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cli", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"s%d" % i, "partition": i % 2} for i in range(20)])
    config_file, report_file = cli_config(tmp_path, kafka_clusters, p), tmp_path / "report.json"
    exe = Path(sys.executable).parent / "mirrorflow"
    command = [str(exe), "replicate", "--config", str(config_file), "--flow", "primary->backup", "--family", "cli"]
    since_ms = int(time.time() * 1000)
    process = subprocess.Popen(
        [*command, "--duration", "10m", "--in-process", "--report", str(report_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the first batch copied everything (its remote topic is made in it)
            assert process.poll() is None, process.communicate()
            with contextlib.suppress(KafkaException):
                if len(read_all(kafka_clusters.backup, f"primary.{topic}")) == 20:
                    break
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, stdout[-2000:] + stderr[-2000:]
    assert "SIGTERM: stopping after the batch in progress" in stderr
    report = json.loads(report_file.read_text())
    assert report["ok"] and report["records"] == 20
    assert any(w.startswith("stopped by SIGTERM after batch ") for w in report["warnings"])
    # The lock's release record carries the run's summary: released, not left to expire.
    flow = load_config(config_file).flow("primary", "backup")
    released = released_report(flow, "cli", since_ms, client_properties(flow, "target", "consumer"))
    assert released is not None and released["ok"] and released["records"] == 20
    produce(kafka_clusters.primary, topic, [{"value": b"t%d" % i, "partition": i % 2} for i in range(4)])
    again = replicate_cli(config_file, report_file, "--in-process")  # the lock was released: no wait, no refusal
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert json.loads(report_file.read_text())["records"] == 4
    assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)


def test_replicate_cli_starts_a_local_spark_connect_server_on_first_use(kafka_clusters: Any, tmp_path: Path) -> None:
    """No engine option, no SPARK_REMOTE: the first run that has records to copy starts the machine's Spark Connect
    server (under MIRRORFLOW_HOME), later runs reuse it, and `mirrorflow dev down` stops it."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cli", partitions=2)
    config_file, report_file = cli_config(tmp_path, kafka_clusters, p), tmp_path / "report.json"
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"} | {"MIRRORFLOW_HOME": str(home)}
    exe = str(Path(sys.executable).parent / "mirrorflow")
    command = [exe, "replicate", "--config", str(config_file), "--flow", "primary->backup", "--family", "cli"]

    def replicate_once() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, "--report", str(report_file)], env=env, capture_output=True, text=True, timeout=300, check=False
        )

    try:
        quiet = replicate_once()  # nothing to copy: no server is started for it
        assert quiet.returncode == 0, quiet.stderr[-3000:]
        assert not (home / "spark-connect" / "server.pid").exists()

        produce(kafka_clusters.primary, topic, [{"value": b"l%d" % i, "partition": i % 2} for i in range(20)])
        first = replicate_once()
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
        assert "starting a local Spark Connect server" in first.stderr
        assert json.loads(report_file.read_text())["records"] == 20

        produce(kafka_clusters.primary, topic, [{"value": b"m%d" % i, "partition": i % 2} for i in range(6)])
        second = replicate_once()
        assert second.returncode == 0 and "starting a local Spark Connect server" not in second.stderr
        assert json.loads(report_file.read_text())["records"] == 6
        assert committed(kafka_clusters.backup, f"primary.{topic}") == committed(kafka_clusters.primary, topic)
    finally:
        down = subprocess.run(
            [exe, "dev", "down", "--clusters", "none:1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert down.returncode == 0, down.stderr
    assert "stopped in" in down.stdout and not (home / "spark-connect" / "server.pid").exists()
