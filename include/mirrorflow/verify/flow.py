"""``verify_flow``: prove that the target holds exactly what the source holds, record by record.

Plan on the driver (offsets, stored progress, copied runs: ``plan``), verify chunks as tasks on the executor the
copy uses (``engine``, ``chunk``), then assemble per-partition verdicts (``report``). The DAG and the failover can
call this function as the CLI does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime

from ..config.model import FlowConfig, MirrorConfig, parse_duration
from ..replication.executor import LocalExecutor, UnitExecutor
from .chunk import ChunkResult
from .engine import run_chunks
from .plan import CHUNK_RECORDS, PartitionPlan, chunk_specs, plan_partitions
from .report import PartitionVerdict, VerifyReport


def flow_named(config: MirrorConfig, flow_name: str, family: str | None) -> FlowConfig:
    """The flow ``SOURCE->TARGET`` (enabled or not: a failback verifies the reverse pair), its family checked."""
    source, arrow, target = flow_name.partition("->")
    if not arrow:
        raise ValueError(f"--flow must look like SOURCE->TARGET, not '{flow_name}'")
    flow = config.flow(source, target)
    if family is not None:
        flow.family(family)  # KeyError names the flow's families
    return flow


def verify_flow(
    config: MirrorConfig,
    flow_name: str,
    family: str | None = None,
    topics: set[str] | None = None,
    since: str | float | None = None,
    executor: UnitExecutor | None = None,
    *,
    from_offsets: Mapping[tuple[str, int], int] | None = None,
    chunk_records: int = CHUNK_RECORDS,
    timeout: float = 60.0,
) -> VerifyReport:
    """Compare every selected source partition with its copy over the range both hold; see the package docstring.

    ``since``: a duration (``"1h"``, or seconds): start at the first source record that recent. ``from_offsets``:
    a start per (topic, partition). ``executor``: where chunk tasks run (default: this process).
    """
    flow = flow_named(config, flow_name, family)
    report = VerifyReport(flow.name, family, datetime.now(UTC).isoformat(timespec="seconds"))
    started = time.monotonic()
    since_ms = None
    if since is not None:
        seconds = since if isinstance(since, int | float) else parse_duration(since)
        since_ms = int((time.time() - seconds) * 1000)
    plans = plan_partitions(flow, family, topics, since_ms, from_offsets, max(1, chunk_records), timeout)
    report.phases["plan"] = round(time.monotonic() - started, 3)
    specs = chunk_specs(flow, plans, timeout)
    executor = executor or LocalExecutor()
    began = time.monotonic()
    engine_before = getattr(executor, "engine_seconds", 0.0)  # an executor's count goes on across calls
    results = run_chunks(executor, specs)
    engine = getattr(executor, "engine_seconds", 0.0) - engine_before
    report.phases["engine"] = round(engine, 3)
    report.phases["verify"] = round(max(0.0, time.monotonic() - began - engine), 3)
    by_partition: dict[tuple[str, int], list[ChunkResult]] = {}
    for result in results:
        by_partition.setdefault((result.topic, result.partition), []).append(result)
    report.partitions = [_verdict(plan, by_partition.get((plan.topic, plan.partition), [])) for plan in plans]
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _verdict(plan: PartitionPlan, results: list[ChunkResult]) -> PartitionVerdict:
    """A partition's verdict from its chunks: digests equal or not, first differences, unverifiable chunks."""
    verdict = PartitionVerdict(plan.topic, plan.remote_topic, plan.partition, note=plan.note)
    verdict.unverifiable = [{"first": u.first, "last": u.last, "reason": u.reason} for u in plan.unverifiable]
    if plan.error:
        verdict.errors.append(plan.error)
    for result in sorted(results, key=lambda r: r.source_begin):
        if result.error:
            verdict.errors.append(result.error)
            continue
        if result.unverifiable:
            verdict.unverifiable.append(
                {"first": result.source_begin, "last": result.source_end - 1, "reason": result.unverifiable}
            )
            continue
        verdict.chunks.append(
            {
                "source_offsets": [result.source_begin, result.source_end - 1],
                "target_offsets": [result.target_begin, result.target_end - 1],
                "source_records": result.source_records,
                "target_records": result.target_records,
                "source_digest": result.source_digest,
                "target_digest": result.target_digest,
                "identical": result.identical,
                "seconds": result.seconds,
            }
        )
        verdict.source_records += result.source_records
        verdict.target_records += result.target_records
        if verdict.source_first is None:
            verdict.source_first, verdict.target_first = result.source_begin, result.target_begin
        verdict.source_last, verdict.target_last = result.source_end - 1, result.target_end - 1
        if not result.identical:
            # The driver decides by the digests; the task named the first difference (it read both sides).
            verdict.differences.append(result.difference or _unnamed(result))
    verdict.unverifiable.sort(key=lambda u: u["first"])
    return verdict


def _unnamed(result: ChunkResult) -> dict[str, object]:
    """Digests differ but the task found no positional difference (cannot happen unless encodings collide)."""
    return {
        "kind": "differs",
        "source_offset": result.source_begin,
        "target_offset": result.target_begin,
        "count": None,
        "fields": ["digest"],
    }


__all__ = ["verify_flow"]
