"""Every setting mirrorflow understands: MM2's keys with MM2's defaults, and mirrorflow's own.

The defaults are MirrorMaker 2's (``MirrorSourceConfig``, ``MirrorCheckpointConfig``,
``MirrorHeartbeatConfig``, ``MirrorConnectorConfig``; see Kafka's ``connect/mirror`` sources), so a file that
works under MM2 means the same here. mirrorflow's own keys live under ``mirrorflow.``: MM2 drops
unknown top-level keys and connectors ignore unknown flow-level keys, so both tools can share a file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..filters import DEFAULT_CONFIG_PROPERTIES_EXCLUDE, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE

MIRRORFLOW_PREFIX = "mirrorflow."
FAMILIES = "mirrorflow.families"
FAMILY_PREFIX = "mirrorflow.family."
SCHEDULE = "mirrorflow.schedule"
DELIVERY = "mirrorflow.delivery"
DELIVERY_MODES = ("exactly-once", "at-least-once")
DEFAULT_FAMILY = "default"
HEARTBEATS_POLICIES = ("alert", "auto-failover")
#: Lag alerts: the flow's key, and the same setting as a family attribute (``mirrorflow.family.<name>.<attr>``).
ALERTS_LAG_MAX_SECONDS = "mirrorflow.alerts.lag.max.seconds"
FAMILY_LAG_ATTRIBUTE = "alerts.lag.max.seconds"

# Integer ranges of the places values end up in: Kafka's wire types (INT16 replication factors, INT32
# partition counts) and the C ints of librdkafka and Python's C extensions. A value outside them
# validated once and then crashed ``replicate`` with an OverflowError, so every range is checked here.
INT16_MAX = 2**15 - 1
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: A second count above this is refused: it reaches ``timedelta`` and ``time.sleep`` (68 years is plenty).
MAX_SECONDS = INT32_MAX


@dataclass(frozen=True)
class KeySpec:
    """A known key: its type and range (for validation) and its default (None = no default)."""

    name: str
    type: str  # int | bool | list | string | class | classes | enum | schedule | duration
    default: str | None
    choices: tuple[str, ...] = ()
    doc: str = ""
    minimum: int | None = None
    maximum: int | None = None
    #: Why 0 is refused although it is in range (replication factors: -1 means the broker default).
    zero: str | None = None


def _k(
    name: str,
    type_: str,
    default: str | None,
    doc: str = "",
    *,
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
    maximum: int | None = None,
) -> KeySpec:
    if type_ == "int" and (minimum is None or maximum is None):
        raise ValueError(f"{name}: an int key needs its range")  # every integer reaches a bounded type
    return KeySpec(name, type_, default, choices, doc, minimum, maximum)


def _rf(name: str, default: str | None, doc: str = "") -> KeySpec:
    """A replication factor: Kafka's INT16, or -1 for the broker's default."""
    spec = _k(name, "int", default, doc, minimum=-1, maximum=INT16_MAX)
    return replace(spec, zero="a replication factor of 0 is not possible (use -1 for the broker default)")


def _seconds(name: str, default: str, doc: str = "") -> KeySpec:
    """MM2's ``*.interval.seconds`` (a Java LONG, but it becomes an Airflow timedelta here)."""
    return _k(name, "int", default, doc, minimum=1, maximum=MAX_SECONDS)


_SPECS = [
    # MirrorConnectorConfig (all connectors)
    _k("enabled", "bool", "false", "replicate this flow (MirrorMakerConfig injects false)"),
    _k("admin.timeout.ms", "int", "60000", "timeout of admin calls", minimum=1, maximum=INT32_MAX),
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
    _k(
        "tasks.max",
        "int",
        "1",
        "parallelism (mirrorflow: Spark tasks per run are planned from work units)",
        minimum=1,
        maximum=INT32_MAX,
    ),
    _k("consumer.poll.timeout.ms", "int", "1000", "consumer poll timeout", minimum=0, maximum=INT32_MAX),
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
    _seconds("refresh.topics.interval.seconds", "600", "how often MM2 looks for new topics"),
    _k("sync.topic.configs.enabled", "bool", "true", "sync topic configs to remote topics"),
    _seconds("sync.topic.configs.interval.seconds", "600"),
    _k("sync.topic.acls.enabled", "bool", "true", "sync topic ACLs to remote topics"),
    _seconds("sync.topic.acls.interval.seconds", "600"),
    _rf("replication.factor", "2", "replication factor of new remote topics (-1: broker default)"),
    _rf("offset-syncs.topic.replication.factor", "3"),
    _k("offset.lag.max", "int", "100", "records between offset syncs", minimum=0, maximum=INT64_MAX),
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
    _seconds("refresh.groups.interval.seconds", "600"),
    _k("emit.checkpoints.enabled", "bool", "true", "write checkpoints"),
    _seconds("emit.checkpoints.interval.seconds", "60"),
    _k("sync.group.offsets.enabled", "bool", "false", "write translated offsets to the target's idle groups"),
    _seconds("sync.group.offsets.interval.seconds", "60"),
    _rf("checkpoints.topic.replication.factor", "3"),
    # MirrorHeartbeatConfig
    _k("emit.heartbeats.enabled", "bool", "true", "emit heartbeats"),
    _seconds("emit.heartbeats.interval.seconds", "1"),
    _rf("heartbeats.topic.replication.factor", "3"),
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
        "records per transaction (exactly-once) or between progress checkpoints (at-least-once, at most 10,000); "
        "a work unit (one Spark task) chains them over its partition for up to 30 s",
        minimum=1,
        maximum=INT32_MAX,
    ),
    _k(
        "mirrorflow.unit.max.bytes",
        "int",
        "67108864",
        "bytes per transaction or between progress checkpoints",
        minimum=1024,
        maximum=INT64_MAX,
    ),
    _k(
        "mirrorflow.poll.interval",
        "duration",
        "1s",
        "continuous mode: pause after a micro-batch that found nothing new (while records arrive, batches run back "
        "to back)",
    ),
    _k(
        "mirrorflow.lock.ttl",
        "duration",
        "30s",
        "lease of a run on what it copies (renewed every third of it): a killed run's lease ends this long after "
        "its last renewal, and a run whose renewals fail this long stops between waves",
    ),
    _k(
        "mirrorflow.cluster.timeout",
        "duration",
        "25s",  # plus process start-up, an unreachable cluster is reported within 30 s
        "how long a run, a DAG's check_clusters or a CLI command waits for a cluster's metadata before failing "
        "with one line naming it (a cluster that refuses connections or whose name does not resolve fails sooner)",
    ),
    _k(
        "mirrorflow.spark.pool",
        "string",
        "",
        "Airflow pool of the mirror DAGs' replicate tasks, so that few Spark jobs run at once (empty: Airflow's "
        "default_pool); the pool must exist (`airflow pools set NAME SLOTS DESCRIPTION`; the demo makes one with a "
        "slot per 2 cores)",
    ),
    _k("mirrorflow.heartbeats.schedule", "schedule", "1m", "schedule of the flow's heartbeats DAG"),
    _k(
        "mirrorflow.verify.schedule",
        "schedule",
        "none",
        "schedule of the flow's verify DAG (verify__<src>__<tgt>: every record of the copy compared with the "
        "source); none: triggered by hand only",
    ),
    _k(
        "mirrorflow.heartbeats.max.age",
        "duration",
        "10m",
        "a replicated heartbeat older than this means replication from the source stopped; keep it above the "
        "schedule of the family that carries 'heartbeats' plus the heartbeats schedule",
    ),
    _k(
        "mirrorflow.heartbeats.grace",
        "duration",
        None,  # unset: mirrorflow.heartbeats.max.age
        "how long after the flow's first heartbeat (the earliest (src, tgt) record in 'heartbeats' on the target) "
        "a flow whose heartbeats have not crossed yet is WAITING rather than STALE (unset: "
        "mirrorflow.heartbeats.max.age)",
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
        ALERTS_LAG_MAX_SECONDS,
        "int",
        None,  # unset: no lag alerts (and no lag measured)
        "lag alert threshold in seconds: when the oldest source record not yet copied of a partition is older than "
        "this (the 'lag s' of mirrorflow status), the heartbeats DAG sends one alert for the partition's family and "
        "one recovery when every partition of the family is back under it (log, webhook, notifiers; never a "
        "failover); per flow as <src>-><tgt>.mirrorflow.alerts.lag.max.seconds, per family as "
        "mirrorflow.family.<name>.alerts.lag.max.seconds, which wins over the flow's (0 turns it off for that "
        "family); unset or 0: off. Checked on the heartbeats schedule, so only for flows with "
        "emit.heartbeats.enabled",
        minimum=0,
        maximum=MAX_SECONDS,
    ),
    _k(
        "mirrorflow.progress.partitions",
        "int",
        "25",
        "partitions of mm2-offsets.<source>.internal if mirrorflow creates it "
        "(Connect's offset.storage.partitions default)",
        minimum=1,
        maximum=INT32_MAX,
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
    FAMILY_LAG_ATTRIBUTE: _k(
        FAMILY_LAG_ATTRIBUTE,
        "int",
        None,
        f"the family's lag alert threshold in seconds, instead of the flow's {ALERTS_LAG_MAX_SECONDS} (0: off)",
        minimum=0,
        maximum=MAX_SECONDS,
    ),
}

#: What the catch-all family ``default`` may set (its topics are whatever no other family claims).
DEFAULT_FAMILY_ATTRIBUTES = ("schedule", FAMILY_LAG_ATTRIBUTE)

TOP_LEVEL_KEYS: dict[str, KeySpec] = {
    "clusters": _k("clusters", "list", None, "cluster aliases"),
    "dedicated.mode.enable.internal.rest": _k("dedicated.mode.enable.internal.rest", "bool", "false", "MM2 only"),
    # A Connect worker key, but mirrorflow creates mm2-offsets.<source>.internal with it.
    "offset.storage.replication.factor": _rf(
        "offset.storage.replication.factor", None, "replication factor of mm2-offsets.<source>.internal"
    ),
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


def _client(name: str, minimum: int, maximum: int = INT32_MAX) -> KeySpec:
    return _k(name, "int", None, "client setting (librdkafka's range)", minimum=minimum, maximum=maximum)


# Client settings with a type librdkafka checks when a client is created, which is long after
# ``config validate`` said yes: their ranges are librdkafka's (2.x, measured), by the Java name a file
# uses (clients.py renames a few). Java's own ranges are wider for some (request.timeout.ms); a value
# librdkafka refuses fails at run time anyway, so it is refused here, naming the line.
CLIENT_KEYS: dict[str, KeySpec] = {
    s.name: s
    for s in [
        _client("linger.ms", 0, 900_000),
        _client("request.timeout.ms", 1, 900_000),
        _client("delivery.timeout.ms", 0),
        _client("message.timeout.ms", 0),
        _client("transaction.timeout.ms", 1000),
        _client("session.timeout.ms", 1, 3_600_000),
        _client("heartbeat.interval.ms", 1, 3_600_000),
        _client("metadata.max.age.ms", 1, 86_400_000),
        _client("retry.backoff.ms", 1, 300_000),
        _client("retry.backoff.max.ms", 1, 300_000),
        _client("reconnect.backoff.ms", 0, 10_000),
        _client("reconnect.backoff.max.ms", 100, 3_600_000),
        _client("fetch.wait.max.ms", 0, 300_000),
        _client("fetch.min.bytes", 0),
        _client("fetch.max.bytes", 0, 2_147_483_135),
        _client("max.partition.fetch.bytes", 1, 1_000_000_000),
        _client("batch.size", 1),
        _client("batch.num.messages", 1, 1_000_000),
        _client("retries", 0),
        _client("connections.max.idle.ms", 0),
        _client("socket.connection.setup.timeout.ms", 1000),
        _client("topic.metadata.refresh.interval.ms", -1, 3_600_000),
        _client("auto.commit.interval.ms", 0, 86_400_000),
        _client("socket.timeout.ms", 10, 300_000),
        _client("statistics.interval.ms", 0, 86_400_000),
        _client("message.max.bytes", 1000, 1_000_000_000),
        _client("receive.message.max.bytes", 1000),
        _client("queue.buffering.max.ms", 0, 900_000),
        _client("queue.buffering.max.messages", 0),
        _client("queue.buffering.max.kbytes", 1),
        _client("max.in.flight.requests.per.connection", 1, 1_000_000),
        _client("socket.send.buffer.bytes", 0, 100_000_000),
        _client("socket.receive.buffer.bytes", 0, 100_000_000),
        _client("compression.level", -1, 12),
        # Java-only (clients.py drops them), so Java's ranges: max.block.ms is a LONG.
        _client("max.poll.interval.ms", 1),
        _client("max.block.ms", 0, INT64_MAX),
        _client("default.api.timeout.ms", 0),
        _k("enable.idempotence", "bool", None, "client setting"),
        _k("check.crcs", "bool", None, "client setting"),
        _k("enable.auto.commit", "bool", None, "client setting"),
        _k("isolation.level", "enum", None, "client setting", choices=("read_committed", "read_uncommitted")),
    ]
}

#: Any other ``*.ms`` client setting: at least a non-negative C int, which every librdkafka duration is.
_OTHER_MS = _client("*.ms", 0)


def client_spec(name: str) -> KeySpec | None:
    """The spec a client setting's value is checked against, or None when mirrorflow leaves it to the client."""
    spec = CLIENT_KEYS.get(name)
    if spec is None and name.endswith(".ms"):
        return replace(_OTHER_MS, name=name)
    return spec
