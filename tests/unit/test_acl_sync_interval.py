"""``topics.sync_not_due``: topic ACLs and topic configs are synced on MM2's timers (``sync.topic.*.interval.seconds``)."""

from __future__ import annotations

from mirrorflow import topics
from mirrorflow.config import FlowConfig, parse_config

BASE = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
NOW_MS = 1_800_000_000_000
ACLS = "sync.topic.acls.interval.seconds"
CONFIGS = "sync.topic.configs.interval.seconds"


def flow(extra: str = "") -> FlowConfig:
    return parse_config(BASE + extra).flow("a", "b")


def test_a_sync_is_due_when_none_is_known() -> None:
    assert topics.sync_not_due(flow(), ACLS, None, NOW_MS) is None


def test_mm2s_default_interval_is_ten_minutes() -> None:
    not_due = topics.sync_not_due(flow(), ACLS, NOW_MS - 599_000, NOW_MS)
    assert not_due == "not due: synced 599 s ago, every 600 s (sync.topic.acls.interval.seconds)"
    assert topics.sync_not_due(flow(), ACLS, NOW_MS - 600_000, NOW_MS) is None


def test_the_configured_interval_counts() -> None:
    every_minute = flow("a->b.sync.topic.acls.interval.seconds = 60\n")
    assert topics.sync_not_due(every_minute, ACLS, NOW_MS - 59_000, NOW_MS) is not None
    assert topics.sync_not_due(every_minute, ACLS, NOW_MS - 61_000, NOW_MS) is None


def test_a_sync_time_ahead_of_this_clock_is_not_a_negative_age() -> None:
    not_due = topics.sync_not_due(flow(), ACLS, NOW_MS + 5_000, NOW_MS)  # the syncing host's clock ran ahead
    assert not_due is not None and "synced 0 s ago" in not_due


def test_topic_configs_have_their_own_interval() -> None:
    configs_hourly = flow("a->b.sync.topic.configs.interval.seconds = 3600\n")
    not_due = topics.sync_not_due(configs_hourly, CONFIGS, NOW_MS - 600_000, NOW_MS)
    assert not_due == "not due: synced 600 s ago, every 3600 s (sync.topic.configs.interval.seconds)"
    assert topics.sync_not_due(configs_hourly, ACLS, NOW_MS - 600_000, NOW_MS) is None
