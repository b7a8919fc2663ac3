"""A lane's one consumer hands each unit its partition's records, and only them, in order (real broker).

The units of a lane read through one consumer assigned to every partition the lane plans to copy
(``lane_reader.LaneReader``), as a MirrorMaker 2 task's consumer owns its partitions. What must hold: each unit
gets exactly its partition's records from its planned start, in order, whatever order the fetches brought them in;
a unit whose start is not the planned one reads alone; holding back for later units stays bounded; the lane's
consumer fetches no more of a partition once it has fetched up to the planned end.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer

from mirrorflow.kafka.clients import BOUNDED_READER
from mirrorflow.replication import lane_reader
from mirrorflow.replication.lane_reader import LaneReader, PartitionReader
from tests.kafka_helpers import create_topic, produce, unique_topic_name

pytestmark = pytest.mark.integration


def read_to(source: PartitionReader, end: int) -> list[Any]:
    """Every record the unit's reader hands out up to ``end`` (as the copy loop does: stop at the end)."""
    got: list[Any] = []
    for _ in range(100):
        got += [m for m in source.consume(1_000, 0.1) if m.error() is None]
        if got and got[-1].offset() >= end - 1:
            source.pause()
            break
    return got


def consumer(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "lane-reader-test", **BOUNDED_READER})


def test_each_unit_gets_its_partitions_records_from_its_planned_start(kafka_clusters: Any) -> None:
    first = create_topic(kafka_clusters.primary, unique_topic_name("lane-reader"), partitions=3)
    second = create_topic(kafka_clusters.primary, unique_topic_name("lane-reader"), partitions=2)
    counts = {(first, 0): 30, (first, 1): 5, (first, 2): 12, (second, 0): 40, (second, 1): 8}
    for (topic, partition), count in counts.items():
        produce(
            kafka_clusters.primary,
            topic,
            [(f"k{i}", f"{topic}/{partition}/{i}", None, partition) for i in range(count)],
        )
    starts = {(first, 0): 10, (first, 1): 0, (first, 2): 11, (second, 0): 0, (second, 1): 3}
    planned = {key: (starts[key], counts[key]) for key in counts}
    source = consumer(kafka_clusters.primary)
    try:
        reader = LaneReader(source, planned)
        for key in [(second, 0), (first, 2), (first, 0), (second, 1), (first, 1)]:  # a lane's order, not the plan's
            unit = reader.open(*key, starts[key])
            assert unit is not None
            got = read_to(unit, counts[key])
            assert [(m.topic(), m.partition()) for m in got] == [key] * (counts[key] - starts[key])
            assert [m.offset() for m in got] == list(range(starts[key], counts[key]))
            assert [m.value() for m in got] == [
                f"{key[0]}/{key[1]}/{i}".encode() for i in range(starts[key], counts[key])
            ]
            assert unit.position() == counts[key]
        assert {(tp.topic, tp.partition) for tp in source.assignment()} == set(counts)
    finally:
        source.close()


def test_a_unit_not_planned_from_its_start_reads_alone_and_the_others_are_unaffected(kafka_clusters: Any) -> None:
    topic = create_topic(kafka_clusters.primary, unique_topic_name("lane-reader"), partitions=3)
    for partition in range(3):
        produce(kafka_clusters.primary, topic, [(f"k{i}", f"{partition}/{i}", None, partition) for i in range(10)])
    planned = {(topic, 0): (0, 10), (topic, 1): (0, 10)}
    source = consumer(kafka_clusters.primary)
    try:
        reader = LaneReader(source, planned)
        assert reader.open(topic, 0, 4) is None  # progress stored since the plan: it starts elsewhere, alone
        assert reader.open(topic, 2, 0) is None  # not in the plan
        unit = reader.open(topic, 1, 0)
        assert unit is not None
        assert [m.offset() for m in read_to(unit, 10)] == list(range(10))
        assert reader.open(topic, 1, 0) is None  # a unit opens its partition once; a redo reads alone
    finally:
        source.close()


def test_what_is_held_for_later_units_is_bounded_and_nothing_is_lost(
    kafka_clusters: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lane_reader, "BUFFER_BYTES", 4_000)
    monkeypatch.setattr(lane_reader, "PULL_RECORDS", 50)
    topic = create_topic(kafka_clusters.primary, unique_topic_name("lane-reader"), partitions=4)
    for partition in range(4):
        produce(kafka_clusters.primary, topic, [(None, "x" * 100, None, partition)] * 200)
    planned = {(topic, partition): (0, 200) for partition in range(4)}
    source = consumer(kafka_clusters.primary)
    try:
        reader = LaneReader(source, planned)
        for partition in range(4):
            unit = reader.open(topic, partition, 0)
            assert unit is not None
            held = []
            got: list[Any] = []
            for _ in range(200):
                got += [m for m in unit.consume(20, 0.1) if m.error() is None]
                held.append(reader._held)
                if got and got[-1].offset() >= 199:
                    break
            assert [m.offset() for m in got] == list(range(200))
            # Past the bound, the later units' partitions wait: what is held never grows past the bound by more
            # than two pulls (the one that crossed it, and what librdkafka had already fetched when the pause came:
            # a pause stops the next fetch, not one in flight).
            assert max(held) <= lane_reader.BUFFER_BYTES + 2 * 50 * 100
    finally:
        source.close()
