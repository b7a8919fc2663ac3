"""The status model against real clusters: lag in records and seconds, and a dead cluster named, not hung on.

One small copy sets up every case at once (a caught-up partition, one behind by records of known
timestamps, an empty one, a topic never copied); a wide flow (200 topics x 5 partitions, one more in-process
run) checks the per-topic summary and that a status makes the same Kafka requests for 50 topics as for 200.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.checkpoints.emit import emit_checkpoints
from mirrorflow.cli import main
from mirrorflow.config import parse_config
from mirrorflow.kafka import calls as kafka_calls
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow.status import BEHIND, CAUGHT_UP, NO_PROGRESS, StatusPages, flow_status, summarize_topics
from mirrorflow_dev.devcluster import free_port
from tests.integration.test_checkpoints import commit
from tests.kafka_helpers import create_topic, own_records, produce

pytestmark = pytest.mark.integration

AGO_S = 60.0  # how old the oldest record not copied is
TOLERANCE_S = 15.0  # the test's own run time between producing and measuring, on a loaded machine


def config_text(primary: str, backup: str, prefix: str, extra: str = "") -> str:
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        f"primary->backup.enabled = true\nprimary->backup.topics = {prefix}-.*\n"
        "primary->backup.mirrorflow.families = main\n"
        f"primary->backup.mirrorflow.family.main.topics = {prefix}-.*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        f"offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n{extra}"
    )


#: A dead cluster is given up on after min(this, 5 s) when it refuses connections: keeps those tests short.
SHORT = "mirrorflow.cluster.timeout = 2s\n"


@pytest.fixture(scope="module")
def copied(kafka_clusters: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Topic ``a`` (3 partitions): p0 copied entirely, p1 copied then 4 more records (the oldest 60 s old), p2
    empty; topic ``b`` created after the copy, with 2 records. Returns what the tests check against."""
    prefix = f"st{uuid.uuid4().hex[:8]}"
    primary, backup = kafka_clusters.primary, kafka_clusters.backup
    a = create_topic(primary, f"{prefix}-a", partitions=3)
    now_ms = int(time.time() * 1000)
    copied_stamp = now_ms - 120_000
    produce(primary, a, [{"value": b"x", "partition": 0} for _ in range(5)])
    produce(primary, a, [{"value": b"y", "partition": 1, "timestamp": copied_stamp - 1000 + i} for i in range(3)])
    config = parse_config(config_text(primary, backup, prefix))
    report = replicate(config, "primary->backup", "main", LocalExecutor())
    assert report.ok and own_records(report) == 8
    behind = [now_ms - int(AGO_S * 1000), now_ms - 30_000, now_ms - 10_000, now_ms]
    produce(primary, a, [{"value": b"z", "partition": 1, "timestamp": ts} for ts in behind])
    b = create_topic(primary, f"{prefix}-b", partitions=1)
    produce(primary, b, [{"value": b"w", "timestamp": now_ms - 5_000}, {"value": b"w"}])
    path = tmp_path_factory.mktemp("status") / "mm2.properties"
    path.write_text(config_text(primary, backup, prefix))
    return {"config": config, "path": path, "a": a, "b": b, "last_copied_ms": copied_stamp - 1000 + 2}


def by_partition(status: Any) -> dict[tuple[str, int], Any]:
    return {(p.topic, p.partition): p for p in status.partitions}


def test_lag_in_records_and_seconds_caught_up_behind_empty_and_never_copied(copied: dict[str, Any]) -> None:
    status = flow_status(copied["config"].flow("primary", "backup"), "main")
    assert status.errors == [] and status.unreachable == []
    parts = by_partition(status)
    a, b = copied["a"], copied["b"]
    assert set(parts) == {(a, 0), (a, 1), (a, 2), (b, 0)}

    caught_up = parts[(a, 0)]
    assert (caught_up.lag_records, caught_up.lag_seconds, caught_up.status) == (0, 0.0, CAUGHT_UP)
    assert (caught_up.end_offset, caught_up.copied_position) == (5, 5)
    assert caught_up.remote_topic == f"primary.{a}"
    assert caught_up.last_copied_timestamp_ms is None  # read only for a partition that lags: no record read here

    behind = parts[(a, 1)]
    assert (behind.end_offset, behind.copied_position, behind.lag_records, behind.status) == (7, 3, 4, BEHIND)
    assert AGO_S <= behind.lag_seconds <= AGO_S + TOLERANCE_S
    assert behind.last_copied_timestamp_ms == copied["last_copied_ms"]

    empty = parts[(a, 2)]
    assert (empty.end_offset, empty.copied_position, empty.lag_records, empty.lag_seconds) == (0, 0, 0, 0.0)
    assert empty.status == CAUGHT_UP and empty.last_copied_timestamp_ms is None

    never = parts[(b, 0)]
    assert (never.copied_position, never.lag_records, never.status) == (0, 2, NO_PROGRESS)
    assert 5.0 <= never.lag_seconds <= 5.0 + TOLERANCE_S and never.last_copied_timestamp_ms is None

    [family] = status.families
    assert family.family == "main" and family.lag_records == 6 and family.max_lag_seconds == behind.lag_seconds
    assert [(p.topic, p.partition) for p in family.worst[:2]] == [(a, 1), (b, 0)]
    assert status.failover == {"state": "normal"}
    assert "error" not in status.heartbeat and "error" not in status.checkpoints


def test_a_dead_target_is_named_not_hung_on(kafka_clusters: Any) -> None:
    dead = f"127.0.0.1:{free_port()}"
    config = parse_config(config_text(kafka_clusters.primary, dead, f"st{uuid.uuid4().hex[:8]}", SHORT))
    status = flow_status(config.flow("primary", "backup"))
    assert status.unreachable == ["backup"] and status.families == []
    assert status.errors[0].startswith(f"error: cluster 'backup' (target of primary->backup, bootstrap.servers {dead})")
    for part in (status.heartbeat, status.checkpoints, status.failover):
        assert "cluster 'backup'" in part["error"]


def test_a_dead_source_is_named_and_the_target_still_measured(kafka_clusters: Any) -> None:
    dead = f"127.0.0.1:{free_port()}"
    config = parse_config(config_text(dead, kafka_clusters.backup, f"st{uuid.uuid4().hex[:8]}", SHORT))
    status = flow_status(config.flow("primary", "backup"))
    assert status.unreachable == ["primary"] and status.families == []
    assert status.errors[0].startswith(
        f"error: cluster 'primary' (source of primary->backup, bootstrap.servers {dead})"
    )
    assert status.failover == {"state": "normal"} and "verdict" in status.heartbeat  # read on the live target


def test_cli_json_has_the_metric_names(copied: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["status", "--config", str(copied["path"]), "--flow", "primary->backup", "--family", "main", "--json"])
    assert code == 0
    [flow] = json.loads(capsys.readouterr().out)["flows"]
    assert flow["flow"] == "primary->backup" and flow["errors"] == []
    worst = flow["partitions"][0]
    assert {"topic", "partition", "lag_records", "lag_seconds", "remote_topic", "status"} <= set(worst)
    assert (worst["topic"], worst["partition"], worst["lag_records"]) == (copied["a"], 1, 4)
    assert {"heartbeat", "checkpoints", "failover", "families"} <= set(flow)


def test_cli_table_and_exit_2_for_a_dead_cluster(
    kafka_clusters: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    path = tmp_path / "mm2.properties"
    path.write_text(config_text(kafka_clusters.primary, dead, f"st{uuid.uuid4().hex[:8]}", SHORT))
    assert main(["status", "--config", str(path), "--flow", "primary->backup"]) == 2
    out, err = capsys.readouterr()
    assert f"error: cluster 'backup' (target of primary->backup, bootstrap.servers {dead}) did not answer" in err
    assert out.startswith("primary->backup: lag 0 record(s)")


def test_groups_with_checkpoints_and_how_many_translate_exactly(kafka_clusters: Any) -> None:
    """Cluster aliases of its own, so the checkpoints and offset-syncs topics hold this test's records only."""
    tag = uuid.uuid4().hex[:6]
    src, tgt, prefix = f"p{tag}", f"b{tag}", f"sg{tag}"
    text = (
        config_text(kafka_clusters.primary, kafka_clusters.backup, prefix)
        .replace("primary", src)
        .replace("backup", tgt)
    )
    config = parse_config(text + f"{src}->{tgt}.groups = {prefix}-.*\n")
    flow = config.flow(src, tgt)
    topic = create_topic(kafka_clusters.primary, f"{prefix}-t", partitions=1)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i} for i in range(10)])
    assert replicate(config, flow.name, "main", LocalExecutor()).records == 10
    produce(kafka_clusters.primary, topic, [{"value": b"late"} for _ in range(5)])  # never copied: 10..14
    commit(kafka_clusters.primary, f"{prefix}-inside", {(topic, 0): 4})  # inside the copied run: exact
    commit(kafka_clusters.primary, f"{prefix}-end", {(topic, 0): 10})  # right after its last record: exact
    commit(kafka_clusters.primary, f"{prefix}-ahead", {(topic, 0): 13})  # beyond the copy: not exact
    emitted = emit_checkpoints(flow, groups=f"{prefix}-.*")
    written = {g.group for g in emitted.groups if any(p.emitted for p in g.partitions)}
    assert {f"{prefix}-inside", f"{prefix}-end"} <= written

    groups = flow_status(flow).groups
    assert "error" not in groups, groups
    assert groups["groups"] == len(written) and groups["partitions"] == len(written)
    assert (groups["groups_exact"], groups["partitions_exact"]) == (2, 2)
    assert [row["group"] for row in groups["not_exact"]] == sorted(written - {f"{prefix}-inside", f"{prefix}-end"})
    for row in groups["not_exact"]:  # committed 13, copied to 10: 3 records not on the target yet
        assert (row["outcome"], row["missing_records"], row["upstream_offset"]) == ("not-yet-copied", 3, 13)


# ------------------------------------------------------------------------------------------- a wide flow

WIDE_TOPICS, WIDE_PARTITIONS, WIDE_RECORDS = 200, 5, 3


def create_topics(bootstrap: str, names: list[str], partitions: int, timeout: float = 60.0) -> None:
    """Every topic in one CreateTopics request; then wait until metadata shows a leader for each partition."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, num_partitions=partitions, replication_factor=1) for name in names]
    for future in client.create_topics(new, operation_timeout=timeout).values():
        future.result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        listed = client.list_topics(timeout=min(10.0, timeout)).topics
        entries = [listed.get(name) for name in names]
        if all(
            e is not None
            and e.error is None
            and len(e.partitions) == partitions
            and all(p.leader >= 0 for p in e.partitions.values())
            for e in entries
        ):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{len(names)} topics did not all get leaders within {timeout} s")
        time.sleep(0.1)


def produce_everywhere(bootstrap: str, names: list[str], partitions: int, records: int) -> None:
    """``records`` small records into every partition of every topic, with one producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failed: list[str] = []
    for name in names:
        for partition in range(partitions):
            for i in range(records):
                producer.produce(
                    name,
                    value=b"r%d" % i,
                    partition=partition,
                    on_delivery=lambda err, _m: err and failed.append(str(err)),
                )
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:3]


@pytest.fixture(scope="module")
def wide(kafka_clusters: Any) -> dict[str, Any]:
    """200 topics x 5 partitions x 3 records, created with one CreateTopics, copied once in-process; and a second
    flow of the same source alias over the first 50 of those topics only (the same stored progress)."""
    prefix = f"sw{uuid.uuid4().hex[:8]}"
    primary, backup = kafka_clusters.primary, kafka_clusters.backup
    names = [f"{prefix}-t{i:03d}" for i in range(WIDE_TOPICS)]
    create_topics(primary, names, WIDE_PARTITIONS)
    produce_everywhere(primary, names, WIDE_PARTITIONS, WIDE_RECORDS)
    config = parse_config(config_text(primary, backup, prefix))
    report = replicate(config, "primary->backup", "main", LocalExecutor())
    assert report.ok and report.records == WIDE_TOPICS * WIDE_PARTITIONS * WIDE_RECORDS
    fifty = parse_config(config_text(primary, backup, prefix).replace(f"{prefix}-.*", f"{prefix}-t0[0-4][0-9]"))
    return {
        "flow": config.flow("primary", "backup"),
        "fifty": fifty.flow("primary", "backup"),
        "names": names,
        "primary": primary,
    }


def counted_status(flow: Any) -> tuple[Any, dict[str, int]]:
    """The flow's status without the heartbeats topic another test may have left on the shared clusters (every flow
    replicates it, MM2's rule, in its default family), and the Kafka calls it made."""
    with kafka_calls.counting() as calls:
        status = flow_status(flow)
    assert status.errors == [], status.errors
    for family in status.families:
        family.partitions = [p for p in family.partitions if p.topic != "heartbeats"]
    return status, dict(calls)


def test_a_wide_flow_is_summarised_per_topic_every_topic_caught_up(wide: dict[str, Any]) -> None:
    status, _calls = counted_status(wide["flow"])
    assert len(status.partitions) == WIDE_TOPICS * WIDE_PARTITIONS
    counts = next(f for f in status.families if f.family == "main").to_dict()
    assert (counts["topics"], counts["partitions"], counts["partitions_behind"], counts["failures"]) == (
        WIDE_TOPICS,
        WIDE_TOPICS * WIDE_PARTITIONS,
        0,
        0,
    )
    assert (counts["lag_records"], counts["max_lag_seconds"]) == (0, 0.0)
    topics = summarize_topics(status.partitions)
    assert [t.topic for t in topics] == wide["names"]  # all caught up: by name
    for t in topics:
        assert (t.partitions, t.partitions_behind, t.failures, t.lag_records, t.status) == (
            WIDE_PARTITIONS,
            0,
            0,
            0,
            CAUGHT_UP,
        )
    assert all(p.copied_position == WIDE_RECORDS and p.last_copied_timestamp_ms is None for p in status.partitions)
    page = StatusPages(status).page(topic=wide["names"][7].upper(), limit=3, topics_limit=1)
    assert [t["topic"] for t in page["topics"]] == [wide["names"][7]]
    assert page["partitions_page"] == {"offset": 0, "limit": 3, "matched": WIDE_PARTITIONS, "shown": 3}


def test_the_kafka_calls_of_a_status_do_not_grow_with_the_topics(wide: dict[str, Any]) -> None:
    """50 topics and 200 topics (250 and 1,000 partitions, caught up): the same requests and clients, one each
    per kind (one discovery, one ListOffsets for the starts and one for the ends, no timestamp read)."""
    fifty, fifty_calls = counted_status(wide["fifty"])
    every, every_calls = counted_status(wide["flow"])
    assert (len(fifty.partitions), len(every.partitions)) == (50 * WIDE_PARTITIONS, WIDE_TOPICS * WIDE_PARTITIONS)
    assert every_calls == fifty_calls
    assert (every_calls["admin list_topics"], every_calls["admin list_offsets"], every_calls["new admin"]) == (1, 2, 1)


def test_a_few_lagging_topics_come_first_and_only_their_records_are_read(wide: dict[str, Any]) -> None:
    names = wide["names"]
    _before, caught_up_calls = counted_status(wide["flow"])
    behind = [names[150], names[20], names[99]]
    now_ms = int(time.time() * 1000)
    for age_s, name in zip((90, 60, 30), behind, strict=True):  # partition 2 of each, 4 records, oldest age_s old
        produce(wide["primary"], name, [{"value": b"late", "partition": 2, "timestamp": now_ms - age_s * 1000}] * 4)
    status, calls = counted_status(wide["flow"])
    topics = summarize_topics(status.partitions)
    assert [t.topic for t in topics[:3]] == behind  # oldest uncopied record first
    for t, age_s in zip(topics[:3], (90, 60, 30), strict=True):
        assert (t.partitions_behind, t.lag_records, t.status) == (1, 4, BEHIND)
        assert age_s <= t.max_lag_seconds <= age_s + TOLERANCE_S
    assert all(t.lag_records == 0 for t in topics[3:]) and len(topics) == WIDE_TOPICS
    lagging = [p for p in status.partitions if p.lag_records]
    assert len(lagging) == 3 and all(p.last_copied_timestamp_ms is not None for p in lagging)
    assert calls["new consumer"] == caught_up_calls["new consumer"] + 1  # one consumer reads the three partitions
    assert next(f for f in status.families if f.family == "main").to_dict()["partitions_behind"] == 3
