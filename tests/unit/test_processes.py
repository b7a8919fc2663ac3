"""Recorded background sessions: started, recognised and stopped through what was recorded only.

Why these matter: the demo's Airflow puts task processes (and their Spark jobs) in process groups of
their own; stopping only the leader's group would leave them running.  And a PID file that outlived
its process must never lead to signalling whoever got that PID next.  Plain ``sleep`` processes
stand in for Airflow here; no broker is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirrorflow.processes import PidRecord, SessionProcess, is_live, proc_stat, session_members

# A leader that starts one child in a process group of its own (as Airflow's task supervisor does)
# and one in its own group, then waits.
TREE = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen(['sleep', '60'], process_group=0)\n"
    "subprocess.Popen(['sleep', '60'])\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "time.sleep(60)\n"
)
# A leader that starts a child and exits at once: the child is orphaned but still in the session.
ORPHAN = "import subprocess; subprocess.Popen(['sleep', '60'])\n"


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[SessionProcess]:
    process = SessionProcess(tmp_path / "pid", tmp_path / "out.log", owner_env=("MIRRORFLOW_TEST_OWNER", str(tmp_path)))
    yield process
    process.stop(timeout=5)  # never leave a sleep behind, whatever the test did


def test_stop_reaches_every_process_group_of_the_session(session: SessionProcess) -> None:
    record = session.start([sys.executable, "-c", TREE], env=os.environ, banner="=== start")
    wait_for(lambda: len(session_members(record.pgid)) == 3)
    assert session.running() and session.leader_alive()
    groups = {st.pgid for pid in session_members(record.pgid) if (st := proc_stat(pid)) is not None}
    assert len(groups) == 2
    saved = json.loads(session.pid_file.read_text())
    assert saved["pid"] == saved["pgid"] == record.pid and saved["start_time"] == record.start_time

    detail = session.stop(timeout=10)

    assert detail.startswith("stopped in"), detail
    assert session_members(record.pgid) == []
    assert not session.pid_file.exists()
    assert session.stop() == "not running"  # idempotent


def test_children_of_an_exited_leader_are_still_ours_through_the_owner_marker(session: SessionProcess) -> None:
    record = session.start([sys.executable, "-c", ORPHAN], env=os.environ)
    wait_for(lambda: not is_live(proc_stat(record.pid)) and len(session_members(record.pgid)) == 1)
    assert session.running() and not session.leader_alive()
    assert session.stop(timeout=10).startswith("stopped")
    assert session_members(record.pgid) == []


def test_a_record_of_someone_elses_process_is_never_signalled(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        stat = proc_stat(stranger.pid)
        assert stat is not None
        # Same PID and group, but another start time and no owner marker: a recycled PID.
        PidRecord(pid=stranger.pid, pgid=stranger.pid, start_time=stat.start_time + 1).save(tmp_path / "pid")
        process = SessionProcess(tmp_path / "pid", tmp_path / "log", owner_env=("MIRRORFLOW_TEST_OWNER", "x"))
        assert process.record() is None
        assert process.stop(timeout=1) == "not running"
        assert stranger.poll() is None, "a process that is not ours was signalled"
        assert not (tmp_path / "pid").exists()  # the stale record is cleared
    finally:
        stranger.send_signal(signal.SIGKILL)
        stranger.wait()


@pytest.mark.parametrize(
    "content",
    [
        "",
        "not json",
        '{"pid": 1}',
        '{"pid": true, "pgid": 1, "start_time": 1}',
        '{"pid": "x", "pgid": 1, "start_time": 1}',
    ],
)
def test_unreadable_records_are_none(tmp_path: Path, content: str) -> None:
    (tmp_path / "pid").write_text(content)
    assert PidRecord.load(tmp_path / "pid") is None


def test_record_round_trip(tmp_path: Path) -> None:
    record = PidRecord(pid=12, pgid=12, start_time=345, started_at="2026-01-01T00:00:00+00:00", port=8080)
    record.save(tmp_path / "sub" / "pid")
    assert PidRecord.load(tmp_path / "sub" / "pid") == record
    assert PidRecord.load(tmp_path / "missing") is None
