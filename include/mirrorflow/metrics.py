"""The status model as Prometheus metrics: the same figures, names and labels the CLI's ``--json`` shows.

Rendered with ``prometheus_client`` (the Prometheus project's own Python client) so the exposition format
(escaping, ``# HELP``/``# TYPE`` lines, counter ``_total`` suffixes) is the reference implementation's, not
a hand-written approximation. A custom collector turns one list of :class:`~.status.FlowStatus` into
metric families on demand: nothing is kept between scrapes, so every scrape shows the clusters as they
are (the page and the endpoint cache a status for a few seconds; see the Airflow plugin).

Metrics (labels ``flow``, ``family``, ``topic`` = the source topic, ``partition``):

- ``mirrorflow_partition_lag_records``: records the target is missing (``lag_records``).
- ``mirrorflow_partition_lag_seconds``: age of the oldest source record not yet copied, 0 when caught up.
- ``mirrorflow_partition_lost_records``: records deleted by retention before they were copied.
- ``mirrorflow_records_copied_total``: the copied position (next source offset to copy). A counter: it
  only grows, by one per source offset copied, so ``rate()`` is the copy rate; it starts from the offset
  the first copy started at, not from 0 records copied by mirrorflow.
- ``mirrorflow_heartbeat_age_seconds`` / ``mirrorflow_heartbeat_max_age_seconds`` (per flow): the newest
  heartbeat's age on the target, and ``mirrorflow.heartbeats.max.age``.
- ``mirrorflow_checkpoint_age_seconds`` (per flow): age of the newest checkpoint on the target.
- ``mirrorflow_checkpoint_groups`` / ``mirrorflow_checkpoint_groups_exact`` (per flow).
- ``mirrorflow_failed_over`` (per flow): 1 while the flow is failed over, else 0.
- ``mirrorflow_cluster_up`` (labels ``flow``, ``cluster``): 0 for a cluster that did not answer.
- ``mirrorflow_status_seconds`` (per flow): how long measuring the status took.

A figure that could not be measured (a cluster down, no heartbeat yet) is left out rather than reported
as 0, so an alert rule on it fires on ``absent()`` instead of a false all-clear.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .status import FlowStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_PARTITION_LABELS = ["flow", "family", "topic", "partition"]


def _gauge(name: str, text: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, labels=labels)


class StatusCollector:
    """A ``prometheus_client`` collector over statuses computed by the caller (one scrape's worth)."""

    def __init__(self, statuses: Iterable[FlowStatus]) -> None:
        self.statuses = list(statuses)

    def collect(self) -> Iterator[Metric]:
        yield from self._partition_metrics()
        yield from self._flow_metrics()

    def _partition_metrics(self) -> Iterator[Metric]:
        lag_records = _gauge("mirrorflow_partition_lag_records", "Records the target is missing", _PARTITION_LABELS)
        lag_seconds = _gauge(
            "mirrorflow_partition_lag_seconds",
            "Age of the oldest source record not yet copied (0 when caught up)",
            _PARTITION_LABELS,
        )
        lost = _gauge(
            "mirrorflow_partition_lost_records",
            "Records deleted by retention on the source before they were copied",
            _PARTITION_LABELS,
        )
        copied = CounterMetricFamily(
            "mirrorflow_records_copied",
            "Copied position: the next source offset to copy (grows by one per source offset copied)",
            labels=_PARTITION_LABELS,
        )
        for st in self.statuses:
            for p in st.partitions:
                if p.end_offset is None:  # not measured (an error): absent, not 0
                    continue
                labels = [st.flow, p.family, p.topic, str(p.partition)]
                lag_records.add_metric(labels, p.lag_records)
                lag_seconds.add_metric(labels, p.lag_seconds)
                lost.add_metric(labels, p.lost_records)
                if p.copied_position is not None:
                    copied.add_metric(labels, p.copied_position)
        yield from (lag_records, lag_seconds, lost, copied)

    def _flow_metrics(self) -> Iterator[Metric]:
        heartbeat = _gauge("mirrorflow_heartbeat_age_seconds", "Age of the newest heartbeat on the target", ["flow"])
        threshold = _gauge(
            "mirrorflow_heartbeat_max_age_seconds", "mirrorflow.heartbeats.max.age: older is stale", ["flow"]
        )
        checkpoint = _gauge("mirrorflow_checkpoint_age_seconds", "Age of the newest checkpoint on the target", ["flow"])
        groups = _gauge("mirrorflow_checkpoint_groups", "Consumer groups with checkpoints on the target", ["flow"])
        exact = _gauge(
            "mirrorflow_checkpoint_groups_exact",
            "Groups whose every checkpoint translates exactly (nothing re-read after a failover)",
            ["flow"],
        )
        failed_over = _gauge("mirrorflow_failed_over", "1 while the flow is failed over, else 0", ["flow"])
        up = _gauge("mirrorflow_cluster_up", "0 when the cluster did not answer the status check", ["flow", "cluster"])
        took = _gauge("mirrorflow_status_seconds", "Time taken to measure the flow's status", ["flow"])
        for st in self.statuses:
            flow = [st.flow]
            _maybe(heartbeat, flow, st.heartbeat.get("age_seconds"))
            _maybe(threshold, flow, st.heartbeat.get("threshold_seconds"))
            _maybe(checkpoint, flow, st.checkpoints.get("age_seconds"))
            _maybe(groups, flow, st.groups.get("groups"))
            _maybe(exact, flow, st.groups.get("groups_exact"))
            state = st.failover.get("state")
            if state is not None:
                failed_over.add_metric(flow, 0 if state == "normal" else 1)
            source, target = st.flow.split("->", 1)
            for cluster in (source, target):
                up.add_metric([st.flow, cluster], 0 if cluster in st.unreachable else 1)
            took.add_metric(flow, st.seconds)
        yield from (heartbeat, threshold, checkpoint, groups, exact, failed_over, up, took)


def _maybe(family: GaugeMetricFamily, labels: list[str], value: Any) -> None:
    """Add the sample only when measured: an unmeasured figure is absent, never a reassuring 0."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        family.add_metric(labels, value)


def render(statuses: Iterable[FlowStatus]) -> str:
    """The Prometheus text exposition of these statuses."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(statuses))
    return generate_latest(registry).decode("utf-8")


__all__ = ["CONTENT_TYPE", "StatusCollector", "render"]
