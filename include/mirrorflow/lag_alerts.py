"""Lag alerts: one alert when a family's copy falls further behind than its threshold, one recovery after.

``mirrorflow.alerts.lag.max.seconds`` (per flow; ``mirrorflow.family.<name>.alerts.lag.max.seconds`` per
family, which wins) is compared with the ``lag_seconds`` of :func:`mirrorflow.status.flow_status`:
the age of the oldest source record not copied yet. Heartbeats say whether replication runs at all; this
says whether it keeps up, which a family whose mirror DAG runs but cannot catch up never shows otherwise.

Why a breach is a *family* going over, not a partition: a family is what one mirror DAG copies, so when it
falls behind (a slow or stuck run, a burst of traffic) all its busy partitions go over together. An alert per
partition would page once per partition (hundreds for a big topic) for one cause, and again each time one of
them crosses back and forth. So there is one alert per family when its first partition goes over, naming
the worst partitions (topic, partition, lag in seconds and records) and how many are over, and one recovery
when every partition of the family is back under the threshold.

The decision is the heartbeat alerts' state machine (:func:`mirrorflow.alerts.evaluate`, state
``stale`` = over the threshold, ``fresh`` = under), per family: once-only alerts and recoveries, and a
retried evaluation (same DAG run) reports what it already sent instead of sending it twice. Only the texts
and the payload are lag's own; the payload has the heartbeat alerts' flat keys plus ``reason: "lag"``.

No Airflow and no Kafka client here (the heartbeats DAG file imports this at parse time): the caller
measures the status and keeps the state (the Airflow adapter keeps it in a Variable of its own).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .alerts import AlertState, Decision, Kind, evaluate
from .config.keys import ALERTS_LAG_MAX_SECONDS, FAMILY_LAG_ATTRIBUTE, FAMILY_PREFIX
from .config.model import FlowConfig

if TYPE_CHECKING:  # status imports the Kafka client: not at DAG parse time
    from .status import FlowStatus, PartitionStatus

#: ``status.ERROR`` (not imported: see above); a partition in error is not measured.
ERROR = "error"
#: The payload's ``reason``: what tells a lag alert from a heartbeat alert (``reason: "heartbeat"``).
REASON = "lag"
#: Partitions named in an alert's text; the payload lists up to :data:`LISTED`.
NAMED = 3
LISTED = 20


def family_key(family: str) -> str:
    """``mirrorflow.family.<family>.alerts.lag.max.seconds``: the family's own threshold."""
    return f"{FAMILY_PREFIX}{family}.{FAMILY_LAG_ATTRIBUTE}"


def _seconds(value: str | None) -> int | None:
    """A threshold as configured: unset, empty or 0 mean off (None). The config check made it an integer."""
    if value is None or not value.strip():
        return None
    return int(value.strip()) or None


def thresholds(flow: FlowConfig) -> dict[str, int]:
    """Per family of ``flow``: its threshold in seconds; families without one (off) are left out.

    The family's own setting wins over the flow's, even to turn it off (``0``): one noisy family (a bulk
    backfill) can opt out of a flow-wide threshold, or one critical family can have a tighter one.
    """
    flow_value = _seconds(flow.get(ALERTS_LAG_MAX_SECONDS))
    result: dict[str, int] = {}
    for fam in flow.families:
        own = flow.settings.get(family_key(fam.name))
        value = flow_value if own is None else _seconds(own.value)
        if value:
            result[fam.name] = value
    return result


@dataclass(frozen=True)
class FamilyLag:
    """One family's lag against its threshold, as measured by one status.

    ``over``: the partitions over the threshold, worst first; ``worst``: the family's worst measured
    partition, over or not (what a recovery reports); ``unmeasured``: partitions in error. A family with no
    partition over and some unmeasured has no verdict: calling it recovered could be wrong.
    """

    family: str
    threshold_s: int
    partitions: int
    over: tuple[PartitionStatus, ...]
    worst: PartitionStatus | None
    unmeasured: int
    error: str | None = None

    @property
    def in_breach(self) -> bool:
        return bool(self.over)

    @property
    def measured(self) -> bool:
        return self.in_breach or (self.error is None and self.unmeasured == 0)


def _worst_first(partitions: Sequence[PartitionStatus]) -> list[PartitionStatus]:
    return sorted(partitions, key=lambda p: (-p.lag_seconds, -p.lag_records, p.topic, p.partition))


def measure(status: FlowStatus, limits: Mapping[str, int]) -> list[FamilyLag]:
    """Each family of ``limits`` in ``status``, in configuration order (a family the status lacks: unmeasured).

    Over means strictly more seconds than the threshold (``lag_seconds > threshold``), as with the heartbeats'
    max age.
    """
    found = {fam.family: fam for fam in status.families}
    why = "; ".join(status.errors) or "not in the status"
    result: list[FamilyLag] = []
    for family, threshold in limits.items():
        fam = found.get(family)
        if fam is None:
            result.append(FamilyLag(family, threshold, 0, (), None, 0, error=why))
            continue
        measured = [p for p in fam.partitions if p.status != ERROR]
        ordered = _worst_first(measured)
        over = tuple(p for p in ordered if p.lag_seconds > threshold)
        result.append(
            FamilyLag(
                family,
                threshold,
                len(fam.partitions),
                over,
                ordered[0] if ordered else None,
                len(fam.partitions) - len(measured),
            )
        )
    return result


def _where(flow: str, family: str) -> str:
    return f"{flow} family {family}"


def _partition_text(p: PartitionStatus) -> str:
    return f"{p.topic}[{p.partition}] {p.lag_seconds:,.0f} s behind ({p.lag_records:,} record(s) not copied)"


def alert_text(flow: str, lag: FamilyLag) -> str:
    """``<flow> family <f>: replication LAGS: <topic>[<p>] <s> s behind (<n> record(s) not copied), over ...``."""
    worst = lag.over[0]
    text = (
        f"{_where(flow, lag.family)}: replication LAGS: {_partition_text(worst)}, over the threshold of "
        f"{lag.threshold_s:,} s ({ALERTS_LAG_MAX_SECONDS})"
    )
    if len(lag.over) > 1:
        named = "; ".join(_partition_text(p) for p in lag.over[1:NAMED])
        more = len(lag.over) - NAMED
        text += f"; {len(lag.over)} of {lag.partitions} partitions over; next: {named}"
        text += f"; and {more} more" if more > 0 else ""
    return text


def recovery_text(flow: str, lag: FamilyLag, since_alert_s: float) -> str:
    """``<flow> family <f>: lag recovered <s> s after the alert: ... under the threshold of <t> s``.

    Counted from the alert (the evaluation that saw the family go over), which is all the state knows: the
    lag itself began up to one threshold earlier.
    """
    worst = lag.worst
    now = "every partition caught up" if worst is None or worst.lag_records == 0 else f"worst {_partition_text(worst)}"
    return (
        f"{_where(flow, lag.family)}: lag recovered {since_alert_s:,.0f} s after the alert: {now}, under the "
        f"threshold of {lag.threshold_s:,} s ({ALERTS_LAG_MAX_SECONDS})"
    )


@dataclass(frozen=True)
class LagDecision:
    """One family's outcome: its lag and the heartbeat-style :class:`~mirrorflow.alerts.Decision`.

    ``decision`` None: the family was not measured (a partition in error, a cluster down), so nothing was
    decided and its state stays as it was.
    """

    lag: FamilyLag
    decision: Decision | None
    previous: AlertState | None

    @property
    def verdict(self) -> str:
        """``over``, ``under`` or ``unmeasured``: what the task reports per family."""
        if self.decision is None:
            return "unmeasured"
        return "over" if self.lag.in_breach else "under"


def _verdict(lag: FamilyLag, checked_at_ms: int) -> dict[str, Any]:
    """The family as :func:`alerts.evaluate` reads a freshness verdict: over the threshold = not fresh."""
    worst = lag.over[0] if lag.over else lag.worst
    return {
        "fresh": not lag.in_breach,
        "checked_at_ms": checked_at_ms,
        "age_s": None if worst is None else worst.lag_seconds,
        "threshold_s": lag.threshold_s,
    }


def decide_family(
    flow: str, lag: FamilyLag, previous: AlertState | None, checked_at_ms: int, *, by: str
) -> LagDecision:
    """The heartbeat state machine for one measured family, with lag's texts.

    A replayed decision keeps the text that was sent; a new one gets :func:`alert_text` or
    :func:`recovery_text` (the outage lasting from the state's ``since_ms``, when it went over).
    """
    decision = evaluate(previous, _verdict(lag, checked_at_ms), by=by)
    if decision.replayed or decision.kind is None:
        return LagDecision(lag, decision, previous)
    if decision.kind == "alert":
        message = alert_text(flow, lag)
    else:
        since = previous.since_ms if previous is not None else checked_at_ms
        message = recovery_text(flow, lag, max(0, checked_at_ms - since) / 1000)
    return LagDecision(lag, replace(decision, message=message), previous)


def decide(
    status: FlowStatus, limits: Mapping[str, int], previous: Mapping[str, AlertState], *, by: str
) -> list[LagDecision]:
    """Every family with a threshold: measured ones decided, unmeasured ones kept as they were (no verdict)."""
    decisions: list[LagDecision] = []
    for lag in measure(status, limits):
        before = previous.get(lag.family)
        if lag.measured:
            decisions.append(decide_family(status.flow, lag, before, status.checked_at_ms, by=by))
        else:
            decisions.append(LagDecision(lag, None, before))
    return decisions


def _partition_dict(p: PartitionStatus) -> dict[str, Any]:
    return {"topic": p.topic, "partition": p.partition, "lag_seconds": p.lag_seconds, "lag_records": p.lag_records}


def lag_payload(
    flow: str, lag: FamilyLag, *, kind: Kind, message: str, checked_at_ms: int | None = None
) -> dict[str, Any]:
    """The webhook's JSON: the heartbeat alerts' flat keys (``age_s`` is the lag in seconds, ``lag`` in records)
    with ``reason: "lag"``, the family, the worst partition, and the partitions over (worst first)."""
    checked = int(checked_at_ms or time.time() * 1000)
    worst = lag.over[0] if lag.over else lag.worst
    return {
        "source": "mirrorflow",
        "kind": kind,
        "reason": REASON,
        "flow": flow,
        "family": lag.family,
        "fresh": not lag.in_breach,
        "age_s": None if worst is None else worst.lag_seconds,
        "threshold_s": lag.threshold_s,
        "topic": None if worst is None else worst.topic,
        "partition": None if worst is None else worst.partition,
        "lag": None if worst is None else worst.lag_records,
        "lag_seconds": None if worst is None else worst.lag_seconds,
        "lag_records": None if worst is None else worst.lag_records,
        "partitions_over": len(lag.over),
        "partitions": [_partition_dict(p) for p in lag.over[:LISTED]],
        "checked_at_ms": checked,
        "time": datetime.fromtimestamp(checked / 1000, UTC).isoformat(),
        "message": message,
    }


def states_from_dict(data: Mapping[str, Any] | None) -> dict[str, AlertState]:
    """The stored per-family states (unreadable entries dropped: that family starts afresh)."""
    result: dict[str, AlertState] = {}
    for family, value in (data or {}).items():
        state = AlertState.from_dict(value if isinstance(value, Mapping) else None)
        if state is not None:
            result[str(family)] = state
    return result


def states_to_dict(states: Mapping[str, AlertState]) -> dict[str, Any]:
    return {family: state.to_dict() for family, state in sorted(states.items())}


__all__ = [
    "ERROR",
    "REASON",
    "FamilyLag",
    "LagDecision",
    "alert_text",
    "decide",
    "decide_family",
    "family_key",
    "lag_payload",
    "measure",
    "recovery_text",
    "states_from_dict",
    "states_to_dict",
    "thresholds",
]
