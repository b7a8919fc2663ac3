"""Small, explicit Kafka helpers for tests: create topics, produce, read everything back.

Why not reuse library code: tests must check the library against an
independent, obviously-correct reader and writer.  These helpers use only what
the Kafka protocol promises (watermarks, partition EOF, read_committed), so they
behave the same against Apache Kafka and the local noida-db broker.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

#: The local broker returns a partition's whole backlog in one fetch, ignoring
#: fetch.max.bytes; librdkafka drops responses larger than this, so raise it.
RECEIVE_MESSAGE_MAX_BYTES = 100 * 1024 * 1024

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Record:
    """One record as read back, reduced to plain values that compare easily."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int | None  # milliseconds; None if the broker gave no timestamp


class Delivered(NamedTuple):
    """Where a produced record landed."""

    partition: int
    offset: int


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_exists(bootstrap: str, topic: str, timeout: float = 10.0) -> bool:
    """True if cluster metadata lists ``topic`` (without auto-creating it)."""
    md = admin(bootstrap).list_topics(timeout=timeout)
    entry = md.topics.get(topic)
    return entry is not None and entry.error is None


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    replication_factor: int = 1,
    timeout: float = 30.0,
) -> str:
    """Create ``name`` and wait until metadata shows every partition with a leader.

    Creation is asynchronous in Kafka: a client may not see the topic right
    after CreateTopics returns, so tests would otherwise be flaky.
    """
    client = admin(bootstrap)
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {}))
    for future in client.create_topics([new], operation_timeout=timeout).values():
        future.result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = client.list_topics(topic=name, timeout=min(5.0, timeout))
        entry = md.topics.get(name)
        if (
            entry is not None
            and entry.error is None
            and len(entry.partitions) == partitions
            and all(p.leader >= 0 for p in entry.partitions.values())
        ):
            return name
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {name!r} did not appear in metadata of {bootstrap} within {timeout} s")
        time.sleep(0.05)


def own_records(report: Any) -> int:
    """Records a run report counts, without those of heartbeats topics (``heartbeats``, ``<alias>.heartbeats``).

    A run over every family also carries the source's heartbeats topics (MM2's rule), and on shared clusters other
    tests (or other flows) write to those: a test counts the records of its own topics.
    """
    return sum(p.records for p in report.partitions if p.topic.rsplit(".", 1)[-1] != "heartbeats")


def unique_topic_name(label: str) -> str:
    """``t-<label-slug>-<uuid8>``: readable in broker listings, unique across runs."""
    slug = "".join(c if c.isalnum() else "-" for c in label.lower())
    slug = "-".join(part for part in slug.split("-") if part)[:60] or "topic"
    return f"t-{slug}-{uuid.uuid4().hex[:8]}"


def unique_alias(label: str) -> str:
    """``<label><uuid8>``: a cluster alias of a test's own (letters and digits, as MM2's topic names need).

    Why: a flow's internal topics and Airflow names derive from its aliases (``mm2-offsets.<src>.internal``,
    ``<src>.heartbeats``, ``heartbeats__<src>__<tgt>``, its failover state), so on clusters shared with
    other tests and earlier runs, only aliases of its own keep what a test reads to what it wrote.
    """
    return f"{label}{uuid.uuid4().hex[:8]}"


def _normalize(record: Any) -> dict[str, Any]:
    """Accept a dict, a tuple (key, value, headers, partition, timestamp), or a bare value."""
    if isinstance(record, Mapping):
        unknown = set(record) - {"key", "value", "headers", "partition", "timestamp"}
        if unknown:
            raise ValueError(f"unknown record fields: {sorted(unknown)}")
        return dict(record)
    if isinstance(record, tuple):
        names = ("key", "value", "headers", "partition", "timestamp")
        if len(record) > len(names):
            raise ValueError(f"record tuple has more than {len(names)} items: {record!r}")
        return dict(zip(names, record, strict=False))
    return {"value": record}


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Any],
    *,
    timeout: float = 30.0,
    config: Mapping[str, Any] | None = None,
) -> list[Delivered]:
    """Produce ``records`` to ``topic``, flush, and return where each landed (in input order).

    Each record is a dict with any of key, value, headers, partition,
    timestamp (ms), or a tuple in that order, or a bare value.  The producer is
    idempotent so that a retry can never duplicate or reorder a test record.
    Raises if any record is not acknowledged.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **(config or {})})
    items = [_normalize(r) for r in records]
    results: list[Delivered | None] = [None] * len(items)
    errors: list[str] = []

    def on_delivery(index: int):
        def callback(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(f"record #{index}: {err}")
            else:
                results[index] = Delivered(msg.partition(), msg.offset())

        return callback

    for index, item in enumerate(items):
        kwargs: dict[str, Any] = {"value": item.get("value"), "key": item.get("key")}
        if item.get("headers") is not None:
            kwargs["headers"] = item["headers"]
        if item.get("partition") is not None:
            kwargs["partition"] = item["partition"]
        if item.get("timestamp") is not None:
            kwargs["timestamp"] = item["timestamp"]
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery(index), **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining:
        raise TimeoutError(f"{remaining} record(s) to {topic!r} not delivered within {timeout} s")
    if errors:
        raise KafkaException(f"produce to {topic!r} failed: " + "; ".join(errors[:5]))
    return [r for r in results if r is not None]


def _list_offsets(
    bootstrap: str, topic: str, partitions: Sequence[int], spec: OffsetSpec, isolation: str, timeout: float
) -> dict[int, int]:
    """Partition -> offset by one ListOffsets, read_committed asking for the last stable offset."""
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    client = admin(bootstrap)  # held until the answers are in: a dropped client never completes its futures
    # The new client learns where the partitions are first: librdkafka's ListOffsets otherwise looks their leaders
    # up itself, and a long test process twice saw that lookup spin (100% CPU) or crash in a fresh client.
    client.list_topics(topic, timeout=timeout)
    futures = client.list_offsets(
        {TopicPartition(topic, p): spec for p in partitions}, isolation_level=level, request_timeout=timeout
    )
    return {tp.partition: future.result(timeout).offset for tp, future in futures.items()}


def read_all(
    bootstrap: str,
    topic: str,
    partition: int | None = None,
    isolation: str = "read_committed",
    timeout: float = 30.0,
) -> list[Record]:
    """Every record of ``topic`` (or one partition) from the beginning to the current end.

    The end is fixed when the call starts by ListOffsets with the read's
    isolation: the high watermark, or for read_committed the last stable
    offset.  Because the end is known, an end-of-partition event before it
    is a stale fetch answer (a just-started embedded broker gave those) and
    is waited past, never believed.  Records are returned sorted by
    (partition, offset).  No consumer group offsets are committed.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-all-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "receive.message.max.bytes": RECEIVE_MESSAGE_MAX_BYTES,
        }
    )
    try:
        md = consumer.list_topics(topic=topic, timeout=timeout)
        entry = md.topics.get(topic)
        if entry is None or entry.error is not None:
            raise KafkaException(f"topic {topic!r} not found on {bootstrap}: {entry.error if entry else 'missing'}")
        partitions: Sequence[int] = sorted(entry.partitions) if partition is None else [partition]

        # Partition -> end offset (exclusive) to reach; empty partitions are done already.
        lows = _list_offsets(bootstrap, topic, partitions, OffsetSpec.earliest(), isolation, timeout)
        ends = _list_offsets(bootstrap, topic, partitions, OffsetSpec.latest(), isolation, timeout)
        pending = {p: ends[p] for p in partitions if ends[p] > lows[p]}
        assignment = [TopicPartition(topic, p, lows[p]) for p in pending]
        out: list[Record] = []
        if not pending:
            return out
        consumer.assign(assignment)
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"read_all({topic!r}) timed out after {timeout} s; unfinished partitions (end offset): {pending}"
                )
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    # At or past the end we fixed (control records move the position past the last
                    # data record): done.  Before it: a stale answer, keep fetching until the deadline.
                    if msg.offset() >= pending.get(msg.partition(), 0):
                        pending.pop(msg.partition(), None)
                    continue
                raise KafkaException(err)
            p = msg.partition()
            if p not in pending or msg.offset() >= pending[p]:
                continue  # written after we fixed the end: not ours to return
            ts_type, ts = msg.timestamp()
            out.append(
                Record(
                    topic=msg.topic(),
                    partition=p,
                    offset=msg.offset(),
                    key=msg.key(),
                    value=msg.value(),
                    headers=list(msg.headers() or []),
                    timestamp=ts if ts_type != TIMESTAMP_NOT_AVAILABLE else None,
                )
            )
            if msg.offset() >= pending[p] - 1:
                pending.pop(p)
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()
