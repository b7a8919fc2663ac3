"""A unit reads only the progress written since its run planned, and gets the same answer as a full read."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from mirrorflow.replication.progress import StoredProgress, progress_since, progress_since_many, read_stored_progress
from mirrorflow.wire import source_offset_key, source_offset_value
from tests.kafka_helpers import create_topic, unique_alias, unique_topic_name

pytestmark = pytest.mark.integration


def write(
    producer: Producer, topic: str, alias: str, offsets: dict[str, int | None], where: dict[str, int] | None = None
) -> None:
    """One transaction of progress records (None: a tombstone), as units write them; ``where``: a source topic's
    progress partition (0 unless given)."""
    producer.begin_transaction()
    for source_topic, offset in offsets.items():
        value = None if offset is None else source_offset_value(offset)
        partition = (where or {}).get(source_topic, 0)
        producer.produce(topic, key=source_offset_key(alias, source_topic, 0), value=value, partition=partition)
    producer.commit_transaction(30)


def test_progress_since_the_plan_equals_a_full_read(kafka_clusters: Any) -> None:
    topic = create_topic(kafka_clusters.backup, unique_topic_name("progress-since"), partitions=1)
    alias = unique_alias("src")
    consumer = {"bootstrap.servers": kafka_clusters.backup, "group.id": "progress-since-test"}
    producer = Producer({"bootstrap.servers": kafka_clusters.backup, "transactional.id": unique_alias("tx")})
    producer.init_transactions(30)
    write(producer, topic, alias, {"a": 10, "b": 20, "c": 30})
    write(producer, topic, alias, {"a": 11})

    reached: dict[int, int] = {}
    planned = read_stored_progress(consumer, topic, alias, [0], timeout=30, reached=reached)
    assert {k: v.offset for k, v in planned.items()} == {("a", 0): 11, ("b", 0): 20, ("c", 0): 30}
    assert reached[0] > 0

    def since(source_topic: str) -> StoredProgress | None:
        key = source_offset_key(alias, source_topic, 0)
        return progress_since(consumer, topic, 0, key, reached[0], planned.get((source_topic, 0)), timeout=30)

    # Nothing written since the plan: the plan's answer, without reading the partition's history again.
    assert since("a") == planned[("a", 0)]
    write(producer, topic, alias, {"a": 12, "b": None})  # later units (or a zombie before it was fenced)
    write(producer, topic, alias, {"a": 13})
    full = read_stored_progress(consumer, topic, alias, [0], timeout=30)
    for source_topic in ("a", "b", "c", "d"):
        assert since(source_topic) == full.get((source_topic, 0)), source_topic
    assert since("a") is not None and since("a").offset == 13
    assert since("b") is None  # the tombstone clears what the plan knew


def test_a_lane_reads_the_progress_of_its_units_on_several_partitions_at_once(kafka_clusters: Any) -> None:
    topic = create_topic(kafka_clusters.backup, unique_topic_name("progress-many"), partitions=3)
    alias = unique_alias("src")
    where = {"a": 0, "b": 1, "c": 1, "d": 2}
    consumer = {"bootstrap.servers": kafka_clusters.backup, "group.id": "progress-many-test"}
    producer = Producer({"bootstrap.servers": kafka_clusters.backup, "transactional.id": unique_alias("tx")})
    producer.init_transactions(30)
    write(producer, topic, alias, {"a": 10, "b": 20, "c": 30}, where)
    reached: dict[int, int] = {}
    planned = read_stored_progress(consumer, topic, alias, [0, 1, 2], timeout=30, reached=reached)
    write(producer, topic, alias, {"a": 11, "c": None, "d": 40}, where)  # since the plan: a zombie, say

    keys = {t: (where[t], source_offset_key(alias, t, 0)) for t in where}
    found = progress_since_many(
        consumer,
        topic,
        {keys[t]: planned.get((t, 0)) for t in where},
        {p: reached.get(p, 0) for p in set(where.values())},
        timeout=30,
    )
    full = read_stored_progress(consumer, topic, alias, [0, 1, 2], timeout=30)
    assert {t: found[keys[t]] for t in where} == {t: full.get((t, 0)) for t in where}
    assert [found[keys[t]] is not None and found[keys[t]].offset for t in "abd"] == [11, 20, 40]
    assert found[keys["c"]] is None  # the tombstone written since clears what the plan knew
