"""The one-writer lease (replication/lock.py) against real brokers: scopes, renewal, release, crashes, start-up.

Each test uses its own source alias (a second name for the primary cluster), so its flow name and
hence its leases are its own: a lease a test leaves behind can never refuse another test's claim.
Timings that matter to an operator (a claim's cost, how soon a killed holder's lease frees) are printed;
run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.lock import FamilyLock, LockError, LockHeldError, blockers
from mirrorflow.replication.run import family_lock, replicate
from mirrorflow_dev.devcluster import ClusterSpec, DevClusters, free_port
from tests.kafka_helpers import create_topic, produce, read_all

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TTL_S = 3
TEXTS: dict[str, str] = {}


def lock_config(clusters: Any, extra: str = "") -> tuple[MirrorConfig, str, str]:
    """A config whose flow ``<alias>->backup`` has families orders and payments; (config, flow name, prefix).

    The file's text is kept in TEXTS under the flow's name, for a holder in another process."""
    alias = f"lk{uuid.uuid4().hex[:8]}"
    prefix = f"{alias}-t"
    text = (
        f"clusters = {alias}, backup\n{alias}.bootstrap.servers = {clusters.primary}\n"
        f"backup.bootstrap.servers = {clusters.backup}\n{alias}->backup.enabled = true\n"
        f"{alias}->backup.topics = {prefix}-.*\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        f"offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
        f"{alias}->backup.mirrorflow.families = orders, payments\n"
        f"{alias}->backup.mirrorflow.family.orders.topics = {prefix}-orders.*\n"
        f"{alias}->backup.mirrorflow.family.payments.topics = {prefix}-payments.*\n"
        f"mirrorflow.lock.ttl = {TTL_S}s\n{extra}"
    )
    TEXTS[f"{alias}->backup"] = text
    return parse_config(text), f"{alias}->backup", prefix


def claim(config: MirrorConfig, flow_name: str, family: str | None) -> FamilyLock:
    source, _, target = flow_name.partition("->")
    return family_lock(config.flow(source, target), family, timeout=30).__enter__()


# -- the decision alone: replaying (key, value, timestamp) records ---------------------------------


def _record(holder: str, state: str, ts: int, scope: list[str], flow: str = "a->b", ttl: int = 1000) -> tuple:
    value = {"flow": flow, "scope": scope, "holder": f"client of {holder}", "ttl_ms": ttl, "state": state}
    return holder.encode(), json.dumps(value).encode(), ts


def test_decision_replays_claims_renewals_and_releases_in_log_order() -> None:
    log = [
        _record("old", "claim", 0, ["orders"]),  # expired at 1000
        _record("a", "claim", 500, ["orders"]),
        _record("a", "renew", 1200, ["orders"]),  # alive until 2200
        _record("b", "claim", 1300, ["payments"]),
        _record("c", "claim", 1400, ["*"]),
        _record("c", "release", 1450, ["*"]),
        _record("other", "claim", 1500, ["*"], flow="x->b"),
        (b"junk", b"not json", 1600),
        (None, b"{}", 1600),
    ]
    me_orders = _record("me", "claim", 2000, ["orders"])
    assert [lease.holder_id for lease in blockers([*log, me_orders], "me", "a->b", ["orders"], 2000)] == ["a"]
    assert [lease.holder_id for lease in blockers(log, "me", "a->b", ["*"], 2000)] == ["a", "b"]
    assert [lease.holder_id for lease in blockers(log, "me", "a->b", ["payments"], 2000)] == ["b"]
    assert blockers(log, "me", "a->b", ["orders"], 2200) == []  # a's lease ended: TTL after its renewal
    assert blockers(log, "me", "a->b", ["refunds"], 2000) == []
    assert blockers(log, "a", "a->b", ["orders"], 2000) == []  # never blocked by itself


# -- against the brokers --------------------------------------------------------------------------


def test_overlapping_claim_is_refused_naming_the_holder(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    first = claim(config, flow, "orders")
    try:
        assert first.held
        print(f"\nclaim of an idle lock took {first.claim_ms} ms")
        with pytest.raises(LockHeldError, match="another run holds the lock") as refused:
            claim(config, flow, "orders")
        message = str(refused.value)
        assert f"pid {os.getpid()}" in message and "family orders" in message and "lease ends at" in message
        assert "target-admin" in message  # the holder's client.id
        assert first.held  # a refused contender takes nothing away
    finally:
        first.__exit__(None, None, None)


def test_disjoint_families_are_both_granted(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    orders = claim(config, flow, "orders")
    try:
        payments = claim(config, flow, "payments")
        assert orders.held and payments.held
        payments.__exit__(None, None, None)
    finally:
        orders.__exit__(None, None, None)


def test_every_family_and_one_family_exclude_each_other(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    everything = claim(config, flow, None)
    try:
        with pytest.raises(LockHeldError, match=r"every family"):
            claim(config, flow, "payments")
    finally:
        everything.__exit__(None, None, None)
    orders = claim(config, flow, "orders")
    try:
        with pytest.raises(LockHeldError, match=r"family orders"):
            claim(config, flow, None)
    finally:
        orders.__exit__(None, None, None)


def test_release_on_exit_frees_at_once(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    with family_lock(config.flow(*flow.split("->")), "orders") as first:
        assert first.held
    assert not first.held
    started = time.monotonic()
    again = claim(config, flow, "orders")
    print(f"\nclaim right after a release took {(time.monotonic() - started) * 1000:.0f} ms")
    assert again.held
    again.__exit__(None, None, None)


def test_a_renewed_lease_outlives_its_ttl(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    with family_lock(config.flow(*flow.split("->")), "orders") as holder:
        time.sleep(TTL_S * 1.7)
        assert holder.held
        with pytest.raises(LockHeldError):
            claim(config, flow, "orders")


def test_held_turns_false_when_renewals_fail(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    holder = claim(config, flow, "orders")
    try:
        # From now on the holder's records go to a port where nothing listens, as if the target were gone.
        holder._producer = Producer({**holder._producer_config(), "bootstrap.servers": f"127.0.0.1:{free_port()}"})
        started = time.monotonic()
        while holder.held and time.monotonic() - started < TTL_S + 2:
            time.sleep(0.05)
        assert not holder.held
        assert time.monotonic() - started <= TTL_S  # stops counting on it before anybody else may claim
        assert "no renewal acknowledged" in (holder.lost_reason or "")
    finally:
        holder.__exit__(None, None, None)


HOLDER = """
import sys, time
from mirrorflow.config import parse_config
from mirrorflow.replication.run import family_lock
config = parse_config(sys.stdin.read())
source, _, target = sys.argv[1].partition("->")
with family_lock(config.flow(source, target), sys.argv[2] or None) as lock:
    print("held", lock.claim_ms, flush=True)
    time.sleep(600)
"""


def test_a_killed_holders_lease_frees_within_its_ttl(kafka_clusters: Any) -> None:
    config, flow, _ = lock_config(kafka_clusters)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, flow, ""],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=env,
        text=True,
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write(TEXTS[flow])
        holder.stdin.close()
        assert holder.stdout.readline().startswith("held")
        time.sleep(TTL_S)  # a few renewals
        with pytest.raises(LockHeldError):
            claim(config, flow, "orders")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        killed = time.monotonic()
        while True:
            try:
                lock = claim(config, flow, "orders")
                break
            except LockHeldError:
                assert time.monotonic() - killed < TTL_S + 3, "the killed holder's lease did not end"
                time.sleep(0.1)
        freed = time.monotonic() - killed
        print(f"\nkilled holder's lease freed {freed:.2f} s after SIGKILL (TTL {TTL_S} s)")
        assert freed <= TTL_S + 1
        lock.__exit__(None, None, None)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_an_unreachable_target_fails_in_kafkas_words_by_the_deadline() -> None:
    lock = FamilyLock({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, "x->y", ["orders"], ttl_s=2, wait_s=3)
    started = time.monotonic()
    with pytest.raises(LockError) as failed:
        lock.__enter__()
    assert not isinstance(failed.value, LockHeldError)
    assert time.monotonic() - started < 3 + 3
    assert "within 3 s" in str(failed.value)
    assert any(name in str(failed.value) for name in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT"))


def test_a_claim_waits_for_a_target_that_is_still_starting(tmp_path: Path) -> None:
    """The first run on a freshly started target: the claim waits it out instead of failing."""
    port = free_port()
    clusters = DevClusters(tmp_path / "late", (ClusterSpec("late", port),))
    starter = threading.Timer(2.0, lambda: clusters.up(timeout=60))
    starter.start()
    try:
        lock = FamilyLock({"bootstrap.servers": f"127.0.0.1:{port}"}, "x->late", None, ttl_s=TTL_S, wait_s=60)
        with lock:
            assert lock.held
    finally:
        starter.join()
        clusters.down(timeout=30)


def test_at_least_once_runs_over_all_families_and_over_one_never_both_write(kafka_clusters: Any) -> None:
    config, flow, prefix = lock_config(kafka_clusters, "mirrorflow.delivery = at-least-once\n")
    topic = create_topic(kafka_clusters.primary, f"{prefix}-orders", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"r%d" % i, "partition": i % 2} for i in range(2000)])
    remote = f"{flow.split('->')[0]}.{topic}"

    # A family run holds its lease: a run over every family is refused and writes nothing, and the reverse.
    family = claim(config, flow, "orders")
    try:
        refused = replicate(config, flow, None, LocalExecutor())
        assert not refused.ok and refused.records == 0
        assert any("another run holds the lock" in e and "family orders" in e for e in refused.errors)
    finally:
        family.__exit__(None, None, None)
    everything = claim(config, flow, None)
    try:
        refused = replicate(config, flow, "orders", LocalExecutor())
        assert not refused.ok and refused.records == 0
        assert any("every family" in e for e in refused.errors)
    finally:
        everything.__exit__(None, None, None)

    # Both started at once: one copies, the other is refused (or, if it came second, finds nothing new).
    reports: dict[str, Any] = {}
    runs = [
        threading.Thread(
            target=lambda f=f: reports.__setitem__(str(f), replicate(config, flow, f, LocalExecutor(), timeout=30))
        )
        for f in (None, "orders")
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
    assert len(reports) == 2, "a run raised: see its thread's traceback"
    # This test's topic only: a run over every family also carries the source's `heartbeats` (as MM2 does).
    assert sum(p.records for r in reports.values() for p in r.partitions if p.topic == topic) == 2000
    values = Counter(r.value for r in read_all(kafka_clusters.backup, remote))
    assert len(values) == 2000 and max(values.values()) == 1  # no duplicate
