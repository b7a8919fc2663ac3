"""Where a failed-over consumer group would resume on the target: ``mirrorflow translate``.

Two sources, best first: a live translation of the group's committed offsets on the source (possible
while the source answers: a planned failover), and otherwise the last checkpoints on the target (a
disaster: the source is gone; this is what MM2's ``RemoteClusterUtils.translateOffsets`` returns).
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException

from .. import clients, preflight
from ..config.model import FlowConfig
from .emit import committed_offsets, read_checkpoints, read_translator, remote_topic


@dataclass(frozen=True)
class ResumePoint:
    remote_topic: str
    partition: int
    upstream: int
    downstream: int | None
    kind: str  # exact, approximate, refused, unavailable, or "checkpoint" (read from the target)
    rereads: int
    reason: str


def translate_group(flow: FlowConfig, group: str, *, timeout: float = 30.0) -> tuple[str, list[ResumePoint]]:
    """(where the answer came from, resume points per remote partition) for ``group``."""
    offsets = None
    try:
        preflight.check_cluster(flow, "source", timeout=min(timeout, 10.0))
        offsets = committed_offsets(clients.admin(flow, "source"), [group], timeout).get(group)
    except (preflight.ClusterUnreachableError, KafkaException, TimeoutError):
        pass  # the source is gone: fall back to the checkpoints
    if offsets is not None:
        translator = read_translator(flow, timeout)
        points = []
        for (topic, partition), (upstream, _meta) in sorted(offsets.items()):
            if not flow.should_replicate_topic(topic):
                continue
            t = translator.translate(topic, partition, upstream)
            points.append(
                ResumePoint(remote_topic(flow, topic), partition, upstream, t.downstream, t.kind, t.rereads, t.reason)
            )
        return f"live translation of the group's offsets on {flow.source}", points
    points = [
        ResumePoint(topic, partition, cp.upstream_offset, cp.downstream_offset, "checkpoint", 0, "last checkpoint")
        for (g, topic, partition), cp in sorted(read_checkpoints(flow, timeout).items())
        if g == group
    ]
    return f"last checkpoints on {flow.target} ({flow.source} did not answer)", points


def render_resume_points(flow: FlowConfig, group: str, source: str, points: list[ResumePoint]) -> str:
    lines = [f"group {group}, {flow.name}: {source}"]
    if not points:
        lines.append("  nothing to translate: no committed offsets on replicated topics (or no checkpoints)")
    width = max((len(p.remote_topic) for p in points), default=0)
    for p in points:
        where = "-" if p.downstream is None else str(p.downstream)
        extra = f", up to {p.rereads} record(s) may be read again" if p.rereads else ""
        lines.append(f"  {p.remote_topic:<{width}} [{p.partition}]  offset {where:>10}  {p.kind}{extra} ({p.reason})")
    return "\n".join(lines)


__all__ = ["ResumePoint", "render_resume_points", "translate_group"]
