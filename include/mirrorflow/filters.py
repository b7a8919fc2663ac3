"""Topic, group and config-property filters with MM2's semantics.

MM2 turns a comma-separated list of Java regexes into one pattern joined with ``|`` and requires a
*full* match; an empty list matches nothing; exclusion wins over inclusion. A user who moves from MM2
must get exactly the same topic and group selection, so these classes mirror ``DefaultTopicFilter``,
``DefaultGroupFilter`` and ``DefaultConfigPropertyFilter``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .classpath import load_class
from .javaregex import compile_pattern_list, full_match

DEFAULT_TOPICS = ".*"
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS = ".*"
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)

# Kafka's ConfigDef LIST parsing: trim, then split on commas with surrounding whitespace.
_LIST_SPLIT = re.compile(r"\s*,\s*")


def split_list(value: str) -> list[str]:
    """Split a LIST-typed value as Kafka's ConfigDef does (empty string -> empty list)."""
    trimmed = value.strip()
    return [] if not trimmed else _LIST_SPLIT.split(trimmed)


@dataclass(frozen=True)
class PatternList:
    """A compiled MM2 pattern list; keeps the source items for display."""

    items: tuple[str, ...]
    pattern: re.Pattern[str] | None = field(compare=False)

    @classmethod
    def parse(cls, value: str | Sequence[str]) -> PatternList:
        """Compile a LIST value; raises ``JavaRegexError`` naming the construct at fault."""
        items = split_list(value) if isinstance(value, str) else [v.strip() for v in value]
        return cls(tuple(items), compile_pattern_list(items))

    def matches(self, name: str) -> bool:
        return full_match(self.pattern, name)

    def __str__(self) -> str:
        return ", ".join(self.items)


class IncludeExcludeFilter:
    """An include list minus an exclude list: the shape of MM2's topic and group filters."""

    def __init__(self, include: str | Sequence[str], exclude: str | Sequence[str]) -> None:
        self.include = PatternList.parse(include)
        self.exclude = PatternList.parse(exclude)

    def selects(self, name: str) -> bool:
        return self.include.matches(name) and not self.exclude.matches(name)


class TopicFilter(IncludeExcludeFilter):
    """``DefaultTopicFilter``: ``topics`` minus ``topics.exclude``."""

    def __init__(
        self, include: str | Sequence[str] = DEFAULT_TOPICS, exclude: str | Sequence[str] = DEFAULT_TOPICS_EXCLUDE
    ) -> None:
        super().__init__(include, exclude)

    def should_replicate_topic(self, topic: str) -> bool:
        return self.selects(topic)


class GroupFilter(IncludeExcludeFilter):
    """``DefaultGroupFilter``: ``groups`` minus ``groups.exclude``."""

    def __init__(
        self, include: str | Sequence[str] = DEFAULT_GROUPS, exclude: str | Sequence[str] = DEFAULT_GROUPS_EXCLUDE
    ) -> None:
        super().__init__(include, exclude)

    def should_replicate_group(self, group: str) -> bool:
        return self.selects(group)


class ConfigPropertyFilter:
    """``DefaultConfigPropertyFilter``: which topic configs are synced, and whose defaults win."""

    def __init__(
        self, exclude: str | Sequence[str] = DEFAULT_CONFIG_PROPERTIES_EXCLUDE, use_defaults_from: str = "target"
    ) -> None:
        if use_defaults_from not in ("source", "target"):
            raise ValueError(f"use.defaults.from must be 'source' or 'target', not '{use_defaults_from}'")
        self.exclude = PatternList.parse(exclude)
        self.use_defaults_from = use_defaults_from

    def should_replicate_config_property(self, prop: str) -> bool:
        return not self.exclude.matches(prop)

    def should_replicate_source_default(self, prop: str) -> bool:
        """With ``use.defaults.from=source`` the source's default values are set on the target."""
        return self.use_defaults_from == "source"


JAVA_TOPIC_FILTERS = {"org.apache.kafka.connect.mirror.DefaultTopicFilter": TopicFilter}
JAVA_GROUP_FILTERS = {"org.apache.kafka.connect.mirror.DefaultGroupFilter": GroupFilter}
JAVA_CONFIG_PROPERTY_FILTERS = {
    "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter": ConfigPropertyFilter,
}


def topic_filter_class(name: str) -> type[TopicFilter]:
    return load_class(name, TopicFilter, JAVA_TOPIC_FILTERS, "topic filter class")


def group_filter_class(name: str) -> type[GroupFilter]:
    return load_class(name, GroupFilter, JAVA_GROUP_FILTERS, "group filter class")


def config_property_filter_class(name: str) -> type[ConfigPropertyFilter]:
    return load_class(name, ConfigPropertyFilter, JAVA_CONFIG_PROPERTY_FILTERS, "config property filter class")
