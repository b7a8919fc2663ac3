"""Stale-heartbeat alerting: one alert per outage, one recovery when it ends, and a JSON webhook.

Why a state machine: the heartbeats DAG evaluates freshness every minute, and an outage lasts many
minutes. Paging someone at every evaluation teaches them to mute the channel, so the decision is made
against the previous evaluation's :class:`AlertState` (kept by the caller; the Airflow adapter keeps it in
an Airflow Variable): the transition fresh -> stale alerts, stale -> fresh announces the recovery, and
everything else stays quiet. A new flow whose first heartbeat has not crossed yet is ``waiting`` (quiet)
during its grace period. The state also records what was sent and by which evaluation (DAG run), so a
retried evaluation reports that notification again instead of sending it twice or losing it.

No Airflow here: the webhook is a plain standard-library POST, so the library stays usable (and testable)
without a scheduler.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

WEBHOOK_KEY = "mirrorflow.alerts.webhook.url"

Kind = Literal["alert", "recovery", "failover", "failback", "data-loss", "reset"]
#: ``waiting``: a new flow whose first heartbeat has not crossed yet, within its grace period.
State = Literal["fresh", "stale", "waiting"]
_STATES = ("fresh", "stale", "waiting")
_SENT_KINDS = ("alert", "recovery")


@dataclass(frozen=True)
class AlertState:
    """What the previous evaluation concluded, so the next one knows whether anything changed.

    ``since_ms``: when the flow entered ``state`` (the check that saw the transition); ``alerted_at_ms``:
    when the alert of the current outage was sent (None while fresh). The ``sent_*`` fields describe the
    last alert or recovery sent and who sent it (``sent_by``: the DAG run), so that a retry of the same
    evaluation returns that notification instead of sending it again or losing it (see :func:`evaluate`).
    """

    state: State
    since_ms: int
    alerted_at_ms: int | None = None
    sent_kind: Kind | None = None
    sent_message: str | None = None
    sent_by: str | None = None
    sent_at_ms: int | None = None
    sent_failed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sent_failed"] = list(self.sent_failed)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> AlertState | None:
        """The stored state, or None when there is none (or it is unreadable: then the flow starts afresh)."""
        if not data or data.get("state") not in _STATES:
            return None
        try:
            kind = data.get("sent_kind")
            return cls(
                data["state"],
                int(data["since_ms"]),
                _int_or_none(data.get("alerted_at_ms")),
                kind if kind in _SENT_KINDS else None,
                None if data.get("sent_message") is None else str(data["sent_message"]),
                None if data.get("sent_by") is None else str(data["sent_by"]),
                _int_or_none(data.get("sent_at_ms")),
                tuple(str(f) for f in data.get("sent_failed") or ()),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def sent(self, kind: Kind, message: str, *, by: str, at_ms: int, failed: list[str] | None = None) -> AlertState:
        """This state, remembering that ``by`` sent ``kind`` (``failed``: the channels that did not take it)."""
        return replace(
            self, sent_kind=kind, sent_message=message, sent_by=by, sent_at_ms=at_ms, sent_failed=tuple(failed or ())
        )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Decision:
    """One evaluation's outcome: the state to keep, and the notification to deliver (``kind`` None: none).

    ``replayed``: ``kind`` and ``message`` were already sent by an earlier try of the same evaluation (the
    state says so): report them, do not send them again.
    """

    state: AlertState
    kind: Kind | None
    message: str | None
    replayed: bool = False

    @property
    def verdict(self) -> State:
        return self.state.state


def _is_fresh(freshness: Mapping[str, Any]) -> bool:
    """``fresh`` as the sensor reported it; recomputed from age and threshold when a caller left it out."""
    if "fresh" in freshness:
        return bool(freshness["fresh"])
    age = freshness.get("age_s")
    return age is not None and float(age) <= float(freshness["threshold_s"])


def verdict_of(freshness: Mapping[str, Any]) -> State:
    """``fresh``, ``waiting`` (nothing crossed yet, within the grace period) or ``stale``, as the sensor saw it."""
    if _is_fresh(freshness):
        return "fresh"
    return "waiting" if freshness.get("waiting") else "stale"


def _age_text(freshness: Mapping[str, Any]) -> str:
    age = freshness.get("age_s")
    threshold = float(freshness["threshold_s"])
    if age is None:
        first, checked = freshness.get("first_ms"), freshness.get("checked_at_ms")
        if first is None or checked is None:
            return f"no heartbeat has crossed yet (threshold {threshold:.0f} s)"
        since = max(0, int(checked) - int(first)) / 1000
        grace = freshness.get("grace_s")
        grace_s = threshold if grace is None else float(grace)
        return f"no heartbeat has crossed yet, {since:.0f} s after the flow's first heartbeat (grace {grace_s:.0f} s)"
    return f"newest heartbeat {float(age):.0f} s old (threshold {threshold:.0f} s)"


def _enter(previous: AlertState | None, state: State, now_ms: int, alerted_at_ms: int | None = None) -> AlertState:
    """A new state from ``now_ms``, keeping the record of the last notification sent."""
    if previous is None:
        return AlertState(state, now_ms, alerted_at_ms)
    return replace(previous, state=state, since_ms=now_ms, alerted_at_ms=alerted_at_ms)


def decide(previous: AlertState | None, freshness: Mapping[str, Any]) -> tuple[AlertState, str | None, Kind | None]:
    """The new state, the message to send (None: stay quiet) and its kind.

    ``freshness`` is the sensor's output (``heartbeats.Freshness`` as a dict: ``fresh``, ``waiting``,
    ``age_s``, ``threshold_s``, ``flow``, ``checked_at_ms``). Exactly one ``alert`` per outage and exactly one
    ``recovery`` after it; a first evaluation that finds the flow fresh says nothing (there was no outage),
    nor does a new flow within its grace period (``waiting``), nor its first fresh verdict after waiting.
    Only a flow that never was fresh or stale waits: once heartbeats crossed, none crossing is an outage.
    """
    now_ms = int(freshness.get("checked_at_ms") or time.time() * 1000)
    flow = freshness.get("flow", "?")
    seen = verdict_of(freshness)
    if seen == "waiting":
        if previous is None or previous.state == "waiting":
            return (previous or AlertState("waiting", now_ms)), None, None
        seen = "stale"
    if seen == "fresh":
        if previous is not None and previous.state == "fresh":
            return previous, None, None
        if previous is None or previous.state == "waiting":
            return _enter(previous, "fresh", now_ms), None, None
        outage_s = max(0, now_ms - previous.since_ms) / 1000
        message = f"{flow}: replication recovered after {outage_s:.0f} s; {_age_text(freshness)}"
        return _enter(previous, "fresh", now_ms), message, "recovery"
    if previous is not None and previous.state == "stale":
        return previous, None, None  # still the same outage: it was alerted already
    message = f"{flow}: replication is STALE: {_age_text(freshness)}"
    return _enter(previous, "stale", now_ms, now_ms), message, "alert"


def evaluate(previous: AlertState | None, freshness: Mapping[str, Any], *, by: str) -> Decision:
    """:func:`decide`, made safe to retry: what ``by`` (a DAG run) already sent is returned, not sent again.

    A try that sent an alert and recorded it, then failed (the worker lost, the API call after it timed out),
    is retried with the same freshness verdict: :func:`decide` now sees the recorded state and would stay
    quiet, so the retry's output would lose the alert. The recorded ``sent_by`` tells the retry that this
    evaluation's notification went out already: it reports it again, ``replayed``, without sending it.
    """
    state, message, kind = decide(previous, freshness)
    if kind is None and previous is not None and previous.sent_by == by and previous.sent_kind is not None:
        return Decision(previous, previous.sent_kind, previous.sent_message, replayed=True)
    return Decision(state, kind, message)


def alert_payload(
    flow: str,
    freshness: Mapping[str, Any],
    lag: int | None = None,
    *,
    kind: Kind,
    message: str | None = None,
) -> dict[str, Any]:
    """The JSON document a webhook (or a plain-callable notifier) receives: flat, self-explanatory keys."""
    checked_at_ms = int(freshness.get("checked_at_ms") or time.time() * 1000)
    return {
        "source": "mirrorflow",
        "kind": kind,
        "reason": "heartbeat",  # a lag alert says "lag" (lag_alerts.py): same keys, another cause
        "flow": flow,
        "fresh": _is_fresh(freshness),
        "age_s": freshness.get("age_s"),
        "threshold_s": freshness.get("threshold_s"),
        "newest_heartbeat_ms": freshness.get("newest_ms"),
        "topic": freshness.get("topic"),
        "lag": lag,
        "checked_at_ms": checked_at_ms,
        "time": datetime.fromtimestamp(checked_at_ms / 1000, UTC).isoformat(),
        "message": message or f"{flow}: {kind}: {_age_text(freshness)}",
    }


def run_event_payloads(report: Mapping[str, Any]) -> list[tuple[Kind, dict[str, Any]]]:
    """One alert per loss or reset event of a replication run report (``RunReport.to_dict()``).

    Unlike stale heartbeats these are facts, not states: each event is sent once, by the run that found it
    (a reset is repaired by that run; a loss event describes records that are gone for good).
    """
    now_ms = int(time.time() * 1000)
    flow, family = report.get("flow", "?"), report.get("family")
    where = f"{flow} family {family}" if family else str(flow)
    payloads: list[tuple[Kind, dict[str, Any]]] = []
    for kind, key in (("data-loss", "loss_events"), ("reset", "reset_events")):
        for event in report.get(key) or []:
            if kind == "data-loss":
                count = int(event["last_missing"]) - int(event["first_missing"]) + 1
                text = (
                    f"{where}: DATA LOSS on {event['topic']}[{event['partition']}]: offsets "
                    f"{event['first_missing']}..{event['last_missing']} ({count} records) were deleted on the "
                    f"source before they were copied; {event['action']}"
                )
            else:
                text = (
                    f"{where}: RESET of {event['topic']}[{event['partition']}] ({event['side']}): {event['reason']}; "
                    f"stored progress {event['stored_progress']}; {event['action']}"
                )
            payloads.append(
                (
                    kind,  # type: ignore[arg-type]
                    {
                        "source": "mirrorflow",
                        "kind": kind,
                        "flow": flow,
                        "family": family,
                        "event": dict(event),
                        "checked_at_ms": now_ms,
                        "time": datetime.fromtimestamp(now_ms / 1000, UTC).isoformat(),
                        "message": text,
                    },
                )
            )
    return payloads


def send_run_events(webhook_url: str, report: Mapping[str, Any], log: Any) -> list[str]:
    """POST every loss and reset event of a run report to the webhook (the run already logged them).

    The run sends them itself, so the CLI, the Spark app and the mirror DAG alert alike; returns what
    failed to be delivered (the URL never appears: it is a secret).
    """
    failed: list[str] = []
    if not webhook_url.strip():
        return failed
    for kind, payload in run_event_payloads(report):
        try:
            status = post_webhook(webhook_url.strip(), payload)
            log.info("%s alert POSTed to the webhook (HTTP %s)", kind, status)
        except WebhookError as exc:
            log.error("%s alert not delivered to the webhook: %s", kind, exc)
            failed.append(f"webhook: {exc}")
    return failed


class WebhookError(RuntimeError):
    """A webhook POST failed. The message never contains the URL (it is a secret)."""


def post_webhook(url: str, payload: Mapping[str, Any], timeout: float = 10.0) -> int:
    """POST ``payload`` as JSON to ``url``; the HTTP status, or :class:`WebhookError` (without the URL).

    Only http(s): a configuration typo must not make mirrorflow open a ``file:`` URL. Chained exceptions
    are dropped (``from None``) because urllib's can carry the URL into a traceback.
    """
    if urlsplit(url).scheme not in ("http", "https"):
        raise WebhookError("webhook URL is not an http(s) URL (value not shown: it is a secret)")
    body = json.dumps(payload, sort_keys=True).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "mirrorflow-alerts"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # the scheme is checked above
            return int(response.status)
    except urllib.error.HTTPError as exc:
        raise WebhookError(f"webhook answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise WebhookError(f"webhook not reachable: {type(exc.reason).__name__}: {exc.reason}") from None
    except (TimeoutError, OSError) as exc:
        raise WebhookError(f"webhook POST failed: {type(exc).__name__}: {exc}") from None


__all__ = [
    "AlertState",
    "Decision",
    "Kind",
    "State",
    "WebhookError",
    "alert_payload",
    "decide",
    "evaluate",
    "post_webhook",
    "run_event_payloads",
    "send_run_events",
    "verdict_of",
]
