"""The resolved, typed configuration: clusters, flows, families, each value with its origin.

Everything downstream (discovery, DAG factory, checkpoints, the CLI) reads this model instead of raw
properties, so MM2's precedence rules are applied once, in ``resolve.py``, and every value can say
where it came from when an operator asks ``mirrorflow config show``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..filters import ConfigPropertyFilter, GroupFilter, PatternList, TopicFilter
from ..policy import ReplicationPolicy, is_cycle
from .keys import DEFAULT_FAMILY, MAX_SECONDS
from .problems import shorten

OriginKind = Literal["file", "mm2-default", "mirrorflow-default", "forced", "connection"]
Side = Literal["source", "target"]
Role = Literal["consumer", "producer", "admin"]


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a line of a file, MM2's default, or a mirrorflow default."""

    kind: OriginKind
    file: str | None = None
    line: int | None = None
    key: str | None = None
    via: str | None = None
    note: str | None = None

    def describe(self) -> str:
        if self.kind == "file":
            where = f"{Path(self.file or '').name}:{self.line}" if self.line else self.file
            text = f"{where} ({self.key})"
            if self.via:
                text += " via config provider"
        elif self.kind == "mm2-default":
            text = "MM2 default"
        elif self.kind == "mirrorflow-default":
            text = "mirrorflow default"
        elif self.kind == "forced":
            text = "always set"
        else:
            text = f"Airflow connection {self.key}"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class Setting:
    """A value (always the string form, as in properties) with its origin."""

    value: str
    origin: Origin


@dataclass(frozen=True)
class Schedule:
    """A family's schedule: an interval (``2m``), a cron expression, an Airflow preset, or none."""

    text: str
    kind: Literal["interval", "cron", "preset", "none"]
    seconds: int | None = None

    def airflow(self) -> str | None:
        """The value to hand to Airflow's ``schedule`` (a timedelta is built by the DAG factory)."""
        return None if self.kind in ("none", "interval") else self.text


_INTERVAL = re.compile(
    r"^(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)$", re.IGNORECASE | re.ASCII
)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CRON_FIELD = re.compile(r"^[\d*/,\-A-Za-z?LW#]+$", re.ASCII)
_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@once", "@continuous")


def parse_duration(text: str) -> int:
    """Seconds in ``30s``, ``2m``, ``1h``, ``1d`` (a bare number is rejected: the unit is not guessed)."""
    match = _INTERVAL.match(text.strip())
    if not match:
        raise ValueError(f"'{shorten(text)}' is not a duration such as 30s, 2m, 1h or 1d")
    digits = match.group(1).lstrip("0") or "0"
    seconds = int(digits) * _UNIT_SECONDS[match.group(2)[0].lower()] if len(digits) <= 12 else MAX_SECONDS + 1
    if seconds <= 0:
        raise ValueError(f"'{shorten(text)}' must be longer than zero")
    if seconds > MAX_SECONDS:  # it becomes a timedelta, a sleep, an Airflow schedule
        raise ValueError(f"'{shorten(text)}' is too long (at most {MAX_SECONDS} seconds)")
    return seconds


def split_names(text: str) -> list[str]:
    """The names of a comma-separated value (``a.B, c.d``), blanks dropped: not regexes, unlike ``list`` keys."""
    return [name.strip() for name in text.split(",") if name.strip()]


def parse_schedule(text: str) -> Schedule:
    """Parse ``2m`` / ``*/2 * * * *`` / ``@hourly`` / ``none``; raises ValueError with the accepted forms.

    A cron expression is checked with croniter, as Airflow checks it when the DAG is parsed: one
    Airflow would refuse (``99 * * * *``) must fail here, at its line, not as a DAG import error.
    """
    value = text.strip()
    if value.lower() in ("none", "manual"):
        return Schedule(value, "none")
    if value in _PRESETS:
        return Schedule(value, "preset")
    if _INTERVAL.match(value):
        return Schedule(value, "interval", parse_duration(value))
    fields = value.split()
    if len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields):
        from croniter import croniter  # Airflow's own cron parser (a dependency of apache-airflow-core)

        try:
            valid = croniter.is_valid(value)
        except Exception:  # noqa: BLE001 - croniter's failure modes are not all CroniterError
            valid = False
        if not valid:
            raise ValueError(f"'{shorten(text)}' is not a valid cron expression (Airflow would refuse it)")
        return Schedule(value, "cron")
    raise ValueError(
        f"'{shorten(text)}' is not a schedule: use an interval (30s, 2m, 1h), a cron expression (*/2 * * * *), "
        f"an Airflow preset ({', '.join(_PRESETS)}) or 'none'"
    )


@dataclass(frozen=True)
class Family:
    """A named group of a flow's topics, replicated by its own DAG on its own schedule."""

    name: str
    topics: PatternList | None  # None for the catch-all family 'default'
    schedule: Schedule
    origin: Origin

    def claims(self, topic: str) -> bool:
        return self.topics is not None and self.topics.matches(topic)


class FamilyConflictError(ValueError):
    """A topic matched by the patterns of two families: its DAG would be ambiguous."""


@dataclass
class ClusterConfig:
    """One Kafka cluster: its alias and every ``<alias>.*`` property (prefix stripped)."""

    alias: str
    properties: dict[str, Setting]

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"].value


#: Topics mirrorflow keeps its own state in: never replicated, like MM2's internal topics.
MIRRORFLOW_TOPIC_PREFIXES = ("mirrorflow.", "mirrorflow-")


@dataclass
class FlowConfig:
    """One ``source->target`` pair with its effective settings, as MM2 would run it."""

    source: str
    target: str
    enabled: bool
    settings: dict[str, Setting]
    clients: dict[tuple[Side, Role], dict[str, Setting]]
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    group_filter: GroupFilter
    config_property_filter: ConfigPropertyFilter
    families: list[Family] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def get(self, key: str) -> str:
        return self.settings[key].value

    def get_bool(self, key: str) -> bool:
        return self.get(key).strip().lower() == "true"

    def get_int(self, key: str) -> int:
        return int(self.get(key).strip())

    def get_seconds(self, key: str) -> int:
        return parse_duration(self.get(key))

    def get_names(self, key: str) -> list[str]:
        return split_names(self.get(key))

    @property
    def delivery(self) -> str:
        return self.get("mirrorflow.delivery")

    @property
    def emits_heartbeats(self) -> bool:
        return self.get_bool("emit.heartbeats.enabled")

    def client_config(self, side: Side, role: Role) -> dict[str, str]:
        """The client properties (Java names) for one role on one side of the flow."""
        return {k: s.value for k, s in self.clients[(side, role)].items()}

    def should_replicate_topic(self, topic: str) -> bool:
        """``MirrorSourceConnector.shouldReplicateTopic``: filter (or heartbeats), not internal, no cycle."""
        wanted = self.topic_filter.should_replicate_topic(topic) or (
            self.get_bool("heartbeats.replication.enabled") and self.policy.is_heartbeats_topic(topic)
        )
        own = topic.startswith(MIRRORFLOW_TOPIC_PREFIXES)  # mirrorflow's own state (locks, failover log)
        return (
            wanted
            and not own
            and not self.policy.is_internal_topic(topic)
            and not is_cycle(self.policy, topic, self.target)
        )

    def family_of(self, topic: str) -> Family:
        """The family replicating ``topic``: the one whose pattern matches, else ``default``."""
        claiming = [f for f in self.families if f.claims(topic)]
        if len(claiming) > 1:
            names = " and ".join(f"'{f.name}' ({f.topics})" for f in claiming)
            raise FamilyConflictError(f"flow {self.name}: topic '{topic}' is claimed by families {names}")
        if claiming:
            return claiming[0]
        return self.family(DEFAULT_FAMILY)

    def family(self, name: str) -> Family:
        for fam in self.families:
            if fam.name == name:
                return fam
        raise KeyError(f"flow {self.name} has no family '{name}'")

    def dag_id(self, kind: str, family: str | None = None) -> str:
        """The Airflow DAG id of this flow for ``kind`` (mirror, checkpoints, ...): ``<kind>__<src>__<tgt>[__<family>]``.

        Defined here, not in the DAG factories, because the demo, the CLI and the status page name
        the same DAGs.
        """
        return "__".join([kind, self.source, self.target, *([family] if family else [])])

    def internal_topics(self) -> dict[str, str]:
        """Names (and clusters) of the internal topics this flow reads and writes, MM2's names."""
        location = self.get("offset-syncs.topic.location")
        syncs_alias = self.target if location == "source" else self.source
        return {
            "offset syncs": f"{self.policy.offset_syncs_topic(syncs_alias)} on {self.source if location == 'source' else self.target}",
            "checkpoints": f"{self.policy.checkpoints_topic(self.source)} on {self.target}",
            "heartbeats": f"{self.policy.heartbeats_topic()} on {self.target}",
            "progress (Connect source offsets)": f"mm2-offsets.{self.source}.internal on {self.target}",
        }


class FlowTable(Mapping[tuple[str, str], FlowConfig]):
    """Every ``source->target`` pair of the clusters, as MM2 knows them: N*(N-1) of them.

    Why lazy: with 1,000 clusters there are 999,000 pairs, and resolving each one (filters, policy,
    six client configurations) made ``config validate`` quadratic. The pairs the file names
    (``<src>-><tgt>.*``, so every enabled flow) are resolved and checked when the file is loaded; every
    other pair has the same connector settings (top level and defaults), was checked through one
    representative, and is built on first use. Iterating over all values builds them all: prefer
    :meth:`enabled` and lookups by pair.
    """

    def __init__(
        self,
        aliases: Sequence[str],
        resolved: Mapping[tuple[str, str], FlowConfig],
        excluded: AbstractSet[tuple[str, str]] = frozenset(),
        representative: FlowConfig | None = None,
        build: Callable[[tuple[str, str]], FlowConfig] | None = None,
    ) -> None:
        self._aliases = list(aliases)
        self._known = set(aliases)
        self._loaded = dict(resolved)  # resolved with the file: every enabled flow is among them
        self._built: dict[tuple[str, str], FlowConfig] = {}
        self._excluded = frozenset(excluded)
        self._representative = representative
        self._build = build

    def __contains__(self, pair: object) -> bool:
        if pair in self._loaded:
            return True
        if not (isinstance(pair, tuple) and len(pair) == 2) or pair in self._excluded or self._build is None:
            return False
        source, target = pair
        return source in self._known and target in self._known and source != target

    def __getitem__(self, pair: tuple[str, str]) -> FlowConfig:
        flow = self._loaded.get(pair) or self._built.get(pair)
        if flow is not None:
            return flow
        if pair not in self or self._build is None:
            raise KeyError(pair)
        flow = self._built[pair] = self._build(pair)
        return flow

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return (pair for pair in ((s, t) for s in self._aliases for t in self._aliases if s != t) if pair in self)

    def __len__(self) -> int:
        if self._build is None:
            return len(self._loaded)
        n = len(self._aliases)
        return n * (n - 1) - len(self._excluded)

    def enabled(self) -> list[FlowConfig]:
        """The enabled flows (in cluster order), without building the other pairs."""
        return [f for f in self._loaded.values() if f.enabled]

    def same_settings(self, pair: tuple[str, str]) -> FlowConfig:
        """The flow ``pair``, or, if it was not built yet, a flow with the same connector settings (not clients)."""
        flow = self._loaded.get(pair) or self._built.get(pair)
        if flow is None and self._representative is not None and pair in self:
            return self._representative
        return self[pair]


@dataclass
class MirrorConfig:
    """The whole resolved configuration file."""

    path: str
    clusters: dict[str, ClusterConfig]
    flows: FlowTable
    top_level: dict[str, Setting]
    warnings: list[str] = field(default_factory=list)
    #: Flows left out by a partial load (``load_config(partial=True)``), with their errors.
    broken_flows: dict[str, list[str]] = field(default_factory=dict)

    def flow(self, source: str, target: str) -> FlowConfig:
        try:
            return self.flows[(source, target)]
        except KeyError:
            raise KeyError(f"no flow {source}->{target} (clusters: {', '.join(self.clusters)})") from None

    def enabled_flows(self) -> list[FlowConfig]:
        return self.flows.enabled()
