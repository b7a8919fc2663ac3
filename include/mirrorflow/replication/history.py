"""Run history on the cluster: each run's summary rides on its lock release, and anyone can read it back.

Why here and not in Airflow's database: the status page (and anything else) must show a family's last run and
its lag over time for runs started from the CLI, the Spark app or any Airflow, and without Airflow at all. Every
run already appends a ``release`` record to the lease log ``mirrorflow-locks.internal`` on the target when it
ends (``lock.py``); that record's JSON value carries the run's summary under ``"run"``. Lease readers ignore keys
they do not know, so runs of older and newer mirrorflow versions share the log. The log keeps at least 24 hours
(``lock.RETENTION_MIN_MS``), which bounds the history: it is a recent history, not an archive.

The summary is small on purpose (totals per flow and per family, at most ``LOSS_EVENTS_KEPT`` loss events,
never one entry per partition): it is written on every run, and every reader reads every run's record.

``result`` is ``ok`` (every partition copied cleanly), ``failed`` (errors or failed partitions: the run's
report says which), ``stopped`` (no error but a partition that the loss or truncation policy stopped) or
``crashed`` (an exception ended the run before it finished its report).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ..kafka.clients import bounded_reader
from .lock import ALL_FAMILIES, LOCK_TOPIC, connection_settings

log = logging.getLogger(__name__)

#: Loss events a summary lists (``loss_events_total`` counts them all): a run that lost data in thousands of
#: partitions must not make a release record the broker refuses.
LOSS_EVENTS_KEPT = 20

_ABSENT = (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)


class HistoryError(RuntimeError):
    """The lock topic could not be read in time (the target did not answer): Kafka's error is named."""


@dataclass(frozen=True)
class RunRecord:
    """One finished run as its release record tells it: ``run`` is the summary (see ``run_summary``)."""

    flow: str
    scope: tuple[str, ...]
    holder: str
    released_ms: int  # the broker's timestamp of the release record (LogAppendTime)
    run: dict[str, Any]

    def covers(self, family: str) -> bool:
        """Whether the run copied ``family``: a run over every family (scope ``*``) covers them all."""
        return ALL_FAMILIES in self.scope or family in self.scope


# -------------------------------------------------------------------------------------------- writing


def run_result(report: Mapping[str, Any], crashed: bool = False) -> str:
    """``ok``, ``failed``, ``stopped`` or ``crashed`` (the module docstring says when)."""
    if crashed:
        return "crashed"
    if report.get("ok"):
        return "ok"
    partitions = report.get("partitions") or []
    stopped = tuple(f"{p['topic']}[{p['partition']}]" for p in partitions if p.get("status") == "stopped")
    # The run names a stopped partition at the start of its error line: stopped means those and nothing else.
    if stopped and all(str(e).startswith(stopped) for e in report.get("errors") or []):
        return "stopped" if not any(p.get("status") == "failed" for p in partitions) else "failed"
    return "failed"


def _family_totals(partitions: Iterable[Mapping[str, Any]], family_of: Callable[[str], str]) -> dict[str, Any]:
    """Records, lag and partition count per family, for the family pages of a run over every family."""
    families: dict[str, dict[str, Any]] = {}
    for p in partitions:
        fam = families.setdefault(
            family_of(str(p["topic"])), {"records": 0, "lag_records": 0, "max_lag_seconds": 0.0, "partitions": 0}
        )
        fam["records"] += int(p.get("records") or 0)
        fam["lag_records"] += int(p.get("lag") or 0)
        fam["max_lag_seconds"] = max(fam["max_lag_seconds"], float(p.get("lag_seconds") or 0.0))
        fam["partitions"] += 1
    return dict(sorted(families.items()))


def run_summary(
    report: Mapping[str, Any],
    *,
    started_ms: int,
    seconds: float,
    family_of: Callable[[str], str],
    crashed: bool = False,
    acls_synced_ms: int | None = None,
    configs_synced_ms: int | None = None,
) -> dict[str, Any]:
    """The ``"run"`` value of a release record, from a run report's ``to_dict()`` (pure: unit-tested).

    ``family_of`` names a source topic's family (the flow's ``family_of``); ``seconds`` is the run's time up to
    its release; ``acls_synced_ms`` and ``configs_synced_ms``, when the holder last synced the scope's topic ACLs
    and topic configs (``last_sync``).
    """
    partitions = report.get("partitions") or []
    losses = list(report.get("loss_events") or [])
    synced = {"acls_synced_ms": acls_synced_ms, "configs_synced_ms": configs_synced_ms}
    syncs = {key: int(value) for key, value in synced.items() if value is not None}
    return {
        "started_ms": int(started_ms),
        "seconds": round(float(seconds), 3),
        "result": run_result(report, crashed),
        "records": sum(int(p.get("records") or 0) for p in partitions),
        "bytes": sum(int(p.get("bytes") or 0) for p in partitions),
        "lag_records": sum(int(p.get("lag") or 0) for p in partitions),
        "max_lag_seconds": max((float(p.get("lag_seconds") or 0.0) for p in partitions), default=0.0),
        "delivery": str(report.get("delivery") or ""),
        "families": _family_totals(partitions, family_of),
        "loss_events": [dict(e) for e in losses[:LOSS_EVENTS_KEPT]],
        "loss_events_total": len(losses),
        **syncs,
    }


def last_sync(runs: Iterable[RunRecord], scope: Iterable[str], key: str = "acls_synced_ms") -> int | None:
    """When a run whose scope covers all of ``scope`` last did a periodic sync (ms since the epoch), or None: topic
    ACLs (``key`` ``acls_synced_ms``) or topic configs (``configs_synced_ms``).

    A run over every family covers each family; a one-family run does not cover a run over all of them, whose
    topics it never looked at. The time is the syncing host's clock: skew only shifts MM2's timer a little.
    """
    scope = tuple(scope)
    times = [
        int(r.run[key]) for r in runs if isinstance(r.run.get(key), int) and all(r.covers(family) for family in scope)
    ]
    return max(times, default=None)


# -------------------------------------------------------------------------------------------- reading


def parse_history(records: Iterable[tuple[bytes | None, bytes | None, int]], flow: str) -> list[RunRecord]:
    """The released runs of ``flow`` that carry a summary, in log order, from (key, value, timestamp) records.

    Claims, renewals, releases without a summary (older mirrorflow, a refused claim) and records that are not
    lease records at all are skipped; a holder's release counted once should the producer have sent it twice.
    """
    runs: list[RunRecord] = []
    seen: set[str] = set()
    for key, value, timestamp in records:
        try:
            data = json.loads(value or b"")
            if not isinstance(data, dict) or data.get("state") != "release" or str(data.get("flow")) != flow:
                continue
            run, scope = data.get("run"), tuple(str(s) for s in data["scope"])
            holder_id = key.decode() if key else ""
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
        if not isinstance(run, dict) or holder_id in seen:
            continue
        if holder_id:
            seen.add(holder_id)
        runs.append(RunRecord(flow, scope, str(data.get("holder", holder_id)), int(timestamp), run))
    return runs


def _consumer(consumer_config: Mapping[str, Any]) -> Consumer:
    """A bounded reader of the lock topic with the connection settings of ``consumer_config`` and nothing else."""
    return Consumer(
        bounded_reader(
            connection_settings(dict(consumer_config)),
            **{
                "group.id": "mirrorflow-locks",  # required by librdkafka; assign() only, never joined or committed
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",  # the first offset expired meanwhile: the oldest left, never the end
                "allow.auto.create.topics": False,
            },
        )
    )


def _range(consumer: Consumer, since_ms: int, deadline: float) -> tuple[int, int] | None:
    """(first offset at or after ``since_ms``, end offset) of the lease log, or None when there is nothing."""
    tp = TopicPartition(LOCK_TOPIC, 0, since_ms)
    try:
        _low, high = consumer.get_watermark_offsets(tp, timeout=max(0.1, deadline - time.monotonic()), cached=False)
        (start,) = consumer.offsets_for_times([tp], max(0.1, deadline - time.monotonic()))
    except KafkaException as exc:
        if exc.args and isinstance(exc.args[0], KafkaError) and exc.args[0].code() in _ABSENT:
            return None  # no run ever took a lock on this target
        raise
    if start.error is not None:
        raise KafkaException(start.error)
    return None if start.offset < 0 or start.offset >= high else (start.offset, high)


def _fetch(consumer: Consumer, start: int, end: int, deadline: float) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, timestamp) of offsets ``start`` to ``end - 1``; HistoryError if the deadline comes first."""
    consumer.assign([TopicPartition(LOCK_TOPIC, 0, start)])
    records: list[tuple[bytes | None, bytes | None, int]] = []
    last = start - 1
    while last < end - 1:
        if time.monotonic() >= deadline:
            raise HistoryError(f"{LOCK_TOPIC} read up to offset {last} of {end - 1} only: no answer in time")
        msg = consumer.poll(min(0.5, max(0.01, deadline - time.monotonic())))
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                break  # retention deleted the rest, or the end moved back: nothing more to read
            raise KafkaException(msg.error())
        records.append((msg.key(), msg.value(), msg.timestamp()[1]))
        last = msg.offset()
    return records


def read_run_history(consumer_config: dict[str, Any], flow: str, since_ms: int, timeout: float) -> list[RunRecord]:
    """The runs of ``flow`` released at or after ``since_ms`` (ms since the epoch) with a summary, oldest first.

    ``consumer_config``: librdkafka properties of a client of the target (only its connection settings are
    used). One consumer, one partition, from the first record at/after ``since_ms`` to the log's end as it was
    when the read began. A target without the lock topic has no history (empty list); a target that does not
    answer within ``timeout`` seconds raises ``HistoryError`` naming Kafka's error, never a partial list.
    """
    deadline = time.monotonic() + timeout
    consumer = _consumer(consumer_config)
    try:
        span = _range(consumer, since_ms, deadline)
        records = _fetch(consumer, *span, deadline) if span else []
    except KafkaException as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        words = f"{error.name()} ({error.str()})" if error is not None else str(exc)
        raise HistoryError(f"cannot read the run history of {flow} from {LOCK_TOPIC}: {words}") from None
    finally:
        consumer.close()
    return parse_history(records, flow)


__all__ = [
    "HistoryError",
    "RunRecord",
    "last_sync",
    "parse_history",
    "read_run_history",
    "run_result",
    "run_summary",
]
