"""Internal topics are created as MM2 creates them (partitions, compaction), never by a metadata request.

Why on real brokers: the bug this guards against is a broker behaviour. With the broker's default
``auto.create.topics.enable=true`` and librdkafka's ``allow.auto.create.topics=true`` for producer-type
handles (the AdminClient is one), a metadata request for a missing topic creates it with the broker's
defaults: 1 partition and ``cleanup.policy=delete``. The topics are checked with the plain protocol
(DescribeTopics, DescribeConfigs) through clients built here, not the library's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from mirrorflow.checkpoints.emit import emit_checkpoints
from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.failover.plan import plan_failover
from mirrorflow.failover.report import FAILOVER_LOG, record
from mirrorflow.heartbeats import emit_heartbeat, heartbeat_flows
from mirrorflow.internal_topics import InternalTopic, ensure_topic
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.lock import LOCK_TOPIC
from mirrorflow.replication.run import replicate
from tests.conftest import KafkaClusters, own_clusters
from tests.integration.test_checkpoints import commit
from tests.integration.test_heartbeats import new_pair
from tests.kafka_helpers import create_topic, produce, read_all, unique_topic_name

pytestmark = pytest.mark.integration

RF_ONE = (
    "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
    "heartbeats.topic.replication.factor = 1\nsync.topic.acls.enabled = false\n"
)


def strict_admin(bootstrap: str) -> AdminClient:
    """An admin client whose metadata requests can never create a topic (the checks must not cause what they check)."""
    return AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})


def layout(bootstrap: str, topic: str) -> tuple[int, dict[str, str]]:
    """(partition count, configs) of an existing topic, read with DescribeTopics and DescribeConfigs."""
    client = strict_admin(bootstrap)
    description = client.describe_topics(TopicCollection([topic]))[topic].result(15)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = client.describe_configs([resource])[resource].result(15)
    return len(description.partitions), {name: entry.value for name, entry in entries.items()}


def auto_create_by_metadata_request(bootstrap: str, topic: str) -> None:
    """What the bug did: a default AdminClient's metadata request for a missing topic creates it (broker defaults).

    A cluster with ``auto.create.topics.enable=false`` (common on a production Kafka) cannot have the bug:
    the test is skipped there, saying so.
    """
    AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=15)
    try:
        partitions, configs = layout(bootstrap, topic)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise
        pytest.skip(f"{bootstrap} does not auto-create topics on a metadata request (auto.create.topics.enable=false)")
    assert (partitions, configs["cleanup.policy"]) == (1, "delete")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[KafkaClusters]:
    """Two fresh clusters (every internal topic on them is one this test's runs created), or the existing ones."""
    with own_clusters(tmp_path / "clusters") as clusters:
        yield clusters


#: Internal topics every flow shares, whatever its aliases: on existing clusters they may predate the test.
SHARED = ("heartbeats", FAILOVER_LOG, LOCK_TOPIC)


def test_every_internal_topic_has_mm2s_partitions_and_cleanup_policy_after_a_run(
    pair: KafkaClusters, caplog: pytest.LogCaptureFixture
) -> None:
    """Every internal topic the runs create has MM2's layout, and none slips through unchecked.

    On a fresh pair that is every internal topic of both clusters. On clusters shared with other tests and
    runs (``MIRRORFLOW_TEST_CLUSTERS``), it is those named after this test's aliases, and the shared ones
    (``heartbeats``, the failover log, the lock topic) if this test created them: one that was there before
    has whatever layout its creator gave it, and what mirrorflow reports about it is not this test's business.
    """
    primary, backup = pair.primary, pair.backup
    aliases = new_pair(pair)
    src, tgt = aliases.source, aliases.target
    orders, billing = unique_topic_name("orders"), unique_topic_name("billing")
    config = parse_config(
        f"clusters = {src}, {tgt}\n{src}.bootstrap.servers = {primary}\n{tgt}.bootstrap.servers = {backup}\n"
        f"{src}->{tgt}.enabled = true\n{src}->{tgt}.topics = {orders}\n{RF_ONE}"
    )
    flow = config.flow(src, tgt)
    existed = {
        (bootstrap, name)
        for bootstrap in (primary, backup)
        for name in strict_admin(bootstrap).list_topics(timeout=15).topics
        if name in SHARED
    }
    assert pair.external or not existed  # a fresh pair
    topic = create_topic(primary, orders, partitions=2)
    produce(primary, topic, [{"value": b"o%d" % i, "partition": i % 2} for i in range(20)])
    commit(primary, billing, {(topic, 0): 5, (topic, 1): 7})
    caplog.set_level(logging.WARNING, logger="mirrorflow.internal_topics")

    for f in heartbeat_flows(config):  # src->tgt and, as MM2, tgt->src
        emit_heartbeat(f)
    report = replicate(config, aliases.flow, None, LocalExecutor())
    assert report.ok, report.errors
    assert sum(p.records for p in report.partitions if p.topic == topic) == 20
    # The source's heartbeats: this test's reverse one (tgt->src), and on shared clusters other flows' too.
    heartbeats = sum(p.records for p in report.partitions if p.topic == "heartbeats")
    assert heartbeats >= 1 and (pair.external or heartbeats == 1), heartbeats
    checkpoints = emit_checkpoints(flow)
    assert checkpoints.emitted == 2 and [t.created for t in checkpoints.internal_topics] == [True]
    record(flow, plan_failover(flow, mode="planned", dry_run=True), state="dry-run")

    compact = {"cleanup.policy": "compact"}
    expected = {
        # (cluster, topic): (partitions, configs that must hold)
        (backup, f"mm2-offsets.{src}.internal"): (25, compact),  # mirrorflow.progress.partitions
        (primary, f"mm2-offset-syncs.{tgt}.internal"): (1, compact),  # offset-syncs.topic.location = source
        (backup, f"{src}.checkpoints.internal"): (1, compact),
        (backup, "heartbeats"): (1, compact),
        (primary, "heartbeats"): (1, compact),  # written by the reverse pair
        (backup, FAILOVER_LOG): (1, {"cleanup.policy": "delete", "retention.ms": "-1"}),  # an audit trail
        # The run lock's topic: its configs are the lock's design (replication/lock.py and its tests).
        (backup, LOCK_TOPIC): (1, {}),
    }

    def ours(bootstrap: str, name: str) -> bool:
        return src in name or tgt in name or (name in SHARED and (bootstrap, name) not in existed)

    # Every internal topic of this test's on both clusters is one of these: none slipped through unchecked.
    for bootstrap in (primary, backup):
        names = strict_admin(bootstrap).list_topics(timeout=15).topics
        internal = {n for n in names if n.endswith(".internal") or n.startswith("mirrorflow") or n == "heartbeats"}
        assert {n for n in internal if ours(bootstrap, n)} == {
            t for (b, t) in expected if b == bootstrap and ours(b, t)
        }, bootstrap
        assert {t for (b, t) in expected if b == bootstrap} <= internal, bootstrap
    for (bootstrap, name), (partitions, configs) in expected.items():
        if not ours(bootstrap, name):
            continue
        found_partitions, found = layout(bootstrap, name)
        assert found_partitions == partitions, name
        assert {k: found[k] for k in configs} == configs, name
    assert [r.partition for r in read_all(backup, f"{src}.checkpoints.internal")] == [0, 0]

    # A second round finds every topic as it should be: nothing reported (about the topics this test made).
    assert replicate(config, aliases.flow, None, LocalExecutor()).ok
    assert emit_checkpoints(flow).internal_topics[0].ok
    reported = [r.getMessage() for r in caplog.records]
    assert not [m for m in reported if not any(f"{name} on " in m for _, name in existed)], reported


def flow_config(kafka_clusters: Any, alias: str, prefix: str, extra: str = "") -> MirrorConfig:
    """A flow from a source alias of its own, so its internal topic names are this test's alone."""
    return parse_config(
        f"clusters = {alias}, backup\n{alias}.bootstrap.servers = {kafka_clusters.primary}\n"
        f"backup.bootstrap.servers = {kafka_clusters.backup}\n{alias}->backup.enabled = true\n"
        f"{alias}->backup.topics = {prefix}-.*\noffset-syncs.topic.location = target\n{RF_ONE}{extra}"
    )


def test_internal_topics_auto_created_with_broker_defaults_are_reported_then_fixed_when_allowed(
    kafka_clusters: Any, caplog: pytest.LogCaptureFixture
) -> None:
    alias = f"src{uuid.uuid4().hex[:8]}"
    prefix = f"it-{uuid.uuid4().hex[:8]}"
    progress, checkpoints = f"mm2-offsets.{alias}.internal", f"{alias}.checkpoints.internal"
    for name in (progress, checkpoints):
        auto_create_by_metadata_request(kafka_clusters.backup, name)
    topic = create_topic(kafka_clusters.primary, f"{prefix}-orders", partitions=3)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i, "partition": i % 3} for i in range(9)])
    caplog.set_level(logging.WARNING, logger="mirrorflow.internal_topics")
    bootstrap = kafka_clusters.backup

    # Reported, not changed: the command that fixes it is named; the existing partition count is used.
    config = flow_config(kafka_clusters, alias, prefix)
    report = replicate(config, f"{alias}->backup", None, LocalExecutor())
    assert report.ok
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    fix = (
        f"kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type topics --entity-name {progress} "
        "--add-config cleanup.policy=compact"
    )
    assert fix in warnings
    assert any(fix in warning for warning in report.warnings)  # in the run report too, where operators look
    assert f"{progress} on backup: 1 partition(s), not 25; mirrorflow uses the existing 1" in warnings
    assert {r.partition for r in read_all(bootstrap, progress)} == {0}  # keys placed by the existing count
    assert layout(bootstrap, progress)[1]["cleanup.policy"] == "delete"
    [state] = emit_checkpoints(config.flow(alias, "backup")).internal_topics
    assert not state.created and not state.fixed
    reported = (
        f"{checkpoints} on backup: has cleanup.policy=delete, must have cleanup.policy=compact (not compacted, what "
        f"it stores expires with the retention); fix it with: kafka-configs.sh --bootstrap-server {bootstrap} "
        f"--alter --entity-type topics --entity-name {checkpoints} --add-config cleanup.policy=compact "
        "(or set mirrorflow.internal.topics.fix=true to let mirrorflow do it)"
    )
    assert [p for p in state.problems if "--add-config" in p] == [reported]
    assert layout(bootstrap, checkpoints)[1]["cleanup.policy"] == "delete"

    # Fixed when the user allows it: the config only; the partition count stays (and is still reported).
    fixing = flow_config(kafka_clusters, alias, prefix, "mirrorflow.internal.topics.fix = true\n")
    caplog.clear()
    assert replicate(fixing, f"{alias}->backup", None, LocalExecutor()).ok
    partitions, configs = layout(bootstrap, progress)
    assert (partitions, configs["cleanup.policy"]) == (1, "compact")
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{progress} on backup: had cleanup.policy=delete; set cleanup.policy=compact" in warnings
    assert "mirrorflow uses the existing 1" in warnings and fix not in warnings
    [state] = emit_checkpoints(fixing.flow(alias, "backup")).internal_topics
    assert state.fixed and not state.problems
    partitions, configs = layout(bootstrap, checkpoints)
    assert (partitions, configs["cleanup.policy"]) == (1, "compact")


def test_the_existence_check_never_creates_a_topic_even_on_a_client_that_allows_auto_creation(
    kafka_clusters: Any,
) -> None:
    """``ensure_topic`` asks with CreateTopics and DescribeTopics, never with a metadata request that auto-creates."""
    name = f"mm2-offsets.src{uuid.uuid4().hex[:8]}.internal"
    permissive = AdminClient({"bootstrap.servers": kafka_clusters.backup})  # librdkafka's default: auto-create on
    state = ensure_topic(
        permissive, InternalTopic(name, 25, 1, keys_follow_partitions=True), cluster="backup", bootstrap="b"
    )
    assert (state.created, state.partitions, state.problems) == (True, 25, [])
    partitions, configs = layout(kafka_clusters.backup, name)
    assert (partitions, configs["cleanup.policy"]) == (25, "compact")
    again = ensure_topic(permissive, InternalTopic(name, 25, 1), cluster="backup", bootstrap="b")
    assert (again.created, again.partitions, again.problems) == (False, 25, [])

    # DescribeTopics (what the existence check and the wait use) does not auto-create, even on this client.
    missing = f"t-missing-{uuid.uuid4().hex[:8]}.internal"
    with pytest.raises(KafkaException) as unknown:
        permissive.describe_topics(TopicCollection([missing]))[missing].result(15)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # A topic that cannot be created (replication factor 3 on one broker) is an error naming why; none appears.
    with pytest.raises(RuntimeError, match=f"cannot create internal topic {missing} on backup .*replication factor 3"):
        ensure_topic(permissive, InternalTopic(missing, 1, 3), cluster="backup", bootstrap="b")
    assert missing not in strict_admin(kafka_clusters.backup).list_topics(timeout=15).topics
