"""The status model: per partition, per topic, per family and per flow, and the pages the Replication page shows.

The figures' definitions are in the package docstring (``mirrorflow.status``).
"""

from __future__ import annotations

import contextlib
import gc
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

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


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, back on after it if it was on.

    Why: a status of a wide flow allocates several objects per partition (the admin client's future, lock and
    condition per partition and offset kind, the rows), and the collector, started by allocation counts, walked every
    live object again and again: a large share of the status's CPU time (docs/performance.md). Reference counting
    frees them as before; the collector runs again once the block is done (and collects any cycle then). Blocks in
    concurrent threads are fine: the collector is on again once the first that found it on is done.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
