"""MM2's filter semantics: comma lists joined with '|', full match, empty matches nothing, exclude wins."""

from __future__ import annotations

import pytest

from mirrorflow.filters import ConfigPropertyFilter, GroupFilter, TopicFilter, split_list
from mirrorflow.javaregex import JavaRegexError


def test_split_list_like_configdef() -> None:
    assert split_list("") == []
    assert split_list("  ") == []
    assert split_list(" a , b,c ") == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("topic", "replicated"),
    [
        ("orders", True),
        ("mm2-offsets.A.internal", False),
        ("connect-internal", False),
        ("x.replica", False),
        ("__consumer_offsets", False),
        ("heartbeats", True),
    ],
)
def test_default_topic_filter(topic: str, replicated: bool) -> None:
    assert TopicFilter().should_replicate_topic(topic) is replicated


def test_full_match_not_search() -> None:
    topics = TopicFilter("orders")
    assert topics.should_replicate_topic("orders")
    assert not topics.should_replicate_topic("orders2")
    assert not topics.should_replicate_topic("my-orders")


def test_empty_include_matches_nothing_and_empty_exclude_excludes_nothing() -> None:
    assert not TopicFilter("").should_replicate_topic("orders")
    assert TopicFilter(".*", "").should_replicate_topic("__consumer_offsets")


def test_exclude_wins_and_lists_are_alternatives() -> None:
    topics = TopicFilter(r"orders\..*, payments", r"orders\.test")
    assert topics.should_replicate_topic("orders.eu")
    assert topics.should_replicate_topic("payments")
    assert not topics.should_replicate_topic("orders.test")


def test_default_group_filter() -> None:
    groups = GroupFilter()
    assert groups.should_replicate_group("billing")
    for excluded in ("console-consumer-123", "connect-mirror", "__internal"):
        assert not groups.should_replicate_group(excluded)


def test_config_property_filter() -> None:
    props = ConfigPropertyFilter()
    assert props.should_replicate_config_property("retention.ms")
    for excluded in (
        "min.insync.replicas",
        "message.timestamp.type",
        "unclean.leader.election.enable",
        "follower.replication.throttled.replicas",
    ):
        assert not props.should_replicate_config_property(excluded)
    assert not props.should_replicate_source_default("retention.ms")
    assert ConfigPropertyFilter(use_defaults_from="source").should_replicate_source_default("retention.ms")
    with pytest.raises(ValueError):
        ConfigPropertyFilter(use_defaults_from="both")


def test_bad_regex_raises_a_named_error() -> None:
    with pytest.raises(JavaRegexError):
        TopicFilter("orders(")


def test_a_regex_too_deep_for_python_is_a_java_regex_error() -> None:
    with pytest.raises(JavaRegexError, match="nested more than 100 deep"):
        TopicFilter("(" * 5000 + "a" + ")" * 5000)
