"""Heartbeats: emitted in MM2's format and place, and their freshness on the target.

MM2's heartbeat connector of flow ``A->B`` writes key (A, B) into B's ``heartbeats`` every second, and
the reverse herder ``B->A`` writes (B, A) into A's. ``A->B`` then replicates A's ``heartbeats`` into
``A.heartbeats`` on B. The age of the newest record there measures the whole path: A up, B able to
write to A, replication from A to B running, and its lag. mirrorflow keeps exactly those topics and
bytes (so ``MirrorClient.upstreamClusters()`` and ``replicationHops()`` work), emits from the
heartbeats DAG, and lets the mirror runs carry ``heartbeats`` like any other topic.

A new flow has nothing in ``A.heartbeats`` until its first mirror run copied one, so "no heartbeat yet" is
not an outage at once: the flow is WAITING for ``mirrorflow.heartbeats.grace`` (default: the max age) after
its *first own heartbeat*, the earliest (A, B) record in ``heartbeats`` on B. That record is durable (a
Kafka topic, not a process's memory), written by the heartbeats DAG's first run together with the first
reverse heartbeat into A (the one that has to cross), and it lies on B, which must answer for any
freshness check, so it can be read even while A is down.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .config.model import FlowConfig, MirrorConfig, Side, parse_duration
from .internal_topics import InternalTopic, ensure_internal_topic
from .kafka import clients
from .replication.progress import read_tail
from .wire import Heartbeat, WireFormatError

#: A topic or partition that does not exist (yet): nothing was written there.
_ABSENT = (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)


@dataclass(frozen=True)
class Emitted:
    cluster: str  # where it was written
    topic: str
    heartbeat: Heartbeat


GRACE_KEY = "mirrorflow.heartbeats.grace"
MAX_AGE_KEY = "mirrorflow.heartbeats.max.age"


@dataclass(frozen=True)
class Freshness:
    """How old the newest heartbeat that crossed a flow is, against the flow's threshold.

    ``first_ms`` and ``grace_s`` are only looked up while no heartbeat has crossed (``newest_ms`` None): they
    decide between WAITING (a new flow within its grace period) and STALE.
    """

    flow: str
    topic: str  # ``<src>.heartbeats`` on the target
    newest_ms: int | None  # the heartbeat's own timestamp (emit time); None: none arrived yet
    age_s: float | None
    threshold_s: float
    checked_at_ms: int
    first_ms: int | None = None  # the flow's first own heartbeat ((src, tgt) on the target); None: none found
    grace_s: float | None = None

    @property
    def fresh(self) -> bool:
        return self.age_s is not None and self.age_s <= self.threshold_s

    @property
    def waiting(self) -> bool:
        """Nothing crossed yet, but the flow is younger than its grace period: not an outage (yet)."""
        return (
            self.age_s is None
            and self.first_ms is not None
            and self.grace_s is not None
            and (self.checked_at_ms - self.first_ms) / 1000 <= self.grace_s
        )

    @property
    def verdict(self) -> str:
        """``fresh``, ``waiting`` or ``stale``."""
        return "fresh" if self.fresh else "waiting" if self.waiting else "stale"

    def describe(self) -> str:
        if self.age_s is None:
            if self.first_ms is None:
                return (
                    f"{self.flow}: no heartbeat in {self.topic} yet, and none of the flow's own in heartbeats on the "
                    f"target (STALE; threshold {self.threshold_s:.0f} s)"
                )
            since = max(0.0, (self.checked_at_ms - self.first_ms) / 1000)
            grace = self.grace_s if self.grace_s is not None else self.threshold_s
            state = "WAITING for the first to cross" if self.waiting else "STALE"
            return (
                f"{self.flow}: no heartbeat in {self.topic} yet, {since:.0f} s after the flow's first heartbeat "
                f"({state}; grace {grace:.0f} s)"
            )
        state = "fresh" if self.fresh else "STALE"
        return f"{self.flow}: newest heartbeat {self.age_s:.0f} s old ({state}; threshold {self.threshold_s:.0f} s)"


def heartbeat_flows(config: MirrorConfig) -> list[FlowConfig]:
    """Every pair that emits heartbeats: enabled flows and, as MM2 does, the reverse pairs of enabled flows."""
    enabled = {(f.source, f.target) for f in config.enabled_flows()}
    wanted = enabled | {(t, s) for s, t in enabled}
    # Look the wanted pairs up: iterating config.flows would build all N*(N-1) pairs of a large file.
    return [
        config.flows[pair] for pair in sorted(wanted) if pair in config.flows and config.flows[pair].emits_heartbeats
    ]


def emit_heartbeat(flow: FlowConfig, *, now_ms: int | None = None, timeout: float = 30.0) -> Emitted:
    """Write one heartbeat (source, target, now) to partition 0 of ``heartbeats`` on the flow's target."""
    topic = flow.policy.heartbeats_topic()
    ensure_internal_topic(
        flow, "target", InternalTopic(topic, 1, flow.get_int("heartbeats.topic.replication.factor")), timeout=timeout
    )
    beat = Heartbeat(flow.source, flow.target, int(time.time() * 1000) if now_ms is None else now_ms)
    producer = clients.producer(
        flow, "target", **{"enable.idempotence": True, "message.timeout.ms": int(timeout * 1000)}
    )
    errors: list[str] = []
    producer.produce(
        topic,
        key=beat.key(),
        value=beat.value(),
        partition=0,
        timestamp=beat.timestamp_ms,
        on_delivery=lambda err, _msg: errors.append(str(err)) if err else None,
    )
    if producer.flush(timeout) or errors:
        raise RuntimeError(f"heartbeat {flow.name} not written to {topic} on {flow.target}: {errors or 'timed out'}")
    return Emitted(flow.target, topic, beat)


def emit_flow_heartbeats(config: MirrorConfig, flow: FlowConfig) -> tuple[list[Emitted], str | None]:
    """What a heartbeats run writes: the flow's heartbeat into the target (must work: raises otherwise) and, as
    MM2's reverse herder does, the reverse pair's into the source (may not: the source being down is exactly what
    freshness reports). Returns the heartbeats written and why the reverse one was not, if it was not."""
    written = [emit_heartbeat(config.flow(flow.source, flow.target))]
    back = config.flows.get((flow.target, flow.source))
    if back is None or not back.emits_heartbeats:
        return written, None
    try:
        written.append(emit_heartbeat(back, timeout=10))
    except Exception as exc:  # noqa: BLE001 - said to the caller, who logs it
        return written, f"reverse heartbeat ({flow.target}, {flow.source}) not written (is {flow.source} down?): {exc}"
    return written, None


def replicated_heartbeats_topic(flow: FlowConfig) -> str:
    """``<src>.heartbeats``: the source's heartbeats as the mirror runs copy them to the target."""
    return flow.policy.format_remote_topic(flow.source, flow.policy.heartbeats_topic())


def newest_heartbeat(
    flow: FlowConfig, side: Side = "target", topic: str | None = None, timeout: float = 15.0
) -> int | None:
    """Timestamp (ms) of the newest heartbeat in ``topic`` on ``side`` (default: ``<src>.heartbeats`` on the target)."""
    topic = topic or replicated_heartbeats_topic(flow)
    config = clients.client_properties(flow, side, "consumer")
    newest: int | None = None
    for message in read_tail(config, topic, 0, 50, timeout):  # compacted: the tail holds the newest
        try:
            beat = Heartbeat.decode(message.key() or b"", message.value() or b"")
        except WireFormatError:
            continue
        newest = beat.timestamp_ms if newest is None else max(newest, beat.timestamp_ms)
    return newest


def first_heartbeat(flow: FlowConfig, timeout: float = 15.0) -> int | None:
    """Timestamp (ms) of the flow's first own heartbeat: the earliest (src, tgt) record in ``heartbeats`` on the target.

    Read from the start of the partition, stopping at the first match: only asked while nothing has crossed,
    that is for a new flow, whose records are few. The topic is compacted, but the broker only compacts
    segments that rolled (``segment.ms``, 7 days by default), so the first record of a young flow is there;
    for an old flow it may be a later one, which the alert state makes harmless (a flow that was fresh or
    stale once never waits again).
    """
    topic = flow.policy.heartbeats_topic()
    config = clients.client_properties(flow, "target", "consumer")
    consumer = Consumer(clients.bounded_reader(config))
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].code() in _ABSENT:
                return None
            raise
        if high <= low:
            return None
        consumer.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return None
                raise KafkaException(message.error())
            try:
                beat = Heartbeat.decode(message.key() or b"", message.value() or b"")
            except WireFormatError:
                beat = None
            if beat is not None and (beat.source_alias, beat.target_alias) == (flow.source, flow.target):
                return beat.timestamp_ms
            if message.offset() + 1 >= high:
                return None
        raise TimeoutError(f"{topic} on {flow.target} not read to offset {high} within {timeout:.0f} s")
    finally:
        consumer.close()


def threshold_seconds(flow: FlowConfig) -> float:
    """``mirrorflow.heartbeats.max.age``: when a heartbeat older than this means replication stopped."""
    return float(parse_duration(flow.get(MAX_AGE_KEY)))


def grace_seconds(flow: FlowConfig) -> float:
    """``mirrorflow.heartbeats.grace``: how long a new flow may wait for its first heartbeat to cross (unset: max age)."""
    text = flow.get(GRACE_KEY).strip()
    return float(parse_duration(text)) if text else threshold_seconds(flow)


def check_freshness(
    flow: FlowConfig, *, threshold_s: float | None = None, grace_s: float | None = None, timeout: float = 15.0
) -> Freshness:
    """The flow's heartbeat freshness now; the target must answer (an unreachable target raises).

    While nothing has crossed, the flow's first own heartbeat is looked up too, for the grace period.
    """
    threshold = threshold_seconds(flow) if threshold_s is None else threshold_s
    newest = newest_heartbeat(flow, timeout=timeout)
    first, grace = None, None
    if newest is None:
        first = first_heartbeat(flow, timeout=timeout)
        grace = grace_seconds(flow) if grace_s is None else grace_s
    now_ms = int(time.time() * 1000)
    age = None if newest is None else max(0.0, (now_ms - newest) / 1000)
    return Freshness(flow.name, replicated_heartbeats_topic(flow), newest, age, threshold, now_ms, first, grace)


__all__ = [
    "GRACE_KEY",
    "MAX_AGE_KEY",
    "Emitted",
    "Freshness",
    "check_freshness",
    "emit_flow_heartbeats",
    "emit_heartbeat",
    "first_heartbeat",
    "grace_seconds",
    "heartbeat_flows",
    "newest_heartbeat",
    "replicated_heartbeats_topic",
    "threshold_seconds",
]
