"""The status as text (``mirrorflow status``) and as JSON (``--json``, the Replication page's API)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from .model import (
    HISTORY_HOURS,
    TOPICS_SHOWN,
    FlowStatus,
    cyclic_gc_paused,
    summarize_topics,
    worst_first,
)

# ------------------------------------------------------------------------------------------- rendering


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:,.1f} s"


def render_text(statuses: list[FlowStatus], limit: int | None = 50) -> str:
    """A readable table per flow, worst partitions first (the ``limit`` worst), with the flow-level checks above it.

    When the flow has more partitions than ``limit``, the :data:`TOPICS_SHOWN` worst topics come first.
    """
    out: list[str] = []
    for st in statuses:
        data = st.to_dict(partitions=False)
        out.append(
            f"{st.flow}: lag {data['lag_records']:,} record(s), max {_age(data['max_lag_seconds'])}; "
            f"measured in {st.seconds:.2f} s"
        )
        hb = st.heartbeat
        out.append("  heartbeat:   " + (hb.get("error") or hb.get("summary", "-")))
        cp = st.checkpoints
        out.append(
            "  checkpoints: "
            + (
                cp.get("error")
                or ("none on the target" if cp.get("newest_ms") is None else f"newest {_age(cp['age_seconds'])} old")
            )
        )
        out.append("  groups:      " + _groups_line(st.groups))
        fo = st.failover
        out.append(
            "  failover:    "
            + (
                fo.get("error")
                or (
                    fo.get("state", "-")
                    + (f" since {fo['since']}" if fo.get("since") and fo["state"] != "normal" else "")
                )
            )
        )
        for fam in st.families:
            counts = fam.to_dict()
            out.append(
                f"  family {fam.family}: {counts['partitions']:,} partition(s) of {counts['topics']:,} topic(s) "
                f"({counts['partitions_behind']:,} behind, {counts['failures']:,} failed), lag {fam.lag_records:,} "
                f"record(s), max {_age(fam.max_lag_seconds)}; {_last_run(fam.last_run, st.checked_at_ms)}"
            )
        shown_errors = (hb.get("error"), cp.get("error"), fo.get("error"), st.groups.get("error"))
        out += [f"  {e}" for e in st.errors if e not in shown_errors]
        rows = worst_first(st.partitions)
        if limit is not None and len(rows) > limit:  # not every partition fits: the topics first, worst first
            tops = summarize_topics(rows)
            out.append("")
            out.append(
                f"  {'topic':<40} {'parts':>5} {'behind':>6} {'failed':>6} {'lag rec':>9} {'max lag s':>9}  status"
            )
            for t in tops[:TOPICS_SHOWN]:
                out.append(
                    f"  {t.topic:<40} {t.partitions:>5,} {t.partitions_behind:>6,} {t.failures:>6,} "
                    f"{t.lag_records:>9,} {t.max_lag_seconds:>9,.1f}  {t.status}"
                )
            if len(tops) > TOPICS_SHOWN:
                out.append(f"  ... {len(tops) - TOPICS_SHOWN:,} more topic(s)")
        if rows:
            out.append("")
            out.append(f"  {'topic':<40} {'part':>4} {'end':>10} {'copied':>10} {'lag rec':>9} {'lag s':>9}  status")
            shown = rows if limit is None else rows[:limit]
            for p in shown:
                out.append(
                    f"  {p.topic:<40} {p.partition:>4} {_num(p.end_offset):>10} {_num(p.copied_position):>10} "
                    f"{p.lag_records:>9,} {p.lag_seconds:>9,.1f}  {p.status}" + (f": {p.error}" if p.error else "")
                )
            if len(shown) < len(rows):
                out.append(f"  ... {len(rows) - len(shown):,} more partition(s) (--json shows them all)")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_json(statuses: list[FlowStatus]) -> str:
    """``{"flows": [...]}`` as ``mirrorflow status --json`` prints it: indented, one partition or topic per line.

    The same data as ``json.dumps(..., indent=2)``. Why not that: with an indent the json module encodes in
    Python rather than C, and on a wide flow that was a large share of the command's time; each row is
    encoded on its own, in C, on a line of its own (still readable, and ``grep``-able by topic).
    """
    marker = f"\u0000rows-{uuid.uuid4().hex}-"  # no Kafka name or figure contains a NUL character
    with cyclic_gc_paused():
        lists: dict[str, str] = {}
        flows = []
        for i, st in enumerate(statuses):
            data = st.to_dict(partitions=False)
            ranked = worst_first(st.partitions)
            for name, listed in (("partitions", ranked), ("topics", summarize_topics(ranked))):
                lines = ",\n".join("        " + json.dumps(row.to_dict()) for row in listed)
                lists[f"{marker}{i}-{name}"] = f"[\n{lines}\n      ]" if listed else "[]"
                data[name] = f"{marker}{i}-{name}"
            flows.append(data)
        text = json.dumps({"flows": flows}, indent=2)
        for key, listed_text in lists.items():
            text = text.replace(json.dumps(key), listed_text, 1)
        return text


def _last_run(run: dict[str, Any] | None, now_ms: int) -> str:
    """``last run 42.0 s ago: ok, 1,200 record(s) in 3.1 s`` (or that none is on record)."""
    if not run:
        return f"no run in the last {HISTORY_HOURS} h"
    ago = max(0.0, (now_ms - run["released_ms"]) / 1000)
    return (
        f"last run {_age(ago)} ago: {run.get('result')}, {run.get('records') or 0:,} record(s) "
        f"in {_age(run.get('seconds'))}"
    )


def _groups_line(groups: dict[str, Any]) -> str:
    """``3 group(s) with checkpoints, 2 exact; 3 of 4 partition(s) exact; worst: g t[1] not yet copied: 40``."""
    if "error" in groups or not groups:
        return groups.get("error", "-")
    if not groups["groups"]:
        return "no checkpoints on the target yet"
    line = (
        f"{groups['groups']:,} group(s) with checkpoints, {groups['groups_exact']:,} exact; "
        f"{groups['partitions_exact']:,} of {groups['partitions']:,} partition(s) translate exactly"
    )
    worst = groups["not_exact"][0] if groups["not_exact"] else None
    if worst is not None:
        what = {
            "not-yet-copied": f"not yet copied: {worst['missing_records']:,} record(s)",
            "re-read": "re-reads "
            + ("an unknown number" if worst["re_read_records"] is None else f"{worst['re_read_records']:,}"),
        }.get(worst["outcome"], worst["outcome"])
        line += f"; worst: {worst['group']} {worst['topic']}[{worst['partition']}] {what}"
    return line


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
