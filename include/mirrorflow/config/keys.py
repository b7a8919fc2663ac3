"""Every setting mirrorflow understands: MM2's keys with MM2's defaults, and mirrorflow's own.

The defaults are MirrorMaker 2's (``MirrorSourceConfig``, ``MirrorCheckpointConfig``,
``MirrorHeartbeatConfig``, ``MirrorConnectorConfig``; see mm2-behaviour.md section 5), so a file that
works under MM2 means the same here. mirrorflow's own keys live under ``mirrorflow.``: MM2 drops
unknown top-level keys and connectors ignore unknown flow-level keys, so both tools can share a file.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..filters import DEFAULT_CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE

MIRRORFLOW_PREFIX = "mirrorflow."
FAMILIES = "mirrorflow.families"
FAMILY_PREFIX = "mirrorflow.family."
SCHEDULE = "mirrorflow.schedule"
DELIVERY = "mirrorflow.delivery"
DELIVERY_MODES = ("exactly-once", "at-least-once")
DEFAULT_FAMILY = "default"
HEARTBEATS_POLICIES = ("alert", "auto-failover")


@dataclass(frozen=True)
class KeySpec:
    """A known key: its type (for validation) and its default (None = no default)."""

    name: str
    type: str  # int | bool | list | string | class | classes | enum | schedule | duration
    default: str | None
    choices: tuple[str, ...] = ()
    doc: str = ""
    minimum: int | None = None


def _k(
    name: str,
    type_: str,
    default: str | None,
    doc: str = "",
    *,
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
) -> KeySpec:
    return KeySpec(name, type_, default, choices, doc, minimum)


_SPECS = [
    # MirrorConnectorConfig (all connectors)
    _k("enabled", "bool", "false", "replicate this flow (MirrorMakerConfig injects false)"),
    _k("admin.timeout.ms", "int", "60000", "timeout of admin calls", minimum=1),
    _k(
        "replication.policy.class",
        "class",
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "remote topic naming",
    ),
    _k("replication.policy.separator", "string", ".", "separator between source alias and topic"),
    _k(
        "replication.policy.internal.topic.separator.enabled",
        "bool",
        "true",
        "use the separator in internal topic names (KIP-949)",
    ),
    _k(
        "forwarding.admin.class",
        "class",
        "org.apache.kafka.clients.admin.ForwardingAdmin",
        "MM2 admin plug-in (not used by mirrorflow)",
    ),
    _k("tasks.max", "int", "1", "parallelism (mirrorflow: Spark tasks per run are planned from work units)", minimum=1),
    _k("consumer.poll.timeout.ms", "int", "1000", "consumer poll timeout", minimum=0),
    # MirrorSourceConfig
    _k("topics", "list", ".*", "topics to replicate (Java regexes, full match)"),
    _k("topics.exclude", "list", DEFAULT_TOPICS_EXCLUDE, "topics never replicated"),
    _k("config.properties.exclude", "list", DEFAULT_CONFIG_PROPERTIES_EXCLUDE, "topic configs never synced"),
    _k("topic.filter.class", "class", "org.apache.kafka.connect.mirror.DefaultTopicFilter", "topic filter"),
    _k(
        "config.property.filter.class",
        "class",
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
        "config property filter",
    ),
    _k("refresh.topics.enabled", "bool", "true", "look for new topics and partitions"),
    _k("refresh.topics.interval.seconds", "int", "600", "how often MM2 looks for new topics", minimum=1),
    _k("sync.topic.configs.enabled", "bool", "true", "sync topic configs to remote topics"),
    _k("sync.topic.configs.interval.seconds", "int", "600", "", minimum=1),
    _k("sync.topic.acls.enabled", "bool", "true", "sync topic ACLs to remote topics"),
    _k("sync.topic.acls.interval.seconds", "int", "600", "", minimum=1),
    _k("replication.factor", "int", "2", "replication factor of new remote topics (-1: broker default)", minimum=-1),
    _k("offset-syncs.topic.replication.factor", "int", "3", "", minimum=-1),
    _k("offset.lag.max", "int", "100", "records between offset syncs", minimum=0),
    _k(
        "offset-syncs.topic.location",
        "enum",
        "source",
        "cluster holding the offset-syncs topic",
        choices=("source", "target"),
    ),
    _k("emit.offset-syncs.enabled", "bool", "true", "write offset syncs"),
    _k("heartbeats.replication.enabled", "bool", "true", "replicate heartbeats topics even when filtered out"),
    _k(
        "use.defaults.from",
        "enum",
        "target",
        "whose defaults apply to synced topic configs",
        choices=("source", "target"),
    ),
    # MirrorCheckpointConfig
    _k("groups", "list", ".*", "consumer groups to checkpoint"),
    _k("groups.exclude", "list", DEFAULT_GROUPS_EXCLUDE, "consumer groups never checkpointed"),
    _k("group.filter.class", "class", "org.apache.kafka.connect.mirror.DefaultGroupFilter", "group filter"),
    _k("refresh.groups.enabled", "bool", "true", ""),
    _k("refresh.groups.interval.seconds", "int", "600", "", minimum=1),
    _k("emit.checkpoints.enabled", "bool", "true", "write checkpoints"),
    _k("emit.checkpoints.interval.seconds", "int", "60", "", minimum=1),
    _k("sync.group.offsets.enabled", "bool", "false", "write translated offsets to the target's idle groups"),
    _k("sync.group.offsets.interval.seconds", "int", "60", "", minimum=1),
    _k("checkpoints.topic.replication.factor", "int", "3", "", minimum=-1),
    # MirrorHeartbeatConfig
    _k("emit.heartbeats.enabled", "bool", "true", "emit heartbeats"),
    _k("emit.heartbeats.interval.seconds", "int", "1", "", minimum=1),
    _k("heartbeats.topic.replication.factor", "int", "3", "", minimum=-1),
    # mirrorflow's own
    _k(FAMILIES, "list", "", "named topic families of the flow; each gets its own DAG"),
    _k(SCHEDULE, "schedule", "5m", "schedule of families that set none, and of family 'default'"),
    _k(DELIVERY, "enum", "exactly-once", "delivery guarantee of the copy", choices=DELIVERY_MODES),
    _k(
        "mirrorflow.truncation",
        "enum",
        "continue",
        "when retention deleted records before they were copied: "
        "record a loss event and continue from the log start, or stop the partition",
        choices=("continue", "stop"),
    ),
    _k(
        "mirrorflow.unit.max.records",
        "int",
        "100000",
        "records per work unit (one Spark task, one transaction)",
        minimum=1,
    ),
    _k("mirrorflow.unit.max.bytes", "int", "67108864", "bytes per work unit", minimum=1024),
    _k("mirrorflow.poll.interval", "duration", "5s", "pause between micro-batches in continuous mode"),
    _k(
        "mirrorflow.lock.ttl",
        "duration",
        "30s",
        "lease of a run on what it copies (renewed every third of it): a killed run's lease ends this long after "
        "its last renewal, and a run whose renewals fail this long stops between waves",
    ),
    _k("mirrorflow.heartbeats.schedule", "schedule", "1m", "schedule of the flow's heartbeats DAG"),
    _k(
        "mirrorflow.heartbeats.max.age",
        "duration",
        "10m",
        "a replicated heartbeat older than this means replication from the source stopped; keep it above the "
        "schedule of the family that carries 'heartbeats' plus the heartbeats schedule",
    ),
    _k(
        "mirrorflow.heartbeats.poll.interval",
        "duration",
        "15s",
        "how often the heartbeats DAG's watch_freshness sensor reads the newest replicated heartbeat: staleness is "
        "reported at most max.age plus this after the last heartbeat was emitted",
    ),
    _k(
        "mirrorflow.heartbeats.policy",
        "enum",
        "alert",
        "what a stale heartbeat does: alert (log, webhook, notifiers), or auto-failover (alert, then trigger "
        "failover__<src>__<tgt> in disaster mode, once per outage)",
        choices=HEARTBEATS_POLICIES,
    ),
    _k(
        "mirrorflow.alerts.webhook.url",
        "string",
        "",
        "where alerts and recoveries are POSTed as JSON (empty: no webhook); a secret, redacted wherever shown",
    ),
    _k(
        "mirrorflow.alerts.notifiers",
        "classes",
        "",
        "dotted paths of Airflow BaseNotifier subclasses (or plain callables taking the alert payload) "
        "called on every alert and recovery",
    ),
    _k(
        "mirrorflow.progress.partitions",
        "int",
        "25",
        "partitions of mm2-offsets.<source>.internal if mirrorflow creates it "
        "(Connect's offset.storage.partitions default)",
        minimum=1,
    ),
    _k(
        "mirrorflow.internal.topics.fix",
        "bool",
        "false",
        "alter existing internal topics whose configs differ from MM2's (cleanup.policy=compact) instead of only "
        "reporting them with the kafka-configs command that fixes them; partition counts are never changed",
    ),
]

CONNECTOR_KEYS: dict[str, KeySpec] = {s.name: s for s in _SPECS}

FAMILY_ATTRIBUTES: dict[str, KeySpec] = {
    "topics": _k("topics", "list", None, "topics of the family (Java regexes, full match)"),
    "schedule": _k("schedule", "schedule", None, "Airflow schedule of the family's mirror DAG"),
}

TOP_LEVEL_KEYS: dict[str, KeySpec] = {
    "clusters": _k("clusters", "list", None, "cluster aliases"),
    "dedicated.mode.enable.internal.rest": _k("dedicated.mode.enable.internal.rest", "bool", "false", "MM2 only"),
}

# Old names still accepted (removed from MM2 in Kafka 4.0, KAFKA-17529).
DEPRECATED_ALIASES = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}

# Keys MM2 passes to its Connect workers; mirrorflow has no workers and ignores them quietly.
WORKER_PREFIXES = (
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "config.providers",
    "listeners",
    "offset.flush",
    "exactly.once.source.support",
    "name",
    "connector.class",
    "source.cluster.alias",
    "target.cluster.alias",
    "rest.",
    "admin.listeners",
    "metric.reporters",
    "metrics.",
)

CLIENT_ROLES = ("consumer", "producer", "admin")


def is_client_key(key: str) -> bool:
    """Keys MM2 treats as connection settings (``MirrorClientConfig``): bootstrap and security."""
    return key in ("bootstrap.servers", "security.protocol", "client.dns.lookup") or key.startswith(("ssl.", "sasl."))
