"""A run report as text: one compact table, the same in the CLI output, the Spark app's output and the task log.

Why one renderer: an operator reads the end of a ``replicate`` task log and the end of ``mirrorflow replicate``
alike, and the two must say the same thing in the same words. The statements agree with each other: ``lag`` is
what the source holds beyond the copy when the run ended, ``lag s`` how long the oldest of those records has been
waiting (the status page's ``lag_seconds``), and when a run that copied everything it planned still shows lag, the
line says that those records arrived after the run planned its work (the next run copies them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Partitions a run did nothing for are left out of the table: a family of thousands stays readable.
_QUIET_STATUSES = ("up to date", "noop")


def headline(report: Mapping[str, Any]) -> str:
    """``primary->backup family orders: 1,200 record(s) in 4 partition(s), 2.1 s, lag 0``; with lag, how far behind
    in seconds (``lag 40, 63.2 s behind``) and why lag remains."""
    partitions = report.get("partitions") or []
    family = report.get("family") or "(all)"
    lag = int(report.get("lag") or 0)
    line = (
        f"{report.get('flow')} family {family}: {int(report.get('records') or 0):,} record(s) in "
        f"{len(partitions)} partition(s), {float(report.get('seconds') or 0):.1f} s, lag {lag:,}"
    )
    if lag and report.get("max_lag_seconds"):
        line += f", {seconds_text(report['max_lag_seconds'])} s behind"
    if lag and report.get("ok") and not any(p.get("status") == "failed" for p in partitions):
        line += " (records that arrived after this run planned its work: the next run copies them)"
    return line


def seconds_text(seconds: float | None) -> str:
    """``-`` (not measured), ``0`` (caught up), else tenths of a second: ``3,600.2``."""
    if seconds is None:
        return "-"
    return "0" if not seconds else f"{float(seconds):,.1f}"


def _cells(p: Mapping[str, Any]) -> list[str]:
    offsets = f"{p['first_offset']}..{p['last_offset']}" if p.get("first_offset") is not None else "-"
    status = str(p.get("status") or "")
    if p.get("retries"):
        status += f" ({p['retries']} retried)"
    lag = p.get("lag")
    return [
        f"{p['topic']}[{p['partition']}]",
        str(p.get("remote_topic") or ""),
        f"{int(p.get('records') or 0):,}",
        offsets,
        str(p.get("position", "")),
        "-" if lag is None else f"{lag:,}",
        seconds_text(p.get("lag_seconds")),
        status,
    ]


def _shown(p: Mapping[str, Any]) -> bool:
    """A partition gets a row if the run copied into it, it did not end quietly, or it is left behind."""
    return bool(p.get("records") or p.get("lag")) or p.get("status") not in _QUIET_STATUSES


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """The headline, a row per partition that copied, failed or is behind, then loss, reset, warning and error
    lines and the phases: every statement on its own line."""
    lines = [headline(report)]
    rows = [_cells(p) for p in report.get("partitions") or [] if _shown(p)]
    if rows:
        lines += _table(rows, ["source", "target", "records", "offsets", "next", "lag", "lag s", "status"])
    lines += [
        f"  LOSS {e['topic']}[{e['partition']}] {e['first_missing']}..{e['last_missing']}: {e['action']}"
        for e in report.get("loss_events") or []
    ]
    lines += [
        f"  RESET {e['topic']}[{e['partition']}] ({e['side']}): {e['reason']}; {e['action']}"
        for e in report.get("reset_events") or []
    ]
    lines += [f"  WARNING {w}" for w in report.get("warnings") or []]
    lines += [f"  ERROR {e}" for e in report.get("errors") or []]
    for label, key in (("phases", "phases"), ("engine", "engine_steps")):
        if report.get(key):
            lines.append(f"  {label}: " + ", ".join(f"{name} {float(s):.3g} s" for name, s in report[key].items()))
    return lines
