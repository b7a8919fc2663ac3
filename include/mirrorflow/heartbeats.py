"""Heartbeats: emitted in MM2's format and place, and their freshness on the target.

MM2's heartbeat connector of flow ``A->B`` writes key (A, B) into B's ``heartbeats`` every second, and
the reverse herder ``B->A`` writes (B, A) into A's. ``A->B`` then replicates A's ``heartbeats`` into
``A.heartbeats`` on B. The age of the newest record there measures the whole path: A up, B able to
write to A, replication from A to B running, and its lag. mirrorflow keeps exactly those topics and
bytes (so ``MirrorClient.upstreamClusters()`` and ``replicationHops()`` work), emits from the
heartbeats DAG, and lets the mirror runs carry ``heartbeats`` like any other topic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from . import clients
from .config.model import FlowConfig, MirrorConfig, Side
from .internal_topics import InternalTopic, ensure_internal_topic
from .replication.progress import read_tail
from .wire import Heartbeat, WireFormatError


@dataclass(frozen=True)
class Emitted:
    cluster: str  # where it was written
    topic: str
    heartbeat: Heartbeat


@dataclass(frozen=True)
class Freshness:
    """How old the newest heartbeat that crossed a flow is, against the flow's threshold."""

    flow: str
    topic: str  # ``<src>.heartbeats`` on the target
    newest_ms: int | None  # the heartbeat's own timestamp (emit time); None: none arrived yet
    age_s: float | None
    threshold_s: float
    checked_at_ms: int

    @property
    def fresh(self) -> bool:
        return self.age_s is not None and self.age_s <= self.threshold_s

    def describe(self) -> str:
        if self.age_s is None:
            return f"{self.flow}: no heartbeat in {self.topic} yet (threshold {self.threshold_s:.0f} s)"
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


def threshold_seconds(flow: FlowConfig) -> float:
    """``mirrorflow.heartbeats.max.age``: when a heartbeat older than this means replication stopped."""
    from .config.model import parse_duration

    return float(parse_duration(flow.get("mirrorflow.heartbeats.max.age")))


def check_freshness(flow: FlowConfig, *, threshold_s: float | None = None, timeout: float = 15.0) -> Freshness:
    """The flow's heartbeat freshness now; the target must answer (an unreachable target raises)."""
    threshold = threshold_seconds(flow) if threshold_s is None else threshold_s
    newest = newest_heartbeat(flow, timeout=timeout)
    now_ms = int(time.time() * 1000)
    age = None if newest is None else max(0.0, (now_ms - newest) / 1000)
    return Freshness(flow.name, replicated_heartbeats_topic(flow), newest, age, threshold, now_ms)


__all__ = [
    "Emitted",
    "Freshness",
    "check_freshness",
    "emit_heartbeat",
    "heartbeat_flows",
    "newest_heartbeat",
    "replicated_heartbeats_topic",
    "threshold_seconds",
]
