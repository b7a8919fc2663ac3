"""`mirrorflow verify` against real clusters and real Spark: a clean copy is identical; every kind of difference is
found and named by its source and target offsets, records the target holds twice included (before the first known
copy, or a range copied again); records retention deleted are not verifiable, not different; many small partitions
are read by one consumer per cluster."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.replication.connect import SparkConnectExecutor
from mirrorflow.replication.executor import LocalExecutor, SparkExecutor, UnitExecutor
from mirrorflow.replication.progress import progress_location, progress_topic
from mirrorflow.replication.run import replicate
from mirrorflow.verify import VerifyReport, render_text, verify_flow
from mirrorflow.wire import source_offset_value
from tests.kafka_helpers import admin, create_topic, produce, read_all

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
FLOW = "primary->backup"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession (the spark-submit app's engine): 2 cores, a failed task retried up to 4 times."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("mirrorflow-verify-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYTHONPATH", str(REPO))
        .getOrCreate()
    )
    yield session
    session.stop()
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(params=["in-process", "spark-context", "spark-connect"])
def engine(request: pytest.FixtureRequest) -> Iterator[UnitExecutor]:
    """The three places chunk tasks run: this process, a SparkContext's tasks, a Spark Connect server's tasks."""
    if request.param == "in-process":
        yield LocalExecutor()
        return
    if request.param == "spark-context":
        yield SparkExecutor(request.getfixturevalue("spark"))
        return
    executor = SparkConnectExecutor(request.getfixturevalue("spark_connect"), f"tests/verify/{uuid.uuid4().hex}")
    yield executor
    executor.close()


def make_config(clusters: Any, prefix: str, extra: str = "") -> MirrorConfig:
    return parse_config(config_text(clusters, prefix, extra))


def config_text(clusters: Any, prefix: str, extra: str = "") -> str:
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}-.*\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        f"offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n{extra}"
    )


def prefix() -> str:
    return f"ver-{uuid.uuid4().hex[:8]}"


def transactional_writes(bootstrap: str, topic: str, batches: list[tuple[list[dict[str, Any]], bool]]) -> None:
    """Write batches in transactions, committing or aborting each: offsets get gaps (markers, aborted records)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for records, commit in batches:
        producer.begin_transaction()
        for r in records:
            producer.produce(topic, **r)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def copy(config: MirrorConfig) -> None:
    report = replicate(config, FLOW, None, LocalExecutor())
    assert report.ok, report.errors


def verdict(report: VerifyReport, topic: str, partition: int = 0) -> Any:
    return next(p for p in report.partitions if p.topic == topic and p.partition == partition)


def target_offset_of(bootstrap: str, topic: str, value: bytes) -> int:
    return next(r.offset for r in read_all(bootstrap, topic) if r.value == value)


def forge_progress(clusters: Any, topic: str, partition: int, last_copied: int) -> None:
    """Store progress as if ``last_copied`` had been copied (what a copy that skipped records would leave)."""
    partitions = len(admin(clusters.backup).list_topics(timeout=10).topics[progress_topic("primary")].partitions)
    key, where = progress_location("primary", topic, partition, partitions)
    produce(
        clusters.backup,
        progress_topic("primary"),
        [{"key": key, "value": source_offset_value(last_copied), "partition": where}],
    )


def test_a_clean_copy_verifies_identical(kafka_clusters: Any, engine: UnitExecutor) -> None:
    p = prefix()
    keyed = create_topic(kafka_clusters.primary, f"{p}-keyed", partitions=3)
    txn = create_topic(kafka_clusters.primary, f"{p}-txn", partitions=2)
    hour_ago = int(time.time() * 1000) - 3_600_000
    produce(
        kafka_clusters.primary,
        keyed,
        [
            {
                "key": None if i % 7 == 0 else b"key-%d" % (i % 5),
                "value": None if i % 11 == 0 else bytes([i, 0, 255 - i]) * (i % 4 + 1),  # None: a tombstone
                "headers": [("h", b"\x00\x01"), ("h", b"second"), ("bin", bytes(range(i % 8))), ("none", None)],
                "partition": i % 3,
                "timestamp": hour_ago + i * 1000,
            }
            for i in range(60)
        ],
    )
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
    copy(config)
    report = verify_flow(config, FLOW, topics={keyed, txn}, executor=engine, chunk_records=6)
    assert report.status == "identical" and report.exit_code == 0, render_text(report)
    assert report.records == 60 + 17 and report.to_dict()["target_records"] == 60 + 17
    assert all(v.status == "identical" and not v.unverifiable for v in report.partitions)
    assert sum(len(v.chunks) for v in report.partitions) > len(report.partitions)  # partitions split into chunks
    for v in report.partitions:
        assert all(c["source_digest"] == c["target_digest"] for c in v.chunks)
    assert "identical" in render_text(report).splitlines()[-1]


def test_a_record_another_producer_appended_is_extra(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-extra", partitions=1)
    config = make_config(kafka_clusters, p, "mirrorflow.unit.max.records = 4\n")
    produce(kafka_clusters.primary, topic, [b"a%d" % i for i in range(10)])
    copy(config)
    stray = produce(kafka_clusters.backup, f"primary.{topic}", [{"value": b"stray", "partition": 0}])[0].offset
    report = verify_flow(config, FLOW, topics={topic}, chunk_records=3)
    assert report.exit_code == 1, render_text(report)
    (difference,) = verdict(report, topic).differences
    assert difference["kind"] == "extra" and difference["target_offset"] == stray and difference["count"] == 1
    assert difference["source_offset"] is None  # after the last source record
    # The copy goes on after the stray: the stray is now between two copied runs, before source offset 10.
    produce(kafka_clusters.primary, topic, [b"b%d" % i for i in range(5)])
    copy(config)
    report = verify_flow(config, FLOW, topics={topic}, chunk_records=3)
    (difference,) = verdict(report, topic).differences
    assert (difference["kind"], difference["target_offset"], difference["source_offset"]) == ("extra", stray, 10)
    assert f"target offset(s) {stray} (1 record(s)) with no source record, before source offset 10" in render_text(
        report
    )


def test_a_record_whose_header_differs_is_named(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-header", partitions=1)
    config = make_config(kafka_clusters, p)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i, "headers": [("h", b"same")]} for i in range(10)])
    copy(config)
    # The same record on both sides except one header value; the stored progress says it was copied.
    stamp = int(time.time() * 1000)
    source = produce(
        kafka_clusters.primary, topic, [{"key": b"k", "value": b"v10", "headers": [("h", b"a")], "timestamp": stamp}]
    )
    wrong = produce(
        kafka_clusters.backup,
        f"primary.{topic}",
        [{"key": b"k", "value": b"v10", "headers": [("h", b"b")], "partition": 0, "timestamp": stamp}],
    )
    forge_progress(kafka_clusters, topic, 0, source[0].offset)
    report = verify_flow(config, FLOW, topics={topic})
    assert report.status == "different" and report.exit_code == 1
    (difference,) = verdict(report, topic).differences
    assert difference["kind"] == "differs" and difference["fields"] == ["headers"]
    assert (difference["source_offset"], difference["target_offset"]) == (source[0].offset, wrong[0].offset)


def test_a_range_the_copy_skipped_is_missing(kafka_clusters: Any, engine: UnitExecutor) -> None:
    """Named the same by every engine: the difference is found inside the chunk task, wherever it runs."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-skip", partitions=1)
    config = make_config(kafka_clusters, p, "mirrorflow.unit.max.records = 3\n")
    produce(kafka_clusters.primary, topic, [b"v%d" % i for i in range(5)])
    copy(config)
    produce(kafka_clusters.primary, topic, [b"v%d" % i for i in range(5, 12)])
    forge_progress(kafka_clusters, topic, 0, 7)  # as if 5..7 had been copied: the next run starts at 8
    copy(config)
    after = target_offset_of(kafka_clusters.backup, f"primary.{topic}", b"v8")
    report = verify_flow(config, FLOW, topics={topic}, chunk_records=2, executor=engine)
    (difference,) = verdict(report, topic).differences
    assert difference["kind"] == "missing" and difference["count"] == 3
    assert (difference["source_offset"], difference["source_last"], difference["target_offset"]) == (5, 7, after)
    assert report.exit_code == 1


def test_a_skipped_range_longer_than_the_look_ahead_is_still_missing(
    kafka_clusters: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside one chunk, 30 records missing with a look-ahead of 5: found by scanning the rest of the chunk."""
    from mirrorflow.verify import plan

    monkeypatch.setattr(plan, "LOOKAHEAD", 5)
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-longskip", partitions=1)
    config = make_config(kafka_clusters, p, "mirrorflow.delivery = at-least-once\n")
    produce(kafka_clusters.primary, topic, [b"v%d" % i for i in range(5)])
    copy(config)
    produce(kafka_clusters.primary, topic, [b"v%d" % i for i in range(5, 50)])
    forge_progress(kafka_clusters, topic, 0, 34)  # 5..34 never copied
    copy(config)
    after = target_offset_of(kafka_clusters.backup, f"primary.{topic}", b"v35")
    report = verify_flow(config, FLOW, topics={topic}, chunk_records=1000)
    (difference,) = verdict(report, topic).differences
    assert (difference["kind"], difference["count"]) == ("missing", 30)
    assert (difference["source_offset"], difference["source_last"], difference["target_offset"]) == (5, 34, after)


def test_records_the_target_held_before_the_copy_began_are_extra(kafka_clusters: Any, engine: UnitExecutor) -> None:
    """Duplicates before the first copied run: the remote partition already held copies of records 0..2 (a first
    copy whose progress was lost) when the copy began, and the copy wrote them again after them. No copied run maps
    target offsets 0..2, yet they are compared: the whole source partition is verified, so every target record must
    copy one of its records. Named the same by every engine."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-head", partitions=1)
    stamp = int(time.time() * 1000)
    records = [
        {"key": b"k%d" % i, "value": b"v%d" % i, "headers": [("h", b"%d" % i)], "timestamp": stamp + i, "partition": 0}
        for i in range(14)
    ]
    produce(kafka_clusters.primary, topic, records)
    remote = create_topic(kafka_clusters.backup, f"primary.{topic}", partitions=1)
    produce(kafka_clusters.backup, remote, records[:3])  # exactly the records a first copy would have written
    config = make_config(kafka_clusters, p)
    copy(config)
    assert [r.value for r in read_all(kafka_clusters.backup, remote)][:4] == [b"v0", b"v1", b"v2", b"v0"]
    report = verify_flow(config, FLOW, topics={topic}, executor=engine)
    assert report.status == "different" and report.exit_code == 1, render_text(report)
    v = verdict(report, topic)
    assert v.target_first == 0 and (v.source_records, v.target_records) == (14, 17)
    (difference,) = v.differences
    assert (difference["kind"], difference["count"], difference["source_offset"]) == ("extra", 3, 3)
    assert (difference["target_offset"], difference["target_last"]) == (3, 5)
    assert "target offset(s) 3..5 (3 record(s)) with no source record, before source offset 3" in render_text(report)
    # Asked to start at offset 0 explicitly, the range is the copy's: what the target held before it is not asked.
    explicit = verify_flow(config, FLOW, topics={topic}, from_offsets={(topic, 0): 0})
    assert explicit.status == "identical" and verdict(explicit, topic).target_first == 3, render_text(explicit)


def test_a_range_copied_twice_is_extra(kafka_clusters: Any) -> None:
    """The progress of records 5..9 was lost after they were copied (forged back to 4): the next run copies them
    again. The offset syncs say where both copies are; the first copies stay inside a chunk and show as extra."""
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-twice", partitions=1)
    config = make_config(kafka_clusters, p)
    produce(kafka_clusters.primary, topic, [b"v%d" % i for i in range(10)])
    copy(config)
    forge_progress(kafka_clusters, topic, 0, 4)
    copy(config)
    values = [r.value for r in read_all(kafka_clusters.backup, f"primary.{topic}")]
    assert values == [b"v%d" % i for i in range(10)] + [b"v%d" % i for i in range(5, 10)]
    for chunk_records in (1000, 3):  # the copies in one chunk, and cut at the second copy's start
        report = verify_flow(config, FLOW, topics={topic}, chunk_records=chunk_records)
        assert report.exit_code == 1, render_text(report)
        v = verdict(report, topic)
        assert not v.unverifiable and (v.source_records, v.target_records) == (10, 15), render_text(report)
        (difference,) = v.differences
        assert (difference["kind"], difference["count"]) == ("extra", 5), difference


def test_many_small_partitions_are_read_by_one_consumer_per_cluster(
    kafka_clusters: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 partitions of a few records, in this process: one source and one target consumer read every chunk (a
    consumer per partition and side waited for each one's end in turn). A stray record in one partition is still
    found and named, by a lockstep read of that chunk alone."""
    from mirrorflow.verify import reader

    made: list[dict[str, Any]] = []
    real = reader.consumer

    def counted(config: dict[str, Any]) -> Any:
        made.append(config)
        return real(config)

    monkeypatch.setattr(reader, "consumer", counted)
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-many", partitions=40)
    produce(kafka_clusters.primary, topic, [{"value": b"m%d" % i, "partition": i % 40} for i in range(120)])
    config = make_config(kafka_clusters, p)
    copy(config)
    clean = verify_flow(config, FLOW, topics={topic})
    assert clean.status == "identical" and clean.records == 120, render_text(clean)
    assert len(made) == 2 and {c["bootstrap.servers"] for c in made} == {kafka_clusters.primary, kafka_clusters.backup}

    [stray] = produce(kafka_clusters.backup, f"primary.{topic}", [{"value": b"stray", "partition": 7}])
    made.clear()
    report = verify_flow(config, FLOW, topics={topic})
    assert len(made) == 2 and report.exit_code == 1
    assert [v.partition for v in report.partitions if v.status != "identical"] == [7]
    (difference,) = verdict(report, topic, 7).differences
    assert (difference["kind"], difference["target_offset"]) == ("extra", stray.offset)


def test_records_retention_deleted_are_not_verifiable_not_different(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-trunc", partitions=1)
    config = make_config(kafka_clusters, p, "mirrorflow.unit.max.records = 5\n")
    produce(kafka_clusters.primary, topic, [b"v%d" % i for i in range(20)])
    copy(config)
    source_admin = admin(kafka_clusters.primary)  # held: a collected client never completes its futures
    for future in source_admin.delete_records([TopicPartition(topic, 0, 12)]).values():
        future.result(30)
    report = verify_flow(config, FLOW, topics={topic}, chunk_records=4)
    v = verdict(report, topic)
    assert report.status == "identical" and report.exit_code == 0, render_text(report)
    assert (v.source_first, v.source_last, v.source_records) == (12, 19, 8)
    (gone,) = v.unverifiable
    assert (gone["first"], gone["last"]) == (0, 11) and "deleted on the source" in gone["reason"]
    assert "NOT VERIFIABLE" in render_text(report) and "1 range(s) not verifiable" in render_text(report)


def test_since_and_from_offsets_limit_the_range(kafka_clusters: Any) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-since", partitions=2)
    old = int(time.time() * 1000) - 7_200_000
    produce(
        kafka_clusters.primary, topic, [{"value": b"old%d" % i, "partition": 0, "timestamp": old} for i in range(5)]
    )
    produce(kafka_clusters.primary, topic, [{"value": b"new%d" % i, "partition": 0} for i in range(3)])
    produce(kafka_clusters.primary, topic, [{"value": b"p1-%d" % i, "partition": 1} for i in range(4)])
    config = make_config(kafka_clusters, p)
    copy(config)
    recent = verify_flow(config, FLOW, topics={topic}, since="1h")
    assert (verdict(recent, topic).source_first, verdict(recent, topic).source_records) == (5, 3)
    assert recent.exit_code == 0
    chosen = verify_flow(config, FLOW, topics={topic}, from_offsets={(topic, 1): 2})
    assert verdict(chosen, topic, 1).source_records == 2 and verdict(chosen, topic, 0).source_records == 8


def verify_cli(config_file: Path, *options: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "mirrorflow"
    command = [str(exe), "verify", "--config", str(config_file), "--flow", FLOW, *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_cli_exit_codes_report_and_unreachable_cluster(kafka_clusters: Any, tmp_path: Path) -> None:
    p = prefix()
    topic = create_topic(kafka_clusters.primary, f"{p}-cli", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"c%d" % i, "partition": i % 2} for i in range(12)])
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(config_text(kafka_clusters, p))
    copy(parse_config(config_file.read_text()))
    report_file = tmp_path / "verify.json"
    clean = verify_cli(config_file, "--in-process", "--topics", topic, "--report", str(report_file))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "identical" in clean.stdout and json.loads(report_file.read_text())["records"] == 12

    produce(kafka_clusters.backup, f"primary.{topic}", [{"value": b"stray", "partition": 1}])
    different = verify_cli(config_file, "--in-process", "--topics", topic, "--json")
    assert different.returncode == 1, different.stdout + different.stderr
    data = json.loads(different.stdout)
    assert data["status"] == "different" and data["differences"] == 1
    (part,) = [v for v in data["partitions"] if v["partition"] == 1]
    assert part["differences"][0]["kind"] == "extra"

    bad = verify_cli(config_file, "--in-process", "--topics", "no-such-topic")
    assert bad.returncode == 2 and "no such source topic" in bad.stderr  # 1 only ever means "the copy differs"

    dead = tmp_path / "dead.properties"
    dead.write_text(config_text(kafka_clusters, p).replace(kafka_clusters.primary, "127.0.0.1:1"))
    unreachable = verify_cli(dead, "--in-process", "--report", str(report_file))
    assert unreachable.returncode == 2, unreachable.stderr
    assert unreachable.stderr.startswith("error: cluster 'primary' (source of primary->backup")
    assert json.loads(report_file.read_text())["status"] == "error"
