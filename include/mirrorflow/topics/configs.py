"""Topic configs as MM2's ``MirrorSourceConnector`` keeps them: those a new remote topic is created with, and the
incremental sync that brings an existing remote topic's configs in line with its source.

The rules (which source configs are copied, which are SET or DELETEd) are pure functions of the described configs;
``sync_topic_configs`` applies them with one IncrementalAlterConfigs request, a failure being that topic's error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from ..config.model import FlowConfig
from .admin_calls import error_text, wait
from .plan import PreparationReport, TopicPlan

log = logging.getLogger("mirrorflow.topics")  # the package's name: log records keep the logger they always had

DELETED = "deleted"
"""The value recorded in ``configs_changed`` for a property removed from a remote topic."""


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


def describe_configs(
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
            found[resource.name] = wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - any failure is this topic's error, not the run's
            reason = error_text(exc, timeout)
            report.add_error(
                topics[resource.name], f"cannot describe configs of {side} topic {resource.name}: {reason}"
            )
    return found


def sync_topic_configs(
    flow: FlowConfig,
    existing: Sequence[TopicPlan],
    source_configs: Mapping[str, dict[str, ConfigEntry]],
    target_admin: AdminClient,
    timeout: float,
    report: PreparationReport,
) -> None:
    """Bring existing remote topics' configs in line with their sources, incrementally (IncrementalAlterConfigs, as MM2 since KIP-894)."""
    plans = [p for p in existing if p.source_topic in source_configs]
    keys = {p.remote_topic: p.source_topic for p in plans}
    target_configs = describe_configs(target_admin, keys, "remote", timeout, report)
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
            wait(future, timeout)
        except Exception as exc:  # noqa: BLE001 - recorded per topic
            names = ", ".join(sorted(changes))
            reason = error_text(exc, timeout)
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
