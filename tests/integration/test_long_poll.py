"""Bounded readers against a broker with Apache Kafka's long poll: no run, status, checkpoint, heartbeat or verify
read waits for it.

Why: Apache Kafka answers a fetch that finds no records only after the request's MaxWaitMs (``fetch.wait.max.ms``);
the embedded broker answers at once. A reader that learns it reached its end from such an empty fetch (a
read_committed range that ends in a transaction marker, an end-of-partition event) cost an exactly-once run with
nothing new 0.5 s of its 0.6 s plan on Apache Kafka, and every lane of a copy as much. ``tests.longpoll_proxy``
gives the embedded brokers that long poll and counts the empty fetches it held. The flow sets
``fetch.wait.max.ms = 2000``, as a user could: no client of these commands may ask to wait that long
(``clients.bounded_reader``), while a plain consumer with the flow's settings does (the control).
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from mirrorflow.checkpoints.emit import emit_checkpoints
from mirrorflow.config import MirrorConfig, load_config
from mirrorflow.heartbeats import check_freshness, newest_heartbeat
from mirrorflow.kafka import clients
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.producers import close_kept_clients
from mirrorflow.replication.run import replicate
from mirrorflow.status import flow_status
from mirrorflow.verify import verify_flow
from tests.configs import write_family_config
from tests.kafka_helpers import admin, create_topic, own_records
from tests.longpoll_proxy import HeldFetch, LongPollProxy

pytestmark = pytest.mark.integration
FLOW = "primary->backup"
LONG_POLL_MS = 2000


@pytest.fixture
def proxies(kafka_clusters: Any) -> Iterator[SimpleNamespace]:
    """A long-poll proxy before each cluster (``primary``, ``backup`` are their bootstraps)."""
    with LongPollProxy(kafka_clusters.primary) as source, LongPollProxy(kafka_clusters.backup) as target:
        for proxy in (source, target):
            brokers = admin(proxy.bootstrap).list_topics(timeout=30).brokers
            if len(brokers) != 1:
                pytest.skip(f"the proxy stands before one broker; {proxy.upstream} is one of {len(brokers)}")
        yield SimpleNamespace(primary=source.bootstrap, backup=target.bootstrap, all=(source, target))
        close_kept_clients()  # before the proxies go: a client left would reconnect to them, and log each time
        gc.collect()  # the units' producers, dropped but still in reference cycles


def long_polled(proxies: SimpleNamespace) -> list[HeldFetch]:
    """The empty fetches held that asked to wait the flow's long poll, on either cluster; proxy errors fail."""
    for proxy in proxies.all:
        assert not proxy.errors
    return [held for proxy in proxies.all for held in proxy.held_at_least(LONG_POLL_MS)]


def long_poll_flow(tmp_path: Path, proxies: SimpleNamespace, kafka_clusters: Any) -> tuple[MirrorConfig, str]:
    """An exactly-once flow through the proxies, the source topic ending in a transaction marker; its prefix."""
    prefix = f"lp-{uuid.uuid4().hex[:8]}"
    topic = create_topic(kafka_clusters.primary, f"{prefix}.orders", partitions=2)
    producer = Producer({"bootstrap.servers": kafka_clusters.primary, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in (0, 1):
        for i in range(3):
            producer.produce(topic, key=b"k", value=f"v{i}".encode(), partition=partition)
    producer.commit_transaction(30)
    extra = f"mirrorflow.delivery = exactly-once\nconsumer.fetch.wait.max.ms = {LONG_POLL_MS}\n"
    config = load_config(write_family_config(tmp_path / "mm2.properties", proxies, prefix, extra))
    flow = config.flow("primary", "backup")
    for side in ("source", "target"):
        assert clients.client_properties(flow, side, "consumer")["fetch.wait.max.ms"] == str(LONG_POLL_MS)
    return config, topic


def test_a_run_with_nothing_new_does_not_wait_for_the_long_poll(
    kafka_clusters: Any, proxies: SimpleNamespace, tmp_path: Path
) -> None:
    config, topic = long_poll_flow(tmp_path, proxies, kafka_clusters)

    first = replicate(config, FLOW, None, LocalExecutor())
    assert first.ok and own_records(first) == 6, first.errors
    assert long_polled(proxies) == [], f"the copying run waited for the long poll; phases {first.phases}"

    for proxy in proxies.all:
        proxy.reset()
    nothing_new = replicate(config, FLOW, None, LocalExecutor())
    assert nothing_new.ok and own_records(nothing_new) == 0, nothing_new.errors
    assert proxies.all[1].fetches > 0  # the plan read the (transactional) progress topic through the proxy
    assert long_polled(proxies) == [], f"a run with nothing new waited for the long poll; phases {nothing_new.phases}"

    # The control: a consumer with the flow's own settings, reading to the end of a topic this run wrote in
    # transactions, waits there (the proxy holds its last, empty fetch). This test's own remote topic, not the shared
    # progress topic: another test's killed run may leave a transaction open there, and no reader reaches its end.
    flow = config.flow("primary", "backup")
    target = clients.client_properties(flow, "target", "consumer", **{"enable.partition.eof": True})
    assert _reads_to_the_end(target, f"primary.{topic}")
    assert long_polled(proxies), "the proxy held no fetch: the test would not see a reader that waits"


def test_status_checkpoints_heartbeats_and_verify_do_not_wait_for_the_long_poll(
    kafka_clusters: Any, proxies: SimpleNamespace, tmp_path: Path
) -> None:
    config, topic = long_poll_flow(tmp_path, proxies, kafka_clusters)
    assert replicate(config, FLOW, None, LocalExecutor()).ok
    flow = config.flow("primary", "backup")
    for proxy in proxies.all:
        proxy.reset()

    status = flow_status(flow)
    assert not status.errors, status.errors
    emit_checkpoints(flow, dry_run=True)  # reads the offset syncs and the progress (both transactional)
    check_freshness(flow)
    # The tail of a topic the copy wrote in transactions (the replicated heartbeats topic is one such).
    assert newest_heartbeat(flow, topic=f"primary.{topic}") is None
    verified = verify_flow(config, FLOW)
    mine = [p for p in verified.partitions if p.topic == topic]  # another test's heartbeats: not this copy
    assert [p.status for p in mine] == ["identical", "identical"], verified.partitions

    assert long_polled(proxies) == []


def _reads_to_the_end(config: dict[str, Any], topic: str) -> bool:
    """Read ``topic`` from the beginning until every non-empty partition's end-of-partition event."""
    consumer = Consumer(config)
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}
        open_ = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in open_])
        for _ in range(200):
            message = consumer.poll(1.0)
            if message is not None and message.error() and message.error().code() == KafkaError._PARTITION_EOF:
                open_.discard(message.partition())
            if not open_:
                return True
        return False
    finally:
        consumer.close()
