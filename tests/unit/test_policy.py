"""Replication policies with MM2's exact semantics (Kafka's ``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy``, KIP-382, KIP-690)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorflow.config import ConfigError, parse_config
from mirrorflow.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    PolicyError,
    ReplicationPolicy,
    is_cycle,
    java_split,
    load_policy,
)


class PrefixlessPolicy(DefaultReplicationPolicy):
    """A custom policy for the dotted-path test: remote topics are '<topic>-from-<alias>'."""


@pytest.mark.parametrize(
    ("topic", "source", "upstream"),
    [
        ("a.", None, None),
        (".a", "", "a"),
        ("A.B.foo", "A", "B.foo"),
        ("...", None, None),
        ("orders", None, None),
        ("", None, None),
        ("A.orders", "A", "orders"),
    ],
)
def test_default_topic_source_uses_java_split(topic: str, source: str | None, upstream: str | None) -> None:
    policy = DefaultReplicationPolicy()
    assert policy.topic_source(topic) == source
    assert policy.upstream_topic(topic) == upstream


def test_java_split_drops_trailing_empty_strings_only() -> None:
    assert java_split("a.", ".") == ["a"]
    assert java_split(".a", ".") == ["", "a"]
    assert java_split("...", ".") == []
    assert java_split("a..b", ".") == ["a", "", "b"]
    assert java_split("ab", ".") == ["ab"]


def test_default_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert policy.original_topic("B.A.orders") == "orders"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.is_heartbeats_topic("heartbeats") and policy.is_heartbeats_topic("B.A.heartbeats")
    assert not policy.is_heartbeats_topic("myheartbeats")
    assert policy.is_checkpoints_topic("A.checkpoints.internal")


def test_custom_separator_and_internal_separator_flag() -> None:
    policy = load_policy(
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy", {"replication.policy.separator": "_"}
    )
    assert policy.format_remote_topic("A", "orders") == "A_orders"
    assert policy.topic_source("A_orders_eu") == "A"
    assert policy.upstream_topic("A_orders_eu") == "orders_eu"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert policy.checkpoints_topic("A") == "A_checkpoints_internal"
    assert policy.is_checkpoints_topic("A_checkpoints_internal")
    legacy = load_policy(
        "DefaultReplicationPolicy",
        {"replication.policy.separator": "__", "replication.policy.internal.topic.separator.enabled": "false"},
    )
    assert legacy.format_remote_topic("A", "t") == "A__t"
    assert legacy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert legacy.checkpoints_topic("A") == "A.checkpoints.internal"


def test_flag_alone_changes_nothing_without_a_separator() -> None:
    policy = load_policy("DefaultReplicationPolicy", {"replication.policy.internal.topic.separator.enabled": "false"})
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"


def test_empty_separator_is_refused() -> None:
    with pytest.raises(PolicyError, match="IdentityReplicationPolicy"):
        load_policy("DefaultReplicationPolicy", {"replication.policy.separator": ""})


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        (".hidden", True),
        ("mm2-offsets.A.internal", True),
        ("x-internal", True),
        ("A.checkpoints.internal", True),
        ("orders", False),
        ("orders.internals", False),
    ],
)
def test_internal_topics(topic: str, internal: bool) -> None:
    assert DefaultReplicationPolicy().is_internal_topic(topic) is internal


def test_identity_policy() -> None:
    policy = load_policy("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", {"source.cluster.alias": "A"})
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.format_remote_topic("A", "orders") == "orders"
    assert policy.topic_source("orders") == "A"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    # heartbeat-like topics keep the default prefixing, even ones that merely end in "heartbeats"
    assert policy.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.format_remote_topic("A", "myheartbeats") == "A.myheartbeats"
    assert policy.topic_source("A.heartbeats") == "A"
    assert policy.is_heartbeats_topic("B.A.heartbeats")


def test_cycle_detection_default_policy() -> None:
    policy = DefaultReplicationPolicy()
    assert is_cycle(policy, "B.orders", "B")
    assert is_cycle(policy, "C.B.orders", "B")
    assert not is_cycle(policy, "C.orders", "B")
    assert not is_cycle(policy, "orders", "B")
    assert is_cycle(policy, "A.heartbeats", "A")
    assert not is_cycle(policy, "B.A.heartbeats", "C")


def test_identity_policy_cannot_see_cycles() -> None:
    policy = IdentityReplicationPolicy("A")
    assert not is_cycle(policy, "orders", "B")
    assert is_cycle(policy, "orders", "A")  # topicSource is the configured source alias


def test_custom_policy_by_dotted_path_and_unknown_classes() -> None:
    assert isinstance(load_policy("tests.unit.test_policy.PrefixlessPolicy", {}), PrefixlessPolicy)
    assert isinstance(load_policy("tests.unit.test_policy:PrefixlessPolicy", {}), ReplicationPolicy)
    with pytest.raises(PolicyError, match="mirrorflow runs Python"):
        load_policy("com.example.MyJavaPolicy", {})
    with pytest.raises(PolicyError, match="not a subclass"):
        load_policy("tests.unit.test_policy.test_identity_policy", {})
    with pytest.raises(PolicyError, match="cannot import"):
        load_policy("no_such_module.Policy", {})


def test_a_policy_module_that_fails_on_import_is_a_config_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_policy_mod.py").write_text("def oops(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = "clusters = a, b\nreplication.policy.class = broken_policy_mod.Policy\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(text, "mm2.properties")
    assert "mm2.properties:2" in str(raised.value) and "SyntaxError" in str(raised.value)
