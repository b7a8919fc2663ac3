"""A flow's topic families (``mirrorflow.families``), built and checked while the flow is resolved.

Each family has a name usable in DAG ids, a non-empty list of topic regexes and a schedule; every
``mirrorflow.family.<name>.<attribute>`` must name a listed family and a known attribute; and no topic may be
claimed by two families (an example topic names the overlap). Problems are reported at their line through the
resolver.
"""

from __future__ import annotations

import re
from typing import Protocol

from ..filters import PatternList, split_list
from ..javaregex import JavaRegexError
from .keys import (
    DEFAULT_FAMILY,
    DEFAULT_FAMILY_ATTRIBUTES,
    FAMILIES,
    FAMILY_ATTRIBUTES,
    FAMILY_PREFIX,
    SCHEDULE,
    KeySpec,
)
from .model import Family, Origin, Schedule, Setting, parse_schedule
from .properties import Entry

_FAMILY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class Checks(Protocol):
    """What the family rules need of the resolver: the file's path, a problem at a value's origin, a value check."""

    path: str

    def err_at(self, origin: Origin, message: str) -> None: ...

    def valid(self, spec: KeySpec, entry: Entry) -> bool: ...


def build_families(checks: Checks, pair: tuple[str, str], settings: dict[str, Setting]) -> list[Family]:
    """The families of the flow ``pair`` (the listed ones, then the default family), every problem reported."""
    name = f"{pair[0]}->{pair[1]}"
    default_schedule = (
        parse_schedule(settings[SCHEDULE].value) if _schedule_ok(checks, settings[SCHEDULE]) else parse_schedule("5m")
    )
    listed = split_list(settings[FAMILIES].value)
    origin = settings[FAMILIES].origin
    result: list[Family] = []
    for fam in listed:
        if fam == DEFAULT_FAMILY:
            checks.err_at(
                origin,
                f"family name '{DEFAULT_FAMILY}' is reserved for topics matched by no family "
                f"(set its schedule with {FAMILY_PREFIX}{DEFAULT_FAMILY}.schedule)",
            )
            continue
        if not _FAMILY_NAME.match(fam):
            checks.err_at(origin, f"family name '{fam}' must be letters, digits, '_' or '-' (used in DAG ids)")
            continue
        topics = settings.get(f"{FAMILY_PREFIX}{fam}.topics")
        if topics is None:
            checks.err_at(
                origin,
                f"family '{fam}' of flow {name} has no topics (set {pair[0]}->{pair[1]}.{FAMILY_PREFIX}{fam}.topics)",
            )
            continue
        try:
            patterns = PatternList.parse(topics.value)
        except JavaRegexError as exc:
            checks.err_at(topics.origin, f"bad regex: {exc}")
            continue
        if not patterns.items:
            checks.err_at(topics.origin, f"family '{fam}' has an empty topics list")
            continue
        result.append(Family(fam, patterns, _family_schedule(checks, fam, settings, default_schedule), topics.origin))
    result.append(
        Family(
            DEFAULT_FAMILY,
            None,
            _family_schedule(checks, DEFAULT_FAMILY, settings, default_schedule),
            settings[SCHEDULE].origin,
        )
    )
    for key, setting in settings.items():
        if not key.startswith(FAMILY_PREFIX):
            continue
        # a family name has no dot (_FAMILY_NAME), an attribute may (alerts.lag.max.seconds)
        fam, _, attr = key[len(FAMILY_PREFIX) :].partition(".")
        if attr == "schedule":
            _schedule_ok(checks, setting)
        if attr not in FAMILY_ATTRIBUTES:
            checks.err_at(setting.origin, f"unknown family setting '{attr}' (known: {', '.join(FAMILY_ATTRIBUTES)})")
        elif fam not in listed and not (fam == DEFAULT_FAMILY and attr in DEFAULT_FAMILY_ATTRIBUTES):
            checks.err_at(setting.origin, f"family '{fam}' is configured but not listed in {FAMILIES} of flow {name}")
        elif FAMILY_ATTRIBUTES[attr].type == "int":
            origin = setting.origin
            entry = Entry(origin.key or key, setting.value, origin.file or checks.path, origin.line or 1, origin.via)
            checks.valid(FAMILY_ATTRIBUTES[attr], entry)
    _check_overlaps(checks, name, result)
    return result


def _family_schedule(checks: Checks, fam: str, settings: dict[str, Setting], fallback: Schedule) -> Schedule:
    setting = settings.get(f"{FAMILY_PREFIX}{fam}.schedule")
    if setting is None or not _schedule_ok(checks, setting):
        return fallback
    return parse_schedule(setting.value)


def _schedule_ok(checks: Checks, setting: Setting) -> bool:
    try:
        parse_schedule(setting.value)
    except ValueError as exc:
        checks.err_at(setting.origin, str(exc))
        return False
    return True


def _check_overlaps(checks: Checks, flow_name: str, families: list[Family]) -> None:
    from .overlap import example_overlap  # interegular: only when families are checked, not at every parse

    named = [f for f in families if f.topics is not None]
    for i, first in enumerate(named):
        for second in named[i + 1 :]:
            example = example_overlap(first.topics, second.topics)  # type: ignore[arg-type]
            if example is not None:
                checks.err_at(
                    second.origin,
                    f"flow {flow_name}: families '{first.name}' ({first.topics}) and "
                    f"'{second.name}' ({second.topics}) both claim topics such as '{example}'",
                )
