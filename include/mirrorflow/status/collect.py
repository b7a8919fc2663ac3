"""Measuring the status live from the clusters: partitions, heartbeats, checkpoints, groups, runs, failover state.

How it stays cheap as a flow widens is in the package docstring (``mirrorflow.status``).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .. import preflight, topics
from ..checkpoints.best import BestTranslator
from ..checkpoints.emit import read_checkpoints, read_translator, remote_topic
from ..config.model import FlowConfig, Side
from ..failover.outcome import classify
from ..failover.report import failover_state
from ..heartbeats import check_freshness
from ..kafka import clients
from ..kafka.offsets import offsets_or_errors
from ..kafka.timestamps import fetch_timestamps
from ..replication.history import read_run_history
from ..replication.progress import last_record_timestamp, progress_topic, read_stored_progress
from .model import (
    BEHIND,
    CAUGHT_UP,
    ERROR,
    HISTORY_HOURS,
    LOST,
    NO_PROGRESS,
    NOT_EXACT_SHOWN,
    RUNS_PER_FAMILY,
    STEP_TIMEOUT_S,
    FamilyStatus,
    FlowStatus,
    PartitionStatus,
    cyclic_gc_paused,
)

# ------------------------------------------------------------------------------------------- partitions


def _isolation(flow: FlowConfig) -> IsolationLevel:
    """The copier's isolation: read_committed copies up to the last stable offset, so that is the end."""
    committed = flow.client_config("source", "consumer").get("isolation.level") == "read_committed"
    return IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED


def partition_status(
    plan: topics.TopicPlan,
    partition: int,
    family: str,
    end: int | str,
    start: int | str,
    stored: int | None,
    stamps: tuple[int | None, int | None],
    now_ms: int,
    written_ms: int | None = None,
) -> PartitionStatus:
    """One partition's figures from what was read (pure: unit-testable)."""
    make = functools.partial(PartitionStatus, plan.source_topic, partition, plan.remote_topic, family)
    if isinstance(end, str) or isinstance(start, str):
        error = end if isinstance(end, str) else start
        return make(
            end_offset=None,
            copied_position=None,
            lag_records=0,
            lag_seconds=0.0,
            last_copied_timestamp_ms=None,
            status=ERROR,
            error=f"listing offsets: {error}",
        )
    copied = stored + 1 if stored is not None else start
    lost = max(0, start - copied)
    lag = max(0, end - max(copied, start))
    last_ms, oldest_ms = stamps
    lag_s = round(max(0.0, (now_ms - oldest_ms) / 1000), 3) if lag and oldest_ms is not None else 0.0
    if copied > end:
        status, error = (
            ERROR,
            (
                f"stored progress {stored} is beyond the source end {end} (topic recreated or truncated?): "
                "the next run reports a reset"
            ),
        )
    else:
        status, error = (BEHIND if lag else CAUGHT_UP), None
        if stored is None and lag:
            status = NO_PROGRESS
        if lost:
            status = LOST
            error = (
                f"{lost:,} record(s) (offsets {copied:,}-{start - 1:,}) were deleted by retention before they were "
                "copied: the next run reports the loss and goes on from the log start"
            )
    return make(
        end_offset=end,
        copied_position=copied,
        lag_records=lag,
        lag_seconds=lag_s,
        last_copied_timestamp_ms=last_ms,
        status=status,
        error=error,
        lost_records=lost,
        progress_written_ms=written_ms,
    )


def _partitions(flow: FlowConfig, family: str | None, timeout: float) -> list[FamilyStatus]:
    """Every partition of the flow's families (or one), grouped by family in configuration order.

    One request per kind whatever the width: one discovery (metadata), one ListOffsets pass for every start and
    one for every end, one read of the progress topic, and one consumer reading the oldest uncopied record of the
    partitions that lag (none when caught up). The progress read (target), the discovery and then both
    ListOffsets (source) run at the same time. A run copying meanwhile can store a position past an end read
    before it: only those partitions' ends are asked again, after the progress read, so no such race is shown
    as an error.
    """
    source_admin = clients.admin(flow, "source")
    target_consumer = clients.client_properties(flow, "target", "consumer")
    isolation = _isolation(flow)
    with ThreadPoolExecutor(2, thread_name_prefix="status-offsets") as pool:
        stored_future = _submit(
            pool, read_stored_progress, target_consumer, progress_topic(flow.source), flow.source, timeout=timeout
        )
        plans = topics.discover(flow, family, source_admin, timeout)
        tps = [TopicPartition(p.source_topic, i) for p in plans for i in range(p.partitions)]
        starts_future = _submit(pool, offsets_or_errors, source_admin, tps, OffsetSpec.earliest(), isolation, timeout)
        ends = offsets_or_errors(source_admin, tps, OffsetSpec.latest(), isolation, timeout)
        starts = starts_future.result()
        stored = stored_future.result()
    past = [
        tp
        for tp in tps
        if isinstance(end := ends[(tp.topic, tp.partition)], int)
        and (progress := stored.get((tp.topic, tp.partition))) is not None
        and progress.offset + 1 > end
    ]
    if past:
        ends.update(offsets_or_errors(source_admin, past, OffsetSpec.latest(), isolation, timeout))
    wanted: dict[tuple[str, int], tuple[int, int, int]] = {}
    for tp in tps:
        key = (tp.topic, tp.partition)
        end, start = ends[key], starts[key]
        if isinstance(end, int) and isinstance(start, int):
            copied = stored[key].offset + 1 if key in stored else start
            if end > max(start, copied):  # lags: its oldest uncopied record (and the last copied one) is read
                wanted[key] = (start, copied, end)
    source_consumer = clients.client_properties(flow, "source", "consumer", **{"isolation.level": _level(isolation)})
    stamps = fetch_timestamps(source_consumer, wanted, timeout)
    now_ms = int(time.time() * 1000)
    by_family = {f.name: FamilyStatus(f.name, schedule=f.schedule.text) for f in flow.families}
    for plan in plans:
        name = flow.family_of(plan.source_topic).name
        fam = by_family.setdefault(name, FamilyStatus(name))
        for i in range(plan.partitions):
            key = (plan.source_topic, i)
            progress = stored.get(key)
            fam.partitions.append(
                partition_status(
                    plan,
                    i,
                    name,
                    ends[key],
                    starts[key],
                    None if progress is None else progress.offset,
                    stamps.get(key, (None, None)),
                    now_ms,
                    None if progress is None else progress.written_ms,
                )
            )
    return [f for f in by_family.values() if f.partitions or family in (None, f.family)]


def _submit(pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
    """``pool.submit`` in a copy of this thread's context, so the Kafka calls a status makes are counted as its own
    (``kafka_calls.counting`` counts in its thread's context only)."""
    return pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)


def _level(isolation: IsolationLevel) -> str:
    return "read_committed" if isolation == IsolationLevel.READ_COMMITTED else "read_uncommitted"


# ------------------------------------------------------------------------------------------- flow level


def heartbeat_status(flow: FlowConfig, timeout: float) -> dict[str, Any]:
    """Heartbeat age against ``mirrorflow.heartbeats.max.age`` (the heartbeats DAG's own check)."""

    fresh = check_freshness(flow, timeout=timeout)
    return {
        "topic": fresh.topic,
        "age_seconds": None if fresh.age_s is None else round(fresh.age_s, 3),
        "threshold_seconds": fresh.threshold_s,
        "newest_ms": fresh.newest_ms,
        "verdict": fresh.verdict,
        "summary": fresh.describe(),
    }


def checkpoint_status(flow: FlowConfig, timeout: float) -> dict[str, Any]:
    """Age of the newest checkpoint on the target (the record's timestamp: the time of the checkpoint poll)."""
    topic = flow.policy.checkpoints_topic(flow.source)
    newest = last_record_timestamp(clients.client_properties(flow, "target", "consumer"), topic, 0, timeout)
    age = None if newest is None else round(max(0.0, time.time() - newest / 1000), 3)
    return {"topic": topic, "newest_ms": newest, "age_seconds": age}


def groups_status(flow: FlowConfig, timeout: float) -> dict[str, Any]:
    """Every checkpoint on the target with the answer a failover would use now (see :func:`summarize_groups`).

    The answer is the failover's own: the best valid one of the copied runs, the offset syncs and the
    checkpoint itself (``checkpoints/best.py``), so an MM2 checkpoint that the syncs can no longer match is
    counted at its own re-reads. ``rows`` is internal: :func:`flow_status` replaces this part with the
    summary once the copied positions are known.
    """

    with ThreadPoolExecutor(2, thread_name_prefix="status-groups") as pool:
        translator_future = _submit(pool, read_translator, flow, timeout)
        checkpoints = read_checkpoints(flow, timeout)
        translator = translator_future.result()
    best = BestTranslator(translator, checkpoints)
    source_of = {remote_topic(flow, topic): topic for topic, _ in translator.partitions()}
    rows = []
    for (group, remote, partition), cp in sorted(checkpoints.items()):
        source = source_of.get(remote)
        t = None if source is None else best.resolve(cp, source)
        translated = t is not None and t.downstream is not None
        rows.append(
            {
                "group": group,
                "topic": remote,
                "source_topic": source,
                "partition": partition,
                "upstream_offset": cp.upstream_offset,
                "downstream_offset": t.downstream if translated else cp.downstream_offset,
                "translated": translated,
                "exact": translated and t.kind == "exact",
                "rereads": t.rereads if translated else 0,
                "basis": t.basis if translated else "",
            }
        )
    return {"rows": rows}


def summarize_groups(rows: list[dict[str, Any]], copied: dict[tuple[str, int], int | None]) -> dict[str, Any]:
    """Per checkpoint the failover outcome, said as the failover report says it (pure: unit-tested).

    ``exact``: a consumer failing over now resumes on the copy of the record it would read next; ``re-read``:
    it reads up to N records again; ``not-yet-copied``: it committed past the copied position, so N records are
    not on the target yet (missing until copied); ``untranslated``: no offset sync says anything about it.
    ``copied`` is the copied position per source (topic, partition) (None or absent: unknown).
    """

    groups: dict[str, bool] = {}
    counts = {"exact": 0, "re-read": 0, "not-yet-copied": 0, "untranslated": 0}
    others: list[dict[str, Any]] = []
    for row in rows:
        position = copied.get((row["source_topic"], row["partition"])) if row["source_topic"] else None
        target = row["downstream_offset"] if row["translated"] else None
        c = classify(row["upstream_offset"], target, row["rereads"], position)
        outcome, re_read = c.outcome, c.re_read_records
        if outcome == "exact" and not row.get("exact", True):  # nothing counted, but not proven exact either
            outcome, re_read = "re-read", None  # how many is not known (a kept checkpoint without syncs)
        counts[outcome] += 1
        groups[row["group"]] = groups.get(row["group"], True) and outcome == "exact"
        if outcome != "exact":
            keys = ("group", "topic", "partition", "upstream_offset", "downstream_offset", "basis")
            shown = {k: row.get(k) for k in keys}
            others.append(
                {**shown, "outcome": outcome, "re_read_records": re_read, "missing_records": c.missing_records}
            )
    others.sort(
        key=lambda r: (-r["missing_records"], -(r["re_read_records"] or 0), r["group"], r["topic"], r["partition"])
    )
    return {
        "groups": len(groups),
        "groups_exact": sum(groups.values()),
        "partitions": len(rows),
        "partitions_exact": counts["exact"],
        "outcomes": counts,
        "not_exact": others[:NOT_EXACT_SHOWN],
    }


def runs_status(flow: FlowConfig, timeout: float) -> dict[str, Any]:
    """The flow's runs of the last :data:`HISTORY_HOURS` hours, oldest first, as their release records tell."""

    since_ms = int((time.time() - HISTORY_HOURS * 3600) * 1000)
    consumer = clients.client_properties(flow, "target", "consumer")
    records = read_run_history(consumer, flow.name, since_ms, timeout)
    runs = [{"released_ms": r.released_ms, "scope": list(r.scope), "run": r.run} for r in records]
    return {"runs": _newest_per_family(runs, [f.name for f in flow.families])}


def _newest_per_family(runs: list[dict[str, Any]], families: list[str]) -> list[dict[str, Any]]:
    """The runs that are among the newest :data:`RUNS_PER_FAMILY` of some family (order kept)."""
    keep: set[int] = set()
    for family in families:
        covering = [i for i, r in enumerate(runs) if "*" in r["scope"] or family in r["scope"]]
        keep.update(covering[-RUNS_PER_FAMILY:])
    return [r for i, r in enumerate(runs) if i in keep]


def attach_runs(families: list[FamilyStatus], runs: list[dict[str, Any]]) -> None:
    """Each family's last run, and each partition's loss events, from the runs' summaries (pure)."""
    for fam in families:
        covering = [r for r in runs if "*" in r["scope"] or fam.family in r["scope"]]
        if covering:
            last = covering[-1]
            summary = last["run"]
            own = (summary.get("families") or {}).get(fam.family, {})
            fam.last_run = {
                "released_ms": last["released_ms"],
                "started_ms": summary.get("started_ms"),
                "seconds": summary.get("seconds"),
                "result": summary.get("result"),
                "records": own.get("records", summary.get("records")),
                "lag_records": own.get("lag_records", summary.get("lag_records")),
                "max_lag_seconds": own.get("max_lag_seconds", summary.get("max_lag_seconds")),
            }
        events = [(run, event) for run in covering for event in run["run"].get("loss_events") or []]
        if not events:
            continue  # the usual case: no index of a wide family's partitions needed
        by_partition = {(p.topic, p.partition): p for p in fam.partitions}
        for run, event in events:
            part = by_partition.get((event.get("topic"), event.get("partition")))
            if part is not None:
                part.loss_events.append({**event, "released_ms": run["released_ms"]})


def failover_status(flow: FlowConfig, timeout: float) -> dict[str, Any]:
    """``normal``, or the last failed-over / failed-back record of the flow on ``mirrorflow.failover-log``."""

    entry = failover_state(flow, timeout)
    if entry is None:
        return {"state": "normal"}
    started = (entry.get("report") or {}).get("started_at")
    return {
        "state": "normal" if entry["state"] == "failed-back" else entry["state"],
        "last": entry["state"],
        "since": started,
    }


def _guard(what: str, cluster: str, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``call()``, or ``{"error": ...}`` naming the cluster: one part failing never hides the others."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - reported in the status, the other parts still shown
        text = str(exc.args[0] if exc.args else exc)
        return {"error": f"{what} on cluster '{cluster}': {type(exc).__name__}: {text}"}


def _alias(flow: FlowConfig, side: Side) -> str:
    return flow.source if side == "source" else flow.target


def flow_status(flow: FlowConfig, family: str | None = None, timeout: float | None = None) -> FlowStatus:
    """The flow's status now (one family's partitions only, with ``family``); never raises for a dead cluster.

    ``timeout``: the cluster check's bound (default ``mirrorflow.cluster.timeout``; a cluster refusing
    connections fails after a few seconds); each later step waits at most :data:`STEP_TIMEOUT_S`.
    """
    with cyclic_gc_paused():
        return _flow_status(flow, family, timeout)


def _flow_status(flow: FlowConfig, family: str | None, timeout: float | None) -> FlowStatus:
    started = time.monotonic()
    status = FlowStatus(flow.name, int(time.time() * 1000))
    if family is not None:
        flow.family(family)  # KeyError naming the flow and family: a typo is the caller's problem to show
    try:
        preflight.check_clusters(flow, timeout=timeout)
    except preflight.ClusterUnreachableError as exc:
        status.errors.append(f"error: {exc}")
        status.unreachable = [_alias(flow, side) for side in exc.sides]
    step = STEP_TIMEOUT_S  # only clusters that answered the check are read
    target_up = flow.target not in status.unreachable
    down = f"cluster '{flow.target}' (target of {flow.name}) did not answer"
    with ThreadPoolExecutor(5, thread_name_prefix="status") as pool:
        parts = {
            "heartbeat": (heartbeat_status, "heartbeat age"),
            "checkpoints": (checkpoint_status, "checkpoint age"),
            "groups": (groups_status, "checkpointed groups"),
            "failover": (failover_status, "failover state"),
            "runs": (runs_status, "run history"),
        }
        futures = {
            name: _submit(pool, _guard, what, flow.target, lambda fn=fn: fn(flow, step))
            for name, (fn, what) in parts.items()
            if target_up and (name != "groups" or not status.unreachable)
        }
        if not status.unreachable:
            try:
                status.families = _partitions(flow, family, step)
            except Exception as exc:  # noqa: BLE001 - the flow-level parts are still worth showing
                status.errors.append(f"partitions of {flow.name}: {type(exc).__name__}: {exc}")
        else:
            status.errors.append(f"partitions of {flow.name} not measured: {', '.join(status.unreachable)} unreachable")
        for name in parts:
            if name in futures:
                value = futures[name].result()
            elif not target_up:
                value = {"error": down}
            else:  # the groups need the offset syncs too, and a cluster other than the target is down
                value = {"error": f"not measured: {', '.join(status.unreachable)} unreachable"}
            setattr(status, name, value)
            if "error" in value and name in futures:
                status.errors.append(value["error"])
    attach_runs(status.families, status.runs.get("runs", []))
    if "rows" in status.groups:
        copied = {(p.topic, p.partition): p.copied_position for p in status.partitions}
        status.groups = summarize_groups(status.groups["rows"], copied)
    status.seconds = time.monotonic() - started
    return status
