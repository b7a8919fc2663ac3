"""Topic ACL sync, as MM2's ``syncTopicAcls``: the remote counterparts of the source's topic ACLs are created on the
target, never deleted.

As in MM2 the sync runs on a timer, once per ``sync.topic.acls.interval.seconds``, for every topic of the family (a
run of only some topics included), so a new topic's ACLs arrive with the next sync, as MM2's do. Not every run: a
run asking the source for all its ACLs each time is a load MM2 never puts on a cluster (docs/performance.md,
"Figures behind other design choices"). When ACLs were last synced is what the caller knows (a run reads it from the
run history on the lease log, ``replication/history.py``); unknown means now. A cluster without an authorizer is
normal: it is logged once per flow and side, not as an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from ..config.model import FlowConfig
from .admin_calls import error_code, error_text, wait
from .plan import PreparationReport, TopicPlan

log = logging.getLogger("mirrorflow.topics")  # the package's name: log records keep the logger they always had

# Flows whose "no authorizer" notice was already logged: MM2 logs it once, not every cycle.
_NO_AUTHORIZER_LOGGED: set[tuple[str, str]] = set()

_ANY_TOPIC_ACL = AclBindingFilter(
    ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


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


def _log_no_authorizer(flow: FlowConfig, side: str) -> None:
    if (flow.name, side) in _NO_AUTHORIZER_LOGGED:
        return
    _NO_AUTHORIZER_LOGGED.add((flow.name, side))
    if side == "source":
        log.info("flow %s: the source cluster has no authorizer; topic ACLs are not synced", flow.name)
    else:
        log.warning("flow %s: the source has topic ACLs but the target has no authorizer to hold them", flow.name)


def sync_topic_acls(
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
        source_bindings = wait(source_admin.describe_acls(_ANY_TOPIC_ACL, request_timeout=timeout), timeout)
    except Exception as exc:  # noqa: BLE001 - ACL sync failing must not fail the run
        if error_code(exc) == KafkaError.SECURITY_DISABLED:
            _log_no_authorizer(flow, "source")
            report.acl_sync = "skipped: the source cluster has no authorizer"
            report.acls_synced_ms = started_ms
        else:
            report.acl_sync = f"failed: cannot describe source ACLs: {error_text(exc, timeout)}"
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
        return list(wait(target_admin.describe_acls(_ANY_TOPIC_ACL, request_timeout=timeout), timeout))
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
            wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - recorded per binding
            if error_code(exc) == KafkaError.SECURITY_DISABLED:
                _log_no_authorizer(flow, "target")
                report.acl_sync = "skipped: the target cluster has no authorizer"
                continue
            report.add_error(topic, f"cannot create ACL {binding} on the target: {error_text(exc, timeout)}")
            failed += 1
            continue
        report.acls_created.setdefault(topic, []).append(binding)
    return failed
