"""Continuous mode: micro-batches back to back for a duration, one lock held across them, one merged report."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from ..config.model import MirrorConfig, parse_duration
from ..kafka import calls as kafka_calls
from . import stop_signal
from .executor import UnitExecutor
from .lock import FamilyLock, LockError
from .report import RunReport
from .run import enabled_flow, family_lock, replicate, summarize

log = logging.getLogger(__name__)


def replicate_continuously(
    config: MirrorConfig,
    flow_name: str,
    family: str | None,
    executor: UnitExecutor,
    duration_s: float,
    *,
    only_topics: set[str] | None = None,
) -> RunReport:
    """Micro-batches until ``duration_s`` is up, so lag is seconds rather than a schedule interval.

    While records arrive, batches run back to back; ``mirrorflow.poll.interval`` is the pause after a batch that
    found nothing to copy.
    """
    flow = enabled_flow(config, flow_name, family)
    pause = parse_duration(flow.get("mirrorflow.poll.interval"))
    started, started_ms = time.monotonic(), int(time.time() * 1000)
    deadline = started + duration_s
    try:
        with family_lock(flow, family) as lock:  # held across batches: one claim, not one per batch
            try:
                total = _batches(config, flow_name, family, executor, only_topics, lock, pause, deadline)
            except BaseException:
                lock.summary = summarize(
                    flow,
                    RunReport(flow.name, family, flow.delivery, ""),
                    started_ms,
                    time.monotonic() - started,
                    True,
                    lock,
                )
                raise
            lock.summary = summarize(flow, total, started_ms, time.monotonic() - started, False, lock)
            return total
    except LockError as exc:  # refused, or the target never answered: a report saying so, as for one batch
        report = RunReport(flow.name, family, flow.delivery, datetime.now(UTC).isoformat(timespec="seconds"))
        report.errors.append(str(exc))
        return report


def _batches(
    config: MirrorConfig,
    flow_name: str,
    family: str | None,
    executor: UnitExecutor,
    only_topics: set[str] | None,
    lock: FamilyLock,
    pause: float,
    deadline: float,
) -> RunReport:
    total: RunReport | None = None
    while True:
        batch = replicate(config, flow_name, family, executor, only_topics=only_topics, lock=lock)
        total = batch if total is None else _merge(total, batch)
        log.info(
            "%s family %s: batch %d copied %d record(s); lag %d",
            flow_name,
            family,
            total.batches,
            batch.records,
            batch.lag,
        )
        # The pause is for an idle source. A batch that copied records (or left some behind) is followed at once by
        # the next: records are arriving, and a pause would only add to their latency (benchmarks/continuous_latency.py
        # measures it).
        wait = 0.0 if batch.records or batch.lag else pause
        if time.monotonic() + wait >= deadline or not batch.ok or stop_signal.pause(wait):
            if signal_name := stop_signal.requested():
                total.warnings.append(
                    f"stopped by {signal_name} after batch {total.batches}, before its duration was up"
                )
            return total


def _merge(total: RunReport, batch: RunReport) -> RunReport:
    parts = {(p.topic, p.partition): p for p in total.partitions}
    for p in batch.partitions:
        if (p.topic, p.partition) in parts:
            old = parts[(p.topic, p.partition)]
            old.records, old.bytes, old.units = old.records + p.records, old.bytes + p.bytes, old.units + p.units
            old.position, old.end, old.lag, old.last_offset = p.position, p.end, p.lag, p.last_offset or old.last_offset
            old.lag_seconds = p.lag_seconds
            old.status, old.error, old.retries = p.status, p.error, old.retries + p.retries
        else:
            total.partitions.append(p)
    total.loss_events += batch.loss_events
    total.reset_events += batch.reset_events
    total.warnings += [w for w in batch.warnings if w not in total.warnings]
    for name, seconds in batch.phases.items():
        total.add_phase(name, seconds)
    total.kafka_calls = kafka_calls.merged(total.kafka_calls, batch.kafka_calls)
    total.errors += batch.errors
    total.batches += 1
    total.seconds = round(total.seconds + batch.seconds, 3)
    return total


__all__ = ["replicate_continuously"]
