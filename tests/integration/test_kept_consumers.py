"""A kept consumer lent to one unit after another reads each unit's partition, and only it (real broker).

Units borrow consumers from the process (``kept_clients``) instead of making two per unit. What must
hold on a real broker: a partition the last unit paused is read again when assigned again, and nothing fetched for
an earlier assignment reaches the next unit.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from mirrorflow.replication import kept_clients
from tests.kafka_helpers import create_topic, produce, unique_topic_name

pytestmark = pytest.mark.integration


def take(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(50):
        got += [m for m in consumer.consume(count - len(got), timeout=0.2) if m.error() is None]
        if len(got) >= count:
            break
    return got


def test_a_kept_consumer_reads_each_lent_partition_and_only_it(kafka_clusters: Any) -> None:
    topic = create_topic(kafka_clusters.primary, unique_topic_name("kept-consumer"), partitions=2)
    for partition in (0, 1):
        produce(kafka_clusters.primary, topic, [(f"k{i}", f"p{partition}-{i}", None, partition) for i in range(20)])
    config = {
        "bootstrap.servers": kafka_clusters.primary,
        "group.id": "kept-consumer-test",
        "enable.auto.commit": False,
    }
    kept_clients.close_kept_consumers()
    try:
        with kept_clients.lent_consumer(config) as first:
            first.assign([TopicPartition(topic, 0, 0)])
            assert [m.offset() for m in take(first, 3)] == [0, 1, 2]  # the rest of the fetch stays behind
            first.pause([TopicPartition(topic, 0)])
        assert len(kept_clients.CONSUMERS) == 1

        with kept_clients.lent_consumer(config) as again:
            assert again is first
            again.assign([TopicPartition(topic, 0, 10)])  # the partition it paused, from elsewhere
            got = take(again, 10)
            assert [(m.partition(), m.offset()) for m in got] == [(0, offset) for offset in range(10, 20)]

        with kept_clients.lent_consumer(config) as other:
            assert other is first
            other.assign([TopicPartition(topic, 1, 0)])
            got = take(other, 20)
            assert [(m.partition(), m.value()) for m in got] == [(1, b"p1-%d" % i) for i in range(20)]

        with pytest.raises(RuntimeError), kept_clients.lent_consumer(config) as failing:
            raise RuntimeError("a unit failed")
        assert len(kept_clients.CONSUMERS) == 0  # closed, not kept: a failure may leave it in any state
        assert failing is first
    finally:
        kept_clients.close_kept_consumers()
