"""Discovery and target preparation: the first step of one replication run of one flow and family.

Before records are copied, the target must have every remote topic with at least the source's partition
count (a record is copied to the *same* partition number), and the configs and ACLs that MM2's
``MirrorSourceConnector`` would keep in sync. MM2 does this on timers (``refresh.topics``,
``sync.topic.configs``, ``sync.topic.acls``); mirrorflow does it at the start of each run, so a run never
copies into a topic that is missing or too small, and an operator sees in the run report what changed.

ACLs are the exception: as in MM2, they are synced on a timer, once per ``sync.topic.acls.interval.seconds``,
for every topic of the family (a run of only some topics included), so a new topic's ACLs arrive with the next
sync, as MM2's do. Why not every run: a scheduled run every 30 s asking the source for all its ACLs is a load
MM2 never puts on a cluster, and on the embedded broker one DescribeAcls cost seconds of a core (it re-persists
everything it holds; BENCHMARKS.md). When ACLs were last synced is what the caller knows (the run reads it from
the run history on the lease log, ``replication/history.py``); unknown means now.

Rules follow MM2's ``MirrorSourceConnector`` (``createNewTopics``, ``syncTopicConfigs``, ``syncTopicAcls``): topics are created with the source
partition count, ``replication.factor`` and the source configs filtered by ``targetConfig``; partitions
are only ever added; configs are changed incrementally; ACLs are only ever created, never deleted.
A problem with one topic is recorded in the report and never stops the others. Every admin future is
waited with a timeout, so a broker that does not answer cannot hang a run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from .config.model import FlowConfig

log = logging.getLogger(__name__)

DELETED = "deleted"
"""The value recorded in ``configs_changed`` for a property removed from a remote topic."""

# Flows whose "no authorizer" notice was already logged: MM2 logs it once, not every cycle.
_NO_AUTHORIZER_LOGGED: set[tuple[str, str]] = set()

_ANY_TOPIC_ACL = AclBindingFilter(
    ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


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


# --------------------------------------------------------------------------------------------- discovery


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


# ------------------------------------------------------------------------------------------ config rules


def _source_of(entry: ConfigEntry) -> ConfigSource:
    """confluent-kafka hands ``source`` over as an int or as the enum, depending on the call."""
    try:
        return ConfigSource(entry.source)
    except ValueError:
        return ConfigSource.UNKNOWN_CONFIG


def _passes_common_filters(flow: FlowConfig, entry: ConfigEntry) -> bool:
    """MM2 ``targetConfig`` minus the default test: never copy read-only, sensitive or static broker values."""
    return (
        not entry.is_read_only
        and not entry.is_sensitive
        and _source_of(entry) is not ConfigSource.STATIC_BROKER_CONFIG
        and flow.config_property_filter.should_replicate_config_property(entry.name)
    )


def creation_configs(flow: FlowConfig, source_configs: Mapping[str, ConfigEntry]) -> dict[str, str]:
    """The configs a new remote topic gets: MM2's ``targetConfig(sourceConfig, incremental=false)``."""
    keep = {}
    for name, entry in source_configs.items():
        wanted_default = flow.config_property_filter.should_replicate_source_default(name)
        if (not entry.is_default or wanted_default) and _passes_common_filters(flow, entry) and entry.value is not None:
            keep[name] = entry.value
    return keep


def config_changes(
    flow: FlowConfig, source_configs: Mapping[str, ConfigEntry], target_configs: Mapping[str, ConfigEntry]
) -> dict[str, str | None]:
    """Incremental changes bringing a remote topic in line with its source: name -> value, None to DELETE.

    As MM2's incremental sync: a source default is DELETEd on the target when ``use.defaults.from=target``
    (only if the target overrides it at topic level, else there is nothing to delete); everything else is
    SET, and only when the value differs. Target properties the source does not describe are untouched.
    """
    changes: dict[str, str | None] = {}
    for name, entry in source_configs.items():
        if not _passes_common_filters(flow, entry):
            continue
        current = target_configs.get(name)
        if entry.is_default and not flow.config_property_filter.should_replicate_source_default(name):
            if current is not None and _source_of(current) is ConfigSource.DYNAMIC_TOPIC_CONFIG:
                changes[name] = None
        elif entry.value is not None and (current is None or current.value != entry.value):
            changes[name] = entry.value
    return changes


# ------------------------------------------------------------------------------------------- ACL rules


def remote_acl_bindings(
    flow: FlowConfig, bindings: Iterable[AclBinding], plans: Sequence[TopicPlan]
) -> list[AclBinding]:
    """The target bindings for source topic bindings, as MM2's ACL sync builds them.

    Kept: TOPIC resources with a LITERAL pattern, for a topic in ``plans``, that are not ALLOW WRITE (only
    the replicator writes remote topics). Each is moved to the remote topic name, and ALLOW ALL becomes
    ALLOW READ; DENY entries, principal and host are copied as they are. Duplicates are dropped.
    """
    remote_of = {p.source_topic: p.remote_topic for p in plans}
    result: list[AclBinding] = []
    for b in bindings:
        if b.restype != ResourceType.TOPIC or b.resource_pattern_type != ResourcePatternType.LITERAL:
            continue
        if b.name not in remote_of or not flow.should_replicate_topic(b.name):
            continue
        if b.permission_type == AclPermissionType.ALLOW and b.operation == AclOperation.WRITE:
            continue
        operation = b.operation
        if b.permission_type == AclPermissionType.ALLOW and b.operation == AclOperation.ALL:
            operation = AclOperation.READ
        remote = AclBinding(
            ResourceType.TOPIC,
            remote_of[b.name],
            ResourcePatternType.LITERAL,
            b.principal,
            b.host,
            operation,
            b.permission_type,
        )
        if remote not in result:
            result.append(remote)
    return result


# ---------------------------------------------------------------------------------------- admin helpers


def _error_text(exc: BaseException, timeout: float) -> str:
    """A short reason for a failed admin future (a timeout says how long was waited)."""
    if isinstance(exc, FutureTimeout):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return f"{exc.args[0].name()}: {exc.args[0].str()}"
    return str(exc) or type(exc).__name__


def _error_code(exc: BaseException) -> int | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code()
    return None


def _wait(future: Future, timeout: float) -> Any:
    return future.result(timeout=timeout)


def _partition_counts(target_admin: AdminClient, timeout: float) -> dict[str, int]:
    """Partition counts of every topic on a cluster.

    All topics are listed rather than the ones wanted: a metadata request naming a missing topic may
    auto-create it on brokers with ``auto.create.topics.enable=true``, with the broker's defaults.
    """
    metadata = target_admin.list_topics(timeout=timeout)
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def _describe_configs(
    admin: AdminClient, topics: Mapping[str, str], side: str, timeout: float, report: PreparationReport
) -> dict[str, dict[str, ConfigEntry]]:
    """Configs of the keys of ``topics``; a failure is recorded under the source topic its value names."""
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    if not resources:
        return {}
    found = {}
    futures = admin.describe_configs(resources, request_timeout=timeout)
    for resource, future in futures.items():
        try:
            found[resource.name] = _wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - any failure is this topic's error, not the run's
            reason = _error_text(exc, timeout)
            report.add_error(
                topics[resource.name], f"cannot describe configs of {side} topic {resource.name}: {reason}"
            )
    return found


def _await_metadata(target_admin: AdminClient, wanted: Mapping[str, int], timeout: float) -> None:
    """Wait (bounded) until target metadata shows new topics and partitions, so the copy can start at once.

    CreateTopics and CreatePartitions return before every broker's metadata has the change; producing in
    that window fails with unknown topic or partition. Not seeing it in time is logged only: the broker
    accepted the change and the producer retries.
    """
    deadline = time.monotonic() + timeout
    while wanted:
        try:
            counts = _partition_counts(target_admin, timeout=max(0.1, min(5.0, deadline - time.monotonic())))
        except KafkaException:
            counts = {}
        if all(counts.get(t, 0) >= n for t, n in wanted.items()):
            return
        if time.monotonic() >= deadline:
            late = sorted(t for t, n in wanted.items() if counts.get(t, 0) < n)
            log.warning("target metadata does not show the changes to %s yet after %g s", ", ".join(late), timeout)
            return
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------ steps


def _create_missing(
    flow: FlowConfig,
    missing: Sequence[TopicPlan],
    source_configs: Mapping[str, dict[str, ConfigEntry]],
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> None:
    """Create remote topics that do not exist, as MM2 does; TopicAlreadyExists means a concurrent run won."""
    replication_factor = flow.get_int("replication.factor")
    requests: dict[str, tuple[TopicPlan, dict[str, str]]] = {}
    for plan in missing:
        if plan.source_topic not in source_configs:
            continue  # its configs are unknown (error recorded): creating it with defaults could lose data
        configs = creation_configs(flow, source_configs[plan.source_topic])
        requests[plan.remote_topic] = (plan, configs)
    if not requests:
        return
    new_topics = [NewTopic(r, p.partitions, replication_factor, config=c) for r, (p, c) in requests.items()]
    futures = target_admin.create_topics(new_topics, operation_timeout=timeout, request_timeout=timeout)
    for remote, future in futures.items():
        plan, configs = requests[remote]
        try:
            _wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - recorded per topic
            if _error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS:
                log.info("flow %s: remote topic %s was created concurrently", flow.name, remote)
                continue
            reason = _error_text(exc, timeout)
            report.add_error(plan.source_topic, f"cannot create remote topic {remote}: {reason}")
            continue
        report.created[plan.source_topic] = CreatedTopic(remote, plan.partitions, replication_factor, configs)
        log.info("flow %s: created remote topic %s (%d partitions)", flow.name, remote, plan.partitions)


def _grow_partitions(
    flow: FlowConfig,
    short: Mapping[str, tuple[TopicPlan, int]],
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> None:
    """Add partitions to remote topics that have fewer than their source (keyed by remote topic).

    A failure is re-checked against fresh metadata: a concurrent run may have grown the topic already
    (Kafka then answers INVALID_PARTITIONS), which is success for this run.
    """
    if not short:
        return
    requests = [NewPartitions(remote, plan.partitions) for remote, (plan, _) in short.items()]
    futures = target_admin.create_partitions(requests, operation_timeout=timeout, request_timeout=timeout)
    failed: dict[str, str] = {}
    for remote, future in futures.items():
        plan, before = short[remote]
        try:
            _wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - recorded per topic
            failed[remote] = _error_text(exc, timeout)
            continue
        report.partitions_added[plan.source_topic] = (before, plan.partitions)
        log.info("flow %s: %s grown from %d to %d partitions", flow.name, remote, before, plan.partitions)
    _record_growth_failures(short, failed, target_admin, timeout, report)


def _record_growth_failures(
    short: Mapping[str, tuple[TopicPlan, int]],
    failed: Mapping[str, str],
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> None:
    if not failed:
        return
    try:
        counts = _partition_counts(target_admin, timeout)
    except KafkaException:
        counts = {}
    for remote, reason in failed.items():
        plan, before = short[remote]
        if counts.get(remote, 0) >= plan.partitions:
            continue
        report.add_error(
            plan.source_topic,
            f"remote topic {remote} has {before} partitions, source {plan.source_topic} has {plan.partitions}, "
            f"and they could not be added: {reason}",
        )


def _sync_configs(
    flow: FlowConfig,
    existing: Sequence[TopicPlan],
    source_configs: Mapping[str, dict[str, ConfigEntry]],
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> None:
    """Bring existing remote topics' configs in line with their sources, incrementally (KIP-894)."""
    plans = [p for p in existing if p.source_topic in source_configs]
    keys = {p.remote_topic: p.source_topic for p in plans}
    target_configs = _describe_configs(target_admin, keys, "remote", timeout, report)
    resources: dict[str, tuple[ConfigResource, dict[str, str | None]]] = {}
    for plan in plans:
        if plan.remote_topic not in target_configs:
            continue
        changes = config_changes(flow, source_configs[plan.source_topic], target_configs[plan.remote_topic])
        if changes:
            resources[plan.remote_topic] = (_alter_resource(plan.remote_topic, changes), changes)
    if not resources:
        return
    futures = target_admin.incremental_alter_configs([r for r, _ in resources.values()], request_timeout=timeout)
    for resource, future in futures.items():
        source_topic = keys[resource.name]
        changes = resources[resource.name][1]
        try:
            _wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - recorded per topic
            names = ", ".join(sorted(changes))
            reason = _error_text(exc, timeout)
            report.add_error(source_topic, f"cannot change configs {names} of remote topic {resource.name}: {reason}")
            continue
        report.configs_changed[source_topic] = {k: DELETED if v is None else v for k, v in changes.items()}
        log.info("flow %s: configs of %s changed: %s", flow.name, resource.name, ", ".join(sorted(changes)))


def _alter_resource(topic: str, changes: Mapping[str, str | None]) -> ConfigResource:
    entries = [
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
        if v is None
        else ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in sorted(changes.items())
    ]
    return ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)


def _log_no_authorizer(flow: FlowConfig, side: str) -> None:
    if (flow.name, side) in _NO_AUTHORIZER_LOGGED:
        return
    _NO_AUTHORIZER_LOGGED.add((flow.name, side))
    if side == "source":
        log.info("flow %s: the source cluster has no authorizer; topic ACLs are not synced", flow.name)
    else:
        log.warning("flow %s: the source has topic ACLs but the target has no authorizer to hold them", flow.name)


def _sync_acls(
    flow: FlowConfig,
    plans: Sequence[TopicPlan],
    source_admin: AdminClient,
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> None:
    """Create the remote counterparts of the source's topic ACLs; never deletes any.

    ``report.acls_synced_ms`` is set when the sync is done, including when a side has no authorizer (asking
    again before the interval would not change that); a failure leaves it None, so the next run tries again.
    """
    started_ms = int(time.time() * 1000)
    try:
        source_bindings = _wait(source_admin.describe_acls(_ANY_TOPIC_ACL, request_timeout=timeout), timeout)
    except Exception as exc:  # noqa: BLE001 - ACL sync failing must not fail the run
        if _error_code(exc) == KafkaError.SECURITY_DISABLED:
            _log_no_authorizer(flow, "source")
            report.acl_sync = "skipped: the source cluster has no authorizer"
            report.acls_synced_ms = started_ms
        else:
            report.acl_sync = f"failed: cannot describe source ACLs: {_error_text(exc, timeout)}"
            log.warning("flow %s: ACL sync %s", flow.name, report.acl_sync)
        return
    report.acl_sync = "synced"
    present = set(_target_topic_acls(target_admin, timeout))
    wanted = [b for b in remote_acl_bindings(flow, source_bindings, plans) if b not in present]
    failed = 0
    if wanted:
        failed = _create_acls(
            flow, wanted, {p.remote_topic: p.source_topic for p in plans}, target_admin, timeout, report
        )
    if not failed:
        report.acls_synced_ms = started_ms


def _target_topic_acls(target_admin: AdminClient, timeout: float) -> list[AclBinding]:
    """The target's topic ACLs, so that the report lists only bindings that are new.

    Best effort: creating is idempotent, so when they cannot be read every wanted binding is created.
    """
    try:
        return list(_wait(target_admin.describe_acls(_ANY_TOPIC_ACL, request_timeout=timeout), timeout))
    except Exception:  # noqa: BLE001 - no authorizer or no DESCRIBE right: create_acls will tell
        return []


def _create_acls(
    flow: FlowConfig,
    wanted: Sequence[AclBinding],
    source_of: Mapping[str, str],
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> int:
    """Create ``wanted`` on the target; the number of bindings that failed (each is a topic error in ``report``).

    CreateAcls is idempotent in Kafka: an existing binding is created again without error."""
    failed = 0
    futures = target_admin.create_acls(list(wanted), request_timeout=timeout)
    for binding, future in futures.items():
        topic = source_of[binding.name]
        try:
            _wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - recorded per binding
            if _error_code(exc) == KafkaError.SECURITY_DISABLED:
                _log_no_authorizer(flow, "target")
                report.acl_sync = "skipped: the target cluster has no authorizer"
                continue
            report.add_error(topic, f"cannot create ACL {binding} on the target: {_error_text(exc, timeout)}")
            failed += 1
            continue
        report.acls_created.setdefault(topic, []).append(binding)
    return failed


def sync_not_due(flow: FlowConfig, interval_key: str, last_synced_ms: int | None, now_ms: int) -> str | None:
    """Why a periodic sync (topic ACLs, topic configs) is not needed now (for the report), or None when one is due:
    never synced (as far as the caller knows), or ``interval_key``'s seconds (MM2's timer) passed since the last."""
    if last_synced_ms is None:
        return None
    interval_s = flow.get_int(interval_key)
    age_s = (now_ms - last_synced_ms) / 1000
    if age_s >= interval_s:
        return None
    return f"not due: synced {max(0.0, age_s):.0f} s ago, every {interval_s} s ({interval_key})"


# ------------------------------------------------------------------------------------------- preparation


def prepare_target(
    flow: FlowConfig,
    plans: Sequence[TopicPlan],
    source_admin: AdminClient,
    target_admin: AdminClient,
    timeout: float = 30,
    *,
    acls_synced_ms: int | None = None,
    configs_synced_ms: int | None = None,
    syncs_deferred: str | None = None,
    acl_plans: Sequence[TopicPlan] | None = None,
) -> PreparationReport:
    """Make the target ready for copying ``plans``: topics, partitions, configs and ACLs, as MM2 keeps them.

    New remote topics are created with their source's configs every time. The configs of existing ones and the
    topic ACLs are synced on MM2's timers (``sync.topic.configs.interval.seconds``,
    ``sync.topic.acls.interval.seconds``), when due by ``sync_not_due`` with ``configs_synced_ms`` and
    ``acls_synced_ms`` (the last syncs the caller knows of), so a run every 30 s does not describe every topic's
    configs twice a minute. ACLs are synced for ``acl_plans`` (default ``plans``: the whole family, when only some of
    its topics are copied); a config sync counts as the family's only when ``plans`` is the whole family.
    ``syncs_deferred``, a reason, leaves both periodic syncs to another step (the report says it). Raises only if
    the target's topic list cannot be read (nothing can be decided without it); every topic-level problem is in
    ``report.errors``.
    """
    report = PreparationReport()
    now_ms = int(time.time() * 1000)
    counts = _partition_counts(target_admin, timeout)
    missing = [p for p in plans if p.remote_topic not in counts]
    existing = [p for p in plans if p.remote_topic in counts]
    sync_configs = flow.get_bool("sync.topic.configs.enabled")
    if sync_configs:
        configs_not_due = sync_not_due(flow, "sync.topic.configs.interval.seconds", configs_synced_ms, now_ms)
        report.config_sync = f"deferred: {syncs_deferred}" if syncs_deferred else configs_not_due or "synced"
    described = missing + existing if report.config_sync == "synced" else missing
    source_configs = _describe_configs(
        source_admin, {p.source_topic: p.source_topic for p in described}, "source", timeout, report
    )

    _create_missing(flow, missing, source_configs, target_admin, timeout, report)
    short = {p.remote_topic: (p, counts[p.remote_topic]) for p in existing if counts[p.remote_topic] < p.partitions}
    _grow_partitions(flow, short, target_admin, timeout, report)
    if report.config_sync == "synced":
        _sync_configs(flow, existing, source_configs, target_admin, timeout, report)
        whole_family = acl_plans is None or len(acl_plans) == len(plans)
        if whole_family and not report.errors:
            report.configs_synced_ms = now_ms
    if flow.get_bool("sync.topic.acls.enabled"):
        not_due = sync_not_due(flow, "sync.topic.acls.interval.seconds", acls_synced_ms, now_ms)
        if syncs_deferred:
            report.acl_sync = f"deferred: {syncs_deferred}"
        elif not_due:
            report.acl_sync = not_due
        else:
            _sync_acls(flow, plans if acl_plans is None else acl_plans, source_admin, target_admin, timeout, report)

    changed = {c.remote_topic: c.partitions for c in report.created.values()}
    changed.update({p.remote_topic: p.partitions for p in plans if p.source_topic in report.partitions_added})
    _await_metadata(target_admin, changed, timeout)
    return report


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


def prepare_family(
    flow: FlowConfig,
    family: str | None,
    source_admin: AdminClient,
    target_admin: AdminClient,
    only_topics: set[str] | None = None,
    timeout: float = 30,
    *,
    acls_synced_ms: int | None = None,
    configs_synced_ms: int | None = None,
    syncs_deferred: str | None = None,
) -> tuple[list[TopicPlan], PreparationReport]:
    """Discover a family's source topics (optionally only some) and prepare the target for them.

    Returns the plans the target is ready for (topics with a preparation error are left out) and the
    report. The mirror DAG's prepare step and every replication run call this same function; the ACL
    arguments are ``prepare_target``'s.
    """
    discovered = discover(flow, family, source_admin, timeout)
    plans = only(discovered, only_topics, flow, family, "replicate")
    report = prepare_target(
        flow,
        plans,
        source_admin,
        target_admin,
        timeout,
        acls_synced_ms=acls_synced_ms,
        configs_synced_ms=configs_synced_ms,
        syncs_deferred=syncs_deferred,
        acl_plans=discovered,
    )
    return [p for p in plans if p.source_topic not in report.errors], report
