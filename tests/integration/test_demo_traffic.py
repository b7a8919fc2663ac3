"""The demo traffic producer against a real local cluster.

Why this matters: ``make demo`` shows replication of this traffic, including consumer-group offsets;
if the records had no keys or headers, or the groups never committed, the demo would show less than
it claims.  The topic and group names are the demo's fixed ones, so assertions only look at what was
added during the test.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from mirrorflow_dev.demo.traffic import DEMO_GROUPS, DEMO_TOPICS, run_traffic
from tests.kafka_helpers import read_all

#: The demo's topic and group names are fixed: on existing clusters (MIRRORFLOW_TEST_CLUSTERS) they may be real ones.
pytestmark = [pytest.mark.integration, pytest.mark.fixed_names]


def end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """High watermarks of every partition of the topics that exist (missing topics: nothing)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-demo-watermarks"})
    try:
        existing = consumer.list_topics(timeout=10).topics
        out = {}
        for topic in topics:
            if topic in existing:
                for p in existing[topic].partitions:
                    out[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        return out
    finally:
        consumer.close()


def committed_total(bootstrap: str, group: str, topics: tuple[str, ...]) -> int:
    """Sum of the group's committed offsets over the topics' partitions (as a new member would resume)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        md = consumer.list_topics(timeout=10).topics
        partitions = [TopicPartition(t, p) for t in topics if t in md for p in md[t].partitions]
        if not partitions:
            return 0
        return sum(max(tp.offset, 0) for tp in consumer.committed(partitions, timeout=10))
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def traffic_run(kafka_clusters):
    """Run the demo traffic for about 3 s (stopped through the event); offsets and counts before and after."""
    names = [t.name for t in DEMO_TOPICS]
    before = end_offsets(kafka_clusters.primary, names)
    committed_before = {g.group: committed_total(kafka_clusters.primary, g.group, g.topics) for g in DEMO_GROUPS}
    stop = threading.Event()
    timer = threading.Timer(3.0, stop.set)
    started = time.time()
    timer.start()
    try:
        counts = run_traffic(kafka_clusters.primary, rate=40.0, stop=stop)
    finally:
        timer.cancel()
    return {"before": before, "committed_before": committed_before, "counts": counts, "started": started}


def test_counts_add_up_and_the_event_stops_it(traffic_run):
    counts = traffic_run["counts"]
    produced = sum(counts["produced"].values())
    assert 60 <= produced <= 200, counts  # about 3 s at 40 records/s
    assert counts["delivered"] == produced and counts["delivery_errors"] == 0, counts
    assert all(n > 0 for n in counts["produced"].values()), counts
    assert counts["elapsed"] < 30, counts


def test_topics_exist_with_the_demo_partitions(kafka_clusters, traffic_run):
    admin = AdminClient({"bootstrap.servers": kafka_clusters.primary})
    topics = admin.list_topics(timeout=10).topics
    for spec in DEMO_TOPICS:
        assert len(topics[spec.name].partitions) == spec.partitions, spec.name
    resource = ConfigResource(ResourceType.TOPIC, "customers")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact"


@pytest.mark.parametrize(
    ("topic", "key_prefix", "source"),
    [("orders.eu", "ord-", "checkout-eu"), ("payments.card", "ord-", "payment-gateway"), ("customers", "cus-", "crm")],
)
def test_records_have_keys_headers_json_and_current_timestamps(kafka_clusters, traffic_run, topic, key_prefix, source):
    before = traffic_run["before"]
    new = [r for r in read_all(kafka_clusters.primary, topic) if r.offset >= before.get((topic, r.partition), 0)]
    assert new, f"no new records in {topic}"
    for record in new:
        assert record.key is not None and record.key.decode().startswith(key_prefix), record
        headers = dict(record.headers)
        assert headers["content-type"] == b"application/json"
        assert headers["source"] == source.encode()
        assert len(headers["trace-id"]) == 32
        value = json.loads(record.value)
        assert record.key.decode() in (value.get("order_id"), value.get("customer_id"))
        assert record.timestamp is not None
        assert traffic_run["started"] - 5 <= record.timestamp / 1000 <= time.time() + 5


def test_orders_are_spread_over_partitions(kafka_clusters, traffic_run):
    before = traffic_run["before"]
    after = end_offsets(kafka_clusters.primary, ["orders.eu", "orders.us"])
    grown = [tp for tp, end in after.items() if end > before.get(tp, 0)]
    assert len(grown) >= 3, after


@pytest.mark.parametrize("group", DEMO_GROUPS, ids=lambda g: g.group)
def test_consumer_groups_committed_offsets_behind_the_end(kafka_clusters, traffic_run, group):
    counts = traffic_run["counts"]
    assert counts["committed"][group.group] > 0, counts
    assert counts["consumed"][group.group] >= counts["committed"][group.group], counts
    committed = committed_total(kafka_clusters.primary, group.group, group.topics)
    assert committed > traffic_run["committed_before"][group.group]
    ends = end_offsets(kafka_clusters.primary, list(group.topics))
    assert committed <= sum(ends.values())
