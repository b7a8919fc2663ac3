"""Before a run: do both clusters of a flow answer?

A mirror run against a dead cluster fails deep inside Spark with a librdkafka timeout that does not
say which cluster was down. The mirror DAG's first task asks each cluster for its metadata with a
short timeout and fails with a message naming the cluster, its role and its bootstrap servers, so
the operator knows at a glance where to look.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaException

from . import clients
from .config.model import FlowConfig, Side


class ClusterUnreachableError(RuntimeError):
    """One or both clusters of a flow did not answer; the message names each of them."""


@dataclass(frozen=True)
class ClusterHealth:
    alias: str
    side: Side
    bootstrap_servers: str
    brokers: int
    topics: int
    seconds: float


def check_cluster(flow: FlowConfig, side: Side, timeout: float = 15.0) -> ClusterHealth:
    """Metadata of one side of a flow, or ``ClusterUnreachableError`` naming the cluster."""
    alias = flow.source if side == "source" else flow.target
    bootstrap = flow.client_config(side, "admin").get("bootstrap.servers", "?")
    started = time.monotonic()
    # A dead cluster makes librdkafka log every reconnect attempt; back off so a check logs a few lines.
    admin = clients.admin(flow, side, **{"reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 5000})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        reason = error.str() if hasattr(error, "str") else str(error)
        raise ClusterUnreachableError(
            f"cluster '{alias}' ({side} of {flow.name}, bootstrap.servers {bootstrap}) did not answer "
            f"within {timeout:g} s: {reason}"
        ) from None
    return ClusterHealth(
        alias, side, bootstrap, len(metadata.brokers), len(metadata.topics), round(time.monotonic() - started, 3)
    )


def check_clusters(flow: FlowConfig, timeout: float = 15.0) -> list[ClusterHealth]:
    """Both clusters of a flow; if any is unreachable, one error naming every unreachable cluster."""
    healthy: list[ClusterHealth] = []
    problems: list[str] = []
    for side in ("source", "target"):
        try:
            healthy.append(check_cluster(flow, side, timeout))  # type: ignore[arg-type]
        except ClusterUnreachableError as exc:
            problems.append(str(exc))
    if problems:
        raise ClusterUnreachableError("; ".join(problems))
    return healthy


__all__ = ["ClusterHealth", "ClusterUnreachableError", "check_cluster", "check_clusters"]
