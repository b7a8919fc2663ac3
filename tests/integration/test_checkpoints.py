"""Checkpoints and group offset sync on real clusters: a failed-over consumer resumes exactly."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

from mirrorflow.checkpoints.emit import emit_checkpoints, read_checkpoints
from mirrorflow.checkpoints.groupsync import sync_group_offsets
from mirrorflow.config import parse_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from tests.integration.test_replication import transactional_writes
from tests.kafka_helpers import admin, create_topic, produce, read_all

pytestmark = pytest.mark.integration


def config(clusters: Any, prefix: str) -> Any:
    return parse_config(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}\\\\..*\nprimary->backup.groups = {prefix}-.*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
        "mirrorflow.unit.max.records = 7\n"  # many units, so many transactions (markers) downstream
    )


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def resume(bootstrap: str, group: str, topics: list[str], expected: int, timeout: float = 30) -> list[bytes]:
    """What a consumer of ``group`` subscribing on ``bootstrap`` receives (values), up to ``expected`` or a quiet spell."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and len(values) <= expected:
            msg = consumer.poll(0.5)
            if msg is None:
                if values and time.monotonic() - quiet_since > 3 or not values and time.monotonic() - quiet_since > 8:
                    break
                continue
            if msg.error():
                continue
            values.append(msg.value())
            quiet_since = time.monotonic()
    finally:
        consumer.close()
    return values


def source_values_from(bootstrap: str, topic: str, positions: dict[int, int]) -> list[bytes]:
    return [r.value for r in read_all(bootstrap, topic) if r.offset >= positions.get(r.partition, 0)]


def test_failed_over_groups_resume_exactly_where_they_left_off(kafka_clusters: Any) -> None:
    prefix = f"cp{uuid.uuid4().hex[:6]}"
    plain = create_topic(kafka_clusters.primary, f"{prefix}.plain", partitions=3)
    txn = create_topic(kafka_clusters.primary, f"{prefix}.txn", partitions=1)
    produce(kafka_clusters.primary, plain, [{"value": b"plain-%d" % i, "partition": i % 3} for i in range(60)])
    transactional_writes(
        kafka_clusters.primary,
        txn,
        [
            ([{"value": b"t-ok-%d" % i, "partition": 0} for i in range(6)], True),
            ([{"value": b"t-aborted-%d" % i, "partition": 0} for i in range(4)], False),
            ([{"value": b"t-ok2-%d" % i, "partition": 0} for i in range(5)], True),
        ],
    )
    flow_config = config(kafka_clusters, prefix)
    flow = flow_config.flow("primary", "backup")
    report = replicate(flow_config, "primary->backup", None, LocalExecutor())
    assert report.ok and report.lag == 0

    txn_offsets = [r.offset for r in read_all(kafka_clusters.primary, txn)]  # committed records only: gaps
    mid, end = f"{prefix}-mid", f"{prefix}-end"
    in_gap = f"{prefix}-gap"
    commit(kafka_clusters.primary, mid, {(plain, 0): 9, (plain, 1): 13, (plain, 2): 1})
    commit(kafka_clusters.primary, end, {(plain, 0): 20, (plain, 1): 20, (plain, 2): 20, (txn, 0): txn_offsets[-1] + 1})
    # after the first transaction: its commit marker and the aborted records follow, then the 2nd transaction
    commit(kafka_clusters.primary, in_gap, {(txn, 0): txn_offsets[5] + 2})
    # a consumer that read everything commits the log end: past the trailing commit marker, which no later run
    # vouches for (the copy's progress does)
    after_marker = f"{prefix}-marker"
    commit(kafka_clusters.primary, after_marker, {(txn, 0): txn_offsets[-1] + 2})

    checkpoints = emit_checkpoints(flow)
    by_group = {g.group: g for g in checkpoints.groups}
    assert set(by_group) == {mid, end, in_gap, after_marker}
    for group in by_group.values():
        assert [p.kind for p in group.partitions] == ["exact"] * len(group.partitions), group
        assert group.max_rereads == 0
    stored = read_checkpoints(flow)
    assert stored[(mid, f"primary.{plain}", 1)].upstream_offset == 13
    [marker] = by_group[after_marker].partitions
    assert (marker.kind, marker.basis, marker.downstream) == (
        "exact",
        "copied runs",
        stored[(end, f"primary.{txn}", 0)].downstream_offset,
    )
    assert "the copy read on to upstream" in marker.reason  # the progress vouched for the marker

    synced = sync_group_offsets(flow)
    assert synced.errors == [] and synced.skipped_active == []

    expect_mid = source_values_from(kafka_clusters.primary, plain, {0: 9, 1: 13, 2: 1})
    got_mid = resume(kafka_clusters.backup, mid, [f"primary.{plain}"], len(expect_mid))
    assert sorted(got_mid) == sorted(expect_mid)  # no record skipped, none read twice
    assert resume(kafka_clusters.backup, end, [f"primary.{plain}", f"primary.{txn}"], 0, timeout=10) == []
    assert resume(kafka_clusters.backup, after_marker, [f"primary.{txn}"], 0, timeout=10) == []
    expect_gap = [v for v in (r.value for r in read_all(kafka_clusters.primary, txn)) if v.startswith(b"t-ok2")]
    assert resume(kafka_clusters.backup, in_gap, [f"primary.{txn}"], len(expect_gap)) == expect_gap

    # A second run writes nothing new (monotonic), and a group's progress moves its checkpoint forward.
    again = emit_checkpoints(flow)
    assert again.emitted == 0
    commit(kafka_clusters.primary, mid, {(plain, 1): 17})
    moved = {
        (p.topic, p.partition): p for p in next(g for g in emit_checkpoints(flow).groups if g.group == mid).partitions
    }
    assert moved[(plain, 1)].emitted and moved[(plain, 1)].upstream == 17 and not moved[(plain, 0)].emitted


def test_active_groups_are_skipped_and_named_and_offsets_never_move_backwards(kafka_clusters: Any) -> None:
    prefix = f"cq{uuid.uuid4().hex[:6]}"
    topic = create_topic(kafka_clusters.primary, f"{prefix}.t", partitions=1)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i} for i in range(30)])
    flow_config = config(kafka_clusters, prefix)
    flow = flow_config.flow("primary", "backup")
    assert replicate(flow_config, "primary->backup", None, LocalExecutor()).ok
    active, ahead = f"{prefix}-active", f"{prefix}-ahead"
    commit(kafka_clusters.primary, active, {(topic, 0): 10})
    commit(kafka_clusters.primary, ahead, {(topic, 0): 10})
    emit_checkpoints(flow)
    remote = f"primary.{topic}"
    commit(kafka_clusters.backup, ahead, {(remote, 0): 25})  # the target group already went further

    member = Consumer({"bootstrap.servers": kafka_clusters.backup, "group.id": active, "enable.auto.commit": False})
    member.subscribe([remote])
    deadline = time.monotonic() + 20
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    try:
        synced = sync_group_offsets(flow)
    finally:
        member.close()
    assert synced.skipped_active == [active]
    by_group = {g.group: g for g in synced.groups}
    assert by_group[ahead].written == {} and by_group[ahead].kept == {f"{remote}:0": 25}
    target = admin(kafka_clusters.backup)  # keep a reference until the future resolves
    answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(ahead)])[ahead].result(10)
    assert [tp.offset for tp in answer.topic_partitions] == [25]
