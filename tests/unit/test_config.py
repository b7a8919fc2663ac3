"""Resolution of mm2.properties: MM2's precedence and defaults, mirrorflow's families, and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorflow.config import ConfigError, FamilyConflictError, load_config, parse_config
from mirrorflow.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "mm2.properties")
    return [str(p) for p in err.value.problems if p.severity == "error"]


def test_mm2_defaults_with_their_origin() -> None:
    flow = parse_config(BASE).flow("A", "B")
    expected = {
        "topics": ".*",
        "groups": ".*",
        "offset.lag.max": "100",
        "replication.factor": "2",
        "offset-syncs.topic.location": "source",
        "sync.group.offsets.enabled": "false",
        "emit.checkpoints.interval.seconds": "60",
        "refresh.topics.interval.seconds": "600",
        "emit.heartbeats.interval.seconds": "1",
        "tasks.max": "1",
        "replication.policy.separator": ".",
        "groups.exclude": "console-consumer-.*, connect-.*, __.*",
        "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
        "mirrorflow.delivery": "exactly-once",
        "mirrorflow.schedule": "5m",
        "heartbeats.replication.enabled": "true",
        "use.defaults.from": "target",
    }
    for key, value in expected.items():
        assert flow.get(key) == value, key
    assert flow.settings["offset.lag.max"].origin.describe() == "MM2 default"
    assert flow.settings["mirrorflow.delivery"].origin.describe() == "mirrorflow default"
    assert isinstance(flow.policy, DefaultReplicationPolicy)


def test_flow_key_beats_top_level_beats_default() -> None:
    config = parse_config(BASE + "B->A.enabled = true\noffset.lag.max = 10\nA->B.offset.lag.max = 5\n", "f.properties")
    assert config.flow("A", "B").get("offset.lag.max") == "5"
    assert config.flow("A", "B").settings["offset.lag.max"].origin.describe() == "f.properties:7 (A->B.offset.lag.max)"
    assert config.flow("B", "A").get("offset.lag.max") == "10"


def test_cluster_prefixed_connector_key_does_not_apply_to_flows() -> None:
    # MM2 turns A.topics into source.cluster.topics, which no connector reads.
    assert parse_config(BASE + "A.topics = nothing\n").flow("A", "B").get("topics") == ".*"


def test_only_enabled_flows_replicate_and_all_pairs_are_known() -> None:
    config = parse_config(BASE.replace("clusters = A, B", "clusters = A, B, C") + "C.bootstrap.servers = c:1\n")
    assert [f.name for f in config.enabled_flows()] == ["A->B"]
    assert len(config.flows) == 6 and not config.flow("B", "A").enabled


def test_deprecated_blacklist_names_are_accepted() -> None:
    config = parse_config(BASE + "topics.blacklist = secret.*\ngroups.blacklist = tmp.*\n")
    flow = config.flow("A", "B")
    assert flow.get("topics.exclude") == "secret.*" and flow.get("groups.exclude") == "tmp.*"
    assert not flow.topic_filter.should_replicate_topic("secret1")
    assert any("pre-4.0 name of 'topics.exclude'" in w for w in config.warnings)
    both = parse_config(BASE + "topics.blacklist = x\ntopics.exclude = y\n")
    assert both.flow("A", "B").get("topics.exclude") == "y"
    assert any("ignored because topics.exclude is also set" in w for w in both.warnings)


def test_client_precedence_alias_role_over_alias_over_top_level() -> None:
    text = BASE + (
        "security.protocol = SSL\nsasl.mechanism = PLAIN\nB.sasl.mechanism = SCRAM-SHA-512\n"
        "B.producer.sasl.mechanism = GSSAPI\n"
    )
    flow = parse_config(text).flow("A", "B")
    assert flow.client_config("target", "producer")["sasl.mechanism"] == "GSSAPI"
    assert flow.client_config("target", "admin")["sasl.mechanism"] == "SCRAM-SHA-512"
    assert flow.client_config("source", "consumer")["sasl.mechanism"] == "PLAIN"
    assert flow.client_config("source", "consumer")["security.protocol"] == "SSL"
    assert flow.client_config("target", "producer")["bootstrap.servers"] == "b:9092"


def test_alias_consumer_beats_flow_consumer_and_flow_source_consumer_beats_both() -> None:
    text = BASE + "A->B.consumer.max.poll.records = 10\nA.consumer.max.poll.records = 20\n"
    assert parse_config(text).flow("A", "B").client_config("source", "consumer")["max.poll.records"] == "20"
    text += "A->B.source.consumer.max.poll.records = 30\n"
    assert parse_config(text).flow("A", "B").client_config("source", "consumer")["max.poll.records"] == "30"
    flow_only = BASE + "A->B.consumer.fetch.min.bytes = 7\n"
    assert parse_config(flow_only).flow("A", "B").client_config("source", "consumer")["fetch.min.bytes"] == "7"


def test_top_level_security_key_beats_flow_role_key_as_in_mm2() -> None:
    text = BASE + "security.protocol = SSL\nA->B.consumer.security.protocol = PLAINTEXT\n"
    assert parse_config(text).flow("A", "B").client_config("source", "consumer")["security.protocol"] == "SSL"
    text2 = BASE + "A->B.source.cluster.security.protocol = SASL_SSL\n"
    assert parse_config(text2).flow("A", "B").client_config("source", "admin")["security.protocol"] == "SASL_SSL"


def test_top_level_client_keys_mm2_drops_are_applied_and_reported() -> None:
    config = parse_config(BASE + "consumer.max.poll.records = 99\nproducer.linger.ms = 5\n")
    flow = config.flow("A", "B")
    assert flow.client_config("source", "consumer")["max.poll.records"] == "99"
    assert flow.client_config("target", "producer")["linger.ms"] == "5"
    assert any("MM2 silently drops top-level 'consumer.max.poll.records'" in w for w in config.warnings)


def test_consumer_forced_settings() -> None:
    flow = parse_config(BASE + "A.consumer.enable.auto.commit = true\nA.consumer.auto.offset.reset = latest\n").flow(
        "A", "B"
    )
    consumer = flow.client_config("source", "consumer")
    assert consumer["enable.auto.commit"] == "false"
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["isolation.level"] == "read_committed"


def test_exactly_once_needs_read_committed() -> None:
    errors = errors_of(BASE + "A.consumer.isolation.level = read_uncommitted\n")
    assert any("exactly-once delivery needs the source consumer's isolation.level=read_committed" in e for e in errors)
    config = parse_config(BASE + "A.consumer.isolation.level = read_uncommitted\nmirrorflow.delivery = at-least-once\n")
    assert config.flow("A", "B").delivery == "at-least-once"


def test_policy_settings_reach_the_policy() -> None:
    flow = parse_config(BASE + "replication.policy.separator = _\n").flow("A", "B")
    assert flow.policy.format_remote_topic("A", "t") == "A_t"
    assert flow.internal_topics()["offset syncs"] == "mm2-offset-syncs_B_internal on A"
    identity = parse_config(
        BASE + "A->B.replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    )
    policy = identity.flow("A", "B").policy
    assert isinstance(policy, IdentityReplicationPolicy) and policy.source_cluster_alias == "A"


def test_should_replicate_topic_follows_mm2() -> None:
    flow = parse_config(BASE + "B->A.enabled = true\nA->B.topics = orders.*\n").flow("A", "B")
    assert flow.should_replicate_topic("orders")
    assert not flow.should_replicate_topic("payments")
    assert flow.should_replicate_topic("heartbeats")  # heartbeats.replication.enabled
    assert flow.should_replicate_topic("C.heartbeats")
    assert not flow.should_replicate_topic("B.orders")  # cycle
    assert not flow.should_replicate_topic("mm2-offsets.A.internal")


def test_families_schedules_and_default_family() -> None:
    text = BASE + (
        "A->B.mirrorflow.families = orders, payments\n"
        "A->B.mirrorflow.family.orders.topics = orders\\\\..*\n"
        "A->B.mirrorflow.family.orders.schedule = 2m\n"
        "A->B.mirrorflow.family.payments.topics = pay.*\n"
        "A->B.mirrorflow.family.payments.schedule = */10 * * * *\n"
        "mirrorflow.family.default.schedule = @hourly\n"
    )
    flow = parse_config(text).flow("A", "B")
    assert [f.name for f in flow.families] == ["orders", "payments", "default"]
    assert flow.family_of("orders.eu").name == "orders"
    assert flow.family_of("ordersX").name == "default"
    assert flow.family_of("payments").schedule.kind == "cron"
    orders = flow.family("orders")
    assert orders.schedule.kind == "interval" and orders.schedule.seconds == 120
    assert flow.family("default").schedule.text == "@hourly"


def test_families_without_configuration_give_one_default_family_every_5_minutes() -> None:
    flow = parse_config(BASE).flow("A", "B")
    assert [(f.name, f.schedule.seconds) for f in flow.families] == [("default", 300)]


def test_family_overlap_is_found_before_any_topic_exists() -> None:
    errors = errors_of(
        BASE + "A->B.mirrorflow.families = eu, orders\nA->B.mirrorflow.family.eu.topics = .*\\\\.eu\n"
        "A->B.mirrorflow.family.orders.topics = orders\\\\..*\n"
    )
    assert any(
        "families 'eu'" in e and "'orders'" in e and "both claim topics such as 'orders.eu'" in e for e in errors
    )


def test_family_conflict_at_run_time_names_topic_and_families() -> None:
    # Backreferences are beyond the static check; the run-time check still refuses the ambiguity.
    text = BASE + (
        "A->B.mirrorflow.families = x, y\nA->B.mirrorflow.family.x.topics = (o)rders\\\\1?\n"
        "A->B.mirrorflow.family.y.topics = orders\n"
    )
    flow = parse_config(text).flow("A", "B")
    with pytest.raises(FamilyConflictError, match="topic 'orders' is claimed by families 'x'"):
        flow.family_of("orders")


def test_all_problems_are_reported_at_once_with_lines(tmp_path: Path) -> None:
    text = (
        "clusters = A, B\n"  # 1
        "A.bootstrap.servers = a:9092\n"  # 2  (B has none)
        "A->C.enabled = true\n"  # 3  unknown alias
        "A->A.enabled = true\n"  # 4  self flow
        "A->B.enabled = true\n"  # 5
        "A->B.topics = orders(\n"  # 6  bad regex
        "replication.policy.class = com.example.Policy\n"  # 7  unknown class
        "A->B.offset.lag.max = many\n"  # 8  not an int
        "A->B.mirrorflow.families = x, default\n"  # 9  reserved name, x has no topics
        "A->B.mirrorflow.family.y.topics = y\n"  # 10 family not listed
        "A->B.mirrorflow.family.x.schedule = sometimes\n"  # 11 bad schedule
        "A→B.enabled = true\n"  # 12 wrong arrow
    )
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    errors = "\n".join(str(p) for p in err.value.problems if p.severity == "error")
    for expected in (
        ":1: error: B.bootstrap.servers: cluster 'B' has no bootstrap.servers",
        ":3: error: A->C.enabled: unknown cluster alias 'C'",
        ":4: error: A->A.enabled: a flow from cluster 'A' to itself",
        ":6: error: A->B.topics: bad regex",
        ":7: error: replication.policy.class: unknown replication policy class 'com.example.Policy'",
        ":8: error: A->B.offset.lag.max: 'many' is not an integer",
        ":9: error: A->B.mirrorflow.families: family name 'default' is reserved",
        ":9: error: A->B.mirrorflow.families: family 'x' of flow A->B has no topics",
        ":10: error: A->B.mirrorflow.family.y.topics: family 'y' is configured but not listed",
        ":11: error: A->B.mirrorflow.family.x.schedule: 'sometimes' is not a schedule",
        ":12: error: A→B.enabled: flows are written",
    ):
        assert expected in errors, expected
    assert str(path) in errors


def test_unreadable_file_and_missing_clusters(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        load_config(tmp_path / "missing.properties")
    assert any("required key 'clusters' is missing" in e for e in errors_of("A.bootstrap.servers = a:1\n"))


def test_secret_values_never_appear_in_errors() -> None:
    errors = errors_of(
        BASE + "B.ssl.key.password = hunter2\nA->B.ssl.keystore.password = x\n"
        "admin.timeout.ms = ssl.keystore.password=hunter2\n"
    )
    assert errors and not any("hunter2" in e for e in errors)


def test_unknown_keys_warn_with_a_suggestion() -> None:
    config = parse_config(BASE + "sync.group.offset.enabled = true\nA->B.emit.checkpoint.interval.seconds = 5\n")
    assert any("did you mean 'sync.group.offsets.enabled'" in w for w in config.warnings)
    assert any("did you mean 'emit.checkpoints.interval.seconds'" in w for w in config.warnings)


def test_lost_backslash_warning() -> None:
    config = parse_config(BASE + "A->B.topics = orders\\..*\n")
    assert config.flow("A", "B").get("topics") == "orders..*"
    assert any("write '\\\\.' for a literal dot" in w for w in config.warnings)


def test_duplicate_keys_last_wins_with_a_warning() -> None:
    config = parse_config(BASE + "offset.lag.max = 1\noffset.lag.max = 2\n")
    assert config.flow("A", "B").get("offset.lag.max") == "2"
    assert any("also set at line 5" in w for w in config.warnings)


# -- many clusters: only the pairs the file names are resolved when it is loaded --------------------------


def test_pairs_the_file_does_not_name_are_built_on_first_use() -> None:
    text = BASE.replace("clusters = A, B", "clusters = A, B, C, D") + (
        "C.bootstrap.servers = c:9092\nD.bootstrap.servers = d:9092\nD.consumer.fetch.min.bytes = 7\n"
        "offset.lag.max = 7\n"
    )
    config = parse_config(text)
    assert len(config.flows) == 12 and len(list(config.flows)) == 12
    assert [f.name for f in config.enabled_flows()] == ["A->B"]
    assert ("D", "C") in config.flows and ("A", "A") not in config.flows and ("A", "Z") not in config.flows
    built = config.flow("D", "C")
    assert not built.enabled and built.get("offset.lag.max") == "7"
    assert built.client_config("source", "consumer")["fetch.min.bytes"] == "7"
    assert built.client_config("target", "admin")["bootstrap.servers"] == "c:9092"
    assert config.flow("D", "C") is built  # built once
    with pytest.raises(KeyError, match="no flow A->Z"):
        config.flow("A", "Z")


def test_loading_resolves_the_named_pairs_and_one_representative(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorflow.config import resolve

    resolved: list[tuple[str, str]] = []
    original = resolve._Resolver.flow

    def counting(self: resolve._Resolver, pair: tuple[str, str]) -> object:
        resolved.append(pair)
        return original(self, pair)

    monkeypatch.setattr(resolve._Resolver, "flow", counting)
    aliases = [f"c{i}" for i in range(300)]
    text = f"clusters = {', '.join(aliases)}\n" + "".join(f"{a}.bootstrap.servers = {a}:9092\n" for a in aliases)
    config = parse_config(text + "c1->c2.enabled = true\nc5->c4.topics = x\n")
    assert resolved == [("c1", "c2"), ("c5", "c4"), ("c0", "c1")]  # not 300 * 299 pairs
    assert [f.name for f in config.enabled_flows()] == ["c1->c2"]


def test_top_level_enabled_turns_every_pair_on() -> None:
    config = parse_config(
        BASE.replace("clusters = A, B", "clusters = A, B, C") + "C.bootstrap.servers = c:1\nenabled = true\n"
    )
    assert len(config.enabled_flows()) == 6


def test_top_level_errors_are_found_when_no_flow_is_named() -> None:
    errors = errors_of(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "replication.policy.class = com.example.Nope\n"
    )
    assert any(e.startswith("mm2.properties:4: error: replication.policy.class: unknown replication") for e in errors)


def test_heartbeat_only_pairs_are_every_pair_not_enabled() -> None:
    from mirrorflow.config.describe import describe_config

    config = parse_config(BASE.replace("clusters = A, B", "clusters = A, B, C") + "C.bootstrap.servers = c:1\n")
    assert describe_config(config)["heartbeat_only_pairs"] == ["A->C", "B->A", "B->C", "C->A", "C->B"]


def test_file_level_problems_are_reported_at_line_1() -> None:
    assert errors_of("A.bootstrap.servers = a:1\n") == [
        "mm2.properties:1: error: clusters: required key 'clusters' is missing (e.g. clusters = primary, backup)"
    ]


class ExplodingPolicy(DefaultReplicationPolicy):
    """A plug-in policy whose constructor fails (user code may raise anything)."""

    def __init__(self) -> None:
        raise RuntimeError("boom")


def test_a_plug_in_that_raises_is_an_error_at_its_line() -> None:
    errors = errors_of(BASE + "replication.policy.class = tests.unit.test_config.ExplodingPolicy\n")
    assert any(
        e.startswith("mm2.properties:5: error: replication.policy.class: ") and "failed: RuntimeError: boom" in e
        for e in errors
    ), errors


def test_typed_client_values_are_trimmed_as_java_reads_them() -> None:
    flow = parse_config(BASE + "B.producer.enable.idempotence = true  \nB.producer.client.rack = r1  \n").flow("A", "B")
    producer = flow.client_config("target", "producer")
    assert producer["enable.idempotence"] == "true" and producer["client.rack"] == "r1  "


def test_errors_are_one_printable_line() -> None:
    errors = errors_of(BASE + "A->B.offset.lag.max = a\\nb\\uD800\n")
    assert errors == ["mm2.properties:5: error: A->B.offset.lag.max: 'a\\nb\\ud800' is not an integer"]


def test_family_patterns_with_huge_automata_are_left_to_the_run_time_check() -> None:
    # ".*a.{16}" determinizes to 2^16 states: the static check gives up instead of blocking the DAG parse.
    text = BASE + (
        "A->B.mirrorflow.families = x, y\nA->B.mirrorflow.family.x.topics = .*a.{16}\n"
        "A->B.mirrorflow.family.y.topics = .*\n"
    )
    flow = parse_config(text).flow("A", "B")
    with pytest.raises(FamilyConflictError, match="claimed by families 'x'"):
        flow.family_of("a" * 17)


def test_an_unchanged_file_is_resolved_once_per_process(tmp_path: Path) -> None:
    from mirrorflow.config import load_config

    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
    )
    first = load_config(path)
    assert load_config(path) is first
    path.write_text(path.read_text().replace("a:9092", "c:9092"))  # same size, maybe the same clock tick
    second = load_config(path)
    assert (
        second is not first
        and second.flow("a", "b").client_config("source", "consumer")["bootstrap.servers"] == "c:9092"
    )


def test_a_file_with_provider_references_is_resolved_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mirrorflow.config import load_config

    path = tmp_path / "mm2.properties"
    monkeypatch.setenv("MF_TEST_SERVERS", "a:9092")
    path.write_text(
        "config.providers = env\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "clusters = a, b\na.bootstrap.servers = ${env:MF_TEST_SERVERS}\nb.bootstrap.servers = b:9092\n"
    )
    assert load_config(path) is not load_config(path)
