"""Heartbeat alerting without Airflow: one alert per outage, one recovery, a new flow's grace, retries, the webhook."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from mirrorflow.alerts import AlertState, WebhookError, alert_payload, decide, evaluate, post_webhook
from mirrorflow.config import ConfigError, parse_config
from mirrorflow.redact import REDACTED, is_secret_key, redact_value
from mirrorflow_dev.loopback_http import serving

THRESHOLD = 5.0


def freshness(fresh: bool, at_ms: int, age: float | None = None) -> dict[str, Any]:
    age = (1.0 if fresh else 12.0) if age is None else age
    return {
        "flow": "primary->backup",
        "topic": "primary.heartbeats",
        "newest_ms": at_ms - int(age * 1000),
        "age_s": age,
        "threshold_s": THRESHOLD,
        "checked_at_ms": at_ms,
        "fresh": fresh,
    }


def run(sequence: list[bool]) -> list[str | None]:
    """Kinds produced by consecutive evaluations, the state carried (and JSON round-tripped) between them."""
    state: AlertState | None = None
    kinds: list[str | None] = []
    for i, fresh in enumerate(sequence):
        new, message, kind = decide(state, freshness(fresh, 1_000_000 + i * 60_000))
        assert (message is None) == (kind is None)
        kinds.append(kind)
        state = AlertState.from_dict(json.loads(json.dumps(new.to_dict())))  # as the Airflow Variable keeps it
    return kinds


def test_one_alert_per_outage_and_one_recovery() -> None:
    assert run([True, False, False, False, True, True, False]) == [
        None,
        "alert",
        None,
        None,
        "recovery",
        None,
        "alert",
    ]


def test_first_evaluations() -> None:
    assert run([True, True]) == [None, None]  # fresh from the start: nothing happened
    assert run([False, False, True]) == ["alert", None, "recovery"]  # stale from the start is an outage


def test_state_times_and_messages() -> None:
    state, message, kind = decide(None, freshness(False, 10_000, age=12))
    assert (state.state, state.since_ms, state.alerted_at_ms, kind) == ("stale", 10_000, 10_000, "alert")
    assert message == "primary->backup: replication is STALE: newest heartbeat 12 s old (threshold 5 s)"
    same, quiet, none = decide(state, freshness(False, 70_000))
    assert (same, quiet, none) == (state, None, None)  # since_ms stays the outage's start
    fresh, message, kind = decide(same, freshness(True, 130_000, age=1))
    assert (fresh.state, fresh.since_ms, fresh.alerted_at_ms, kind) == ("fresh", 130_000, None, "recovery")
    assert message == "primary->backup: replication recovered after 120 s; newest heartbeat 1 s old (threshold 5 s)"
    never = freshness(False, 5_000)
    never.update(age_s=None, newest_ms=None)
    assert "no heartbeat has crossed yet" in (decide(None, never)[1] or "")


def test_fresh_is_recomputed_when_missing_and_bad_state_is_ignored() -> None:
    data = freshness(False, 10_000)
    del data["fresh"]
    assert decide(None, data)[2] == "alert"
    assert AlertState.from_dict(None) is None
    assert AlertState.from_dict({"state": "weird", "since_ms": 1}) is None
    assert AlertState.from_dict({"state": "stale"}) is None
    assert AlertState.from_dict({"state": "stale", "since_ms": "5", "alerted_at_ms": None}) == AlertState("stale", 5)


def test_alert_payload() -> None:
    payload = alert_payload("primary->backup", freshness(False, 1_700_000_000_000, age=12), 42, kind="alert")
    assert payload == {
        "source": "mirrorflow",
        "kind": "alert",
        "reason": "heartbeat",
        "flow": "primary->backup",
        "fresh": False,
        "age_s": 12,
        "threshold_s": THRESHOLD,
        "newest_heartbeat_ms": 1_700_000_000_000 - 12_000,
        "topic": "primary.heartbeats",
        "lag": 42,
        "checked_at_ms": 1_700_000_000_000,
        "time": "2023-11-14T22:13:20+00:00",
        "message": "primary->backup: alert: newest heartbeat 12 s old (threshold 5 s)",
    }
    assert json.loads(json.dumps(payload)) == payload
    assert alert_payload("a->b", freshness(True, 1), kind="recovery", message="back")["message"] == "back"


class _Recorder(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, Any]]]
    status = 204

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.headers["Content-Type"], json.loads(body)))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[type[_Recorder]]:
    handler = type("Handler", (_Recorder,), {"received": [], "status": 204})
    with serving(handler) as base:
        handler.url = f"{base}/hooks/s3cr3t-token"  # type: ignore[attr-defined]
        yield handler


def test_post_webhook_sends_json(webhook: Any) -> None:
    assert post_webhook(webhook.url, {"kind": "alert", "age_s": 12.5}) == 204
    assert webhook.received == [("application/json", {"kind": "alert", "age_s": 12.5})]


def test_webhook_errors_never_show_the_url(webhook: Any) -> None:
    webhook.status = 500
    with pytest.raises(WebhookError, match="HTTP 500") as failed:
        post_webhook(webhook.url, {})
    assert "s3cr3t" not in str(failed.value) and failed.value.__cause__ is None
    with pytest.raises(WebhookError, match="not an http") as refused:
        post_webhook("file:///etc/s3cr3t", {})
    assert "s3cr3t" not in str(refused.value)
    with pytest.raises(WebhookError, match="not reachable") as unreachable:
        post_webhook("http://127.0.0.1:1/hooks/s3cr3t-token", {}, timeout=2)  # port 1: nobody listens
    assert "s3cr3t" not in str(unreachable.value)


def test_the_webhook_url_is_a_secret() -> None:
    assert is_secret_key("mirrorflow.alerts.webhook.url")
    assert is_secret_key("primary->backup.mirrorflow.alerts.webhook.url")
    assert redact_value("mirrorflow.alerts.webhook.url", "https://hooks.example.com/T0/B0/xyz") == REDACTED
    assert not is_secret_key("mirrorflow.alerts.notifiers") and not is_secret_key("mirrorflow.heartbeats.policy")


BASE = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"


def test_alerting_keys_defaults_and_validation() -> None:
    flow = parse_config(BASE).flow("a", "b")
    assert flow.get_seconds("mirrorflow.heartbeats.poll.interval") == 15
    assert flow.get("mirrorflow.heartbeats.policy") == "alert"
    assert flow.get("mirrorflow.alerts.webhook.url") == ""
    assert flow.get_names("mirrorflow.alerts.notifiers") == []

    flow = parse_config(
        BASE + "mirrorflow.heartbeats.poll.interval = 1s\na->b.mirrorflow.heartbeats.policy = auto-failover\n"
        "mirrorflow.alerts.notifiers = pkg.alerts.Pager, pkg.hooks.call\n"
        "mirrorflow.alerts.webhook.url = https://hooks.example.com/services/T0/B0/xyz\n"
    ).flow("a", "b")
    assert flow.get_seconds("mirrorflow.heartbeats.poll.interval") == 1
    assert flow.get("mirrorflow.heartbeats.policy") == "auto-failover"
    assert flow.get_names("mirrorflow.alerts.notifiers") == ["pkg.alerts.Pager", "pkg.hooks.call"]

    with pytest.raises(ConfigError) as bad:
        parse_config(
            BASE + "mirrorflow.heartbeats.policy = failover\nmirrorflow.alerts.notifiers = pkg.Pager, not a path\n"
            "mirrorflow.heartbeats.poll.interval = 10\n"
        )
    text = str(bad.value)
    assert "'failover' is not one of alert, auto-failover" in text
    assert "'not a path' is not a dotted Python path" in text
    assert "'10' is not a duration" in text


# -- a new flow's grace period ------------------------------------------------------------------------------------


def waiting(at_ms: int, first_ms: int, grace: float = 60.0) -> dict[str, Any]:
    """Nothing crossed yet; the flow's first heartbeat at ``first_ms``, as the sensor reports it."""
    data = freshness(False, at_ms)
    data.update(newest_ms=None, age_s=None, first_ms=first_ms, grace_s=grace)
    data["waiting"] = (at_ms - first_ms) / 1000 <= grace
    return data


def test_a_new_flow_waits_within_its_grace_period_then_alerts() -> None:
    state, message, kind = decide(None, waiting(10_000, first_ms=0))
    assert (state.state, message, kind) == ("waiting", None, None)
    same, message, kind = decide(state, waiting(50_000, first_ms=0))
    assert (same, message, kind) == (state, None, None)  # still waiting: since_ms is the first evaluation's
    stale, message, kind = decide(same, waiting(70_000, first_ms=0))  # 70 s after the first heartbeat: over
    assert (stale.state, kind) == ("stale", "alert")
    assert message == (
        "primary->backup: replication is STALE: no heartbeat has crossed yet, 70 s after the flow's first "
        "heartbeat (grace 60 s)"
    )
    # the first heartbeat that crosses after waiting is not a recovery: nothing was alerted
    fresh, message, kind = decide(state, freshness(True, 40_000))
    assert (fresh.state, message, kind) == ("fresh", None, None)


def test_only_a_flow_that_never_crossed_waits() -> None:
    fresh = decide(None, freshness(True, 1_000))[0]
    # a fresh flow whose replicated heartbeats vanished is stale, not waiting (nor is an ongoing outage)
    state, _, kind = decide(fresh, waiting(2_000, first_ms=0))
    assert (state.state, kind) == ("stale", "alert")
    assert decide(state, waiting(3_000, first_ms=0))[1:] == (None, None)


def test_freshness_verdicts() -> None:
    from mirrorflow.heartbeats import Freshness

    def at(newest: int | None, first: int | None, now: int = 100_000) -> Freshness:
        age = None if newest is None else (now - newest) / 1000
        return Freshness("a->b", "a.heartbeats", newest, age, 10.0, now, first, 30.0 if newest is None else None)

    assert at(95_000, None).verdict == "fresh"
    assert at(80_000, None).verdict == "stale"
    assert at(None, 80_000).verdict == "waiting" and "WAITING" in at(None, 80_000).describe()
    assert (
        at(None, 60_000).verdict == "stale" and "40 s after the flow's first heartbeat" in at(None, 60_000).describe()
    )
    assert at(None, None).verdict == "stale" and "none of the flow's own" in at(None, None).describe()


def test_the_grace_key_defaults_to_the_max_age() -> None:
    from mirrorflow.heartbeats import grace_seconds

    assert grace_seconds(parse_config(BASE + "mirrorflow.heartbeats.max.age = 2m\n").flow("a", "b")) == 120
    assert grace_seconds(parse_config(BASE + "a->b.mirrorflow.heartbeats.grace = 1h\n").flow("a", "b")) == 3600
    with pytest.raises(ConfigError, match="not a duration"):
        parse_config(BASE + "mirrorflow.heartbeats.grace = soon\n")


# -- a retried evaluation ------------------------------------------------------------------------------------------


def test_a_retry_reports_what_its_earlier_try_sent_without_sending_it_again() -> None:
    first = evaluate(None, freshness(False, 10_000), by="run-1")
    assert (first.kind, first.replayed) == ("alert", False)
    # the try sends it, records it, then fails; the state went through the Variable (JSON)
    recorded = first.state.sent(first.kind, first.message or "", by="run-1", at_ms=10_500, failed=["webhook: HTTP 500"])
    stored = AlertState.from_dict(json.loads(json.dumps(recorded.to_dict())))
    assert stored == recorded
    retry = evaluate(stored, freshness(False, 10_000), by="run-1")
    assert (retry.kind, retry.message, retry.replayed, retry.state) == ("alert", first.message, True, stored)
    assert retry.state.sent_failed == ("webhook: HTTP 500",)
    # the next run, same outage: quiet; the record of what was sent stays
    later = evaluate(stored, freshness(False, 70_000), by="run-2")
    assert (later.kind, later.replayed, later.state.sent_by) == (None, False, "run-1")
    # a recovery keeps the record until it is sent itself
    back = evaluate(stored, freshness(True, 130_000), by="run-3")
    assert (back.kind, back.state.sent_kind, back.state.since_ms) == ("recovery", "alert", 130_000)
