"""Resolve parsed ``mm2.properties`` entries into the typed model, with MM2's precedence.

Precedence follows Kafka's ``MirrorMakerConfig`` (``clientConfig``/``connectorBaseConfig``):

* connector settings: ``<src>-><tgt>.key`` > top-level ``key`` > MM2 default;
* client settings of a flow's ``<side>`` ``<role>`` client, lowest first: top-level security keys,
  ``<alias>.<security key>``, ``<src>-><tgt>.<side>.cluster.<key>``, top-level ``<role>.*``
  (a mirrorflow extension: MM2 drops it), ``<src>-><tgt>.<role>.*``, ``<alias>.<role>.*`` and the
  security keys again (MM2 copies them into ``<role>.*`` when absent), ``<src>-><tgt>.<side>.<role>.*``.

All problems are collected and raised together as one ``ConfigError``, each at a ``file:line``. Reading the file
is ``load``'s; a flow's families are built and checked in ``families``, what one scope's keys contribute to the
client settings in ``settings``, and which flow an error belongs to (a partial load) in ``blame``.

Validation must stay linear in the size of the file (Airflow re-parses it at every DAG parse, under a
timeout): N clusters make N*(N-1) pairs, so only the pairs the file names are resolved when it is
loaded; the others share the top-level settings, are checked once through one representative pair,
and are built on first use (:class:`~.model.FlowTable`). Per-flow work reads precomputed per-scope
tables instead of scanning every key again.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache

from ..classpath import ClassLoadError
from ..filters import (
    ConfigPropertyFilter,
    GroupFilter,
    PatternList,
    TopicFilter,
    config_property_filter_class,
    group_filter_class,
    split_list,
    topic_filter_class,
)
from ..javaregex import JavaRegexError
from ..policy import PolicyError, ReplicationPolicy, load_policy
from ..redact import is_secret
from .blame import blame_flows
from .client_check import check_clients
from .families import build_families
from .keys import (
    CLIENT_ROLES,
    CONNECTOR_KEYS,
    DEPRECATED_ALIASES,
    FAMILY_PREFIX,
    INT64_MAX,
    TOP_LEVEL_KEYS,
    WORKER_PREFIXES,
    KeySpec,
    client_spec,
    is_client_key,
)
from .model import (
    ClusterConfig,
    FlowConfig,
    FlowTable,
    MirrorConfig,
    Origin,
    Role,
    Setting,
    Side,
    parse_duration,
    parse_schedule,
    split_names,
)
from .problems import ConfigError, Problems, dedupe_problems, shorten
from .properties import Entry, lost_backslashes
from .providers import resolve_references
from .settings import Mapper, client_key, default_of, flow_client_key, origin_of, project, strip_prefix

_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_ARROW_LOOKALIKES = ("→", "=>", "-&gt;", "—>", "–>")
# Java's Integer.parseInt syntax with ASCII digits only (Python's int() also takes "1_000" and "١٢").
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_KNOWN_KEYS = (*CONNECTOR_KEYS, *TOP_LEVEL_KEYS)
_NEW_NAME_OF = {new: old for old, new in DEPRECATED_ALIASES.items()}

Pair = tuple[str, str]


class _Resolver:
    """Holds the entries and the problems while the model is built."""

    def __init__(self, entries: list[Entry], path: str, problems: Problems) -> None:
        self.path = path
        self.problems = problems
        self.entries = self._dedupe(entries)
        self.aliases: list[str] = []
        self.alias_set: set[str] = set()
        self.top: dict[str, Entry] = {}
        self.per_cluster: dict[str, dict[str, Entry]] = {}
        self.per_flow: dict[Pair, dict[str, Entry]] = {}
        self._validated: dict[tuple[str, int], bool] = {}
        self._layers: dict[tuple[str, ...], dict[str, Setting]] = {}
        self._top_families: dict[str, Setting] | None = None

    # -- helpers -------------------------------------------------------------------------------------
    def _report(self, report: Callable[..., None], message: str, entry: Entry | None, key: str | None) -> None:
        """File-level findings (a missing key) are reported at line 1: every problem has a ``file:line``."""
        report(
            message,
            file=entry.file if entry else self.path,
            line=entry.line if entry else 1,
            key=key or (entry.key if entry else None),
        )

    def err(self, message: str, entry: Entry | None = None, key: str | None = None) -> None:
        self._report(self.problems.error, message, entry, key)

    def warn(self, message: str, entry: Entry | None = None, key: str | None = None) -> None:
        self._report(self.problems.warning, message, entry, key)

    def _dedupe(self, entries: list[Entry]) -> dict[str, Entry]:
        result: dict[str, Entry] = {}
        for entry in entries:
            previous = result.get(entry.key)
            if previous is not None:
                self.problems.warning(
                    f"also set at line {previous.line}; the last value wins (as in Java)",
                    file=entry.file,
                    line=entry.line,
                    key=entry.key,
                )
            result[entry.key] = entry
        return result

    # -- classification ------------------------------------------------------------------------------
    def classify(self) -> None:
        clusters = self.entries.get("clusters")
        if clusters is None:
            self.err("required key 'clusters' is missing (e.g. clusters = primary, backup)", key="clusters")
        else:
            for alias in split_list(clusters.value):
                if not _ALIAS.match(alias):
                    self.err(
                        f"cluster alias '{alias}' must be letters, digits, '_' or '-' "
                        "(mirrorflow uses aliases in Airflow DAG ids)",
                        clusters,
                    )
                elif alias in self.alias_set:
                    self.warn(f"cluster alias '{alias}' is listed twice", clusters)
                else:
                    self.aliases.append(alias)
                    self.alias_set.add(alias)
            if not self.aliases and not self.problems.errors:
                self.err("'clusters' lists no cluster", clusters)
        for key, entry in self.entries.items():
            if any(a in key for a in _ARROW_LOOKALIKES):
                self.err("flows are written '<source>-><target>.<key>' with '->'", entry)
                continue
            head, dot, rest = key.partition(".")  # aliases have no '.', so the alias is the head
            if "->" in head or ("->" in key and dot):
                self._classify_flow_key(key, entry)
            elif dot and head in self.alias_set:
                self.per_cluster.setdefault(head, {})[rest] = entry
            else:
                self.top[key] = entry

    def _classify_flow_key(self, key: str, entry: Entry) -> None:
        source, _, rest = key.partition("->")
        target, dot, setting = rest.partition(".")
        unknown = [a for a in (source, target) if a not in self.alias_set]
        if unknown:
            self.err(
                f"unknown cluster alias '{shorten(unknown[0])}' in flow "
                f"(clusters = {shorten(', '.join(self.aliases) or 'none')})",
                entry,
            )
            return
        if not dot:
            self.err(f"a flow key names a setting after the flow: {source}->{target}.<key>", entry)
            return
        if source == target:
            self.err(f"a flow from cluster '{source}' to itself is not possible", entry)
            return
        self.per_flow.setdefault((source, target), {})[setting] = entry

    # -- validation of single values -----------------------------------------------------------------
    def check_value(self, spec: KeySpec, entry: Entry) -> bool:
        """Check one value against its spec (type and range, see keys.py); report it at its line."""
        value = entry.value.strip()
        shown = "the value" if is_secret(entry.key, entry.value) else f"'{shorten(value)}'"
        if spec.type == "int":
            return self._check_int(spec, entry, value, shown)
        if spec.type == "bool":
            if value.lower() not in ("true", "false"):
                self.err(f"{shown} is not a boolean (true or false)", entry)
                return False
        elif spec.type == "enum":
            if value not in spec.choices:
                self.err(f"{shown} is not one of {', '.join(spec.choices)}", entry)
                return False
        elif spec.type == "list" and spec.name != "clusters":
            self._warn_lost_backslashes(entry)
            try:
                PatternList.parse(self._glob_star(entry))
            except JavaRegexError as exc:
                self.err(f"bad regex: {exc}", entry)
                return False
        elif spec.type == "classes":
            bad = [name for name in split_names(value) if not _DOTTED_PATH.match(name)]
            if bad:
                self.err(
                    f"'{shorten(bad[0])}' is not a dotted Python path such as my_package.alerts.PagerNotifier", entry
                )
                return False
        elif spec.type in ("duration", "schedule"):
            try:
                (parse_duration if spec.type == "duration" else parse_schedule)(value)
            except ValueError as exc:
                self.err(str(exc), entry)
                return False
        return True

    def _check_int(self, spec: KeySpec, entry: Entry, value: str, shown: str) -> bool:
        if not _INTEGER.fullmatch(value):
            self.err(f"{shown} is not an integer", entry)
            return False
        # A 5,000-digit number is out of every range; int() of it would raise (Python's 4,300-digit limit).
        number = int(value) if len(value.lstrip("+-").lstrip("0")) <= 20 else None
        low = spec.minimum if spec.minimum is not None else -INT64_MAX - 1  # keys.py gives every int key a range
        high = spec.maximum if spec.maximum is not None else INT64_MAX
        if (number is None and value.startswith("-")) or (number is not None and number < low):
            self.err(f"{shown} is below the minimum {low}", entry)
            return False
        if number is None or number > high:
            self.err(f"{shown} is above the maximum {high}", entry)
            return False
        if number == 0 and spec.zero:
            self.err(spec.zero, entry)
            return False
        return True

    def check_client_key(self, name: str | None, entry: Entry) -> None:
        """Client settings librdkafka types (``linger.ms``, ``enable.idempotence``): checked here, not at run time."""
        spec = client_spec(name) if name else None
        if spec is not None:
            self.valid(spec, entry)

    def _warn_lost_backslashes(self, entry: Entry) -> None:
        if entry.raw is not None and lost_backslashes(entry.raw):
            self.warn(
                "a single backslash escapes the next character in a properties file, so this regex "
                f"reads '{entry.value.strip()}'; write '\\\\.' for a literal dot (as in MM2)",
                entry,
            )

    def _glob_star(self, entry: Entry) -> list[str]:
        """A lone ``*`` is a common glob slip (MM2 fails on it); read it as ``.*`` and say so."""
        items = split_list(entry.value)
        if "*" in items:
            self.warn(
                "'*' is not a valid Java regex (MM2 would fail with 'Dangling meta character'); "
                "mirrorflow reads it as '.*'",
                entry,
            )
        return [".*" if item == "*" else item for item in items]

    # -- top level -----------------------------------------------------------------------------------
    def check_top_level(self) -> None:
        for key, entry in self.top.items():
            if key in DEPRECATED_ALIASES:
                self._deprecated(key, entry, self.top)
            elif key in CONNECTOR_KEYS:
                self.check_value(CONNECTOR_KEYS[key], entry)
                if key == "use.defaults.from":
                    self.warn(
                        "MM2 only honours use.defaults.from per flow (<src>-><tgt>.use.defaults.from); "
                        "mirrorflow applies it to every flow",
                        entry,
                    )
            elif key in TOP_LEVEL_KEYS:
                self.check_value(TOP_LEVEL_KEYS[key], entry)
            elif key.startswith(FAMILY_PREFIX):
                if key.endswith(".topics"):
                    self._warn_lost_backslashes(entry)
            elif is_client_key(key):
                self.check_client_key(key, entry)
            elif key.split(".", 1)[0] in CLIENT_ROLES:
                self.check_client_key(key.split(".", 1)[1], entry)
                self.warn(
                    f"MM2 silently drops top-level '{key}'; mirrorflow applies it to every cluster's "
                    f"{key.split('.', 1)[0]} clients (for MM2, write <alias>.{key})",
                    entry,
                )
            elif key.startswith(WORKER_PREFIXES):
                pass
            else:
                self._unknown(key, entry, "top-level")

    def _deprecated(self, key: str, entry: Entry, scope: Mapping[str, Entry]) -> None:
        new = DEPRECATED_ALIASES[key]
        if new in scope:
            self.warn(f"ignored because {new} is also set (Kafka 4.0 removed '{key}')", entry)
        else:
            self.warn(f"'{key}' is the pre-4.0 name of '{new}' (removed in Kafka 4.0); read as {new}", entry)
            self.check_value(CONNECTOR_KEYS[new], entry)

    def _unknown(self, key: str, entry: Entry, scope: str) -> None:
        guess = _suggestion(key)
        hint = f"; did you mean '{guess}'?" if guess else ""
        self.warn(f"unknown {scope} key, ignored{hint}", entry)

    # -- clusters ------------------------------------------------------------------------------------
    def clusters(self) -> dict[str, ClusterConfig]:
        result: dict[str, ClusterConfig] = {}
        clusters_entry = self.entries.get("clusters")
        for alias in self.aliases:
            props = {k: Setting(e.value, origin_of(e)) for k, e in self.per_cluster.get(alias, {}).items()}
            if "bootstrap.servers" not in props:
                top = self.top.get("bootstrap.servers")
                if top is not None:
                    props["bootstrap.servers"] = Setting(top.value, origin_of(top))
                else:
                    self.err(
                        f"cluster '{alias}' has no bootstrap.servers (set {alias}.bootstrap.servers)",
                        clusters_entry,
                        key=f"{alias}.bootstrap.servers",
                    )
            elif not props["bootstrap.servers"].value.strip():
                self.err("bootstrap.servers is empty", self.per_cluster[alias]["bootstrap.servers"])
            for key, entry in self.per_cluster.get(alias, {}).items():
                role, dot, name = key.partition(".")
                self.check_client_key(name if dot and role in CLIENT_ROLES else client_key(key), entry)
            result[alias] = ClusterConfig(alias, props)
        return result

    # -- flows ---------------------------------------------------------------------------------------
    def flow_settings(self, pair: Pair) -> dict[str, Setting]:
        overrides = self.per_flow.get(pair, {})
        settings: dict[str, Setting] = {}
        for name, spec in CONNECTOR_KEYS.items():
            old = _NEW_NAME_OF.get(name)
            entry = (
                overrides.get(name)
                or (old and overrides.get(old))
                or self.top.get(name)
                or (old and self.top.get(old))
                or None
            )
            if entry is not None and self.valid(spec, entry):
                value = ", ".join(self._glob_star(entry)) if spec.type == "list" else entry.value.strip()
                settings[name] = Setting(value, origin_of(entry))
            else:
                settings[name] = default_of(spec)
        for key, entry in overrides.items():
            if key.startswith(FAMILY_PREFIX):
                settings[key] = Setting(entry.value.strip(), origin_of(entry))
        if self._top_families is None:  # the same for every flow: computed once, not once per flow
            self._top_families = {
                k: Setting(e.value.strip(), origin_of(e)) for k, e in self.top.items() if k.startswith(FAMILY_PREFIX)
            }
        for key, setting in self._top_families.items():
            settings.setdefault(key, setting)
        return settings

    def valid(self, spec: KeySpec, entry: Entry) -> bool:
        """Validate once per entry, however many flows read it."""
        key = (entry.key, entry.line)
        if key not in self._validated:
            self._validated[key] = self.check_value(spec, entry)
        return self._validated[key]

    def check_flow_keys(self, pair: Pair) -> None:
        for key, entry in self.per_flow.get(pair, {}).items():
            if key in DEPRECATED_ALIASES:
                self._deprecated(key, entry, self.per_flow[pair])
            elif key in CONNECTOR_KEYS:
                self.valid(CONNECTOR_KEYS[key], entry)
            elif key.startswith(FAMILY_PREFIX):
                if key.endswith(".topics"):
                    self._warn_lost_backslashes(entry)
            elif (
                is_client_key(key)
                or key.split(".", 1)[0] in CLIENT_ROLES
                or key.startswith(("source.", "target.", *WORKER_PREFIXES))
            ):
                self.check_client_key(flow_client_key(key), entry)
            else:
                self._unknown(key, entry, f"flow {pair[0]}->{pair[1]}")

    def _layer(self, cache_key: tuple[str, ...], scope: Mapping[str, Entry], mapper: Mapper) -> dict[str, Setting]:
        """The client settings one scope contributes; the top-level and cluster ones are computed once."""
        layer = self._layers.get(cache_key)
        if layer is None:
            layer = project(scope, mapper)
            self._layers[cache_key] = layer
        return layer

    def client_settings(self, pair: Pair, side: Side, role: Role) -> dict[str, Setting]:
        alias = pair[0] if side == "source" else pair[1]
        cluster = self.per_cluster.get(alias, {})
        flow = self.per_flow.get(pair, {})
        top_client = self._layer(("top", "client"), self.top, client_key)
        cluster_client = self._layer(("cluster", alias, "client"), cluster, client_key)
        layers = [
            top_client,
            cluster_client,
            project(flow, strip_prefix(f"{side}.cluster.", client_only=True)),
            self._layer(("top", role), self.top, strip_prefix(f"{role}.")),
            project(flow, strip_prefix(f"{role}.")),
            top_client,  # MM2 copies security keys into <role>.*
            cluster_client,
            self._layer(("cluster", alias, role), cluster, strip_prefix(f"{role}.")),
            project(flow, strip_prefix(f"{side}.{role}.")),
        ]
        result: dict[str, Setting] = {}
        for layer in layers:
            result.update(layer)
        if role == "consumer":
            result["enable.auto.commit"] = Setting("false", Origin("forced", note="offsets are tracked by mirrorflow"))
            result.setdefault("auto.offset.reset", Setting("earliest", Origin("mm2-default")))
            if side == "source":
                result.setdefault(
                    "isolation.level",
                    Setting(
                        "read_committed",
                        Origin("mirrorflow-default", note="MM2: read_uncommitted; aborted records are not copied"),
                    ),
                )
        return result

    def err_at(self, origin: Origin, message: str) -> None:
        """An error at the value's line (``_at``)."""
        self._at(self.problems.error, origin, message)

    def warn_at(self, origin: Origin, message: str) -> None:
        """A warning at the value's line (``_at``)."""
        self._at(self.problems.warning, origin, message)

    def _at(self, report: Callable[..., None], origin: Origin, message: str) -> None:
        """At the value's line; a default value (no file) is blamed on line 1 of the file, as missing keys are."""
        line = 1 if origin.file is None else origin.line
        report(message, file=origin.file or self.path, line=line, key=origin.key)

    def flow(self, pair: Pair) -> FlowConfig | None:
        self.check_flow_keys(pair)
        settings = self.flow_settings(pair)
        enabled = settings["enabled"].value.lower() == "true"
        policy_props = {
            k: settings[k].value
            for k in ("replication.policy.separator", "replication.policy.internal.topic.separator.enabled")
            if settings[k].origin.kind == "file"
        }
        policy_props["source.cluster.alias"] = pair[0]
        policy: ReplicationPolicy | None = None
        try:
            policy = load_policy(settings["replication.policy.class"].value, policy_props)
        except PolicyError as exc:
            bad = settings["replication.policy.class"]
            if "separator" in str(exc):
                bad = settings["replication.policy.separator"]
            self.err_at(bad.origin, str(exc))
        filters = self._filters(settings)
        # Families of disabled flows are not validated: their DAGs do not exist.
        families = build_families(self, pair, settings) if enabled else []
        clients = {
            (side, role): self.client_settings(pair, side, role)
            for side in ("source", "target")
            for role in CLIENT_ROLES
        }
        if enabled:
            check_clients(clients, self.err_at, self.warn_at)
        if enabled and settings["mirrorflow.delivery"].value == "exactly-once":
            isolation = clients[("source", "consumer")]["isolation.level"]
            if isolation.value != "read_committed":
                self.err_at(
                    isolation.origin,
                    f"flow {pair[0]}->{pair[1]}: exactly-once delivery needs the source "
                    "consumer's isolation.level=read_committed",
                )
        if policy is None or filters is None:
            return None
        return FlowConfig(pair[0], pair[1], enabled, settings, clients, policy, *filters, families=families)  # type: ignore[arg-type]

    def _filters(self, settings: dict[str, Setting]) -> tuple[TopicFilter, GroupFilter, ConfigPropertyFilter] | None:
        """The flow's three filters; a plug-in class that cannot be loaded or built is an error at its line.

        The values handed to them were validated where they were read (an invalid one fell back to the
        default), so anything raised here comes from the class itself, possibly a user's plug-in.
        """
        built = []
        for key, load, values in (
            ("topic.filter.class", topic_filter_class, ("topics", "topics.exclude")),
            ("group.filter.class", group_filter_class, ("groups", "groups.exclude")),
            (
                "config.property.filter.class",
                config_property_filter_class,
                ("config.properties.exclude", "use.defaults.from"),
            ),
        ):
            try:
                built.append(load(settings[key].value)(*(settings[v].value for v in values)))
            except ClassLoadError as exc:
                self.err_at(settings[key].origin, str(exc))
            except Exception as exc:  # noqa: BLE001 - a plug-in's own failure, reported at its line
                self.err_at(settings[key].origin, f"'{shorten(settings[key].value)}' failed: {_describe(exc)}")
        if len(built) < 3:
            return None
        return built[0], built[1], built[2]  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def _suggestion(key: str) -> str | None:
    """The known key an unknown one is probably a typo of (cached: the same typo recurs in every flow)."""
    guess = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.8)
    return guess[0] if guess else None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {shorten(str(exc), 200)}"


def resolve_entries(
    entries: list[Entry], path: str, problems: Problems | None = None, *, partial: bool = False
) -> MirrorConfig:
    """Build the model from parsed entries; raise ``ConfigError`` if any error was found (see ``load.load_config``)."""
    problems = problems or Problems()
    resolver = _Resolver(entries, path, problems)
    resolver.entries = resolve_references(resolver.entries, problems)
    resolver.classify()
    resolver.check_top_level()
    clusters = resolver.clusters()
    flows: dict[Pair, FlowConfig] = {}
    failed: set[Pair] = set()
    blamed: dict[int, Pair] = {}  # id(problem) -> the flow it was found in

    def resolve(pair: Pair, blame: bool = True) -> FlowConfig | None:
        before = len(problems.items)
        flow = resolver.flow(pair)
        if blame:
            blamed.update((id(p), pair) for p in problems.items[before:])
        if flow is None:
            failed.add(pair)
        else:
            flows[pair] = flow
        return flow

    order = {alias: i for i, alias in enumerate(resolver.aliases)}
    for pair in sorted(resolver.per_flow, key=lambda p: (order[p[0]], order[p[1]])):
        resolve(pair)
    # Every pair the file does not name has the top-level settings: one of them stands for all. Its
    # errors belong to the top level, not to a flow (a partial load cannot leave them out).
    unnamed = (p for p in _pairs(resolver.aliases) if p not in resolver.per_flow)
    representative_pair = next(unnamed, None)
    representative = resolve(representative_pair, blame=False) if representative_pair else None
    if representative is not None and representative.enabled:  # top-level enabled = true: every pair runs
        for pair in unnamed:
            resolve(pair)
    if resolver.aliases and not any(f.enabled for f in flows.values()):
        problems.warning("no replication flow is enabled (set <source>-><target>.enabled = true)", file=path, line=1)
    broken: dict[str, list[str]] = {}
    if partial and problems.errors:
        broken = blame_flows(problems, blamed, resolver.aliases)
    dedupe_problems(problems)
    if problems.errors and not broken:
        raise ConfigError(problems.items)
    excluded = failed | {_pair_of(name) for name in broken}
    return MirrorConfig(
        path,
        clusters,
        FlowTable(
            resolver.aliases,
            {pair: f for pair, f in flows.items() if pair not in excluded},
            excluded,
            representative,
            _builder(resolver) if representative is not None else None,
        ),
        {k: Setting(e.value, origin_of(e)) for k, e in resolver.top.items()},
        warnings=[str(p) for p in problems.warnings],
        broken_flows=broken,
    )


def _pairs(aliases: Sequence[str]) -> Iterator[Pair]:
    return ((s, t) for s in aliases for t in aliases if s != t)


def _pair_of(name: str) -> Pair:
    source, _, target = name.partition("->")
    return source, target


def _builder(resolver: _Resolver) -> Callable[[Pair], FlowConfig]:
    """Builds a pair the file does not name, on first use; its checks already passed for the representative."""

    def build(pair: Pair) -> FlowConfig:
        shared, resolver.problems = resolver.problems, Problems()
        try:
            flow = resolver.flow(pair)
            found = resolver.problems
        finally:
            resolver.problems = shared
        if flow is None or found.errors:  # only a plug-in policy that depends on the alias gets here
            raise ConfigError(found.items)
        return flow

    return build
