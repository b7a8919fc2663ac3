"""The failover report (Markdown for people, JSON for tools) and the audit log on the target.

Every failover run, dry or not, leaves one record on ``mirrorflow.failover-log`` on the target (key:
the flow, value: the JSON report): an audit trail that survives the loss of the source and of Airflow's
database. The last non-dry record of a flow also says whether it is failed over: the mirror DAGs of a
failed-over flow skip their runs until a failback records the original direction again.
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer

from ..config.model import FlowConfig
from ..internal_topics import InternalTopic, ensure_internal_topic
from ..kafka import clients
from ..replication.progress import read_partitions
from .outcome import action_text, group_heading, outcome_text, top_line, totals
from .plan import FailoverPlan, PartitionMove

FAILOVER_LOG = "mirrorflow.failover-log"


def failover_log_topic(flow: FlowConfig) -> InternalTopic:
    """An audit trail: one partition (one order), never compacted (every run is kept), never expired."""
    return InternalTopic(
        FAILOVER_LOG,
        1,
        flow.get_int("replication.factor"),
        {"cleanup.policy": "delete", "retention.ms": "-1"},
    )


def _reachability(reachable: bool | None) -> str:
    return "not contacted (disaster)" if reachable is None else ("reachable" if reachable else "unreachable")


def render_markdown(plan: FailoverPlan) -> str:
    """The top line (what to do), then per group a heading with its totals and one row per partition.

    Every number in a heading or the top line is summed from the rows shown (``outcome.totals``), so they
    cannot disagree; the rows say what happens (exact, re-reads N, not yet copied: N records) and where the
    group ends on the target.
    """
    age = "none found" if plan.checkpoints_age_s is None else f"{plan.checkpoints_age_s:.0f} s old"
    out = [
        f"# Failover {plan.flow} ({plan.mode}{', dry run' if plan.dry_run else ''})",
        "",
        f"**{top_line(plan)}**",
        "",
        (
            f"Started {plan.started_at}; source {_reachability(plan.source_reachable)}; "
            f"newest checkpoint {age}; {plan.seconds:.1f} s."
        ),
        "",
    ]
    out += [f"- {note}" for note in plan.notes]
    for g in plan.groups:
        out += [
            "",
            f"## {group_heading(g, plan.dry_run, plan.source_reachable)}",
            "",
            "| Topic on target | Partition | Source offset | Copied to (source) | Target offset | Outcome | Before | Action |",
            "|---|---|---|---|---|---|---|---|",
        ]
        out += [_row(p, plan) for p in g.partitions]
    return "\n".join(out) + "\n"


def _row(p: PartitionMove, plan: FailoverPlan) -> str:
    """One partition: offsets as read, the outcome, and the offset the group ends at on the target."""

    def num(value: int | None) -> str:
        return "-" if value is None else f"{value:,}"

    return (
        f"| {p.remote_topic} | {p.partition} | {num(p.source_offset)} | {num(p.copied_position)} "
        f"| {num(p.target_offset)} | {outcome_text(p, plan.source_reachable)} | {num(p.current)} "
        f"| {action_text(p, plan.dry_run)} |"
    )


def summary(plan: FailoverPlan) -> dict[str, Any]:
    """The report's verdict for tools: the top line and the totals of every moving group's rows."""
    moving = [p for g in plan.groups if g.refused is None for p in g.partitions]
    return {"advice": top_line(plan), "totals": totals(moving).to_dict()}


def record(flow: FlowConfig, plan: FailoverPlan, *, state: str, timeout: float = 30.0) -> dict[str, Any]:
    """Append the run to ``mirrorflow.failover-log`` on the target; ``state`` is failed-over, failed-back or dry-run."""
    ensure_internal_topic(flow, "target", failover_log_topic(flow), timeout=timeout)
    entry = {"flow": flow.name, "state": state, "report": plan.to_dict()}
    producer = Producer(clients.client_properties(flow, "target", "producer", **{"enable.idempotence": True}))
    producer.produce(FAILOVER_LOG, key=flow.name.encode(), value=json.dumps(entry).encode(), partition=0)
    if producer.flush(timeout):
        raise RuntimeError(f"the failover record of {flow.name} was not written to {FAILOVER_LOG} on {flow.target}")
    return entry


def failover_state(flow: FlowConfig, timeout: float = 30.0) -> dict[str, Any] | None:
    """The last failed-over / failed-back record of this flow on its target (dry runs ignored), or None."""
    config = clients.client_properties(flow, "target", "consumer")
    last = None
    for key, value in read_partitions(config, FAILOVER_LOG, [0], timeout):
        if key == flow.name.encode() and value:
            entry = json.loads(value)
            if entry.get("state") in ("failed-over", "failed-back"):
                last = entry
    return last


__all__ = ["FAILOVER_LOG", "failover_log_topic", "failover_state", "record", "render_markdown", "summary"]
