"""Resolve parsed ``mm2.properties`` entries into the typed model, with MM2's precedence.

Precedence follows ``MirrorMakerConfig`` (mm2-behaviour.md 5.3):

* connector settings: ``<src>-><tgt>.key`` > top-level ``key`` > MM2 default;
* client settings of a flow's ``<side>`` ``<role>`` client, lowest first: top-level security keys,
  ``<alias>.<security key>``, ``<src>-><tgt>.<side>.cluster.<key>``, top-level ``<role>.*``
  (a mirrorflow extension: MM2 drops it), ``<src>-><tgt>.<role>.*``, ``<alias>.<role>.*`` and the
  security keys again (MM2 copies them into ``<role>.*`` when absent), ``<src>-><tgt>.<side>.<role>.*``.

All problems are collected and raised together as one ``ConfigError``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

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
from .keys import (
    CLIENT_ROLES,
    CONNECTOR_KEYS,
    DEFAULT_FAMILY,
    DEPRECATED_ALIASES,
    FAMILIES,
    FAMILY_ATTRIBUTES,
    FAMILY_PREFIX,
    MIRRORFLOW_PREFIX,
    SCHEDULE,
    TOP_LEVEL_KEYS,
    WORKER_PREFIXES,
    KeySpec,
    is_client_key,
)
from .model import (
    ClusterConfig,
    Family,
    FlowConfig,
    MirrorConfig,
    Origin,
    Role,
    Schedule,
    Setting,
    Side,
    parse_duration,
    parse_schedule,
    split_names,
)
from .problems import ConfigError, Problems
from .properties import Entry, PropertiesSyntaxError, lost_backslashes, parse_properties, read_properties_file
from .providers import resolve_references

_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_FAMILY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_ARROW_LOOKALIKES = ("→", "=>", "-&gt;", "—>", "–>")


def load_config(path: str | Path, *, overrides: Sequence[Entry] = (), partial: bool = False) -> MirrorConfig:
    """Read and resolve a configuration file; raises ``ConfigError`` listing every problem.

    ``overrides`` (e.g. from an Airflow connection, see :mod:`.overrides`) replace the file's entries
    of the same key. With ``partial``, a flow whose own settings are broken is left out (and listed in
    ``MirrorConfig.broken_flows``) instead of failing the whole file, so the DAGs of the other flows
    still load; problems no flow can be blamed for still raise.
    """
    problems = Problems()
    try:
        entries = read_properties_file(path)
    except OSError as exc:
        problems.error(f"cannot read configuration file: {exc.strerror or exc}", file=str(path))
        raise ConfigError(problems.items) from None
    except PropertiesSyntaxError as exc:
        problems.error(exc.message, file=exc.file, line=exc.line)
        raise ConfigError(problems.items) from None
    if overrides:
        replaced = {e.key for e in overrides}
        entries = [e for e in entries if e.key not in replaced] + list(overrides)
    return resolve_entries(entries, str(path), problems, partial=partial)


def parse_config(text: str, file: str = "<string>") -> MirrorConfig:
    """Resolve configuration text (tests, Airflow variables)."""
    problems = Problems()
    try:
        entries = parse_properties(text, file)
    except PropertiesSyntaxError as exc:
        problems.error(exc.message, file=exc.file, line=exc.line)
        raise ConfigError(problems.items) from None
    return resolve_entries(entries, file, problems)


def _origin(entry: Entry) -> Origin:
    return Origin("file", entry.file, entry.line, entry.key, via=entry.via)


def _default(spec: KeySpec) -> Setting:
    kind = "mirrorflow-default" if spec.name.startswith(MIRRORFLOW_PREFIX) else "mm2-default"
    return Setting(spec.default or "", Origin(kind))


class _Resolver:
    """Holds the entries and the problems while the model is built."""

    def __init__(self, entries: list[Entry], path: str, problems: Problems) -> None:
        self.path = path
        self.problems = problems
        self.entries = self._dedupe(entries)
        self.aliases: list[str] = []
        self.top: dict[str, Entry] = {}
        self.per_cluster: dict[str, dict[str, Entry]] = {}
        self.per_flow: dict[tuple[str, str], dict[str, Entry]] = {}
        self._validated: dict[tuple[str, int], bool] = {}

    # -- helpers -------------------------------------------------------------------------------------
    def _report(self, report: Callable[..., None], message: str, entry: Entry | None, key: str | None) -> None:
        report(
            message,
            file=entry.file if entry else self.path,
            line=entry.line if entry else None,
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
                elif alias in self.aliases:
                    self.warn(f"cluster alias '{alias}' is listed twice", clusters)
                else:
                    self.aliases.append(alias)
            if not self.aliases and not self.problems.errors:
                self.err("'clusters' lists no cluster", clusters)
        by_length = sorted(self.aliases, key=len, reverse=True)
        for key, entry in self.entries.items():
            if any(a in key for a in _ARROW_LOOKALIKES):
                self.err("flows are written '<source>-><target>.<key>' with '->'", entry)
                continue
            if "->" in key.split(".", 1)[0] or ("->" in key and "." in key):
                self._classify_flow_key(key, entry, by_length)
                continue
            alias = next((a for a in by_length if key.startswith(a + ".")), None)
            if alias is not None:
                self.per_cluster.setdefault(alias, {})[key[len(alias) + 1 :]] = entry
            else:
                self.top[key] = entry

    def _classify_flow_key(self, key: str, entry: Entry, by_length: list[str]) -> None:
        source, _, rest = key.partition("->")
        target = next((a for a in by_length if rest.startswith(a + ".")), None)
        unknown = [a for a in (source, target or rest.split(".", 1)[0]) if a not in self.aliases]
        if unknown or target is None:
            self.err(
                f"unknown cluster alias '{unknown[0] if unknown else rest}' in flow "
                f"(clusters = {', '.join(self.aliases) or 'none'})",
                entry,
            )
            return
        if source == target:
            self.err(f"a flow from cluster '{source}' to itself is not possible", entry)
            return
        self.per_flow.setdefault((source, target), {})[rest[len(target) + 1 :]] = entry

    # -- validation of single values -----------------------------------------------------------------
    def check_value(self, spec: KeySpec, entry: Entry) -> bool:
        value = entry.value.strip()
        shown = "the value" if is_secret(entry.key, entry.value) else f"'{value}'"
        if spec.type == "int":
            try:
                number = int(value)
            except ValueError:
                self.err(f"{shown} is not an integer", entry)
                return False
            if spec.minimum is not None and number < spec.minimum:
                self.err(f"{number} is below the minimum {spec.minimum}", entry)
                return False
            if spec.name.endswith("replication.factor") and number == 0:
                self.err("a replication factor of 0 is not possible (use -1 for the broker default)", entry)
                return False
        elif spec.type == "bool":
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
                self.err(f"'{bad[0]}' is not a dotted Python path such as my_package.alerts.PagerNotifier", entry)
                return False
        elif spec.type in ("duration", "schedule"):
            try:
                (parse_duration if spec.type == "duration" else parse_schedule)(value)
            except ValueError as exc:
                self.err(str(exc), entry)
                return False
        return True

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
                pass
            elif key.split(".", 1)[0] in CLIENT_ROLES:
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
        known = list(CONNECTOR_KEYS) + list(TOP_LEVEL_KEYS)
        guess = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
        hint = f"; did you mean '{guess[0]}'?" if guess else ""
        self.warn(f"unknown {scope} key, ignored{hint}", entry)

    # -- clusters ------------------------------------------------------------------------------------
    def clusters(self) -> dict[str, ClusterConfig]:
        result: dict[str, ClusterConfig] = {}
        clusters_entry = self.entries.get("clusters")
        for alias in self.aliases:
            props = {k: Setting(e.value, _origin(e)) for k, e in self.per_cluster.get(alias, {}).items()}
            if "bootstrap.servers" not in props:
                top = self.top.get("bootstrap.servers")
                if top is not None:
                    props["bootstrap.servers"] = Setting(top.value, _origin(top))
                else:
                    self.err(
                        f"cluster '{alias}' has no bootstrap.servers (set {alias}.bootstrap.servers)",
                        clusters_entry,
                        key=f"{alias}.bootstrap.servers",
                    )
            elif not props["bootstrap.servers"].value.strip():
                self.err("bootstrap.servers is empty", self.per_cluster[alias]["bootstrap.servers"])
            result[alias] = ClusterConfig(alias, props)
        return result

    # -- flows ---------------------------------------------------------------------------------------
    def flow_settings(self, pair: tuple[str, str]) -> dict[str, Setting]:
        overrides = self.per_flow.get(pair, {})
        settings: dict[str, Setting] = {}
        for name, spec in CONNECTOR_KEYS.items():
            entry = (
                overrides.get(name)
                or self._alias_entry(name, overrides)
                or self.top.get(name)
                or self._alias_entry(name, self.top)
            )
            if entry is not None and self._valid(spec, entry):
                value = ", ".join(self._glob_star(entry)) if spec.type == "list" else entry.value.strip()
                settings[name] = Setting(value, _origin(entry))
            else:
                settings[name] = _default(spec)
        for key, entry in overrides.items():
            if key.startswith(FAMILY_PREFIX):
                settings[key] = Setting(entry.value.strip(), _origin(entry))
        for key, entry in self.top.items():
            if key.startswith(FAMILY_PREFIX) and key not in settings:
                settings[key] = Setting(entry.value.strip(), _origin(entry))
        return settings

    def _alias_entry(self, name: str, scope: Mapping[str, Entry]) -> Entry | None:
        old = next((o for o, n in DEPRECATED_ALIASES.items() if n == name), None)
        return scope.get(old) if old else None

    def _valid(self, spec: KeySpec, entry: Entry) -> bool:
        """Validate once per entry, however many flows read it."""
        key = (entry.key, entry.line)
        if key not in self._validated:
            self._validated[key] = self.check_value(spec, entry)
        return self._validated[key]

    def check_flow_keys(self, pair: tuple[str, str]) -> None:
        for key, entry in self.per_flow.get(pair, {}).items():
            if key in DEPRECATED_ALIASES:
                self._deprecated(key, entry, self.per_flow[pair])
            elif key in CONNECTOR_KEYS:
                self._valid(CONNECTOR_KEYS[key], entry)
            elif key.startswith(FAMILY_PREFIX):
                if key.endswith(".topics"):
                    self._warn_lost_backslashes(entry)
            elif (
                is_client_key(key)
                or key.split(".", 1)[0] in CLIENT_ROLES
                or key.startswith(("source.", "target.", *WORKER_PREFIXES))
            ):
                pass
            else:
                self._unknown(key, entry, f"flow {pair[0]}->{pair[1]}")

    def client_settings(self, pair: tuple[str, str], side: Side, role: Role) -> dict[str, Setting]:
        alias = pair[0] if side == "source" else pair[1]
        cluster = self.per_cluster.get(alias, {})
        flow = self.per_flow.get(pair, {})
        layers: list[tuple[Mapping[str, Entry], Callable[[str], str | None]]] = [
            (self.top, lambda k: k if is_client_key(k) else None),
            (cluster, lambda k: k if is_client_key(k) else None),
            (flow, _strip(f"{side}.cluster.", client_only=True)),
            (self.top, _strip(f"{role}.")),
            (flow, _strip(f"{role}.")),
            (self.top, lambda k: k if is_client_key(k) else None),  # MM2 copies security keys into <role>.*
            (cluster, lambda k: k if is_client_key(k) else None),
            (cluster, _strip(f"{role}.")),
            (flow, _strip(f"{side}.{role}.")),
        ]
        result: dict[str, Setting] = {}
        for scope, mapper in layers:
            for key, entry in scope.items():
                name = mapper(key)
                if name:
                    result[name] = Setting(entry.value, _origin(entry))
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

    def families(self, pair: tuple[str, str], settings: dict[str, Setting]) -> list[Family]:
        name = f"{pair[0]}->{pair[1]}"
        default_schedule = (
            parse_schedule(settings[SCHEDULE].value) if self._schedule_ok(settings[SCHEDULE]) else parse_schedule("5m")
        )
        listed = split_list(settings[FAMILIES].value)
        origin = settings[FAMILIES].origin
        result: list[Family] = []
        for fam in listed:
            if fam == DEFAULT_FAMILY:
                self._err_at(
                    origin,
                    f"family name '{DEFAULT_FAMILY}' is reserved for topics matched by no family "
                    f"(set its schedule with {FAMILY_PREFIX}{DEFAULT_FAMILY}.schedule)",
                )
                continue
            if not _FAMILY_NAME.match(fam):
                self._err_at(origin, f"family name '{fam}' must be letters, digits, '_' or '-' (used in DAG ids)")
                continue
            topics = settings.get(f"{FAMILY_PREFIX}{fam}.topics")
            if topics is None:
                self._err_at(
                    origin,
                    f"family '{fam}' of flow {name} has no topics "
                    f"(set {pair[0]}->{pair[1]}.{FAMILY_PREFIX}{fam}.topics)",
                )
                continue
            try:
                patterns = PatternList.parse(topics.value)
            except JavaRegexError as exc:
                self._err_at(topics.origin, f"bad regex: {exc}")
                continue
            if not patterns.items:
                self._err_at(topics.origin, f"family '{fam}' has an empty topics list")
                continue
            result.append(Family(fam, patterns, self._family_schedule(fam, settings, default_schedule), topics.origin))
        result.append(
            Family(
                DEFAULT_FAMILY,
                None,
                self._family_schedule(DEFAULT_FAMILY, settings, default_schedule),
                settings[SCHEDULE].origin,
            )
        )
        for key, setting in settings.items():
            if not key.startswith(FAMILY_PREFIX):
                continue
            fam, _, attr = key[len(FAMILY_PREFIX) :].rpartition(".")
            if attr == "schedule":
                self._schedule_ok(setting)
            if attr not in FAMILY_ATTRIBUTES:
                self._err_at(setting.origin, f"unknown family setting '{attr}' (known: {', '.join(FAMILY_ATTRIBUTES)})")
            elif fam not in listed and not (fam == DEFAULT_FAMILY and attr == "schedule"):
                self._err_at(
                    setting.origin, f"family '{fam}' is configured but not listed in {FAMILIES} of flow {name}"
                )
        self._check_overlaps(name, result)
        return result

    def _family_schedule(self, fam: str, settings: dict[str, Setting], fallback: Schedule) -> Schedule:
        setting = settings.get(f"{FAMILY_PREFIX}{fam}.schedule")
        if setting is None or not self._schedule_ok(setting):
            return fallback
        return parse_schedule(setting.value)

    def _schedule_ok(self, setting: Setting) -> bool:
        try:
            parse_schedule(setting.value)
        except ValueError as exc:
            self._err_at(setting.origin, str(exc))
            return False
        return True

    def _err_at(self, origin: Origin, message: str) -> None:
        self.problems.error(message, file=origin.file or self.path, line=origin.line, key=origin.key)

    def _check_overlaps(self, flow_name: str, families: list[Family]) -> None:
        from .overlap import example_overlap

        named = [f for f in families if f.topics is not None]
        for i, first in enumerate(named):
            for second in named[i + 1 :]:
                example = example_overlap(first.topics, second.topics)  # type: ignore[arg-type]
                if example is not None:
                    self._err_at(
                        second.origin,
                        f"flow {flow_name}: families '{first.name}' ({first.topics}) and "
                        f"'{second.name}' ({second.topics}) both claim topics such as '{example}'",
                    )

    def flow(self, pair: tuple[str, str]) -> FlowConfig | None:
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
            self._err_at(bad.origin, str(exc))
        filters = self._filters(settings)
        # Families of disabled flows are not validated: their DAGs do not exist.
        families = self.families(pair, settings) if enabled else []
        clients = {
            (side, role): self.client_settings(pair, side, role)
            for side in ("source", "target")
            for role in CLIENT_ROLES
        }
        if enabled and settings["mirrorflow.delivery"].value == "exactly-once":
            isolation = clients[("source", "consumer")]["isolation.level"]
            if isolation.value != "read_committed":
                self._err_at(
                    isolation.origin,
                    f"flow {pair[0]}->{pair[1]}: exactly-once delivery needs the source "
                    "consumer's isolation.level=read_committed",
                )
        if policy is None or filters is None:
            return None
        return FlowConfig(pair[0], pair[1], enabled, settings, clients, policy, *filters, families=families)  # type: ignore[arg-type]

    def _filters(self, settings: dict[str, Setting]) -> tuple[TopicFilter, GroupFilter, ConfigPropertyFilter] | None:
        classes = []
        for key, load in (
            ("topic.filter.class", topic_filter_class),
            ("group.filter.class", group_filter_class),
            ("config.property.filter.class", config_property_filter_class),
        ):
            try:
                classes.append(load(settings[key].value))
            except ClassLoadError as exc:
                self._err_at(settings[key].origin, str(exc))
        if len(classes) < 3:
            return None
        try:
            return (
                classes[0](settings["topics"].value, settings["topics.exclude"].value),
                classes[1](settings["groups"].value, settings["groups.exclude"].value),
                classes[2](settings["config.properties.exclude"].value, settings["use.defaults.from"].value),
            )
        except (JavaRegexError, ValueError):
            return None  # already reported where the value was read


def _strip(prefix: str, client_only: bool = False) -> Callable[[str], str | None]:
    def mapper(key: str) -> str | None:
        if not key.startswith(prefix):
            return None
        name = key[len(prefix) :]
        return name if name and (not client_only or is_client_key(name)) else None

    return mapper


def resolve_entries(
    entries: list[Entry], path: str, problems: Problems | None = None, *, partial: bool = False
) -> MirrorConfig:
    """Build the model from parsed entries; raise ``ConfigError`` if any error was found (see load_config)."""
    problems = problems or Problems()
    resolver = _Resolver(entries, path, problems)
    resolver.entries = resolve_references(resolver.entries, problems)
    resolver.classify()
    resolver.check_top_level()
    clusters = resolver.clusters()
    flows: dict[tuple[str, str], FlowConfig] = {}
    blamed: dict[int, tuple[str, str]] = {}  # id(problem) -> the flow it was found in
    for source in resolver.aliases:
        for target in resolver.aliases:
            if source != target:
                before = len(problems.items)
                flow = resolver.flow((source, target))
                blamed.update((id(p), (source, target)) for p in problems.items[before:])
                if flow is not None:
                    flows[(source, target)] = flow
    if resolver.aliases and not any(f.enabled for f in flows.values()):
        problems.warning("no replication flow is enabled (set <source>-><target>.enabled = true)", file=path)
    broken: dict[str, list[str]] = {}
    if partial and problems.errors:
        broken = _blame_flows(problems, blamed, resolver.aliases)
    _dedupe_problems(problems)
    if problems.errors and not broken:
        raise ConfigError(problems.items)
    flows = {pair: f for pair, f in flows.items() if f"{pair[0]}->{pair[1]}" not in broken}
    return MirrorConfig(
        path,
        clusters,
        flows,
        {k: Setting(e.value, _origin(e)) for k, e in resolver.top.items()},
        warnings=[str(p) for p in problems.warnings],
        broken_flows=broken,
    )


def _blame_flows(problems: Problems, blamed: Mapping[int, tuple[str, str]], aliases: list[str]) -> dict[str, list[str]]:
    """Errors per flow they belong to, or {} when one error belongs to no flow (the file is broken).

    An error belongs to a flow when it was found while resolving that flow, or when its key is the
    flow's (``a->b.*``) or one of its clusters' (``a.*``: every flow of cluster ``a``).
    """
    pairs = [(s, t) for s in aliases for t in aliases if s != t]
    broken: dict[str, list[str]] = {}
    for problem in problems.errors:
        key = problem.key or ""
        if id(problem) in blamed:
            culprits = [blamed[id(problem)]]
        elif "->" in key.split(".", 1)[0]:
            culprits = [p for p in pairs if key.startswith(f"{p[0]}->{p[1]}.")]
        else:
            culprits = [p for p in pairs if any(key.startswith(f"{alias}.") for alias in p)]
        if not culprits:
            return {}
        for source, target in culprits:
            broken.setdefault(f"{source}->{target}", []).append(str(problem))
    return broken


def _dedupe_problems(problems: Problems) -> None:
    seen: set[tuple[object, ...]] = set()
    unique = []
    for p in problems.items:
        ident = (p.severity, p.message, p.file, p.line, p.key)
        if ident not in seen:
            seen.add(ident)
            unique.append(p)
    problems.items[:] = unique
