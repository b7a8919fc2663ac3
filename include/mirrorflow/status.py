"""How far behind is the copy, in records and in seconds, and is anything wrong: one status model.

Computed live from the clusters (stored progress on the target, end offsets and record timestamps on the
source, heartbeats, checkpoints and the failover log on the target), never from a run's memory, so the
CLI, the DAGs and any page show the same numbers whoever computes them and whenever.

Definitions (the README's "Status" section says the same):

- ``copied_position``: the next source offset to copy: the stored progress (MM2's last copied offset) + 1,
  or the partition's log start when nothing is stored.
- ``end_offset``: the source partition's end: its high watermark, or its last stable offset when the flow
  reads ``read_committed`` (records of open transactions cannot be copied yet).
- ``lag_records``: ``end_offset - max(copied_position, log start)``, never below 0: what can still be copied.
- ``lag_seconds``: the age (now minus its timestamp) of the oldest source record not yet copied, that is
  the first record at or after ``copied_position``; 0 when caught up. It says how long the oldest record
  the target is missing has been waiting: what a consumer that failed over now would lack, in time.
- ``lost_records``: records retention deleted from the source before they were copied (the log start is past
  ``copied_position``); the next run reports them as a loss event and goes on from the log start.
- ``progress_written_ms``: when the copy last moved the partition (the stored progress record's timestamp).
- ``last_copied_timestamp_ms``: the timestamp of the record at ``copied_position - 1``, read in the same fetch
  as the oldest record not copied, so for a partition that lags only (None when caught up: a width of 10,000
  caught-up partitions would cost 10,000 reads for it; ``progress_written_ms`` says when it last moved).

Per family, ``last_run`` and per flow ``runs``: the runs' own summaries, read back from their lock release
records on the target (``replication/history.py``: start, duration, records, result, lag at the end), for the
last :data:`HISTORY_HOURS` hours; per partition, ``loss_events``: the data losses those runs reported.

Per flow, ``groups``: the consumer groups with checkpoints on the target, and how many of their
checkpointed partitions translate exactly (the checkpoint holds the exact translation the copied runs give:
a consumer that fails over re-reads nothing); the others name their re-reads (see ``checkpoints``).

Cheap on purpose, and no dearer per partition as a flow widens: one discovery, one ListOffsets pass each for the
starts and the ends of every partition (``offset_lookup``: its calls, of many partitions each, sent together),
one consumer reading the progress topic, one consumer fetching, only for the partitions that lag, the last
copied record and the oldest one not copied (for their timestamps), and the flow-level checks in parallel
threads; no request per topic or per partition. A cluster that does not answer is found first, by the same
check the other commands run (``preflight``), so the parts needing it are skipped with an ``error`` naming it:
no hang, no crash.

For a wide flow (thousands of partitions) the model is also summarised per topic (:class:`TopicSummary`:
partitions, how many behind or failed, lag in records, max lag in seconds), worst first, and
:class:`StatusPages` filters and pages both lists for the Replication page.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import heapq
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from . import preflight, topics
from .checkpoints.best import BestTranslator
from .checkpoints.emit import read_checkpoints, read_translator, remote_topic
from .config.model import FlowConfig, Side
from .failover.outcome import classify
from .failover.report import failover_state
from .heartbeats import check_freshness
from .kafka import clients
from .kafka.offsets import offsets_or_errors
from .kafka.timestamps import fetch_timestamps
from .replication.history import read_run_history
from .replication.progress import last_record_timestamp, progress_topic, read_stored_progress

CAUGHT_UP = "caught up"
BEHIND = "behind"
NO_PROGRESS = "no progress yet"
LOST = "records lost"
ERROR = "error"

#: Checkpointed partitions that are not exact, listed per flow (worst first).
NOT_EXACT_SHOWN = 10

#: How far back the run history is read (the lock topic keeps at least 24 hours).
HISTORY_HOURS = 24

#: Runs kept per family in ``runs`` (newest): enough for a chart, small enough for a page every 15 s.
RUNS_PER_FAMILY = 60

#: How many partitions a family lists as its worst.
WORST = 5

#: Topics the text table lists (worst first) when a flow has more partitions than it shows.
TOPICS_SHOWN = 10

#: The most any one step of a status waits for a cluster that answered the check (seconds).
STEP_TIMEOUT_S = 15.0


@dataclass
class PartitionStatus:
    """One source partition: where the copy is and how far behind, in records and in seconds."""

    topic: str
    partition: int
    remote_topic: str
    family: str
    end_offset: int | None
    copied_position: int | None
    lag_records: int
    lag_seconds: float
    last_copied_timestamp_ms: int | None
    status: str
    error: str | None = None
    lost_records: int = 0
    progress_written_ms: int | None = None
    loss_events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """An error or a loss: what an operator must look at whatever the lag."""
        return self.status in (ERROR, LOST)

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` without its deep copy: the same keys, written out (10,000 rows per status)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "remote_topic": self.remote_topic,
            "family": self.family,
            "end_offset": self.end_offset,
            "copied_position": self.copied_position,
            "lag_records": self.lag_records,
            "lag_seconds": self.lag_seconds,
            "last_copied_timestamp_ms": self.last_copied_timestamp_ms,
            "status": self.status,
            "error": self.error,
            "lost_records": self.lost_records,
            "progress_written_ms": self.progress_written_ms,
            "loss_events": [dict(e) for e in self.loss_events],
        }


@dataclass
class TopicSummary:
    """One source topic's partitions in one row: how many, how far behind at worst, and how many failed.

    Why: a whole-cluster flow has thousands of partitions; a person reads a page of topics, worst first, and
    opens the partitions of the one that matters. ``status`` and ``error`` are those of its worst partition.
    """

    topic: str
    remote_topic: str
    family: str
    partitions: int = 0
    partitions_behind: int = 0
    failures: int = 0
    lag_records: int = 0
    lost_records: int = 0
    max_lag_seconds: float = 0.0
    status: str = CAUGHT_UP
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` without its deep copy (every field is a plain value)."""
        return dict(self.__dict__)


@dataclass
class FamilyStatus:
    """A family's totals and its worst partitions (by lag in seconds, then records)."""

    family: str
    partitions: list[PartitionStatus] = field(default_factory=list)
    schedule: str | None = None
    last_run: dict[str, Any] | None = None

    @property
    def lag_records(self) -> int:
        return sum(p.lag_records for p in self.partitions)

    @property
    def max_lag_seconds(self) -> float:
        return max((p.lag_seconds for p in self.partitions), default=0.0)

    @property
    def worst(self) -> list[PartitionStatus]:
        return heapq.nsmallest(WORST, self.partitions, key=_rank)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "schedule": self.schedule,
            "last_run": self.last_run,
            "lag_records": self.lag_records,
            "lost_records": sum(p.lost_records for p in self.partitions),
            "max_lag_seconds": self.max_lag_seconds,
            "partitions": len(self.partitions),
            "topics": len({p.topic for p in self.partitions}),
            "partitions_behind": sum(1 for p in self.partitions if p.lag_records),
            "failures": sum(1 for p in self.partitions if p.failed),
            "worst": [{"topic": p.topic, "partition": p.partition} for p in self.worst],
        }


@dataclass
class FlowStatus:
    """A flow now: its families' partitions, heartbeat and checkpoint ages, failover state, and errors.

    ``errors`` holds one line per unreachable cluster (naming it, as the other commands do) and per part
    that could not be measured; ``unreachable`` the sides that did not answer.
    """

    flow: str
    checked_at_ms: int
    families: list[FamilyStatus] = field(default_factory=list)
    heartbeat: dict[str, Any] = field(default_factory=dict)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, Any] = field(default_factory=dict)
    failover: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def partitions(self) -> list[PartitionStatus]:
        return [p for fam in self.families for p in fam.partitions]

    def to_dict(self, partitions: bool = True) -> dict[str, Any]:
        """The figures as JSON data; ``partitions=False`` leaves out the per-partition and per-topic lists (the
        page's :class:`StatusPages` adds a page of each instead)."""
        data = {
            "flow": self.flow,
            "checked_at_ms": self.checked_at_ms,
            "seconds": round(self.seconds, 3),
            "lag_records": sum(f.lag_records for f in self.families),
            "max_lag_seconds": max((f.max_lag_seconds for f in self.families), default=0.0),
            "families": [f.to_dict() for f in self.families],
            "partitions": [],
            "topics": [],
            "heartbeat": self.heartbeat,
            "checkpoints": self.checkpoints,
            "groups": self.groups,
            "failover": self.failover,
            "runs": self.runs.get("runs", []),
            "errors": self.errors,
            "unreachable": self.unreachable,
        }
        if partitions:
            ranked = worst_first(self.partitions)
            data["partitions"] = [p.to_dict() for p in ranked]
            data["topics"] = [t.to_dict() for t in summarize_topics(ranked)]
        return data


_RANK = {ERROR: 0, LOST: 1}


def _rank(p: PartitionStatus) -> tuple[int, float, int, str, int]:
    return (_RANK.get(p.status, 2), -p.lag_seconds, -p.lag_records, p.topic, p.partition)


def worst_first(partitions: Iterable[PartitionStatus]) -> list[PartitionStatus]:
    """Errors first, then losses, then by lag in seconds, then in records; ties by topic and partition."""
    return sorted(partitions, key=_rank)


def summarize_topics(partitions: Iterable[PartitionStatus]) -> list[TopicSummary]:
    """One row per source topic (pure, one pass): worst first, ranked as :func:`worst_first` ranks partitions.

    A topic ranks as its worst partition: errors first, then losses, then the most seconds behind, then the most
    records behind (the topic's total), then by name. Its ``status`` and ``error`` are that partition's.
    """
    rows: dict[str, TopicSummary] = {}
    worst: dict[str, PartitionStatus] = {}
    for p in partitions:
        row = rows.get(p.topic)
        if row is None:
            row = rows[p.topic] = TopicSummary(p.topic, p.remote_topic, p.family)
        row.partitions += 1
        row.lag_records += p.lag_records
        row.lost_records += p.lost_records
        row.partitions_behind += 1 if p.lag_records else 0
        row.failures += 1 if p.failed else 0
        row.max_lag_seconds = max(row.max_lag_seconds, p.lag_seconds)
        if p.topic not in worst or _rank(p) < _rank(worst[p.topic]):
            worst[p.topic] = p
    for name, row in rows.items():
        row.status, row.error = worst[name].status, worst[name].error
    return sorted(rows.values(), key=lambda t: (_RANK.get(t.status, 2), -t.max_lag_seconds, -t.lag_records, t.topic))


def _matches(topic: str, family: str, query: str | None, only_family: str | None) -> bool:
    """The page's filter: ``query`` a case-insensitive part of the topic's name, ``only_family`` its family."""
    return (not query or query.casefold() in topic.casefold()) and (only_family is None or family == only_family)


def page_of(rows: list[Any], offset: int = 0, limit: int | None = None) -> tuple[list[Any], dict[str, Any]]:
    """Rows ``offset`` to ``offset + limit`` (all from ``offset`` with no limit), and where that page is."""
    offset = max(0, offset)
    shown = rows[offset:] if limit is None else rows[offset : offset + max(0, limit)]
    return shown, {"offset": offset, "limit": limit, "matched": len(rows), "shown": len(shown)}


class StatusPages:
    """One flow's status, ranked once, then filtered and paged for every request (pure: no Kafka).

    Why: the Replication page of a whole-cluster flow cannot show 10,000 rows, and each viewer asks every few
    seconds while the status is computed once per cache period; ranking once and slicing per request keeps a
    request's cost to the rows it returns.
    """

    def __init__(self, status: FlowStatus) -> None:
        self.status = status
        self.partitions = worst_first(status.partitions)
        self.topics = summarize_topics(self.partitions)
        self._base = status.to_dict(partitions=False)

    def page(
        self,
        topic: str | None = None,
        family: str | None = None,
        offset: int = 0,
        limit: int | None = None,
        topics_offset: int = 0,
        topics_limit: int | None = None,
    ) -> dict[str, Any]:
        """The flow's figures with one page of its partitions and one of its topics, both worst first.

        ``topic``: only topics whose name contains it (case-insensitive); ``family``: only that family's.
        ``offset``/``limit`` page ``partitions``, ``topics_offset``/``topics_limit`` page ``topics`` (no limit:
        every matching row, as ``mirrorflow status --json`` gives them). ``partitions_page`` and ``topics_page``
        say which rows were shown of how many matched; ``partitions_total``/``topics_total`` count them all.
        """
        parts = [p for p in self.partitions if _matches(p.topic, p.family, topic, family)]
        tops = [t for t in self.topics if _matches(t.topic, t.family, topic, family)]
        shown_parts, parts_page = page_of(parts, offset, limit)
        shown_tops, tops_page = page_of(tops, topics_offset, topics_limit)
        return {
            **self._base,
            "partitions": [p.to_dict() for p in shown_parts],
            "topics": [t.to_dict() for t in shown_tops],
            "partitions_total": len(self.partitions),
            "topics_total": len(self.topics),
            "partitions_page": parts_page,
            "topics_page": tops_page,
            "filter": {"topic": topic or "", "family": family},
        }


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


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, back on after it if it was on.

    Why: a status of 10,000 partitions allocates some 100,000 objects (the admin client's future, lock and
    condition per partition and offset kind, the rows), and the collector, started by allocation counts, walked
    every live object again and again: a quarter of the status's CPU time on 2 cores. Reference counting frees
    them as before; the collector runs again once the block is done (and collects any cycle then). Blocks in
    concurrent threads are fine: the collector is on again once the first that found it on is done.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def flow_status(flow: FlowConfig, family: str | None = None, timeout: float | None = None) -> FlowStatus:
    """The flow's status now (one family's partitions only, with ``family``); never raises for a dead cluster.

    ``timeout``: the cluster check's bound (default ``mirrorflow.cluster.timeout``; a cluster refusing
    connections fails after a few seconds); each later step waits at most :data:`STEP_TIMEOUT_S`.
    """
    with _cyclic_gc_paused():
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
    Python rather than C, and at 10,000 partitions (5 MB) that was a third of the command's time; each row is
    encoded on its own, in C, on a line of its own (still readable, and ``grep``-able by topic).
    """
    marker = f"\u0000rows-{uuid.uuid4().hex}-"  # no Kafka name or figure contains a NUL character
    with _cyclic_gc_paused():
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


__all__ = [
    "BEHIND",
    "CAUGHT_UP",
    "ERROR",
    "LOST",
    "NO_PROGRESS",
    "FamilyStatus",
    "FlowStatus",
    "PartitionStatus",
    "StatusPages",
    "TopicSummary",
    "fetch_timestamps",
    "flow_status",
    "groups_status",
    "page_of",
    "partition_status",
    "render_json",
    "render_text",
    "summarize_groups",
    "summarize_topics",
    "worst_first",
]
