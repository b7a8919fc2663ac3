"""What a verification found, per partition, as data (``to_dict``: JSON, XCom) and as a text table.

Why a verdict per partition with its differences and unverifiable ranges spelled out: an operator deciding
whether to fail over needs "identical" to mean every record in the compared range, "different" to come with the
first offsets to look at on both clusters, and records that could not be compared (deleted by retention before
verification) to be said as such, never silently counted as verified or as different.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .compare import Difference

IDENTICAL, DIFFERENT, UNVERIFIABLE, NOT_COPIED, EMPTY, ERROR = (
    "identical",
    "different",
    "not verifiable",
    "not copied",
    "nothing to compare",
    "error",
)
EXIT_IDENTICAL, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


@dataclass
class PartitionVerdict:
    """One source partition against its copy: the range compared, counts, and what differs or could not be compared."""

    topic: str
    remote_topic: str
    partition: int
    source_first: int | None = None  # source offsets compared, first..last (None: nothing compared)
    source_last: int | None = None
    target_first: int | None = None
    target_last: int | None = None
    source_records: int = 0
    target_records: int = 0
    chunks: list[dict[str, Any]] = field(default_factory=list)  # per chunk: ranges, counts, digests
    differences: list[dict[str, Any]] = field(default_factory=list)  # the first difference of each chunk that differs
    unverifiable: list[dict[str, Any]] = field(default_factory=list)  # {first, last, reason}: source offsets
    errors: list[str] = field(default_factory=list)
    note: str = ""  # why nothing was compared (not copied yet, nothing in range)

    @property
    def status(self) -> str:
        if self.errors:
            return ERROR
        if self.differences:
            return DIFFERENT
        if self.unverifiable and not self.chunks:
            return UNVERIFIABLE
        if not self.chunks:
            return NOT_COPIED if self.note.startswith("not copied") else EMPTY
        return IDENTICAL

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


@dataclass
class VerifyReport:
    flow: str
    family: str | None
    started_at: str
    seconds: float = 0.0
    partitions: list[PartitionVerdict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # plan, verify (chunk tasks), engine

    @property
    def differences(self) -> int:
        return sum(len(p.differences) for p in self.partitions)

    @property
    def status(self) -> str:
        """``error`` (something could not be verified for a reason other than retention), ``different``, or
        ``identical`` (every compared record equal; unverifiable ranges are listed, not counted as differences)."""
        if self.errors or any(p.errors for p in self.partitions):
            return ERROR
        return DIFFERENT if self.differences else IDENTICAL

    @property
    def exit_code(self) -> int:
        return {IDENTICAL: EXIT_IDENTICAL, DIFFERENT: EXIT_DIFFERENT}.get(self.status, EXIT_ERROR)

    @property
    def records(self) -> int:
        return sum(p.source_records for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "family": self.family,
            "started_at": self.started_at,
            "seconds": self.seconds,
            "status": self.status,
            "records": self.records,
            "target_records": sum(p.target_records for p in self.partitions),
            "differences": self.differences,
            "unverifiable": sum(len(p.unverifiable) for p in self.partitions),
            "chunks": sum(len(p.chunks) for p in self.partitions),
            "phases": self.phases,
            "partitions": [p.to_dict() for p in self.partitions],
            "errors": self.errors,
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))


def describe_difference(verdict: PartitionVerdict, difference: dict[str, Any]) -> str:
    """``orders[0] -> primary.orders[0]: missing on the target: source offset(s) 10..14 ...``."""
    known = {k: v for k, v in difference.items() if k in Difference.__dataclass_fields__}
    where = f"{verdict.topic}[{verdict.partition}] -> {verdict.remote_topic}[{verdict.partition}]"
    return f"{where}: {Difference(**known).describe()}"


def _range(first: int | None, last: int | None) -> str:
    return "-" if first is None or last is None else f"{first}..{last}"


def render_text(report: VerifyReport) -> str:
    """The report as a table (one line per partition), then each difference, unverifiable range and error."""
    header = ("source", "target", "source offsets", "target offsets", "records", "target", "chunks", "status")
    rows = [
        (
            f"{p.topic}[{p.partition}]",
            f"{p.remote_topic}[{p.partition}]",
            _range(p.source_first, p.source_last),
            _range(p.target_first, p.target_last),
            str(p.source_records),
            str(p.target_records),
            str(len(p.chunks)),
            p.status,
        )
        for p in report.partitions
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    for p in report.partitions:
        lines += [f"DIFFERENT {describe_difference(p, d)}" for d in p.differences]
        lines += [
            f"NOT VERIFIABLE {p.topic}[{p.partition}] source offsets {u['first']}..{u['last']}: {u['reason']}"
            for u in p.unverifiable
        ]
        lines += [f"ERROR {e}" for e in p.errors]
    lines += [f"ERROR {e}" for e in report.errors]
    lines.append(summary_line(report))
    return "\n".join(lines)


def summary_line(report: VerifyReport) -> str:
    """``verify primary->backup: 1,000,000 record(s) in 4 partition(s) compared: identical (12.3 s)``."""
    scope = f"{report.flow}" + (f" family {report.family}" if report.family else "")
    compared = sum(1 for p in report.partitions if p.chunks)
    unverifiable = sum(len(p.unverifiable) for p in report.partitions)
    status = report.status.upper() if report.status != IDENTICAL else IDENTICAL
    detail = f"; {report.differences} difference(s)" if report.differences else ""
    detail += f"; {unverifiable} range(s) not verifiable" if unverifiable else ""
    return (
        f"verify {scope}: {report.records:,} record(s) in {compared} partition(s) compared: {status}{detail} "
        f"({report.seconds:.1f} s)"
    )


__all__ = [
    "DIFFERENT",
    "ERROR",
    "EXIT_DIFFERENT",
    "EXIT_ERROR",
    "EXIT_IDENTICAL",
    "IDENTICAL",
    "PartitionVerdict",
    "VerifyReport",
    "describe_difference",
    "render_text",
    "summary_line",
]
