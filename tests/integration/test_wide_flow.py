"""A whole-cluster flow, small enough for CI: many topics in one family, every one copied, costs that do not grow.

MirrorMaker 2's usual job mirrors every topic of a cluster (``topics = .*``). What must hold at width: every partition
of every topic is copied exactly, a run's driver makes the same admin calls and clients whether the flow has 20
topics or 200 (batched requests, never one per topic), and a run with nothing new copies nothing.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import RunReport, replicate
from tests.kafka_helpers import admin

pytestmark = pytest.mark.integration

PARTITIONS = 5


def wide_family(bootstrap: str, topics: int, per_partition: int) -> tuple[str, list[str]]:
    """``topics`` new topics of ``PARTITIONS`` partitions (one CreateTopics request), ``per_partition`` records in each
    partition; their common prefix and names."""
    prefix = f"wide-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}-{i:04d}" for i in range(topics)]
    client = admin(bootstrap)
    for future in client.create_topics([NewTopic(n, PARTITIONS, 1) for n in names], request_timeout=60).values():
        future.result(60)
    append(bootstrap, names, per_partition)
    return prefix, names


def append(bootstrap: str, names: list[str], per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    for name in names:
        for partition in range(PARTITIONS):
            for i in range(per_partition):
                producer.produce(name, key=b"k%d" % i, value=b"v" * 100, partition=partition)
        producer.poll(0)
    assert producer.flush(60) == 0


def config(clusters: Any, prefix: str) -> MirrorConfig:
    return parse_config(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}-.*\nprimary->backup.groups = none\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\noffset-syncs.topic.location = target\n"
        "sync.topic.acls.enabled = false\n"
    )


def run(cfg: MirrorConfig) -> RunReport:
    report = replicate(cfg, "primary->backup", None, LocalExecutor(), timeout=120)
    assert report.ok, report.errors[:5]
    return report


def committed_counts(bootstrap: str, names: list[str]) -> dict[tuple[str, int], int]:
    """Committed records per partition of ``names``, read by one consumer up to each partition's last stable offset
    (transaction markers take offsets too, so offsets alone do not count records)."""
    tps = [TopicPartition(n, p) for n in names for p in range(PARTITIONS)]
    client = admin(bootstrap)
    futures = client.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=60
    )
    ends = {(tp.topic, tp.partition): future.result(60).offset for tp, future in futures.items()}
    counts = dict.fromkeys(ends, 0)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"wide-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(n, p, 0) for n, p in ends])
        reading = {key for key, end in ends.items() if end > 0}
        deadline = time.monotonic() + 60
        while reading and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                key = (message.topic(), message.partition())
                if message.error() is None:
                    counts[key] += 1
                    if message.offset() + 1 >= ends[key]:
                        reading.discard(key)
                elif message.offset() >= ends[key]:
                    reading.discard(key)  # the end of the partition: its last offsets were markers
        assert not reading, f"{len(reading)} partition(s) not read to their end"
    finally:
        consumer.close()
    return counts


def test_a_flow_of_200_topics_is_copied_whole_with_the_driver_calls_of_a_flow_of_20(kafka_clusters: Any) -> None:
    narrow_prefix, _ = wide_family(kafka_clusters.primary, 20, 1)
    prefix, names = wide_family(kafka_clusters.primary, 200, 2)
    narrow, wide = config(kafka_clusters, narrow_prefix), config(kafka_clusters, prefix)

    first = run(wide)
    # A heartbeats topic another test left on the shared clusters is replicated by every flow (MM2's rule): not counted.
    ours = [p for p in first.partitions if p.topic.startswith(prefix)]
    assert sum(p.records for p in ours) == 200 * PARTITIONS * 2 and len(ours) == 200 * PARTITIONS
    assert {p.status for p in ours} == {"copied"} and first.lag == 0
    assert len([t for t in first.preparation["created"] if t.startswith(prefix)]) == 200
    remote = [f"primary.{name}" for name in names]
    assert set(committed_counts(kafka_clusters.backup, remote).values()) == {2}, "every partition of every topic"

    append(kafka_clusters.primary, names, 1)
    second = run(wide)
    ours = [p for p in second.partitions if p.topic.startswith(prefix)]
    assert sum(p.records for p in ours) == 200 * PARTITIONS and {p.position for p in ours} == {3}
    assert set(committed_counts(kafka_clusters.backup, remote).values()) == {3}, "each record once: no duplicate"

    run(narrow)
    calls = {"20 topics": run(narrow).kafka_calls, "200 topics": run(wide).kafka_calls}
    assert calls["20 topics"]["by_kind"] == calls["200 topics"]["by_kind"], calls
    assert calls["200 topics"]["admin"] <= 20, "a run with nothing new: a few batched admin calls, none per topic"
    nothing = run(wide)
    assert {p.status for p in nothing.partitions if p.topic.startswith(prefix)} == {"up to date"}
    # Topic configs are synced on MM2's timer: the first run synced them, the runs since did not describe them.
    assert nothing.preparation["config_sync"].startswith("not due"), nothing.preparation["config_sync"]
