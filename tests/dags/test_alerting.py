"""The Airflow side of heartbeat alerting: notifier loading, delivery, the sensor/trigger and the DAG's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from airflow.sdk import BaseNotifier

from mirrorflow.config import parse_config
from mirrorflow.config.model import parse_schedule
from mirrorflow_dev import EXAMPLE_CONFIG as DEFAULT_CONFIG
from mirrorflow_dev.loopback_http import serving

RECEIVED: list[tuple[str, Any]] = []


def record_payload(payload: dict[str, Any]) -> None:
    """A plain-callable notifier: gets the payload dict."""
    RECEIVED.append(("callable", payload))


class MessageNotifier(BaseNotifier):
    """A notifier taking its text as ``message`` (as most providers' notifiers do), templated."""

    template_fields = ("message",)

    def __init__(self, message: str = "") -> None:
        super().__init__()
        self.message = message

    def notify(self, context: Any) -> None:
        RECEIVED.append(("message", self.message))


class TextNotifier(BaseNotifier):
    """Slack's notifier calls it ``text``."""

    def __init__(self, *, text: str, channel: str = "#ops") -> None:
        super().__init__()
        self.text = text

    def notify(self, context: Any) -> None:
        RECEIVED.append(("text", self.text))


class SilentNotifier(BaseNotifier):
    """Takes no message: built without arguments; sees the context."""

    def notify(self, context: Any) -> None:
        RECEIVED.append(("silent", context.get("marker")))


class BrokenNotifier(BaseNotifier):
    def __init__(self, message: str) -> None:
        super().__init__()

    def notify(self, context: Any) -> None:
        raise RuntimeError("pager service down")


@pytest.fixture(autouse=True)
def _clear() -> None:
    RECEIVED.clear()


def test_notifiers_by_dotted_path() -> None:
    from mirrorflow_airflow.notifications.alerting import call_notifier

    here = __name__
    payload = {"kind": "alert", "message": "a->b: replication is STALE"}
    assert call_notifier(f"{here}.record_payload", "m", payload, {}) == f"callable {here}.record_payload"
    assert call_notifier(f"{here}.MessageNotifier", "stale {{ 1 + 1 }}", payload, {}) == "notifier MessageNotifier"
    assert call_notifier(f"{here}.TextNotifier", "stale", payload, {}) == "notifier TextNotifier"
    assert call_notifier(f"{here}.SilentNotifier", "stale", payload, {"marker": 7}) == "notifier SilentNotifier"
    assert RECEIVED == [("callable", payload), ("message", "stale 2"), ("text", "stale"), ("silent", 7)]
    with pytest.raises(ImportError, match="has no 'nothing'"):
        call_notifier(f"{here}.nothing", "m", payload, {})
    with pytest.raises(TypeError, match="neither a BaseNotifier nor a callable"):
        call_notifier(f"{here}.RECEIVED", "m", payload, {})


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        type(self).received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook_url() -> Iterator[str]:
    _Hook.received = []
    with serving(_Hook) as base:
        yield f"{base}/services/T0/s3cr3t-hook"


def test_notify_tries_every_channel_and_masks_the_webhook(webhook_url: str, caplog: pytest.LogCaptureFixture) -> None:
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    from mirrorflow_airflow.notifications.alerting import notify

    here = __name__
    flow = parse_config(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
        f"mirrorflow.alerts.webhook.url = {webhook_url}\n"
        f"mirrorflow.alerts.notifiers = {here}.BrokenNotifier, {here}.record_payload, {here}.MessageNotifier\n"
    ).flow("a", "b")
    payload = {"kind": "alert", "flow": "a->b", "message": "a->b: replication is STALE"}
    with caplog.at_level("INFO"):
        failed = notify(flow, "alert", payload, {})
    assert failed == [f"{here}.BrokenNotifier: RuntimeError: pager service down"]
    assert _Hook.received == [payload]
    assert RECEIVED == [("callable", payload), ("message", "a->b: replication is STALE")]
    assert "mirrorflow alert: a->b: replication is STALE" in caplog.text
    assert "s3cr3t" not in caplog.text
    assert "s3cr3t" not in redact(f"posting to {webhook_url}")  # registered with Airflow's secrets masker


def test_the_trigger_serializes_to_an_importable_classpath() -> None:
    from airflow.sdk.module_loading import import_string

    from mirrorflow_airflow.triggers.heartbeat_freshness import HeartbeatFreshnessTrigger

    trigger = HeartbeatFreshnessTrigger(
        config_file="c.properties", flow="a->b", threshold_s=5, poll_s=1, watch_until=1_700_000_000.5
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "mirrorflow_airflow.triggers.heartbeat_freshness.HeartbeatFreshnessTrigger"
    assert kwargs == {
        "config_file": "c.properties",
        "flow": "a->b",
        "threshold_s": 5.0,
        "poll_s": 1.0,
        "watch_until": 1_700_000_000.5,
    }
    assert import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)


def test_the_sensor_takes_its_poll_interval_from_the_configuration(tmp_path: Path) -> None:
    from mirrorflow_airflow.sensors.heartbeat_freshness import HeartbeatFreshnessSensor

    config = tmp_path / "mm2.properties"
    config.write_text(DEFAULT_CONFIG.read_text() + "\nprimary->backup.mirrorflow.heartbeats.poll.interval = 7s\n")
    sensor = HeartbeatFreshnessSensor(task_id="w", flow="primary->backup", config_file=config)
    assert (sensor.poke_interval, sensor.watch, sensor.deferrable, sensor.mode) == (
        7,
        timedelta(seconds=50),
        False,
        "poke",
    )
    assert sensor.timeout == 50 + 2 * 7 + 120
    rescheduling = HeartbeatFreshnessSensor(
        task_id="r", flow="primary->backup", config_file=config, poke_interval=2, mode="reschedule"
    )
    assert (rescheduling.poke_interval, rescheduling.reschedule) == (2, True)


def test_watch_window_follows_the_schedule() -> None:
    from mirrorflow_airflow.dags.heartbeats import watch_window

    assert watch_window(parse_schedule("1m")) == timedelta(seconds=50)
    assert watch_window(parse_schedule("10m")) == timedelta(seconds=500)
    assert watch_window(parse_schedule("6s")) == timedelta(seconds=5)
    assert watch_window(parse_schedule("*/5 * * * *")) == timedelta(seconds=50)


def test_the_heartbeats_dag_watches_alerts_and_may_fail_over(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import TriggerRule

    from mirrorflow_airflow.dags.heartbeats import heartbeats_dags

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(DEFAULT_CONFIG))
    dag = heartbeats_dags()["heartbeats__primary__backup"]
    assert {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks} == {
        "still_mirrored": ["emit_heartbeats", "lag_alerts"],  # everything skips while the flow is failed over
        "emit_heartbeats": ["watch_freshness"],
        "watch_freshness": ["alert"],
        "alert": ["failover_wanted", "verdict"],
        "failover_wanted": ["trigger_failover"],
        "trigger_failover": [],
        "verdict": [],  # a leaf: Airflow decides a run's state from its leaves, so a STALE verdict makes it red
        "lag_alerts": [],  # the demo config sets mirrorflow.alerts.lag.max.seconds: on its own, never a failover
    }
    sensor = dag.get_task("watch_freshness")
    assert (sensor.deferrable, sensor.poke_interval, sensor.watch) == (True, 15, timedelta(seconds=50))
    assert sensor.trigger_rule == TriggerRule.ALL_DONE and dag.get_task("alert").trigger_rule == TriggerRule.ALL_DONE
    # failover_wanted needs the alert's output: only after a successful alert (auto-failover: once per outage)
    assert dag.get_task("failover_wanted").trigger_rule == TriggerRule.ALL_SUCCESS
    assert dag.get_task("verdict").trigger_rule == TriggerRule.ALL_SUCCESS
    trigger = dag.get_task("trigger_failover")
    assert trigger.trigger_dag_id == "failover__primary__backup"
    assert trigger.conf == {"mode": "disaster", "dry_run": False}
    assert trigger.skip_when_already_exists is True
    assert "mirrorflow_alert_state__primary__backup" in dag.doc_md
    assert "mirrorflow.heartbeats.grace" in dag.doc_md


def test_what_a_stale_verdict_and_a_watch_without_verdict_say() -> None:
    from mirrorflow_airflow.dags.heartbeats import stale_message
    from mirrorflow_airflow.triggers.heartbeat_freshness import last_measured, watch_failure

    result = {
        "verdict": "stale",
        "summary": "a->b: newest heartbeat 700 s old (STALE; threshold 600 s)",
        "since": "2026-11-23T02:00:00+00:00",
        "alerted_at": "2026-11-23T02:00:00+00:00",
        "last_sent_by": "scheduled__2026-11-23T01:59:00+00:00",
        "channels": ["log", "webhook"],
        "failed_channels": ["webhook: webhook answered HTTP 500 Internal Server Error"],
    }
    assert stale_message(result) == (
        "a->b: newest heartbeat 700 s old (STALE; threshold 600 s); STALE since 2026-11-23T02:00:00+00:00; alert "
        "sent at 2026-11-23T02:00:00+00:00 (run scheduled__2026-11-23T01:59:00+00:00) to log, webhook; NOT "
        "delivered by: webhook: webhook answered HTTP 500 Internal Server Error"
    )
    measured = {
        "flow": "a->b",
        "topic": "a.heartbeats",
        "newest_ms": 1_700_000_000_000 - 42_000,
        "age_s": 42.0,
        "threshold_s": 600.0,
        "checked_at_ms": 1_700_000_000_000,
    }
    assert last_measured(measured, now_ms=1_700_000_030_000) == (
        "last measured at 2023-11-14 22:13:20 UTC (30 s ago): a->b: newest heartbeat 42 s old (fresh; threshold 600 s)"
    )
    assert watch_failure("a->b", "the sensor timed out after 170 s", None) == (
        "freshness watch of a->b ended without a verdict: the sensor timed out after 170 s; nothing could be measured"
    )
    assert "last measured by this task, after the watch ended at" in watch_failure(
        "a->b", "t", measured, measured_now=True
    )
