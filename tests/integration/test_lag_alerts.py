"""Lag alerts end to end: records two minutes old that were never copied, a real webhook, the heartbeats DAG.

Its own pair of clusters (as ``test_freshness_alerts.py``: the flow's topics, progress and heartbeats are
its own; on the clusters ``MIRRORFLOW_TEST_CLUSTERS`` names, its aliases and topic names are) and the
demo's alert sink (a real background process) as the webhook, so the test counts what actually arrived. Family ``orders`` has a 60 s threshold of its own; the rest of the flow (family
``default``) has the flow's 3600 s, so records as old in ``audit`` must not alert. The heartbeats DAG runs
three times through ``dag.test``: behind (one alert, although the first ``lag_alerts`` try fails after
sending and is retried), still behind (quiet), and after an in-process replication run (one recovery).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import airflow  # noqa: F401 - first: importing Airflow puts plugins/ (mirrorflow_airflow) on sys.path
import pytest

from mirrorflow.alerts import AlertState
from mirrorflow.config import load_config, parse_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow.status import FlowStatus
from mirrorflow_dev import EXAMPLE_CONFIG as DEFAULT_CONFIG
from mirrorflow_dev.demo.alert_sink import AlertSink
from tests.conftest import own_clusters
from tests.integration.test_heartbeats import Pair, new_pair, pair_config_text
from tests.kafka_helpers import create_topic, produce, unique_topic_name

FLOW = "primary->backup"
DAG_ID = "heartbeats__primary__backup"
LAG_STATE_KEY = "mirrorflow_lag_alert_state__primary__backup"
HEARTBEAT_STATE_KEY = "mirrorflow_alert_state__primary__backup"
AGE_S = 120
THRESHOLD_S = 60


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


def _clear_alert_states(clusters: Pair) -> None:
    """The session's metadata DB is shared: another test's heartbeats DAG may have left states behind."""
    from airflow.models.variable import Variable

    Variable.delete(clusters.names(LAG_STATE_KEY))
    Variable.delete(clusters.names(HEARTBEAT_STATE_KEY))


def _write_config(tmp_path: Path, clusters: Pair, url: str, orders: str, audit: str) -> Path:
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        pair_config_text(clusters)
        + clusters.names(
            f"primary->backup.topics = {orders}, {audit}\n"  # the last value wins over pair_config_text's none-such
            f"primary->backup.mirrorflow.families = orders\nprimary->backup.mirrorflow.family.orders.topics = {orders}\n"
            "mirrorflow.alerts.lag.max.seconds = 3600\n"
            f"primary->backup.mirrorflow.family.orders.alerts.lag.max.seconds = {THRESHOLD_S}\n"
            # 6 s schedule: each run's sensor watches 5 s (the 10 m default max age: no heartbeat alert meanwhile)
            "mirrorflow.heartbeats.schedule = 6s\nmirrorflow.heartbeats.poll.interval = 1s\n"
            "backup->primary.emit.heartbeats.enabled = false\n"
            # The source's `heartbeats` is not this test's: on shared clusters it may hold old records of other
            # flows that would lag family default. Here it is never written (the reverse emit is off), as before.
            "primary->backup.heartbeats.replication.enabled = false\n"
        )
        + f"mirrorflow.alerts.webhook.url = {url}\n"
    )
    return config_file


def _lag_posts(sink: AlertSink) -> list[dict[str, Any]]:
    return [p for p in sink.alerts() if p.get("reason") == "lag"]


def _lag_result(run: Any) -> dict[str, Any]:
    return run.get_task_instance("lag_alerts").xcom_pull(task_ids="lag_alerts")


def _family(result: dict[str, Any], name: str) -> dict[str, Any]:
    [row] = [r for r in result["families"] if r["family"] == name]
    return row


@pytest.mark.integration
def test_records_older_than_the_threshold_alert_once_and_recover_once_after_the_copy(
    clusters: Pair,
    sink: AlertSink,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.models.dagrun import DagRun

    from mirrorflow_airflow.dags.heartbeats import heartbeats_dags
    from mirrorflow_airflow.notifications import alerting

    failover_dag = clusters.names("failover__primary__backup")
    failovers_before = {r.run_id for r in DagRun.find(dag_id=failover_dag)}  # other tests' runs
    endpoint = sink.endpoint()
    assert endpoint is not None
    orders, audit = unique_topic_name("orders"), unique_topic_name("audit")
    config_file = _write_config(tmp_path, clusters, endpoint.url, orders, audit)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    _clear_alert_states(clusters)
    primary, flow = clusters.primary, clusters.flow
    create_topic(primary, orders, partitions=2)
    create_topic(primary, audit)
    old_ms = int(time.time() * 1000) - AGE_S * 1000
    produce(primary, orders, [{"value": f"o{i}", "partition": 0, "timestamp": old_ms + i} for i in range(3)])
    produce(primary, orders, [{"value": "recent", "partition": 1}])  # behind by a record, not by a minute
    produce(primary, audit, [{"value": f"a{i}", "timestamp": old_ms} for i in range(2)])  # under the flow's 3600 s

    # -- 1. behind: one alert, although the task fails right after sending and recording it, and is retried
    dag = heartbeats_dags()[clusters.names(DAG_ID)]
    # only after the failed-over check, and nothing after it: a lag alert never leads to a failover
    assert dag.get_task("lag_alerts").upstream_task_ids == {"still_mirrored"}
    assert dag.get_task("lag_alerts").downstream_task_ids == set()
    dag.get_task("lag_alerts").retry_delay = timedelta(0)
    real_save = alerting.save_lag_states
    saves: list[dict[str, str]] = []

    def save_then_fail(source: str, target: str, states: Any) -> None:
        """As an API call whose response is lost after the server stored the Variable."""
        real_save(source, target, states)
        saves.append({family: state.state for family, state in states.items()})
        if len(saves) == 1:
            raise ConnectionError("the API server's answer to Variable.set was lost")

    monkeypatch.setattr(alerting, "save_lag_states", save_then_fail)
    with caplog.at_level("INFO"):
        first = dag.test()
    lag_ti = first.get_task_instance("lag_alerts")
    assert (lag_ti.state, lag_ti.try_number) == ("success", 2)
    result = _lag_result(first)
    row, default = _family(result, "orders"), _family(result, "default")
    assert (row["verdict"], row["kind"], row["replayed"], row["worst"]) == (
        "over",
        "alert",
        True,
        f"{orders}[0]",
    )
    assert (row["threshold_s"], row["lag_records"], row["partitions_over"]) == (THRESHOLD_S, 3, 1)
    assert AGE_S <= row["lag_seconds"] < AGE_S + 120
    assert (default["verdict"], default["kind"], default["threshold_s"]) == ("under", None, 3600)
    assert result["over"] == ["orders"] and result["measured"] is True and result["errors"] == []
    assert "reported again, not sent again" in caplog.text
    print(f"lag measured in {result['status_seconds']} s")

    [alert] = _lag_posts(sink)
    assert (alert["kind"], alert["flow"], alert["family"], alert["fresh"]) == ("alert", flow, "orders", False)
    assert (alert["topic"], alert["partition"], alert["lag_records"], alert["threshold_s"]) == (orders, 0, 3, 60)
    assert AGE_S <= alert["lag_seconds"] == alert["age_s"] < AGE_S + 120
    assert alert["partitions"] == [
        {"topic": orders, "partition": 0, "lag_seconds": alert["lag_seconds"], "lag_records": 3}
    ]
    assert alert["message"] == row["message"] and alert["message"].startswith(
        f"{flow} family orders: replication LAGS: {orders}[0] {alert['lag_seconds']:,.0f} s behind (3 record(s) not "
        "copied), over the threshold of 60 s (mirrorflow.alerts.lag.max.seconds)"
    )
    print(alert["message"])

    # -- 2. still behind: quiet
    monkeypatch.setattr(alerting, "save_lag_states", real_save)
    second = dag.test()
    again = _family(_lag_result(second), "orders")
    assert (again["verdict"], again["kind"], again["replayed"]) == ("over", None, False)
    assert (again["last_sent_kind"], again["last_sent_by"]) == ("alert", first.run_id)
    assert len(_lag_posts(sink)) == 1

    # -- 3. copied: one recovery
    config = load_config(config_file)
    assert replicate(config, flow, None, LocalExecutor()).ok
    third = dag.test()
    recovered = _family(_lag_result(third), "orders")
    assert (recovered["verdict"], recovered["kind"], recovered["lag_records"]) == ("under", "recovery", 0)
    posts = _lag_posts(sink)
    assert [p["kind"] for p in posts] == ["alert", "recovery"]
    assert (posts[1]["fresh"], posts[1]["family"], posts[1]["partitions_over"], posts[1]["lag_records"]) == (
        True,
        "orders",
        0,
        0,
    )
    assert "s after the alert: every partition caught up" in posts[1]["message"]
    assert [p for p in sink.alerts() if p.get("reason") != "lag"] == []  # no heartbeat alert meanwhile
    assert endpoint.url not in caplog.text  # the webhook URL is a secret
    failovers = {r.run_id for r in DagRun.find(dag_id=failover_dag)}
    assert failovers - failovers_before == set()  # a lag alert never fails over


def test_the_lag_task_exists_only_with_a_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No threshold, no task (and no lag measured every minute): the default costs nothing."""
    from mirrorflow_airflow.dags.heartbeats import heartbeats_dags

    off = tmp_path / "off.properties"  # the demo's file sets a threshold: turn it off (0 = off) for this case
    off.write_text(DEFAULT_CONFIG.read_text() + "\nmirrorflow.alerts.lag.max.seconds = 0\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(off))
    plain = heartbeats_dags()[DAG_ID]
    assert "lag_alerts" not in plain.task_ids
    assert "Lag alerts are off: set `mirrorflow.alerts.lag.max.seconds`" in (plain.doc_md or "")

    config = tmp_path / "mm2.properties"
    config.write_text(DEFAULT_CONFIG.read_text() + "\nprimary->backup.mirrorflow.alerts.lag.max.seconds = 300\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config))
    dag = heartbeats_dags()[DAG_ID]
    task = dag.get_task("lag_alerts")
    # after the failed-over check only, and nothing after it: nothing to do with failover
    assert task.upstream_task_ids == {"still_mirrored"} and task.downstream_task_ids == set()
    assert LAG_STATE_KEY in (dag.doc_md or "") and "never triggers a failover" in (dag.doc_md or "")


def test_an_unmeasured_flow_keeps_its_lag_state_and_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source that does not answer is no recovery: the breach stays open, and the task is told to fail.

    Outside a task the Variable API has no supervisor to talk to, so the Variable is a dict here (the
    test above goes through the real one).
    """
    from mirrorflow_airflow.notifications import alerting

    flow = parse_config(
        "clusters = primary, backup\nprimary.bootstrap.servers = x:1\nbackup.bootstrap.servers = y:1\n"
        "primary->backup.enabled = true\nmirrorflow.alerts.lag.max.seconds = 60\n"
    ).flow("primary", "backup")
    breach = AlertState("stale", 1_000, 1_000, "alert", "primary->backup family default: replication LAGS", "r0", 1_000)
    variable: dict[str, dict[str, AlertState]] = {"states": {"default": breach, "gone": breach}}
    monkeypatch.setattr(alerting, "load_lag_states", lambda source, target: dict(variable["states"]))
    monkeypatch.setattr(
        alerting, "save_lag_states", lambda source, target, states: variable.update(states=dict(states))
    )
    down = FlowStatus(FLOW, 2_000, errors=["error: cluster 'primary' (source of primary->backup) did not answer"])
    result = alerting.evaluate_lag_and_notify(flow, down, {}, run_id="r1")
    assert (result["measured"], result["sent"], result["over"]) == (False, [], [])
    [row] = result["families"]
    assert (row["family"], row["verdict"], row["kind"]) == ("default", "unmeasured", None)
    assert row["unmeasured"] == "error: cluster 'primary' (source of primary->backup) did not answer"
    # the open breach is kept; a family that no longer has a threshold is forgotten
    assert variable["states"] == {"default": breach}
