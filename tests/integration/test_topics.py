"""Discovery and target preparation against two real local clusters, plus the pure MM2 rules.

Why integration: topic creation, partition growth and config sync are admin-protocol behaviour; a mock
would only repeat our assumptions. The pure rules (which configs and ACLs MM2 copies, and how it
rewrites them) are also tested without a broker, because the local broker has no authorizer and reports
few config sources, so some branches can only be reached with hand-built entries.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.config import FamilyConflictError, FlowConfig, parse_config
from mirrorflow.kafka import calls as kafka_calls
from mirrorflow.kafka.clients import admin
from mirrorflow.topics import (
    DELETED,
    PreparationReport,
    TopicPlan,
    config_changes,
    creation_configs,
    discover,
    prepare_target,
    remote_acl_bindings,
)
from mirrorflow.topics.prepare import _grow_partitions
from tests.kafka_helpers import create_topic, unique_topic_name

pytestmark = pytest.mark.integration

TIMEOUT = 20.0


def make_flow(clusters, extra: str = "") -> FlowConfig:
    """The primary->backup flow on the session clusters, with ``extra`` flow properties appended."""
    text = (
        "clusters = primary, backup\n"
        f"primary.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\n"
        "primary->backup.enabled = true\n"
        "replication.factor = 1\n"
        f"{extra}"
    )
    return parse_config(text).flow("primary", "backup")


def only(flow_clusters, *topics: str, extra: str = "") -> FlowConfig:
    """A flow replicating exactly ``topics`` (unique names keep tests independent on shared clusters).

    Heartbeats replication is off: MM2 replicates a ``heartbeats`` topic whatever the filter says, and
    another test creates one on the shared primary.
    """
    return make_flow(
        flow_clusters,
        f"primary->backup.topics = {', '.join(topics)}\nprimary->backup.heartbeats.replication.enabled = false\n{extra}",
    )


def plan_and_prepare(flow: FlowConfig, timeout: float = TIMEOUT) -> tuple[list[TopicPlan], PreparationReport]:
    plans = discover(flow, None, admin(flow, "source"), timeout=timeout)
    return plans, prepare_target(flow, plans, admin(flow, "source"), admin(flow, "target"), timeout=timeout)


def partition_count(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT)
    entry = md.topics.get(topic)
    return 0 if entry is None else len(entry.partitions)


def topic_configs(bootstrap: str, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    client = AdminClient({"bootstrap.servers": bootstrap})
    return client.describe_configs([resource])[resource].result(TIMEOUT)


def alter_configs(bootstrap: str, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced: a destroyed client fails its futures
    for future in client.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)


# ------------------------------------------------------------------------------------------- discovery


def test_discover_keeps_filtered_topics_sorted_with_remote_names_and_partitions(kafka_clusters, topic_factory):
    wanted_b = topic_factory(kafka_clusters.primary, partitions=3)
    wanted_a = topic_factory(kafka_clusters.primary, partitions=1)
    unwanted = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, wanted_a, wanted_b)

    plans = discover(flow, None, admin(flow, "source"), timeout=TIMEOUT)

    expected = [TopicPlan(wanted_a, f"primary.{wanted_a}", 1), TopicPlan(wanted_b, f"primary.{wanted_b}", 3)]
    assert plans == sorted(expected, key=lambda p: p.source_topic)
    assert unwanted not in {p.source_topic for p in plans}


def test_discover_selects_one_family(kafka_clusters, topic_factory):
    in_family = topic_factory(kafka_clusters.primary, partitions=2)
    outside = topic_factory(kafka_clusters.primary)
    flow = make_flow(
        kafka_clusters,
        f"primary->backup.topics = {in_family}, {outside}\n"
        "primary->backup.mirrorflow.families = a\n"
        f"primary->backup.mirrorflow.family.a.topics = {in_family}\n",
    )

    family_a = discover(flow, "a", admin(flow, "source"), timeout=TIMEOUT)
    default = discover(flow, "default", admin(flow, "source"), timeout=TIMEOUT)

    assert family_a == [TopicPlan(in_family, f"primary.{in_family}", 2)]
    assert outside in {p.source_topic for p in default}
    assert in_family not in {p.source_topic for p in default}


def test_discover_propagates_a_family_conflict_naming_the_topic(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    rest = topic.removeprefix("t")
    # A backreference cannot be checked for overlap when the config is read, so the run-time check decides.
    flow = make_flow(
        kafka_clusters,
        f"primary->backup.topics = {topic}\n"
        "primary->backup.mirrorflow.families = a, b\n"
        f"primary->backup.mirrorflow.family.a.topics = {topic}\n"
        f"primary->backup.mirrorflow.family.b.topics = (t)\\\\1*{rest}\n",
    )

    with pytest.raises(FamilyConflictError, match=topic):
        discover(flow, "a", admin(flow, "source"), timeout=TIMEOUT)


def test_discover_skips_internal_topics_and_cycles_and_includes_heartbeats(kafka_clusters, topic_factory):
    normal = topic_factory(kafka_clusters.primary)
    suffix = normal.removeprefix("t-")
    skipped = [f"__x-{suffix}", f"x-{suffix}.internal", f"backup.{normal}"]
    # Heartbeats of another cluster ('<alias>.heartbeats'), unique so no other test's discovery sees it.
    heartbeats = f"hb{suffix.replace('-', '')}.heartbeats"
    # The filter selects the skipped topics (and excludes nothing), so only MM2's internal and cycle rules
    # can drop them; it does not select the heartbeats topic, which MM2 replicates anyway.
    flow = make_flow(
        kafka_clusters,
        f"primary->backup.topics = {', '.join([normal, *skipped])}\nprimary->backup.topics.exclude = \n",
    )
    try:
        for name in [*skipped, heartbeats]:
            create_topic(kafka_clusters.primary, name)

        names = {p.source_topic: p.remote_topic for p in discover(flow, None, admin(flow, "source"), timeout=TIMEOUT)}
    finally:
        delete_topics(kafka_clusters.primary, [*skipped, heartbeats])

    assert names[normal] == f"primary.{normal}"
    assert names[heartbeats] == f"primary.{heartbeats}"
    assert not set(skipped) & set(names)


def delete_topics(bootstrap: str, names: list[str]) -> None:
    """Best-effort cleanup of topics that would otherwise be seen by other tests' discovery."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    for future in client.delete_topics(names, operation_timeout=TIMEOUT).values():
        try:
            future.result(TIMEOUT)
        except KafkaException:
            pass


# ------------------------------------------------------------------------------------------- creation


def test_missing_remote_topic_is_created_with_partitions_and_filtered_configs(kafka_clusters, topic_factory):
    config = {"retention.ms": "12345", "cleanup.policy": "compact", "min.insync.replicas": "1"}
    topic = topic_factory(kafka_clusters.primary, partitions=3, config=config)
    remote = f"primary.{topic}"
    flow = only(kafka_clusters, topic)

    plans, report = plan_and_prepare(flow)

    assert plans == [TopicPlan(topic, remote, 3)]
    assert report.errors == {}
    created = report.created[topic]
    assert (created.remote_topic, created.partitions, created.replication_factor) == (remote, 3, 1)
    assert created.configs == {"retention.ms": "12345", "cleanup.policy": "compact"}
    assert partition_count(kafka_clusters.backup, remote) == 3
    remote_configs = topic_configs(kafka_clusters.backup, remote)
    assert remote_configs["retention.ms"].value == "12345"
    assert remote_configs["cleanup.policy"].value == "compact"
    assert ConfigSource(remote_configs["min.insync.replicas"].source) is not ConfigSource.DYNAMIC_TOPIC_CONFIG
    json.dumps(report.to_dict())  # the run report must serialise

    _, again = plan_and_prepare(flow)

    assert not again.changed, again.to_dict()
    assert again.errors == {}


def test_a_topic_level_error_does_not_stop_the_other_topics(kafka_clusters, topic_factory):
    good = topic_factory(kafka_clusters.primary, partitions=2)
    gone = unique_topic_name("never-created")
    flow = only(kafka_clusters, good, gone)
    plans = [TopicPlan(gone, f"primary.{gone}", 2), TopicPlan(good, f"primary.{good}", 2)]

    report = prepare_target(flow, plans, admin(flow, "source"), admin(flow, "target"), timeout=TIMEOUT)

    assert set(report.created) == {good}
    assert set(report.errors) == {gone}
    assert f"cannot describe configs of source topic {gone}" in report.errors[gone]
    assert partition_count(kafka_clusters.backup, f"primary.{good}") == 2


# ----------------------------------------------------------------------------------------- partitions


def test_partitions_are_added_when_the_source_grew(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary, partitions=2)
    remote = f"primary.{topic}"
    flow = only(kafka_clusters, topic)
    plan_and_prepare(flow)
    source = AdminClient({"bootstrap.servers": kafka_clusters.primary})
    source.create_partitions([NewPartitions(topic, 4)])[topic].result(TIMEOUT)
    wait_for_partitions(kafka_clusters.primary, topic, 4)

    plans, report = plan_and_prepare(flow)

    assert plans == [TopicPlan(topic, remote, 4)]
    assert report.errors == {}
    assert report.partitions_added == {topic: (2, 4)}
    assert partition_count(kafka_clusters.backup, remote) == 4


def test_a_remote_topic_with_more_partitions_is_left_alone(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary, partitions=1)
    create_topic(kafka_clusters.backup, f"primary.{topic}", partitions=3)
    flow = only(kafka_clusters, topic, extra="primary->backup.sync.topic.configs.enabled = false\n")

    _, report = plan_and_prepare(flow)

    assert not report.changed and report.errors == {}
    assert partition_count(kafka_clusters.backup, f"primary.{topic}") == 3


def test_partitions_that_cannot_be_added_are_a_clear_topic_error(kafka_clusters):
    # The local broker accepts every increase, so the refusal used here is a real one: the remote topic
    # vanished between listing and growing it (the broker answers UNKNOWN_TOPIC_OR_PART).
    topic = unique_topic_name("vanished")
    remote = f"primary.{topic}"
    flow = only(kafka_clusters, topic)
    report = PreparationReport()

    _grow_partitions(flow, {remote: (TopicPlan(topic, remote, 4), 2)}, admin(flow, "target"), TIMEOUT, report)

    assert report.partitions_added == {}
    message = report.errors[topic]
    assert message.startswith(
        f"remote topic {remote} has 2 partitions, source {topic} has 4, and they could not be added: "
    )


def wait_for_partitions(bootstrap: str, topic: str, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while partition_count(bootstrap, topic) < count:
        assert time.monotonic() < deadline, f"{topic} never showed {count} partitions"
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------- config sync


def test_changed_source_configs_are_synced_incrementally(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary, config={"retention.ms": "1000000", "cleanup.policy": "compact"})
    remote = f"primary.{topic}"
    flow = only(kafka_clusters, topic)
    plan_and_prepare(flow)
    alter_configs(kafka_clusters.primary, topic, {"retention.ms": "2000000"}, delete=("cleanup.policy",))

    _, report = plan_and_prepare(flow)

    assert report.errors == {}
    assert report.configs_changed == {topic: {"retention.ms": "2000000", "cleanup.policy": DELETED}}
    remote_configs = topic_configs(kafka_clusters.backup, remote)
    assert remote_configs["retention.ms"].value == "2000000"
    assert ConfigSource(remote_configs["cleanup.policy"].source) is not ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_config_sync_disabled_leaves_remote_configs_untouched(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary, config={"retention.ms": "1000000"})
    flow = only(kafka_clusters, topic, extra="primary->backup.sync.topic.configs.enabled = false\n")
    plan_and_prepare(flow)
    alter_configs(kafka_clusters.primary, topic, {"retention.ms": "3000000"})

    _, report = plan_and_prepare(flow)

    assert report.configs_changed == {} and report.errors == {}
    assert topic_configs(kafka_clusters.backup, f"primary.{topic}")["retention.ms"].value == "1000000"


# ------------------------------------------------------------------------------------------------ ACLs


def test_acl_sync_never_fails_the_preparation(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, topic, extra="primary->backup.sync.topic.acls.enabled = true\n")

    _, report = plan_and_prepare(flow)

    assert report.errors == {}
    assert report.acl_sync == "synced" or report.acl_sync.startswith("skipped: ")


def prepare_counting(flow: FlowConfig, **syncs) -> tuple[PreparationReport, dict[str, int]]:
    """``prepare_target`` with ``syncs`` arguments; the report and the admin calls it made, by name."""
    plans = discover(flow, None, admin(flow, "source"), timeout=TIMEOUT)
    source, target = admin(flow, "source"), admin(flow, "target")
    with kafka_calls.counting() as calls:
        report = prepare_target(flow, plans, source, target, timeout=TIMEOUT, **syncs)
    return report, dict(calls)


def test_acls_are_synced_once_per_interval(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, topic)  # MM2's defaults: ACL sync on, every 600 s
    plan_and_prepare(flow)  # the remote topic exists from here on
    now_ms = int(time.time() * 1000)

    recent, recent_calls = prepare_counting(flow, acls_synced_ms=now_ms - 5_000)
    assert recent.acl_sync.startswith("not due: synced ") and "every 600 s" in recent.acl_sync, recent.acl_sync
    assert recent.acls_synced_ms is None and "admin describe_acls" not in recent_calls

    due, due_calls = prepare_counting(flow, acls_synced_ms=now_ms - 600_000)
    assert due.acl_sync == "synced" or due.acl_sync.startswith("skipped: "), due.acl_sync
    assert due.acls_synced_ms is not None and due.acls_synced_ms >= now_ms
    assert due_calls.get("admin describe_acls", 0) >= 1

    unknown, _ = prepare_counting(flow)
    assert unknown.acls_synced_ms is not None, "no sync known: one is due"


def test_a_created_topic_gets_its_acls_with_the_next_sync_as_in_mm2(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, topic)

    report, calls = prepare_counting(flow, acls_synced_ms=int(time.time() * 1000))

    assert list(report.created) == [topic]
    assert report.acl_sync.startswith("not due: "), report.acl_sync
    assert "admin describe_acls" not in calls


def test_deferred_acls_are_left_alone_and_reported(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, topic)

    report, calls = prepare_counting(flow, syncs_deferred="the run syncs them")

    assert list(report.created) == [topic], "the rest of the preparation is done"
    assert report.acl_sync == "deferred: the run syncs them" and report.acls_synced_ms is None
    assert report.config_sync == "deferred: the run syncs them" and report.configs_synced_ms is None
    assert "admin describe_acls" not in calls


def test_existing_topics_configs_are_synced_once_per_interval(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, topic)  # MM2's defaults: config sync on, every 600 s
    plan_and_prepare(flow)  # the remote topic exists from here on
    now_ms = int(time.time() * 1000)

    recent, recent_calls = prepare_counting(flow, configs_synced_ms=now_ms - 5_000)
    assert recent.config_sync.startswith("not due: synced ") and "every 600 s" in recent.config_sync
    assert recent.configs_synced_ms is None and "admin describe_configs" not in recent_calls

    due, due_calls = prepare_counting(flow, configs_synced_ms=now_ms - 600_000)
    assert due.config_sync == "synced" and due.configs_synced_ms is not None and due.configs_synced_ms >= now_ms
    assert due_calls["admin describe_configs"] == 2, "one call per cluster for every topic of the family"


def test_acl_sync_disabled_is_reported(kafka_clusters, topic_factory):
    topic = topic_factory(kafka_clusters.primary)
    flow = only(kafka_clusters, topic, extra="primary->backup.sync.topic.acls.enabled = false\n")

    _, report = plan_and_prepare(flow)

    assert report.acl_sync == "disabled"


def acl(name, operation, permission=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL, **kw):
    return AclBinding(
        kw.get("restype", ResourceType.TOPIC),
        name,
        pattern,
        kw.get("principal", "User:alice"),
        kw.get("host", "*"),
        operation,
        permission,
    )


def test_remote_acl_bindings_filter_and_transform_as_mm2(kafka_clusters):
    flow = make_flow(kafka_clusters)
    plans = [TopicPlan("orders", "primary.orders", 1)]
    source = [
        acl("orders", AclOperation.READ, principal="User:bob", host="10.0.0.1"),
        acl("orders", AclOperation.ALL),  # ALLOW ALL -> ALLOW READ
        acl("orders", AclOperation.WRITE),  # ALLOW WRITE: only the replicator writes remote topics
        acl("orders", AclOperation.WRITE, AclPermissionType.DENY),  # DENY is copied as it is
        acl("orders", AclOperation.ALL, AclPermissionType.DENY),
        acl("orders", AclOperation.READ),  # duplicate of the transformed ALLOW ALL
        acl("ord", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        acl("*", AclOperation.READ),  # the wildcard is not a planned topic
        acl("payments", AclOperation.READ),  # not in this run's plans
        acl("orders", AclOperation.READ, restype=ResourceType.GROUP),
    ]

    remote = remote_acl_bindings(flow, source, plans)

    assert remote == [
        acl("primary.orders", AclOperation.READ, principal="User:bob", host="10.0.0.1"),
        acl("primary.orders", AclOperation.READ),
        acl("primary.orders", AclOperation.WRITE, AclPermissionType.DENY),
        acl("primary.orders", AclOperation.ALL, AclPermissionType.DENY),
    ]


def test_report_to_dict_names_acl_enums(kafka_clusters):
    report = PreparationReport(acl_sync="synced")
    report.acls_created["orders"] = [acl("primary.orders", AclOperation.READ)]
    report.partitions_added["orders"] = (2, 4)
    report.add_error("orders", "one")
    report.add_error("orders", "two")

    data = json.loads(json.dumps(report.to_dict()))

    assert data["acls_created"]["orders"][0]["operation"] == "READ"
    assert data["acls_created"]["orders"][0]["permission_type"] == "ALLOW"
    assert data["partitions_added"] == {"orders": {"from": 2, "to": 4}}
    assert data["errors"] == {"orders": "one; two"}


# ------------------------------------------------------------------------------------ pure config rules


def entry(name, value, source=ConfigSource.DYNAMIC_TOPIC_CONFIG, **flags) -> ConfigEntry:
    is_default = flags.pop("is_default", source is ConfigSource.DEFAULT_CONFIG)
    return ConfigEntry(name, value, source=source.value, is_default=is_default, **flags)


def entries(*items: ConfigEntry) -> dict[str, ConfigEntry]:
    return {e.name: e for e in items}


SOURCE = entries(
    entry("retention.ms", "5"),
    entry("segment.ms", "100", ConfigSource.DEFAULT_CONFIG),
    entry("min.insync.replicas", "2"),  # excluded by MM2's default config.properties.exclude
    entry("log.dir.thing", "x", ConfigSource.STATIC_BROKER_CONFIG),
    entry("ro", "x", is_read_only=True),
    entry("secret", None, is_sensitive=True),
    entry("max.message.bytes", "9", ConfigSource.DYNAMIC_BROKER_CONFIG),
)


def test_creation_configs_follow_mm2_target_config(kafka_clusters):
    assert creation_configs(make_flow(kafka_clusters), SOURCE) == {"retention.ms": "5", "max.message.bytes": "9"}
    from_source = make_flow(kafka_clusters, "primary->backup.use.defaults.from = source\n")
    assert creation_configs(from_source, SOURCE) == {"retention.ms": "5", "segment.ms": "100", "max.message.bytes": "9"}


def test_config_changes_set_differences_and_delete_target_overrides_of_source_defaults(kafka_clusters):
    target = entries(
        entry("retention.ms", "5"),  # equal: nothing to do
        entry("segment.ms", "7"),  # overridden on the target, default on the source: DELETE
        entry("max.message.bytes", "1", ConfigSource.DEFAULT_CONFIG),
        entry("min.insync.replicas", "1"),
        entry("only.on.target", "z"),  # not described by the source: untouched
    )
    assert config_changes(make_flow(kafka_clusters), SOURCE, target) == {"segment.ms": None, "max.message.bytes": "9"}

    from_source = make_flow(kafka_clusters, "primary->backup.use.defaults.from = source\n")
    assert config_changes(from_source, SOURCE, target) == {"segment.ms": "100", "max.message.bytes": "9"}
    target_default = entries(entry("segment.ms", "100", ConfigSource.DEFAULT_CONFIG))
    assert config_changes(make_flow(kafka_clusters), entries(SOURCE["segment.ms"]), target_default) == {}
