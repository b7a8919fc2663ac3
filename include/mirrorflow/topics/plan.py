"""What a run of one flow and family replicates (``TopicPlan``, ``discover``, ``only``) and what preparing the
target did (``PreparationReport``).

Discovery is one metadata request to the source, filtered by the flow's MM2 rules; the report is plain data keyed by
source topic, turned into the run report's JSON by ``to_dict``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka.admin import AclBinding, AdminClient

from ..config.model import FlowConfig

log = logging.getLogger("mirrorflow.topics")  # the package's name: log records keep the logger they always had


@dataclass(frozen=True)
class TopicPlan:
    """One source topic to replicate, its remote name on the target and its source partition count."""

    source_topic: str
    remote_topic: str
    partitions: int


@dataclass(frozen=True)
class CreatedTopic:
    """A remote topic created by this run, with exactly what it was created with."""

    remote_topic: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


@dataclass
class PreparationReport:
    """What ``prepare_target`` did, keyed by *source* topic (the remote name is in each plan).

    ``acl_sync`` says whether ACL sync ran at all ("synced", "disabled", or why it was skipped or not due),
    because a cluster without an authorizer is normal and must not look like an error. ``acls_synced_ms``
    is when this preparation synced them (ms since the epoch; None: it did not, or it failed), for the
    run history that decides when the next sync is due. ``config_sync`` and ``configs_synced_ms`` say the same
    of topic configs.
    """

    created: dict[str, CreatedTopic] = field(default_factory=dict)
    partitions_added: dict[str, tuple[int, int]] = field(default_factory=dict)
    configs_changed: dict[str, dict[str, str]] = field(default_factory=dict)
    acls_created: dict[str, list[AclBinding]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    acl_sync: str = "disabled"
    acls_synced_ms: int | None = None
    config_sync: str = "disabled"
    configs_synced_ms: int | None = None

    def add_error(self, topic: str, message: str) -> None:
        """Record a topic-level problem; a second problem of the same topic is appended, not lost."""
        self.errors[topic] = f"{self.errors[topic]}; {message}" if topic in self.errors else message

    @property
    def changed(self) -> bool:
        """True if anything was created or altered on the target."""
        return bool(self.created or self.partitions_added or self.configs_changed or self.acls_created)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for the run report."""
        return {
            "created": {t: asdict(c) for t, c in sorted(self.created.items())},
            "partitions_added": {t: {"from": a, "to": b} for t, (a, b) in sorted(self.partitions_added.items())},
            "configs_changed": {t: dict(sorted(c.items())) for t, c in sorted(self.configs_changed.items())},
            "acls_created": {t: [acl_to_dict(b) for b in acls] for t, acls in sorted(self.acls_created.items())},
            "errors": dict(sorted(self.errors.items())),
            "acl_sync": self.acl_sync,
            "acls_synced_ms": self.acls_synced_ms,
            "config_sync": self.config_sync,
            "configs_synced_ms": self.configs_synced_ms,
        }


def acl_to_dict(binding: AclBinding) -> dict[str, str]:
    """An ACL binding as readable names (the enums' names, not their numbers)."""
    return {
        "resource_type": binding.restype.name,
        "resource_name": binding.name,
        "pattern_type": binding.resource_pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission_type": binding.permission_type.name,
    }


def discover(flow: FlowConfig, family: str | None, source_admin: AdminClient, timeout: float = 30) -> list[TopicPlan]:
    """The source topics this flow (and family, if given) replicates, sorted by name.

    ``flow.should_replicate_topic`` applies MM2's filter, internal-topic, cycle and heartbeats rules. A
    ``FamilyConflictError`` is not caught: a topic claimed by two families has no well-defined DAG, and
    the error names it. Topics whose metadata carries an error (being created or deleted) are left for
    the next run, because their partition count is not known yet.
    """
    metadata = source_admin.list_topics(timeout=timeout)
    plans = []
    for name in sorted(metadata.topics):
        entry = metadata.topics[name]
        if not flow.should_replicate_topic(name):
            continue
        if family is not None and flow.family_of(name).name != family:
            continue
        if entry.error is not None or not entry.partitions:
            log.info("flow %s: topic %s skipped this run, its metadata is not ready: %s", flow.name, name, entry.error)
            continue
        remote = flow.policy.format_remote_topic(flow.source, name)
        plans.append(TopicPlan(name, remote, len(entry.partitions)))
    return plans


def only(
    plans: list[TopicPlan], wanted: set[str] | None, flow: FlowConfig, family: str | None, purpose: str
) -> list[TopicPlan]:
    """The discovered plans restricted to ``wanted`` (None: all); ValueError naming any wanted topic not discovered,
    so a typo in a topic list fails instead of silently doing nothing for it."""
    if wanted is None:
        return plans
    unknown = sorted(wanted - {p.source_topic for p in plans})
    if unknown:
        raise ValueError(
            f"{flow.name} family {family or '(all)'}: no such source topic to {purpose}: {', '.join(unknown)}"
        )
    return [p for p in plans if p.source_topic in wanted]
