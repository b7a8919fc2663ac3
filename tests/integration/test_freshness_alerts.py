"""Stale-heartbeat detection and alerting, end to end: a real outage of the source, a real webhook.

Its own pair of clusters (as ``test_heartbeats.py``, and for the same reason), of which the primary is
stopped mid-test (so that test is ``stops_brokers``: skipped on ``MIRRORFLOW_TEST_CLUSTERS``); the demo's alert sink (a real background process) is the webhook, so the test counts
what actually arrived. The timing is measured on the trigger the deferrable sensor defers to (the code that
runs in the triggerer), started while the heartbeat is still fresh; the alert state machine then runs
twice through the heartbeats DAG (``dag.test``, which runs the deferred trigger in-process) while the
primary is down, the first time with an ``alert`` try that fails after sending (and is retried), and once
more after it is back.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.config import load_config
from mirrorflow.heartbeats import check_freshness, emit_heartbeat, replicated_heartbeats_topic
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import family_lock, replicate
from mirrorflow.wire import Heartbeat
from mirrorflow_dev.demo.alert_sink import AlertSink
from mirrorflow_dev.devcluster import DevClusters
from tests.conftest import own_clusters
from tests.integration.test_heartbeats import Pair, new_pair, pair_config_text
from tests.kafka_helpers import create_topic, produce

pytestmark = pytest.mark.integration

THRESHOLD_S = 5.0
POLL_S = 1.0
#: One freshness read on the target (a consumer assign + poll) on top of the poll interval.
READ_SLACK_S = 1.5
STATE_KEY = "mirrorflow_alert_state__primary__backup"
FAILOVER_DAG = "failover__primary__backup"


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Pair]:
    """The test's clusters and aliases: ``names()`` turns the constants above into the flow's own."""
    with own_clusters(tmp_path / "clusters") as pair:
        yield new_pair(pair)


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[AlertSink]:
    """The demo's webhook receiver, in its own process, writing ``alerts.jsonl`` under ``tmp_path``."""
    receiver = AlertSink(tmp_path / "demo")
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


def _clear_alert_state(clusters: Pair) -> None:
    """The session's metadata DB is shared: another test's heartbeats DAG may have left a state behind."""
    from airflow.models.variable import Variable

    Variable.delete(clusters.names(STATE_KEY))


def _failover_dag_is_deployed(clusters: Pair) -> bool:
    """Whether ``dags/`` (synced to the DB by every dag.test) defines the failover DAG of the flow."""
    from airflow.models.dag import DagModel

    model = DagModel.get_current(clusters.names(FAILOVER_DAG))
    return model is not None and not model.is_stale and not model.has_import_errors


def _write_config(tmp_path: Path, clusters: Pair, extra: str = "") -> Path:
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        pair_config_text(clusters) + "mirrorflow.heartbeats.max.age = 5s\nmirrorflow.heartbeats.poll.interval = 1s\n"
        # 6 s schedule: each run's sensor watches 5 s, so a fresh verdict does not take 50 s
        "mirrorflow.heartbeats.schedule = 6s\n"
        "mirrorflow.heartbeats.policy = auto-failover\n"
        # The tests write the primary's heartbeats themselves, to know exactly when the last one was emitted;
        # the DAG's reverse emit would only add a 10 s timeout per run while the primary is down.
         + clusters.names("backup->primary.emit.heartbeats.enabled = false\n") + extra
    )
    return config_file


def _first_event(trigger: Any) -> Any:
    async def first() -> Any:
        return await anext(trigger.run(), None)

    return asyncio.run(first())


@pytest.mark.stops_brokers
def test_a_stopped_source_alerts_once_within_threshold_plus_one_poll_and_recovers_once(
    clusters: Pair,
    sink: AlertSink,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.sdk import PokeReturnValue
    from airflow.sdk.exceptions import AirflowSensorTimeout

    from mirrorflow_airflow.dags.heartbeats import heartbeats_dags
    from mirrorflow_airflow.notifications import alerting
    from mirrorflow_airflow.sensors.heartbeat_freshness import HeartbeatFreshnessSensor, HeartbeatFreshnessTrigger

    endpoint = sink.endpoint()
    assert endpoint is not None
    url = endpoint.url
    assert clusters.clusters.specs is not None and clusters.clusters.state_dir is not None  # embedded: stoppable
    primary_spec = clusters.clusters.specs[0]
    config_file = _write_config(tmp_path, clusters, f"mirrorflow.alerts.webhook.url = {url}\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    _clear_alert_state(clusters)
    config = load_config(config_file)
    into_primary = config.flow(clusters.target, clusters.source)
    forward = config.flow(clusters.source, clusters.target)
    flow = clusters.flow

    def beat_and_replicate() -> int:
        """A heartbeat into the primary's ``heartbeats``, carried to ``primary.heartbeats`` on the backup."""
        emitted = emit_heartbeat(into_primary).heartbeat.timestamp_ms
        assert replicate(config, flow, None, LocalExecutor()).ok
        return emitted

    emitted_ms = beat_and_replicate()
    assert check_freshness(forward).fresh

    # -- 1. how soon staleness is reported: the deferrable sensor's trigger watches while the primary stops
    trigger = HeartbeatFreshnessTrigger(
        config_file=str(config_file),
        flow=flow,
        threshold_s=THRESHOLD_S,
        poll_s=POLL_S,
        watch_until=time.time() + 30,
    )
    events: list[Any] = []
    watching_from_ms = int(time.time() * 1000)
    watcher = threading.Thread(target=lambda: events.append(_first_event(trigger)), daemon=True)
    watcher.start()
    primary_only = DevClusters(clusters.clusters.state_dir, (primary_spec,))  # same state dir: stops only the primary
    primary_only.down(timeout=30)
    watcher.join(timeout=30)
    assert watching_from_ms - emitted_ms < THRESHOLD_S * 1000  # watching began while still fresh
    [event] = events
    stale = event.payload
    delay_s = (stale["checked_at_ms"] - emitted_ms) / 1000
    assert stale["fresh"] is False and stale["newest_ms"] == emitted_ms and stale["threshold_s"] == THRESHOLD_S
    print(f"staleness reported {delay_s:.2f} s after the last heartbeat was emitted (threshold {THRESHOLD_S} s)")
    assert THRESHOLD_S < delay_s <= THRESHOLD_S + POLL_S + READ_SLACK_S, delay_s
    # the same verdict in poke (and reschedule) mode: done at once, the freshness dict as its XCom
    poked = HeartbeatFreshnessSensor(task_id="poke", flow=flow, config_file=config_file).poke({})  # type: ignore[arg-type]
    assert isinstance(poked, PokeReturnValue) and poked.is_done and poked.xcom_value["fresh"] is False

    # a deferral that times out (a triggerer that never ran the trigger) says what was measured last
    deferred = HeartbeatFreshnessSensor(task_id="watch", flow=flow, config_file=config_file, deferrable=True)
    with pytest.raises(AirflowSensorTimeout) as timed_out:
        deferred.resume_execution("__fail__", {"error": "Trigger timeout"}, {})  # type: ignore[arg-type]
    said = str(timed_out.value)
    assert "the triggerer sent no verdict within the deferral's timeout" in said
    assert re.search(r"last measured by this task, after the watch ended at .+ UTC \(\d+ s ago\): ", said), said
    assert re.search(r"newest heartbeat \d+ s old \(STALE; threshold 5 s\)", said), said

    # -- 2. two consecutive evaluations of the DAG while the primary is down: exactly one alert POST, although
    # the first evaluation's alert task fails right after sending and recording it, and is retried
    dag = heartbeats_dags()[clusters.names("heartbeats__primary__backup")]
    dag.get_task("alert").retry_delay = timedelta(0)  # retried at once (the dag.test loop polls every second)
    real_save = alerting.save_state
    saves: list[str] = []

    def save_then_fail(source: str, target: str, state: Any) -> None:
        """As an API call whose response is lost after the server stored the Variable."""
        real_save(source, target, state)
        saves.append(state.state)
        if len(saves) == 1:
            raise ConnectionError("the API server's answer to Variable.set was lost")

    monkeypatch.setattr(alerting, "save_state", save_then_fail)
    with caplog.at_level("INFO"):
        first = dag.test()
    states = {ti.task_id: ti.state for ti in first.get_task_instances()}
    assert {k: states[k] for k in ("emit_heartbeats", "watch_freshness", "alert", "failover_wanted", "verdict")} == {
        "emit_heartbeats": "success",
        "watch_freshness": "success",
        "alert": "success",  # its second try
        "failover_wanted": "success",
        "verdict": "failed",  # STALE: the run is red
    }
    assert first.state == "failed"
    assert first.get_task_instance("alert").try_number == 2 and saves == ["stale"]  # the retry saved nothing
    verdict = first.get_task_instance("alert").xcom_pull(task_ids="alert")
    assert (verdict["kind"], verdict["verdict"], verdict["replayed"], verdict["failed_channels"]) == (
        "alert",
        "stale",
        True,
        [],
    )
    assert "STALE" in verdict["message"] and verdict["channels"] == ["log", "webhook"]
    assert "reported again, not sent again" in caplog.text
    [alert] = sink.alerts()
    assert (alert["kind"], alert["flow"], alert["fresh"], alert["threshold_s"]) == ("alert", flow, False, 5.0)
    assert alert["age_s"] > THRESHOLD_S and alert["newest_heartbeat_ms"] == emitted_ms
    assert alert["message"] == verdict["message"] and "received_at" in alert
    # auto-failover: the failover DAG is triggered once if it is deployed; if not, the gate says so and skips
    if _failover_dag_is_deployed(clusters):
        from airflow.models.dagrun import DagRun

        assert states["trigger_failover"] == "success"
        [run] = DagRun.find(dag_id=clusters.names(FAILOVER_DAG), run_id=f"auto_failover__{verdict['since_ms']}")
        assert run.conf == {"mode": "disaster", "dry_run": False}
    else:
        assert states["trigger_failover"] == "skipped"

    second = dag.test()
    again = second.get_task_instance("alert").xcom_pull(task_ids="alert")
    assert (again["kind"], again["replayed"], again["since_ms"]) == (None, False, verdict["since_ms"])  # quiet
    assert again["last_sent_kind"] == "alert" and again["last_sent_by"] == first.run_id
    second_states = {ti.task_id: ti.state for ti in second.get_task_instances()}
    assert (second_states["trigger_failover"], second_states["verdict"], second.state) == (
        "skipped",
        "failed",
        "failed",
    )
    assert len(sink.alerts()) == 1

    # -- 3. the primary is back and replication runs again: exactly one recovery POST
    primary_only.up(timeout=60)
    beat_and_replicate()
    stop = threading.Event()

    def keep_replicating() -> None:
        """As a continuous mirror run would (one lock, micro-batches): a DAG run's start-up alone takes ~3 s."""
        with family_lock(forward, None) as held:
            while not stop.wait(0.2):
                emit_heartbeat(into_primary)
                replicate(config, flow, None, LocalExecutor(), lock=held)

    mirror = threading.Thread(target=keep_replicating, daemon=True)
    mirror.start()
    try:
        third = dag.test()
    finally:
        stop.set()
        mirror.join(timeout=30)
    recovered = third.get_task_instance("alert").xcom_pull(task_ids="alert")
    assert recovered["kind"] == "recovery" and recovered["verdict"] == "fresh" and third.state == "success"
    assert HeartbeatFreshnessSensor(task_id="poke", flow=flow, config_file=config_file).poke({}) is False  # type: ignore[arg-type]
    posts = sink.alerts()
    assert [p["kind"] for p in posts] == ["alert", "recovery"]
    assert posts[1]["fresh"] is True and posts[1]["age_s"] <= THRESHOLD_S


def test_auto_failover_without_a_failover_dag_alerts_and_says_so(
    clusters: Pair,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import mirrorflow_airflow.dags.heartbeats as factory

    # dags/failover.py defines a failover DAG for every enabled flow, so point the heartbeats DAG (in memory
    # and as dags/heartbeats.py builds it for dag.test, in this process) at one that does not exist.
    monkeypatch.setattr(factory, "failover_dag_id", lambda flow: f"failover__{flow.source}__nowhere")
    # Stale: the newest heartbeat that crossed is a minute old. It is written where a copy would have put it
    # (``<src>.heartbeats`` on the target) rather than copied from the source's ``heartbeats``: on shared
    # clusters that topic may hold newer heartbeats of other flows, which a copy would carry too.
    config_file = _write_config(tmp_path, clusters)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    _clear_alert_state(clusters)
    flow = load_config(config_file).flow(clusters.source, clusters.target)
    old = Heartbeat(clusters.target, clusters.source, int(time.time() * 1000) - 60_000)  # a minute old
    crossed = create_topic(clusters.backup, replicated_heartbeats_topic(flow))
    produce(clusters.backup, crossed, [{"key": old.key(), "value": old.value(), "timestamp": old.timestamp_ms}])
    assert check_freshness(flow).newest_ms == old.timestamp_ms

    with caplog.at_level("INFO"):
        run = factory.heartbeats_dags()[clusters.names("heartbeats__primary__backup")].test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert (states["alert"], states["failover_wanted"], states["trigger_failover"]) == ("success", "success", "skipped")
    assert (states["verdict"], run.state) == ("failed", "failed")
    assert run.get_task_instance("alert").xcom_pull(task_ids="alert")["kind"] == "alert"
    assert clusters.names("failover__primary__nowhere does not exist: NOT failing over") in caplog.text
