"""Where a failed-over consumer group would resume on the target: ``mirrorflow translate``.

Two sources, best first: a live translation of the group's committed offsets on the source (possible
while the source answers: a planned failover), and otherwise the last checkpoints on the target (a
disaster: the source is gone; this is what MM2's ``RemoteClusterUtils.translateOffsets`` returns).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException

from .. import preflight
from ..config.model import FlowConfig
from ..kafka import clients
from .emit import committed_offsets, read_best, remote_topic, source_topic_of, syncs_location
from .translate import Translation

#: How long ``translate`` waits for a source that neither answers nor refuses (packets dropped: a host that is
#: gone). A live cluster answers a metadata request in milliseconds, and without one the checkpoints on the
#: target are the answer: a disaster is exactly when the source is silent, so the answer must not wait 10 s.
#: A source refusing connections (or whose name does not resolve) is given up at once (``quick``).
SOURCE_PROBE_S = 3.0


@dataclass(frozen=True)
class ResumePoint:
    remote_topic: str
    partition: int
    upstream: int
    downstream: int | None
    kind: str  # exact, approximate, refused, unavailable, or "checkpoint" (an existing checkpoint kept)
    rereads: int
    reason: str
    basis: str = ""  # copied runs, offset syncs or existing checkpoint: where the answer came from


def translate_group(
    flow: FlowConfig,
    group: str,
    *,
    timeout: float = 30.0,
    on_unreachable: Callable[[str], None] | None = None,
) -> tuple[str, list[ResumePoint]]:
    """(where the answer came from, resume points per remote partition) for ``group``.

    ``on_unreachable`` receives the one line naming the source when it did not answer (the CLI prints it as a
    warning): the answer then comes from the checkpoints, found in about a second, not after a long probe.
    """
    offsets = None
    try:
        preflight.check_cluster(flow, "source", timeout=min(timeout, SOURCE_PROBE_S), quick=True)
        offsets = committed_offsets(clients.admin(flow, "source"), [group], timeout).get(group)
    except preflight.ClusterUnreachableError as exc:
        if on_unreachable is not None:
            on_unreachable(str(exc))  # the source is gone: fall back to the checkpoints
    except (KafkaException, TimeoutError):
        pass  # the source went away between the check and the read: fall back to the checkpoints
    if offsets is not None:
        return f"live translation of the group's offsets on {flow.source}", live_points(flow, group, offsets, timeout)
    return f"last checkpoints on {flow.target} ({flow.source} did not answer)", checkpoint_points(flow, group, timeout)


def live_points(
    flow: FlowConfig, group: str, offsets: dict[tuple[str, int], tuple[int, str]], timeout: float
) -> list[ResumePoint]:
    """The group's committed offsets on the source, each given the best valid answer (``best.choose``)."""
    best = read_best(flow, timeout)
    points = []
    for (topic, partition), (upstream, _meta) in sorted(offsets.items()):
        if flow.should_replicate_topic(topic):
            remote = remote_topic(flow, topic)
            points.append(_point(remote, partition, best.translate(group, topic, remote, partition, upstream)))
    return points


def checkpoint_points(flow: FlowConfig, group: str, timeout: float) -> list[ResumePoint]:
    """A disaster: the group's checkpoints on the target, each translated again where the syncs survive the source.

    With ``offset-syncs.topic.location=target`` the syncs (and the copy's progress) are on the target: a
    checkpoint written before the copy reached its offset gives way to the exact answer the copy allows now.
    """
    best = read_best(flow, timeout, syncs=syncs_location(flow)[0] == "target")
    return [
        _point(remote, partition, best.resolve(cp, source_topic_of(flow, remote)))
        for (g, remote, partition), cp in sorted(best.checkpoints.items())
        if g == group
    ]


def _point(remote: str, partition: int, t: Translation) -> ResumePoint:
    return ResumePoint(remote, partition, t.upstream, t.downstream, t.kind, t.rereads, t.reason, t.basis)


def render_resume_points(flow: FlowConfig, group: str, source: str, points: list[ResumePoint]) -> str:
    lines = [f"group {group}, {flow.name}: {source}"]
    if not points:
        lines.append("  nothing to translate: no committed offsets on replicated topics (or no checkpoints)")
    width = max((len(p.remote_topic) for p in points), default=0)
    for p in points:
        where = "-" if p.downstream is None else str(p.downstream)
        extra = f", up to {p.rereads} record(s) may be read again" if p.rereads else ""
        basis = f" [{p.basis}]" if p.basis else ""
        lines.append(
            f"  {p.remote_topic:<{width}} [{p.partition}]  offset {where:>10}  {p.kind}{extra}{basis} ({p.reason})"
        )
    return "\n".join(lines)


__all__ = [
    "SOURCE_PROBE_S",
    "ResumePoint",
    "checkpoint_points",
    "live_points",
    "render_resume_points",
    "translate_group",
]
