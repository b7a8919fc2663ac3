"""A checkpoint run asks the clusters what the protocol requires per group, and nothing more per group.

Why: on a whole-cluster flow (hundreds of groups) a request too many per group is hundreds of requests, and a
request waited for one group after another is hundreds of round trips. confluent-kafka takes one group per
``list_consumer_group_offsets`` and ``alter_consumer_group_offsets`` call, so those are one per group (sent
together); listing and describing groups is one request for all of them, and the reading clients are the same
whatever the number of groups. A count, unlike a timing, is the same on any machine.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from mirrorflow.checkpoints.emit import emit_checkpoints, read_checkpoints
from mirrorflow.checkpoints.groupsync import sync_group_offsets
from mirrorflow.kafka import calls as kafka_calls
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from tests.integration.test_checkpoints import config
from tests.kafka_helpers import admin, create_topic, produce, read_all

pytestmark = pytest.mark.integration

T = TypeVar("T")
PARTITIONS = 3
PER_PARTITION = 10
LIST_OFFSETS = "admin list_consumer_group_offsets"
ALTER_OFFSETS = "admin alter_consumer_group_offsets"


def counted(fn: Callable[[], T]) -> tuple[T, Counter[str]]:
    with kafka_calls.counting() as calls:
        result = fn()
    return result, Counter(calls)


class Flow:
    """A copied topic of ``PARTITIONS`` partitions and ``count`` groups committed on every partition, and where
    each committed offset must land on the target (found by reading both topics, not by translating)."""

    def __init__(self, kafka_clusters: Any, count: int) -> None:
        self.prefix = f"cc{uuid.uuid4().hex[:6]}"
        self.topic = create_topic(kafka_clusters.primary, f"{self.prefix}.t", partitions=PARTITIONS)
        self.remote = f"primary.{self.topic}"
        produce(
            kafka_clusters.primary,
            self.topic,
            [{"value": b"%s-%d" % (self.prefix.encode(), i), "partition": i % PARTITIONS} for i in range(30)],
        )
        flow_config = config(kafka_clusters, self.prefix)  # 7 records a unit: transaction markers downstream
        assert replicate(flow_config, "primary->backup", None, LocalExecutor()).ok
        self.flow = flow_config.flow("primary", "backup")
        self.groups = [f"{self.prefix}-g{n:02d}" for n in range(count)]
        copy_of = {r.value: r.offset for r in read_all(kafka_clusters.backup, self.remote)}
        source = {(r.partition, r.offset): r.value for r in read_all(kafka_clusters.primary, self.topic)}
        self.committed = {
            (g, p): (n * 3 + p) % PER_PARTITION for n, g in enumerate(self.groups) for p in range(PARTITIONS)
        }
        self.expected = {(g, p): copy_of[source[(p, u)]] for (g, p), u in self.committed.items()}
        client = admin(kafka_clusters.primary)  # referenced until every future resolved
        futures = {}
        for g in self.groups:
            tps = [TopicPartition(self.topic, p, self.committed[(g, p)]) for p in range(PARTITIONS)]
            futures.update(client.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)]))
        for future in futures.values():
            future.result(30)


def target_offsets(bootstrap: str, groups: list[str], topic: str) -> dict[tuple[str, int], int]:
    client = admin(bootstrap)
    futures = {}
    for g in groups:
        futures.update(client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)]))
    return {
        (g, tp.partition): tp.offset
        for g, future in futures.items()
        for tp in future.result(30).topic_partitions or []
        if tp.topic == topic and tp.offset >= 0
    }


def test_requests_per_run_do_not_grow_with_the_groups_beyond_one_per_group_where_the_api_forces_it(
    kafka_clusters: Any,
) -> None:
    few, many = Flow(kafka_clusters, 5), Flow(kafka_clusters, 50)
    emit_checkpoints(few.flow, groups="(?!)")  # makes the checkpoints topic: both counted runs then find it

    emitted: dict[int, Any] = {}
    emit_calls: dict[int, Counter[str]] = {}
    for flow in (few, many):
        emitted[len(flow.groups)], emit_calls[len(flow.groups)] = counted(lambda f=flow: emit_checkpoints(f.flow))
    assert emit_calls[5].pop(LIST_OFFSETS) == 5 and emit_calls[50].pop(LIST_OFFSETS) == 50
    assert emit_calls[5] == emit_calls[50], "every other request and client is the same for 5 and 50 groups"
    assert emit_calls[5]["admin list_consumer_groups"] == 1
    assert emit_calls[5]["new consumer"] <= 4  # the offset syncs, the progress (and its metadata), the checkpoints

    synced: dict[int, Any] = {}
    sync_calls: dict[int, Counter[str]] = {}
    for flow in (few, many):
        only = f"{flow.prefix}-.*"  # the checkpoints topic is shared by every test's flow of this source
        synced[len(flow.groups)], sync_calls[len(flow.groups)] = counted(
            lambda f=flow, o=only: sync_group_offsets(f.flow, groups=o)
        )
    for n in (5, 50):
        assert sync_calls[n].pop(LIST_OFFSETS) == n and sync_calls[n].pop(ALTER_OFFSETS) == n
    assert sync_calls[5] == sync_calls[50]
    assert sync_calls[5]["admin describe_consumer_groups"] == 1

    # And the answers are right: every checkpoint and every target offset is where the record landed.
    for flow in (few, many):
        n = len(flow.groups)
        assert emitted[n].emitted == n * PARTITIONS and emitted[n].errors == []
        assert {p.kind for g in emitted[n].groups for p in g.partitions} == {"exact"}
        stored = read_checkpoints(flow.flow)
        assert {(g, p): stored[(g, flow.remote, p)].downstream_offset for g, p in flow.expected} == flow.expected
        assert {(g, p): stored[(g, flow.remote, p)].upstream_offset for g, p in flow.expected} == flow.committed
        assert synced[n].errors == [] and synced[n].skipped_active == []
        assert target_offsets(kafka_clusters.backup, flow.groups, flow.remote) == flow.expected

    # Nothing changed: nothing written, no write requested, and still one listing request per group.
    again, calls = counted(lambda: emit_checkpoints(many.flow))
    assert again.emitted == 0 and calls[LIST_OFFSETS] == 50
    resynced, calls = counted(lambda: sync_group_offsets(many.flow, groups=f"{many.prefix}-.*"))
    assert sum(len(g.written) for g in resynced.groups) == 0 and calls[ALTER_OFFSETS] == 0
    assert sum(len(g.kept) for g in resynced.groups) == 50 * PARTITIONS
