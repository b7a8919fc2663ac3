"""Delivering a heartbeat alert or recovery from Airflow, and remembering what was delivered.

The decision (alert once per outage, recover once) is the library's (``include/mirrorflow/alerts.py``);
this module adds what needs Airflow: the per-flow state in an Airflow Variable (so it survives between
DAG runs and workers), Airflow's secrets masker for the webhook URL, and Airflow notifiers
(``BaseNotifier`` subclasses: Slack, SMTP, PagerDuty... from the providers) named in
``mirrorflow.alerts.notifiers``.

Delivery never raises: every channel is tried, and the failed ones are returned (and logged), because a
broken webhook must not stop the notifiers after it, nor an automatic failover after the alert.

Each notification is recorded in the Variable right after it went out, with the DAG run that sent it, so
a retried ``alert`` task reports the same notification again instead of sending it twice or losing it
(:func:`mirrorflow.alerts.evaluate`).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseNotifier, Variable
from airflow.sdk.log import mask_secret

from mirrorflow.alerts import (
    WEBHOOK_KEY,
    AlertState,
    Kind,
    WebhookError,
    alert_payload,
    evaluate,
    post_webhook,
)
from mirrorflow.config import FlowConfig
from mirrorflow.lag_alerts import LagDecision, decide, lag_payload, states_from_dict, states_to_dict, thresholds

if TYPE_CHECKING:  # status imports the Kafka client: not at DAG parse time
    from mirrorflow.status import FlowStatus

log = logging.getLogger(__name__)

NOTIFIERS_KEY = "mirrorflow.alerts.notifiers"
WEBHOOK_TIMEOUT_S = 10.0


def alert_state_key(source: str, target: str) -> str:
    """``mirrorflow_alert_state__<src>__<tgt>``: one Variable per flow, named like the flow's DAGs."""
    return f"mirrorflow_alert_state__{source}__{target}"


def load_state(source: str, target: str) -> AlertState | None:
    """The previous evaluation's state; None before the first one."""
    return AlertState.from_dict(Variable.get(alert_state_key(source, target), default=None, deserialize_json=True))


def save_state(source: str, target: str, state: AlertState) -> None:
    Variable.set(
        alert_state_key(source, target),
        state.to_dict(),
        description=f"mirrorflow: heartbeat alert state of {source}->{target} (written by heartbeats DAG)",
        serialize_json=True,
    )


def load_object(path: str) -> Any:
    """``package.module.Name`` -> the object (a class, an instance or a function)."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        raise ImportError(f"'{path}' is not a dotted path such as my_package.alerts.PagerNotifier")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module '{module_name}' has no '{attribute}'") from None


def _message_argument(cls: type) -> str | None:
    """The keyword the notifier takes its text by (``message`` or ``text``), if any."""
    try:
        parameters = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in ("message", "text") if name in parameters), None)


def call_notifier(path: str, message: str, payload: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    """Run one configured notifier; returns what it was (for the log). Raises whatever the notifier raises.

    - a ``BaseNotifier`` subclass: instantiated with ``message=``/``text=`` when its ``__init__`` takes one
      (else without arguments) and called with the task context, which renders its template fields and then
      calls its ``notify(context)``;
    - a ``BaseNotifier`` instance: called with the context;
    - any other callable: called with a copy of the payload dict (what the webhook receives).
    """
    target = load_object(path)
    # a copy: BaseNotifier merges its template fields into the context it is given
    ctx: dict[str, Any] = dict(context)
    if isinstance(target, type) and issubclass(target, BaseNotifier):
        keyword = _message_argument(target)
        notifier = target(**{keyword: message}) if keyword else target()
        notifier(ctx)
        return f"notifier {target.__name__}"
    if isinstance(target, BaseNotifier):
        target(ctx)
        return f"notifier {type(target).__name__}"
    if callable(target):
        function: Callable[[dict[str, Any]], Any] = target
        function(dict(payload))
        return f"callable {path}"
    raise TypeError(f"'{path}' is neither a BaseNotifier nor a callable")


def channels(flow: FlowConfig, *, webhook: bool = True) -> list[str]:
    """Where a notification goes: the task log always, then the webhook and the notifiers that are configured."""
    found = ["log"]
    if webhook and flow.get(WEBHOOK_KEY).strip():
        found.append("webhook")
    return found + flow.get_names(NOTIFIERS_KEY)


def _clock(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def evaluate_and_notify(
    flow: FlowConfig, freshness: Mapping[str, Any], context: Mapping[str, Any], *, run_id: str
) -> dict[str, Any]:
    """The ``alert`` task: decide, deliver what is new (once per DAG run), record it; a flat, JSON-ready result.

    The state is saved right after delivery, before anything else can fail, with ``run_id`` as the sender:
    a retry of the task then finds its own notification in the state and reports it (``replayed``) without
    sending it again. The only window left is a crash between the POST and the save (a duplicate then,
    never a lost alert).
    """
    previous = load_state(flow.source, flow.target)
    decision = evaluate(previous, freshness, by=run_id)
    state = decision.state
    if decision.replayed:
        log.warning(
            "%s: this %s was sent at %s by an earlier try of this run (%s): reported again, not sent again",
            flow.name,
            decision.kind,
            _clock(state.sent_at_ms),
            run_id,
        )
    elif decision.kind is not None and decision.message is not None:
        payload = alert_payload(flow.name, freshness, kind=decision.kind, message=decision.message)
        failed = notify(flow, decision.kind, payload, context)
        state = state.sent(decision.kind, decision.message, by=run_id, at_ms=int(time.time() * 1000), failed=failed)
        save_state(flow.source, flow.target, state)
    elif state != previous:
        save_state(flow.source, flow.target, state)
    log.info("%s: %s (%s)", flow.name, state.state, decision.kind or "nothing new to report")
    sent_now = decision.kind is not None
    return {
        "verdict": state.state,
        "kind": decision.kind,
        "message": decision.message,
        "replayed": decision.replayed,
        "since_ms": state.since_ms,
        "since": _clock(state.since_ms),
        "alerted_at": _clock(state.alerted_at_ms),
        "channels": channels(flow),
        "failed_channels": list(state.sent_failed) if sent_now else [],
        # the last notification of the flow (this run's, or an earlier run's during the same outage)
        "last_sent_kind": state.sent_kind,
        "last_sent_at": _clock(state.sent_at_ms),
        "last_sent_by": state.sent_by,
    }


def notify(
    flow: FlowConfig, kind: Kind, payload: Mapping[str, Any], context: Mapping[str, Any], *, webhook: bool = True
) -> list[str]:
    """Deliver an alert or recovery on every configured channel; returns the channels that failed.

    Always one log line (WARNING for an alert, a loss or a reset), then the webhook if
    ``mirrorflow.alerts.webhook.url`` is set and ``webhook`` (a replication run POSTs its own loss and reset
    events; the URL is registered with the secrets masker first and never logged), then each notifier of
    ``mirrorflow.alerts.notifiers`` in order.
    """
    message = str(payload.get("message") or f"{flow.name}: {kind}")
    loud = kind in ("alert", "data-loss", "reset")
    (log.warning if loud else log.info)("mirrorflow %s: %s", kind, message)
    failed: list[str] = []
    url = flow.get(WEBHOOK_KEY).strip() if webhook else ""
    if url:
        mask_secret(url)
        try:
            status = post_webhook(url, payload, timeout=WEBHOOK_TIMEOUT_S)
            log.info("%s of %s POSTed to the webhook (HTTP %s)", kind, flow.name, status)
        except WebhookError as exc:
            log.error("%s of %s not delivered to the webhook: %s", kind, flow.name, exc)
            failed.append(f"webhook: {exc}")
    for path in flow.get_names(NOTIFIERS_KEY):
        try:
            what = call_notifier(path, message, payload, context)
            log.info("%s of %s sent by %s", kind, flow.name, what)
        except Exception as exc:
            log.exception("%s of %s not delivered by %s", kind, flow.name, path)
            failed.append(f"{path}: {type(exc).__name__}: {exc}")
    return failed


# ------------------------------------------------------------------------------------------- lag alerts


def lag_state_key(source: str, target: str) -> str:
    """``mirrorflow_lag_alert_state__<src>__<tgt>``: the lag alert state of every family of the flow, apart from
    the heartbeat alert state (a lag breach and a heartbeat outage are separate incidents)."""
    return f"mirrorflow_lag_alert_state__{source}__{target}"


def load_lag_states(source: str, target: str) -> dict[str, AlertState]:
    """Per family, the previous evaluation's state (families never evaluated are absent)."""
    return states_from_dict(Variable.get(lag_state_key(source, target), default=None, deserialize_json=True))


def save_lag_states(source: str, target: str, states: Mapping[str, AlertState]) -> None:
    Variable.set(
        lag_state_key(source, target),
        states_to_dict(states),
        description=f"mirrorflow: lag alert state of {source}->{target} per family (written by heartbeats DAG)",
        serialize_json=True,
    )


def _unmeasured(item: LagDecision) -> str | None:
    """Why a family has no lag verdict (None: it has one)."""
    lag = item.lag
    return lag.error or (f"{lag.unmeasured} partition(s) in error" if lag.unmeasured else None)


def _lag_row(item: LagDecision, failed: list[str]) -> dict[str, Any]:
    """What the task returns for one family: flat and JSON-ready, like the heartbeat ``alert`` task's result."""
    lag, decision = item.lag, item.decision
    worst = lag.over[0] if lag.over else lag.worst
    state = decision.state if decision is not None else item.previous
    return {
        "family": lag.family,
        "verdict": item.verdict,
        "threshold_s": lag.threshold_s,
        "worst": None if worst is None else f"{worst.topic}[{worst.partition}]",
        "lag_seconds": None if worst is None else worst.lag_seconds,
        "lag_records": None if worst is None else worst.lag_records,
        "partitions_over": len(lag.over),
        "unmeasured": _unmeasured(item),
        "kind": None if decision is None else decision.kind,
        "message": None if decision is None else decision.message,
        "replayed": bool(decision and decision.replayed),
        "failed_channels": failed,
        "since": _clock(state.since_ms) if state is not None else None,
        "last_sent_kind": None if state is None else state.sent_kind,
        "last_sent_at": None if state is None else _clock(state.sent_at_ms),
        "last_sent_by": None if state is None else state.sent_by,
    }


def evaluate_lag_and_notify(
    flow: FlowConfig, status: FlowStatus, context: Mapping[str, Any], *, run_id: str
) -> dict[str, Any]:
    """The ``lag_alerts`` task: per family, decide, deliver what is new (once per DAG run), record it.

    As :func:`evaluate_and_notify` for heartbeats: the states are saved right after each notification, with
    ``run_id`` as the sender, so a retried task reports that notification (``replayed``) instead of sending it
    again. Families whose threshold was removed are dropped from the state (no recovery is sent for them: the
    threshold that was breached no longer exists). Never triggers a failover: lag is not an outage.
    """
    limits = thresholds(flow)
    previous = load_lag_states(flow.source, flow.target)
    states = {family: state for family, state in previous.items() if family in limits}
    dirty = states != previous
    rows: list[dict[str, Any]] = []
    for item in decide(status, limits, previous, by=run_id):
        decision, failed = item.decision, []
        if decision is None:
            log.warning("%s family %s: lag not measured: %s", flow.name, item.lag.family, _unmeasured(item))
        elif decision.replayed:
            log.warning(
                "%s family %s: this lag %s was sent by an earlier try of this run (%s): reported again, not sent again",
                flow.name,
                item.lag.family,
                decision.kind,
                run_id,
            )
        elif decision.kind is not None and decision.message is not None:
            payload = lag_payload(
                flow.name, item.lag, kind=decision.kind, message=decision.message, checked_at_ms=status.checked_at_ms
            )
            failed = notify(flow, decision.kind, payload, context)
            sent = decision.state.sent(
                decision.kind, decision.message, by=run_id, at_ms=int(time.time() * 1000), failed=failed
            )
            states[item.lag.family] = sent
            save_lag_states(flow.source, flow.target, states)
            item = LagDecision(item.lag, replace(decision, state=sent), item.previous)
        elif decision.state != item.previous:
            states[item.lag.family] = decision.state
            dirty = True
        rows.append(_lag_row(item, failed))
    if dirty:
        save_lag_states(flow.source, flow.target, states)
    return {
        "families": rows,
        "over": [r["family"] for r in rows if r["verdict"] == "over"],
        "sent": [r["kind"] for r in rows if r["kind"] is not None and not r["replayed"]],
        "measured": any(r["verdict"] != "unmeasured" for r in rows),
        "errors": list(status.errors),
        "status_seconds": round(status.seconds, 3),
        "channels": channels(flow),
    }


__all__ = [
    "alert_state_key",
    "call_notifier",
    "channels",
    "evaluate_and_notify",
    "evaluate_lag_and_notify",
    "lag_state_key",
    "load_lag_states",
    "load_object",
    "load_state",
    "notify",
    "save_lag_states",
    "save_state",
]


class ReplicationAlertNotifier(BaseNotifier):
    """Sends a message on a flow's alert channels (its webhook and notifiers), as mirrorflow's own alerts go.

    For the operator's own DAGs, so that what concerns replication reaches the same place:
    ``on_failure_callback=ReplicationAlertNotifier(flow="east->west")``. ``message`` is a Jinja template rendered
    with the task context. Like every delivery here, it never raises: a failed channel is logged.
    """

    template_fields = ("message",)

    def __init__(
        self, *, flow: str, message: str = "{{ ti.task_id }} of {{ dag.dag_id }} failed", config: str | None = None
    ) -> None:
        super().__init__()
        self.flow, self.message, self.config = flow, message, config

    def notify(self, context: Mapping[str, Any]) -> None:
        from mirrorflow_airflow.hooks.config import MirrorflowHook

        flow = MirrorflowHook(self.config).flow(self.flow)
        ti = context.get("ti")
        payload = {
            "kind": "alert",
            "flow": flow.name,
            "message": str(self.message),
            "dag_id": getattr(ti, "dag_id", None),
            "task_id": getattr(ti, "task_id", None),
            "run_id": getattr(ti, "run_id", None),
        }
        notify(flow, "alert", payload, context)
