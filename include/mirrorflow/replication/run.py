"""One replication run of one flow and topic family: discover, prepare, plan, copy, report.

Every step is a function of plain data; only the copy runs in executors. Work is planned per source
partition up to its last stable offset and executed in waves of bounded units (one Spark task and
one transaction each); a wave never holds two units of the same partition, so records keep their
order. State lives on the clusters (progress, offset syncs), so any process can run the next step.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .. import clients, topics
from ..config.model import FlowConfig, MirrorConfig, parse_duration
from .executor import UnitExecutor
from .lock import LOCK_TOPIC, FamilyLock, LockHeldError
from .progress import ensure_compacted_topic, progress_location, progress_topic, read_progress
from .units import Fault, LossEvent, UnitResult, UnitSpec

log = logging.getLogger(__name__)


@dataclass
class PartitionReport:
    """Per-partition figures of a run (what the DAG publishes and the status page shows)."""

    topic: str
    remote_topic: str
    partition: int
    start: int
    end: int
    position: int
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    units: int = 0
    lag: int | None = None
    status: str = "planned"
    error: str | None = None


@dataclass
class RunReport:
    flow: str
    family: str | None
    delivery: str
    started_at: str
    seconds: float = 0.0
    batches: int = 0
    preparation: dict[str, Any] = field(default_factory=dict)
    partitions: list[PartitionReport] = field(default_factory=list)
    loss_events: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and all(p.status != "failed" for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def lag(self) -> int:
        """Records still to copy, summed over partitions (as measured at the end of the run)."""
        return sum(p.lag or 0 for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"], data["records"], data["lag"] = self.ok, self.records, self.lag
        return data

    def write_json(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))


def fault_from_env() -> Fault | None:
    """The test-only fault hook: ``MIRRORFLOW_FAULT='{"after_records": 5, "marker": "/tmp/x"}'``."""
    raw = os.environ.get("MIRRORFLOW_FAULT")
    return Fault(**json.loads(raw)) if raw else None


def _isolation(flow: FlowConfig) -> IsolationLevel:
    committed = flow.client_config("source", "consumer").get("isolation.level") == "read_committed"
    return IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED


def _offsets(
    admin: Any, partitions: list[TopicPartition], spec: OffsetSpec, isolation: IsolationLevel, timeout: float
) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets({tp: spec for tp in partitions}, isolation_level=isolation, request_timeout=timeout)
    return {(tp.topic, tp.partition): f.result(timeout).offset for tp, f in futures.items()}


class _Run:
    """State of one run while it executes (kept out of the report, which is plain data)."""

    def __init__(
        self,
        config: MirrorConfig,
        flow: FlowConfig,
        family: str | None,
        executor: UnitExecutor,
        only_topics: set[str] | None,
        timeout: float,
    ) -> None:
        self.config, self.flow, self.family, self.executor = config, flow, family, executor
        self.only_topics, self.timeout = only_topics, timeout
        self.source_admin = clients.admin(flow, "source")
        self.target_admin = clients.admin(flow, "target")
        self.fault = fault_from_env()

    def internal_topics(self) -> tuple[int, str, bool]:
        """Create the progress and offset-syncs topics if missing; return what units need to know."""
        flow = self.flow
        worker_rf = self.config.top_level.get("offset.storage.replication.factor")
        progress_partitions = ensure_compacted_topic(
            self.target_admin,
            progress_topic(flow.source),
            flow.get_int("mirrorflow.progress.partitions"),
            int(worker_rf.value) if worker_rf else -1,
            self.timeout,
        )
        on_target = flow.get("offset-syncs.topic.location") == "target"
        syncs_topic = flow.policy.offset_syncs_topic(flow.source if on_target else flow.target)
        if flow.get_bool("emit.offset-syncs.enabled"):
            ensure_compacted_topic(
                self.target_admin if on_target else self.source_admin,
                syncs_topic,
                1,
                flow.get_int("offset-syncs.topic.replication.factor"),
                self.timeout,
            )
        return progress_partitions, syncs_topic, on_target

    def execute(self, report: RunReport, lock: FamilyLock) -> None:
        flow = self.flow
        plans, prepared = topics.prepare_family(
            flow, self.family, self.source_admin, self.target_admin, self.only_topics, self.timeout
        )
        report.preparation = prepared.to_dict()
        for topic, error in prepared.errors.items():
            report.errors.append(f"{topic}: {error}")
        if not plans:
            return
        progress_partitions, syncs_topic, syncs_on_target = self.internal_topics()
        tps = [TopicPartition(p.source_topic, i) for p in plans for i in range(p.partitions)]
        isolation = _isolation(flow)
        ends = _offsets(self.source_admin, tps, OffsetSpec.latest(), isolation, self.timeout)
        starts = _offsets(self.source_admin, tps, OffsetSpec.earliest(), isolation, self.timeout)
        target_consumer = clients.client_properties(flow, "target", "consumer")
        stored = read_progress(target_consumer, progress_topic(flow.source), flow.source, timeout=self.timeout)
        latest = flow.client_config("source", "consumer").get("auto.offset.reset") == "latest"
        remote = {p.source_topic: p.remote_topic for p in plans}
        by_tp: dict[tuple[str, int], PartitionReport] = {}
        for tp in tps:
            key = (tp.topic, tp.partition)
            default_start = ends[key] if latest else starts[key]
            begin = stored[key] + 1 if key in stored else default_start
            by_tp[key] = PartitionReport(tp.topic, remote[tp.topic], tp.partition, begin, ends[key], begin)
        report.partitions.extend(by_tp.values())
        common = self._unit_common(syncs_topic, syncs_on_target, target_consumer)
        pending = {k for k, p in by_tp.items() if p.start < p.end or p.start < starts[k]}
        wave = 0
        while pending:
            if not lock.held:
                report.errors.append(f"{flow.name} family {self.family}: lost the run lock; another run took over")
                break
            wave += 1
            units = [self._unit(common, by_tp[k], ends[k], progress_partitions) for k in sorted(pending)]
            log.info("%s family %s: wave %d, %d work unit(s)", flow.name, self.family, wave, len(units))
            for result in self.executor.run(units):
                key = (result.topic, result.partition)
                self._record(report, by_tp[key], result)
                done = result.position is None or result.position >= ends[key]
                if result.status != "copied" or done or (result.records == 0 and not result.truncated):
                    pending.discard(key)
            copied = sum(p.records for p in by_tp.values())
            log.info(
                "%s family %s: %d record(s) copied so far, %d partition(s) still behind",
                flow.name,
                self.family,
                copied,
                len(pending),
            )
        latest_ends = _offsets(self.source_admin, tps, OffsetSpec.latest(), isolation, self.timeout)
        for key, part in by_tp.items():
            part.lag = max(0, latest_ends[key] - part.position)
            if part.status == "planned":
                part.status = "up to date"

    def _unit_common(self, syncs_topic: str, syncs_on_target: bool, target_consumer: dict[str, Any]) -> dict[str, Any]:
        """The UnitSpec fields every unit of this run shares."""
        flow = self.flow
        return {
            "source_alias": flow.source,
            "target_alias": flow.target,
            "max_records": flow.get_int("mirrorflow.unit.max.records"),
            "max_bytes": flow.get_int("mirrorflow.unit.max.bytes"),
            "delivery": flow.delivery,
            "source_consumer": clients.client_properties(flow, "source", "consumer"),
            "target_producer": clients.client_properties(flow, "target", "producer"),
            "target_consumer": target_consumer,
            "progress_topic": progress_topic(flow.source),
            "syncs_topic": syncs_topic,
            "syncs_on_target": syncs_on_target,
            "syncs_producer": clients.client_properties(flow, "target" if syncs_on_target else "source", "producer"),
            "emit_syncs": flow.get_bool("emit.offset-syncs.enabled"),
            "truncation": flow.get("mirrorflow.truncation"),
            "fault": self.fault,
            "timeout_s": self.timeout,
        }

    def _unit(self, common: dict[str, Any], part: PartitionReport, end: int, progress_partitions: int) -> UnitSpec:
        key, partition = progress_location(self.flow.source, part.topic, part.partition, progress_partitions)
        return UnitSpec(
            topic=part.topic,
            remote_topic=part.remote_topic,
            partition=part.partition,
            end=end,
            default_start=part.start,
            transactional_id=f"mirrorflow|{self.flow.name}|{part.topic}|{part.partition}",
            progress_partition=partition,
            progress_key=key,
            **common,
        )

    @staticmethod
    def _record(report: RunReport, part: PartitionReport, result: UnitResult) -> None:
        part.units += 1
        part.records += result.records
        part.bytes += result.bytes
        if result.first_offset is not None and part.first_offset is None:
            part.first_offset = result.first_offset
        if result.last_offset is not None:
            part.last_offset = result.last_offset
        if result.position is not None:
            part.position = max(part.position, result.position)
        if result.loss is not None:
            report.loss_events.append(asdict(result.loss))
            log.error(result.loss.describe())
        if result.status in ("failed", "stopped"):
            part.status, part.error = result.status, result.error or (result.loss.describe() if result.loss else None)
            report.errors.append(f"{part.topic}[{part.partition}]: {part.error}")
        elif result.status == "copied" or part.status == "planned":
            part.status = result.status


def _enabled_flow(config: MirrorConfig, flow_name: str, family: str | None, require_enabled: bool = True) -> FlowConfig:
    source, _, target = flow_name.partition("->")
    flow = config.flow(source, target)
    if require_enabled and not flow.enabled:
        raise ValueError(f"flow {flow_name} is not enabled in {config.path}")
    if family is not None:
        flow.family(family)  # KeyError names the flow's families
    return flow


def family_lock(flow: FlowConfig, family: str | None) -> FamilyLock:
    """The lock of one flow family (of the whole flow when ``family`` is None)."""
    target = clients.admin(flow, "target")
    ensure_compacted_topic(target, LOCK_TOPIC, 1, -1)
    config = clients.client_properties(flow, "target", "consumer")
    return FamilyLock(config, f"mirrorflow-lock.{flow.source}->{flow.target}.{family or '*'}")


def replicate(
    config: MirrorConfig,
    flow_name: str,
    family: str | None,
    executor: UnitExecutor,
    *,
    only_topics: set[str] | None = None,
    timeout: float = 120.0,
    lock: FamilyLock | None = None,
    require_enabled: bool = True,
) -> RunReport:
    """Copy everything new in one family of one flow; the report says what happened per partition.

    The run holds the family's lock (see ``lock.py``); pass ``lock`` to reuse one already held.
    ``require_enabled=False`` copies along a flow the file does not enable (a failback's reverse pair).
    """
    flow = _enabled_flow(config, flow_name, family, require_enabled)
    report = RunReport(flow.name, family, flow.delivery, datetime.now(UTC).isoformat(timespec="seconds"))
    started = time.monotonic()
    run = _Run(config, flow, family, executor, only_topics, timeout)
    try:
        with contextlib.nullcontext(lock) if lock is not None else family_lock(flow, family) as held:
            run.execute(report, held)
    except LockHeldError as exc:
        report.errors.append(str(exc))
    report.batches = 1
    report.seconds = round(time.monotonic() - started, 3)
    return report


def replicate_continuously(
    config: MirrorConfig,
    flow_name: str,
    family: str | None,
    executor: UnitExecutor,
    duration_s: float,
    *,
    only_topics: set[str] | None = None,
) -> RunReport:
    """Micro-batches until ``duration_s`` is up, so lag is seconds rather than a schedule interval."""
    flow = _enabled_flow(config, flow_name, family)
    pause = parse_duration(flow.get("mirrorflow.poll.interval"))
    deadline = time.monotonic() + duration_s
    with family_lock(flow, family) as lock:  # held across batches: one group join, not one per batch
        return _batches(config, flow_name, family, executor, only_topics, lock, pause, deadline)


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
        if time.monotonic() + pause >= deadline or not batch.ok:
            return total
        time.sleep(pause)


def _merge(total: RunReport, batch: RunReport) -> RunReport:
    parts = {(p.topic, p.partition): p for p in total.partitions}
    for p in batch.partitions:
        if (p.topic, p.partition) in parts:
            old = parts[(p.topic, p.partition)]
            old.records, old.bytes, old.units = old.records + p.records, old.bytes + p.bytes, old.units + p.units
            old.position, old.end, old.lag, old.last_offset = p.position, p.end, p.lag, p.last_offset or old.last_offset
            old.status, old.error = p.status, p.error
        else:
            total.partitions.append(p)
    total.loss_events += batch.loss_events
    total.errors += batch.errors
    total.batches += 1
    total.seconds = round(total.seconds + batch.seconds, 3)
    return total


__all__ = ["LossEvent", "PartitionReport", "RunReport", "replicate", "replicate_continuously"]
