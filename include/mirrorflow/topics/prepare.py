"""Target preparation: remote topics created and grown, then configs and ACLs synced when their timers are due.

Before records are copied, the target must have every remote topic with at least the source's partition count (a
record is copied to the *same* partition number); mirrorflow sees to it at the start of each run, so a run never
copies into a topic that is missing or too small. Topics are created with the source partition count,
``replication.factor`` and the source configs MM2 would copy (``configs``); partitions are only ever added. A problem
with one topic is recorded in the report and never stops the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigEntry, NewPartitions, NewTopic

from ..config.model import FlowConfig
from ..kafka.retries import outcomes
from .acls import sync_topic_acls
from .admin_calls import error_code, error_text
from .configs import creation_configs, describe_configs, sync_topic_configs
from .plan import CreatedTopic, PreparationReport, TopicPlan, discover, only

log = logging.getLogger("mirrorflow.topics")  # the package's name: log records keep the logger they always had


def _partition_counts(target_admin: AdminClient, timeout: float) -> dict[str, int]:
    """Partition counts of every topic on a cluster.

    All topics are listed rather than the ones wanted: a metadata request naming a missing topic may
    auto-create it on brokers with ``auto.create.topics.enable=true``, with the broker's defaults.
    """
    metadata = target_admin.list_topics(timeout=timeout)
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


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
    found = outcomes(
        lambda topics: target_admin.create_topics(topics, operation_timeout=timeout, request_timeout=timeout),
        new_topics,
        lambda topic: topic.topic,
        timeout,
    )
    for remote, exc in found.items():
        plan, configs = requests[remote]
        if exc is not None:
            if error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS:  # a concurrent run, or our own retried request
                log.info("flow %s: remote topic %s was created concurrently", flow.name, remote)
                continue
            reason = error_text(exc, timeout)
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
    found = outcomes(
        lambda asked: target_admin.create_partitions(asked, operation_timeout=timeout, request_timeout=timeout),
        requests,
        lambda request: request.topic,
        timeout,
    )
    failed: dict[str, str] = {}
    for remote, exc in found.items():
        plan, before = short[remote]
        if exc is not None:
            failed[remote] = error_text(exc, timeout)
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
    ``acls_synced_ms`` (the last syncs the caller knows of), so a frequently scheduled run does not describe every
    topic's configs each time. ACLs are synced for ``acl_plans`` (default ``plans``: the whole family, when only some of
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
    source_configs = describe_configs(
        source_admin, {p.source_topic: p.source_topic for p in described}, "source", timeout, report
    )

    _create_missing(flow, missing, source_configs, target_admin, timeout, report)
    short = {p.remote_topic: (p, counts[p.remote_topic]) for p in existing if counts[p.remote_topic] < p.partitions}
    _grow_partitions(flow, short, target_admin, timeout, report)
    if report.config_sync == "synced":
        sync_topic_configs(flow, existing, source_configs, target_admin, timeout, report)
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
            sync_topic_acls(
                flow, plans if acl_plans is None else acl_plans, source_admin, target_admin, timeout, report
            )

    changed = {c.remote_topic: c.partitions for c in report.created.values()}
    changed.update({p.remote_topic: p.partitions for p in plans if p.source_topic in report.partitions_added})
    _await_metadata(target_admin, changed, timeout)
    return report


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
