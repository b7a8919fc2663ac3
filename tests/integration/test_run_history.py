"""Lag in seconds in the run report, and the run history each release leaves in the lock topic, on real brokers.

A run leaves records behind in a deterministic way: its executor writes more records, with an old timestamp, to
one source partition after the run planned its work (as records arriving mid-run do). The report's
``lag_seconds`` of that partition is then their age, the other partition's is 0, and ``read_run_history``
returns the run with the same figures.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.kafka import clients
from mirrorflow.replication.continuous import replicate_continuously
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.history import read_run_history
from mirrorflow.replication.lock import LOCK_TOPIC
from mirrorflow.replication.run import replicate
from mirrorflow.replication.units import UnitResult, UnitSpec
from tests.kafka_helpers import create_topic, own_records, produce, topic_exists

pytestmark = pytest.mark.integration

LATE_AGE_S = 600  # the age of the records left behind


def history_config(
    clusters: Any, acls: str = "sync.topic.acls.enabled = false", alias: str | None = None
) -> tuple[MirrorConfig, str, str]:
    """A flow of its own (a fresh alias of the primary cluster unless ``alias`` is given), so its history holds
    this test's runs only; ``acls``: the ACL sync's properties."""
    alias = alias or f"rh{uuid.uuid4().hex[:8]}"
    prefix = f"{alias}-t"
    text = (
        f"clusters = {alias}, backup\n{alias}.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\n{alias}->backup.enabled = true\n"
        f"{alias}->backup.topics = {prefix}-.*\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        f"offset-syncs.topic.location = target\n{acls}\n"
        f"{alias}->backup.mirrorflow.families = orders, payments\n"
        f"{alias}->backup.mirrorflow.family.orders.topics = {prefix}-orders.*\n"
        f"{alias}->backup.mirrorflow.family.payments.topics = {prefix}-payments.*\n"
    )
    return parse_config(text), f"{alias}->backup", prefix


class LateArrivals:
    """A local executor that, after the first wave, writes records the run did not plan (old timestamps)."""

    engine_seconds = 0.0

    def __init__(self, bootstrap: str, topic: str, partition: int, count: int, timestamp_ms: int) -> None:
        self.inner = LocalExecutor()
        self.late = [{"value": b"late-%d" % i, "partition": partition, "timestamp": timestamp_ms} for i in range(count)]
        self.bootstrap, self.topic = bootstrap, topic

    def run(self, units: Sequence[UnitSpec]) -> list[UnitResult]:
        results = self.inner.run(units)
        if self.late:
            produce(self.bootstrap, self.topic, self.late)
            self.late = []
        return results

    def close(self) -> None:
        self.inner.close()


def test_lag_seconds_in_the_report_and_the_run_in_the_history(kafka_clusters: Any) -> None:
    config, flow_name, prefix = history_config(kafka_clusters)
    topic = create_topic(kafka_clusters.primary, f"{prefix}-orders", partitions=2)
    hour_ago = int(time.time() * 1000) - 3_600_000
    produce(
        kafka_clusters.primary,
        topic,
        [{"value": b"v%d" % i, "partition": i % 2, "timestamp": hour_ago} for i in range(20)],
    )
    before_ms = int(time.time() * 1000)
    late_ms = before_ms - LATE_AGE_S * 1000

    first = replicate(config, flow_name, "orders", LateArrivals(kafka_clusters.primary, topic, 1, 5, late_ms))

    assert first.ok, first.errors
    parts = {p.partition: p for p in first.partitions}
    assert (parts[0].records, parts[0].lag, parts[0].lag_seconds) == (10, 0, 0.0)
    assert (parts[1].records, parts[1].lag) == (10, 5)
    assert parts[1].lag_seconds == pytest.approx(LATE_AGE_S, abs=5)
    assert first.max_lag_seconds == parts[1].lag_seconds
    assert first.to_dict()["max_lag_seconds"] == parts[1].lag_seconds
    assert first.to_dict()["partitions"][1]["lag_seconds"] == parts[1].lag_seconds

    between_ms = int(time.time() * 1000)
    second = replicate(config, flow_name, None, LocalExecutor())  # every family: catches up
    assert second.ok, second.errors
    # every family includes the source's `heartbeats` (replicated as MM2 does) when other tests wrote some
    mine = [p for p in second.partitions if p.topic == topic]
    assert [(p.records, p.lag, p.lag_seconds) for p in mine] == [(0, 0, 0.0), (5, 0, 0.0)]

    source, _, target = flow_name.partition("->")
    consumer = clients.client_properties(config.flow(source, target), "target", "consumer")
    history = read_run_history(consumer, flow_name, before_ms - 1000, timeout=10)
    assert [(r.flow, r.scope) for r in history] == [(flow_name, ("orders",)), (flow_name, ("*",))]
    run1, run2 = history[0].run, history[1].run
    assert run1["result"] == "ok" and run1["delivery"] == first.delivery
    assert (run1["records"], run1["lag_records"]) == (20, 5)
    assert run1["bytes"] == sum(p.bytes for p in first.partitions) > 0
    assert run1["max_lag_seconds"] == parts[1].lag_seconds
    assert run1["families"] == {
        "orders": {"records": 20, "lag_records": 5, "max_lag_seconds": parts[1].lag_seconds, "partitions": 2}
    }
    assert run1["loss_events"] == [] and run1["loss_events_total"] == 0
    assert before_ms - 1000 <= run1["started_ms"] <= history[0].released_ms <= between_ms + 1000
    assert 0 < run1["seconds"] <= first.seconds
    extra = second.records - 5  # the source's heartbeats, if other tests wrote some (family default)
    assert (run2["records"], run2["lag_records"], run2["max_lag_seconds"]) == (5 + extra, 0, 0.0)
    assert run2["families"]["orders"] == {"records": 5, "lag_records": 0, "max_lag_seconds": 0.0, "partitions": 2}
    assert history[1].covers("payments") and not history[0].covers("payments")
    assert "pid" in history[0].holder
    print(f"lag {parts[1].lag_seconds} s, finish {first.phases['finish']} s; history: {history}")

    # From a time between the runs: the second only.
    assert [r.run["records"] for r in read_run_history(consumer, flow_name, history[0].released_ms + 1, 10)] == [
        5 + extra
    ]
    # Continuous mode holds one lease across its batches: one release, with the batches' totals.
    produce(kafka_clusters.primary, topic, [{"value": b"more", "partition": 0}] * 3)
    since_ms = int(time.time() * 1000)
    batches = replicate_continuously(config, flow_name, "orders", LocalExecutor(), 1.0)
    assert batches.ok and own_records(batches) == 3 and batches.batches >= 2
    (continuous,) = read_run_history(consumer, flow_name, since_ms, 10)
    assert continuous.scope == ("orders",)
    assert (continuous.run["records"], continuous.run["lag_records"], continuous.run["result"]) == (3, 0, "ok")
    # From now on: nothing yet.
    assert read_run_history(consumer, flow_name, int(time.time() * 1000) + 60_000, 10) == []


def test_history_of_a_target_without_a_lock_topic_is_empty(kafka_clusters: Any) -> None:
    """The primary holds a lock topic only if some test replicated into it: then the read finds no run of this
    flow; otherwise the topic is missing, and reading must neither fail nor create it."""
    existed = topic_exists(kafka_clusters.primary, LOCK_TOPIC)
    consumer = {"bootstrap.servers": kafka_clusters.primary}
    assert read_run_history(consumer, f"nobody{uuid.uuid4().hex[:6]}->primary", 0, timeout=10) == []
    assert topic_exists(kafka_clusters.primary, LOCK_TOPIC) == existed


def test_acls_are_synced_once_per_interval_across_runs_through_the_history(kafka_clusters: Any) -> None:
    """The run that creates the remote topic syncs ACLs; the runs after it, of every family or one family, find
    that sync in the history their lock claim read back and do not ask the source again until the interval ends.
    """
    config, flow_name, prefix = history_config(kafka_clusters, acls="")  # MM2's defaults: on, every 600 s
    topic = create_topic(kafka_clusters.primary, f"{prefix}-orders", partitions=1)
    produce(kafka_clusters.primary, topic, [{"value": b"v", "partition": 0}])
    before_ms = int(time.time() * 1000)

    first = replicate(config, flow_name, None, LocalExecutor())
    again = replicate(config, flow_name, None, LocalExecutor())
    family = replicate(config, flow_name, "orders", LocalExecutor())

    assert first.ok and again.ok and family.ok, (first.errors, again.errors, family.errors)
    synced_ms = first.preparation["acls_synced_ms"]
    assert synced_ms is not None and synced_ms >= before_ms, first.preparation
    assert first.kafka_calls["by_kind"].get("admin describe_acls", 0) >= 1
    for later in (again, family):
        assert later.preparation["acl_sync"].startswith("not due: "), later.preparation
        assert "admin describe_acls" not in later.kafka_calls["by_kind"], later.kafka_calls

    source, _, target = flow_name.partition("->")
    consumer = clients.client_properties(config.flow(source, target), "target", "consumer")
    history = read_run_history(consumer, flow_name, before_ms - 1000, timeout=10)
    assert [r.run.get("acls_synced_ms") for r in history] == [synced_ms] * 3, "every release carries the last sync"

    time.sleep(1.5)  # then the same flow with a 1 s interval: the sync is due again, for a run of one topic too
    alias = flow_name.partition("->")[0]
    shorter, _, _ = history_config(kafka_clusters, acls="sync.topic.acls.interval.seconds = 1", alias=alias)
    due = replicate(shorter, flow_name, None, LocalExecutor(), only_topics={topic})
    assert due.ok, due.errors
    assert due.preparation["acls_synced_ms"] > synced_ms, due.preparation
    assert due.kafka_calls["by_kind"].get("admin describe_acls", 0) >= 1
    history = read_run_history(consumer, flow_name, before_ms - 1000, timeout=10)
    assert history[-1].run["acls_synced_ms"] == due.preparation["acls_synced_ms"], "a sync covers the whole family"
