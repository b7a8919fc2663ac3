"""Integration tests for the local dev clusters (noida-db) and the Kafka test helpers.

Why these matter: every replication test builds on two independent clusters
and on the helpers that write and read them.  If a cluster leaked processes or
ports, or two "clusters" were secretly one, later tests would pass or fail for
the wrong reasons.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirrorflow_dev import devcluster
from mirrorflow_dev.devcluster import (
    ClusterSpec,
    DevClusterError,
    DevClusters,
    find_noida_binary,
    free_port,
    wait_for_kafka,
)
from tests.conftest import distinct_free_ports
from tests.kafka_helpers import produce, read_all, topic_exists

pytestmark = pytest.mark.integration


def processes_mentioning(text: str) -> list[int]:
    """PIDs of live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append(int(entry.name))
    return found


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


# --------------------------------------------------------------------------
# The session's clusters and the helpers
# --------------------------------------------------------------------------


def test_session_clusters_are_independent_and_round_trip_records(kafka_clusters, topic_factory) -> None:
    assert kafka_clusters.primary != kafka_clusters.backup
    if not kafka_clusters.external:  # embedded: our own brokers, never the demo's ports
        assert {s.alias for s in kafka_clusters.specs} == {"primary", "backup"}
        assert {s.port for s in kafka_clusters.specs}.isdisjoint({19092, 29092})

    topic = topic_factory(kafka_clusters.primary, partitions=2)
    assert topic.startswith("t-test-session-clusters")
    assert topic_exists(kafka_clusters.primary, topic)
    assert not topic_exists(kafka_clusters.backup, topic)

    # Recent timestamps: retention (7 days by default) may delete older records at any moment.
    base_ts = int(time.time() * 1000) - 60_000
    records = [
        {"key": b"k0", "value": b"v0", "headers": [("h", b"1")], "partition": 0, "timestamp": base_ts},
        {
            "key": "k1",
            "value": "v1-text",
            "headers": [("a", b"x"), ("a", b"y")],
            "partition": 1,
            "timestamp": base_ts + 1,
        },
        {"key": None, "value": b"\x00\xffbinary", "partition": 0, "timestamp": base_ts + 2},
        {"key": b"tombstone", "value": None, "headers": [("n", None)], "partition": 1, "timestamp": base_ts + 3},
        (b"k4", b"v4", [("t", b"tuple")], 0, base_ts + 4),
    ]
    delivered = produce(kafka_clusters.primary, topic, records)
    assert [d.partition for d in delivered] == [0, 1, 0, 1, 0]
    assert [d.offset for d in delivered] == [0, 0, 1, 1, 2]

    got = read_all(kafka_clusters.primary, topic, timeout=20)
    assert [(r.partition, r.offset) for r in got] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    by_pos = {(r.partition, r.offset): r for r in got}
    assert by_pos[(0, 0)].key == b"k0" and by_pos[(0, 0)].value == b"v0"
    assert by_pos[(0, 0)].headers == [("h", b"1")] and by_pos[(0, 0)].timestamp == base_ts
    assert by_pos[(1, 0)].key == b"k1" and by_pos[(1, 0)].value == b"v1-text"
    assert by_pos[(1, 0)].headers == [("a", b"x"), ("a", b"y")]  # order and duplicates kept
    assert by_pos[(0, 1)].key is None and by_pos[(0, 1)].value == b"\x00\xffbinary"
    assert by_pos[(0, 1)].headers == []
    assert by_pos[(1, 1)].value is None and by_pos[(1, 1)].headers == [("n", None)]
    assert by_pos[(0, 2)].key == b"k4" and by_pos[(0, 2)].headers == [("t", b"tuple")]
    assert [r.timestamp for r in got] == [base_ts, base_ts + 2, base_ts + 4, base_ts + 1, base_ts + 3]
    assert all(r.topic == topic for r in got)

    # One partition only, and the backup cluster never saw any of it.
    assert [r.offset for r in read_all(kafka_clusters.primary, topic, partition=1)] == [0, 1]
    assert not topic_exists(kafka_clusters.backup, topic)


def test_read_all_stops_at_last_stable_offset(kafka_clusters, topic_factory) -> None:
    """read_committed must not wait for (or return) an open transaction's records."""
    from confluent_kafka import Producer

    topic = topic_factory(kafka_clusters.backup)
    produce(kafka_clusters.backup, topic, [(b"k", b"committed")])
    txn = Producer({"bootstrap.servers": kafka_clusters.backup, "transactional.id": f"txn-{topic}"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce(topic, key=b"k", value=b"open")
    txn.flush(10)
    try:
        committed = read_all(kafka_clusters.backup, topic, timeout=10)
        assert [r.value for r in committed] == [b"committed"]
        uncommitted = read_all(kafka_clusters.backup, topic, isolation="read_uncommitted", timeout=10)
        assert [r.value for r in uncommitted] == [b"committed", b"open"]
    finally:
        txn.abort_transaction(10)


def test_wait_for_kafka(kafka_clusters) -> None:
    wait_for_kafka(kafka_clusters.primary.split(",")[0], timeout=5)  # one broker: it probes HOST:PORT
    t0 = time.monotonic()
    with pytest.raises(DevClusterError, match="did not answer"):
        wait_for_kafka(f"127.0.0.1:{free_port()}", timeout=1)
    assert time.monotonic() - t0 < 5


# --------------------------------------------------------------------------
# DevClusters lifecycle: the embedded brokers themselves (skipped on MIRRORFLOW_TEST_CLUSTERS)
# --------------------------------------------------------------------------


@pytest.mark.embedded_brokers
def test_lifecycle_up_twice_down_and_data_persists(tmp_path: Path) -> None:
    ports = distinct_free_ports(2)
    specs = (ClusterSpec("primary", ports[0]), ClusterSpec("backup", ports[1]))
    dc = DevClusters(tmp_path / "state", specs)
    try:
        t0 = time.monotonic()
        first = dc.up(timeout=30)
        startup = time.monotonic() - t0
        print(f"\nup (2 clusters, cold): {startup:.2f} s")
        assert [s.alias for s in first] == ["primary", "backup"]
        assert all(s.running and s.answers and s.pid for s in first), first
        assert all(s.detail.startswith("started") for s in first)

        for spec, st in zip(specs, dc.status(), strict=True):
            assert st.running and st.answers and st.bootstrap == spec.bootstrap
            assert st.data_dir == (tmp_path / "state" / spec.alias / "data").absolute()
            assert st.data_dir.is_dir()
            assert (tmp_path / "state" / spec.alias / "broker.log").is_file()
            record = json.loads((tmp_path / "state" / spec.alias / "pid").read_text())
            assert record["pid"] == st.pid and record["pgid"] == st.pgid and record["port"] == spec.port
            assert record["started_at"] and record["start_time"] > 0

        again = dc.up(timeout=30)
        assert [s.pid for s in again] == [s.pid for s in first]
        assert all(s.detail == "already running" for s in again)

        from tests.kafka_helpers import create_topic

        create_topic(specs[0].bootstrap, "persisted-topic", partitions=3)
        produce(specs[0].bootstrap, "persisted-topic", [{"key": b"k", "value": b"kept", "partition": 2}])
        assert not topic_exists(specs[1].bootstrap, "persisted-topic")

        t0 = time.monotonic()
        stopped = dc.down(timeout=30)
        print(f"down (2 clusters): {time.monotonic() - t0:.2f} s")
        assert all(not s.running for s in stopped)
        for st in first:
            assert st.pgid is not None and group_gone(st.pgid), f"process group {st.pgid} still exists"
        assert processes_mentioning(str(tmp_path / "state")) == []
        assert all(not (tmp_path / "state" / s.alias / "pid").exists() for s in specs)
        assert all(not s.running and not s.answers and s.pid is None for s in dc.status())
        assert [s.detail for s in dc.down(timeout=5)] == ["not running", "not running"]  # harmless

        t0 = time.monotonic()
        restarted = dc.up(timeout=30)
        print(f"up (2 clusters, warm): {time.monotonic() - t0:.2f} s")
        assert all(s.running and s.answers for s in restarted)
        assert topic_exists(specs[0].bootstrap, "persisted-topic")
        assert [(r.partition, r.value) for r in read_all(specs[0].bootstrap, "persisted-topic")] == [(2, b"kept")]
    finally:
        dc.down(timeout=30)
    assert processes_mentioning(str(tmp_path / "state")) == []


@pytest.mark.embedded_brokers
def test_port_taken_is_reported_and_nothing_starts(tmp_path: Path) -> None:
    free, taken = distinct_free_ports(2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as blocker:
        blocker.bind(("127.0.0.1", taken))
        blocker.listen()
        # 'primary' could start, but up() checks every port before starting anything.
        dc = DevClusters(tmp_path / "state", (ClusterSpec("primary", free), ClusterSpec("backup", taken)))
        with pytest.raises(DevClusterError) as info:
            dc.up(timeout=20)
    message = str(info.value)
    assert "'backup'" in message and str(taken) in message and "already in use" in message
    assert f"pid {os.getpid()}" in message  # it names the process holding the port
    assert processes_mentioning(str(tmp_path / "state")) == []
    assert not (tmp_path / "state" / "primary" / "pid").exists()
    assert all(not s.running for s in dc.status())


@pytest.mark.embedded_brokers
def test_missing_binary_gives_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setattr(sys, "executable", str(empty / "python"))
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(DevClusterError, match=r"pip install noida-db") as info:
        find_noida_binary()
    assert "make install" in str(info.value)

    dc = DevClusters(tmp_path / "state", (ClusterSpec("primary", free_port()),))
    with pytest.raises(DevClusterError, match="'noida-db' executable was not found"):
        dc.up(timeout=10)
    assert not (tmp_path / "state" / "primary" / "pid").exists()


@pytest.mark.embedded_brokers
def test_broker_dying_at_startup_reports_log_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "noida-db"
    fake.write_text("#!/bin/sh\necho 'error: something specific went wrong' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(devcluster, "find_noida_binary", lambda: fake)
    dc = DevClusters(tmp_path / "state", (ClusterSpec("primary", free_port()),))
    with pytest.raises(DevClusterError, match="exited during startup") as info:
        dc.up(timeout=10)
    assert "something specific went wrong" in str(info.value)
    assert not (tmp_path / "state" / "primary" / "pid").exists()


@pytest.mark.embedded_brokers
def test_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    """A PID file whose process was replaced (different start time) is stale, not ours."""
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        spec = ClusterSpec("primary", free_port())
        dc = DevClusters(tmp_path / "state", (spec,))
        pid_file = tmp_path / "state" / "primary" / "pid"
        pid_file.parent.mkdir(parents=True)
        pid_file.write_text(
            json.dumps(
                {"pid": stranger.pid, "pgid": stranger.pid, "port": spec.port, "started_at": "x", "start_time": 1}
            )
        )
        assert [s.running for s in dc.status()] == [False]
        assert [s.detail for s in dc.down(timeout=5)] == ["not running"]
        assert stranger.poll() is None, "down() signalled a process that is not ours"
        assert not pid_file.exists()
    finally:
        os.killpg(stranger.pid, signal.SIGKILL)
        stranger.wait()
