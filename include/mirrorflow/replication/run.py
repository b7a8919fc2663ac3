"""One replication run of one flow and topic family: discover, prepare, plan, copy, report.

Every step is a function of plain data; only the copy runs in executors. Work is planned per source
partition up to its last stable offset and executed in waves of units (each a chain of bounded transactions for up
to ``tuning.UNIT_SECONDS``), spread over Spark tasks by lanes (``lanes``); a wave never holds two units of the same
partition, so records keep their order. State lives on the clusters (progress, offset syncs), so any process can run the next step.

The report is ``report.py``'s, continuous mode (batches back to back) ``continuous.py``'s. This module stays one
piece above 600 lines because ``_Run`` is one run's steps over one shared state (plan, lock, waves, lag); split,
each part would take that state apart again.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TypeVar

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .. import topics
from ..alerts import WEBHOOK_KEY, send_run_events
from ..config.model import FlowConfig, MirrorConfig
from ..internal_topics import InternalTopic, ensure_internal_topic
from ..kafka import calls as kafka_calls
from ..kafka import clients
from ..kafka.errors import is_retriable, kafka_words
from ..kafka.offsets import list_offsets
from ..kafka.timestamps import READ_TIMEOUT_S, fetch_timestamps
from .executor import UnitExecutor
from .history import last_sync, parse_history, run_summary
from .incarnation import PartitionNow, fingerprint_offset, fingerprints_now, plan_reset, topic_ids
from .lanes import transactional_id
from .lock import FamilyLock, LockError
from .progress import StoredProgress, progress_location, progress_topic, read_stored_progress
from .report import PHASES, PartitionReport, RunReport, phase
from .units import Fault, LossEvent, Reset, ResetEvent, UnitResult, UnitSpec

log = logging.getLogger(__name__)
T = TypeVar("T")


def fault_from_env() -> Fault | None:
    """The test-only fault hook: ``MIRRORFLOW_FAULT='{"after_records": 5, "marker": "/tmp/x"}'``."""
    raw = os.environ.get("MIRRORFLOW_FAULT")
    return Fault(**json.loads(raw)) if raw else None


def _isolation(flow: FlowConfig) -> IsolationLevel:
    committed = flow.client_config("source", "consumer").get("isolation.level") == "read_committed"
    return IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED


def retrying(call: Callable[[], T], what: str, timeout: float) -> T:
    """``call()``, again while Kafka calls its failure transient (a broker starting, a leader being elected,
    a coordinator loading), until ``timeout``; then an error naming ``what`` and Kafka's error."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            if not is_retriable(error) or time.monotonic() + delay >= deadline:
                raise RunStartError(f"{what}: {kafka_words(error)}") from None
        except FutureTimeout:
            if time.monotonic() + delay >= deadline:
                raise RunStartError(f"{what}: no answer within {timeout:g} s") from None
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """The results of ``calls``, run at once in threads of their own, in order; the first one's exception, if any,
    once all ended. Each runs in a copy of this context, so its Kafka calls count as the run's (``kafka_calls``).

    Why: a plan's requests (offsets, stored progress, topic ids) wait on the clusters one round trip or more each and
    do not depend on each other, so they overlap: one after the other, on a wide flow, their waits were most of a
    scheduled run with nothing new.
    """
    with ThreadPoolExecutor(len(calls), thread_name_prefix="mirrorflow-plan") as pool:
        futures = [pool.submit(contextvars.copy_context().run, call) for call in calls]
    return [future.result() for future in futures]


class RunStartError(RuntimeError):
    """A request a run needs before it copies failed for good (after retrying transient errors)."""


def _offsets(
    admin: Any, partitions: list[TopicPartition], spec: OffsetSpec, isolation: IsolationLevel, timeout: float, on: str
) -> dict[tuple[str, int], int]:
    """The offsets of ``spec``, asked again while Kafka calls the failure retriable; ``on`` names the cluster."""
    if not partitions:
        return {}

    def ask() -> dict[tuple[str, int], int]:
        futures = list_offsets(admin, partitions, spec, isolation, timeout)
        return {(tp.topic, tp.partition): f.result(timeout).offset for tp, f in futures.items()}

    names = sorted({tp.topic for tp in partitions})
    topics_asked = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return retrying(ask, f"listing offsets of {topics_asked} on {on}", timeout)


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
        self.on_source, self.on_target = f"cluster '{flow.source}' (source)", f"cluster '{flow.target}' (target)"
        self.fault = fault_from_env()
        self.resets: dict[tuple[str, int], Reset] = {}  # partitions whose next unit starts over
        self.ledger: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}  # (first, last, records, bytes)
        self.source_ids: dict[str, str | None] = {}
        self.target_ids: dict[str, str | None] = {}
        self.stored: dict[tuple[str, int], StoredProgress] = {}  # the progress read when the run planned
        self.progress_reached: dict[int, int] = {}  # where that read ended, per progress partition
        self.log_starts: dict[tuple[str, int], int] = {}  # the source's log starts when the run planned
        self.truncated: set[tuple[str, int]] = set()  # partitions whose units met deleted records: they ask again
        self.retried: set[tuple[str, int]] = set()  # partitions with a failed attempt: copied in their own transactions
        self.topic_families: dict[str, str] = {}
        self.isolation = IsolationLevel.READ_COMMITTED  # the source reads' (``_isolation``), set by the plan  # a run over every family: each topic's family (``_family_of``)

    def internal_topics(self, report: RunReport) -> tuple[int, str, bool]:
        """Create the progress and offset-syncs topics if missing; return what units need to know.

        An existing topic that differs from what MM2 would create is a warning in the report, with the
        command that fixes it (``internal_topics``), so the operator sees it where they look.
        """
        flow = self.flow
        worker_rf = self.config.top_level.get("offset.storage.replication.factor")
        progress = ensure_internal_topic(
            flow,
            "target",
            InternalTopic(
                progress_topic(flow.source),
                flow.get_int("mirrorflow.progress.partitions"),
                int(worker_rf.value) if worker_rf else -1,
                keys_follow_partitions=True,  # an existing topic's count is used, as Connect does
            ),
            admin=self.target_admin,
            timeout=self.timeout,
        )
        report.warnings += progress.problems
        on_target = flow.get("offset-syncs.topic.location") == "target"
        syncs_topic = flow.policy.offset_syncs_topic(flow.source if on_target else flow.target)
        if flow.get_bool("emit.offset-syncs.enabled"):
            syncs = ensure_internal_topic(
                flow,
                "target" if on_target else "source",
                InternalTopic(syncs_topic, 1, flow.get_int("offset-syncs.topic.replication.factor")),
                admin=self.target_admin if on_target else self.source_admin,
                timeout=self.timeout,
            )
            report.warnings += syncs.problems
        return progress.partitions, syncs_topic, on_target

    def execute(self, report: RunReport, lock: FamilyLock) -> None:
        flow = self.flow
        with phase(report, "prepare"):
            plans, prepared = topics.prepare_family(
                flow,
                self.family,
                self.source_admin,
                self.target_admin,
                self.only_topics,
                self.timeout,
                **_last_syncs(flow, lock),
            )
            if prepared.acls_synced_ms is not None:  # for the whole family, even when copying only some topics
                lock.acls_synced_ms = prepared.acls_synced_ms
            if prepared.configs_synced_ms is not None:
                lock.configs_synced_ms = prepared.configs_synced_ms
            report.preparation = prepared.to_dict()
            for topic, error in prepared.errors.items():
                report.errors.append(f"{topic}: {error}")
            if not plans:
                return
            progress_partitions, syncs_topic, syncs_on_target = self.internal_topics(report)
        with phase(report, "plan"):
            by_tp, common, pending, ends, tps, isolation = self._plan(report, plans, syncs_topic, syncs_on_target)
        with phase(report, "copy"):
            self._copy(report, lock, by_tp, common, pending, ends, progress_partitions)
        with phase(report, "finish"):
            latest_ends = _offsets(self.source_admin, tps, OffsetSpec.latest(), isolation, self.timeout, self.on_source)
            for key, part in by_tp.items():
                part.lag = max(0, latest_ends[key] - part.position)
                if part.status == "planned":
                    part.status = "up to date"
            self._lag_seconds(by_tp, latest_ends)

    def _lag_seconds(self, by_tp: dict[tuple[str, int], PartitionReport], ends: dict[tuple[str, int], int]) -> None:
        """Each partition's lag in seconds: the age of its oldest record not yet copied (status.py's definition).

        Only partitions with lag are read (one consumer, about one fetch each), so a run that caught up, like the
        scheduled run that found nothing new, pays nothing. A record that cannot be read in time leaves None.
        """
        for part in by_tp.values():
            part.lag_seconds = 0.0 if not part.lag else None
        wanted = {k: (p.position, p.position, ends[k]) for k, p in by_tp.items() if p.lag}
        if not wanted:
            return
        consumer = clients.client_properties(self.flow, "source", "consumer")
        stamps = fetch_timestamps(consumer, wanted, min(self.timeout, READ_TIMEOUT_S))
        now_ms = time.time() * 1000
        for key, (_last, oldest) in stamps.items():
            if oldest is not None:
                by_tp[key].lag_seconds = round(max(0.0, (now_ms - oldest) / 1000), 3)

    def _plan(
        self, report: RunReport, plans: list[topics.TopicPlan], syncs_topic: str, syncs_on_target: bool
    ) -> tuple[
        dict[tuple[str, int], PartitionReport],
        dict[str, Any],
        set[tuple[str, int]],
        dict[tuple[str, int], int],
        list[TopicPartition],
        IsolationLevel,
    ]:
        """Where each partition starts and ends, and which ones have anything to do."""
        flow = self.flow
        tps = [TopicPartition(p.source_topic, i) for p in plans for i in range(p.partitions)]
        isolation = self.isolation = _isolation(flow)
        target_consumer = clients.client_properties(flow, "target", "consumer")
        remote = {p.source_topic: p.remote_topic for p in plans}

        def read_progress() -> tuple[dict[tuple[str, int], StoredProgress], dict[int, int]]:
            reached: dict[int, int] = {}  # per attempt: a failed one's positions must not pair with a retry's answer
            stored = read_stored_progress(
                target_consumer, progress_topic(flow.source), flow.source, timeout=self.timeout, reached=reached
            )
            return stored, reached

        where = f"reading progress from {progress_topic(flow.source)} on {flow.target}"
        ends, starts, (stored, reached), self.source_ids, self.target_ids = _together(
            lambda: _offsets(self.source_admin, tps, OffsetSpec.latest(), isolation, self.timeout, self.on_source),
            lambda: _offsets(self.source_admin, tps, OffsetSpec.earliest(), isolation, self.timeout, self.on_source),
            lambda: retrying(read_progress, where, self.timeout),
            lambda: topic_ids(self.source_admin, list(remote), self.timeout),
            lambda: topic_ids(self.target_admin, list(remote.values()), self.timeout),
        )
        self.stored, self.progress_reached = stored, reached
        latest = flow.client_config("source", "consumer").get("auto.offset.reset") == "latest"
        self._check_incarnations(report, remote, tps, stored, starts, ends)
        self.log_starts = starts
        by_tp: dict[tuple[str, int], PartitionReport] = {}
        for tp in tps:
            key = (tp.topic, tp.partition)
            default_start = ends[key] if latest else starts[key]
            begin = stored[key].offset + 1 if key in stored else default_start
            begin = self.resets[key].start if key in self.resets else begin
            by_tp[key] = PartitionReport(tp.topic, remote[tp.topic], tp.partition, begin, ends[key], begin)
        for event in report.reset_events:
            if event["action"] == "stopped":
                part = by_tp[(event["topic"], event["partition"])]
                part.status, part.error = "stopped", ResetEvent(**event).describe()
                report.errors.append(f"{part.topic}[{part.partition}]: {part.error}")
        report.partitions.extend(by_tp.values())
        common = self._unit_common(syncs_topic, syncs_on_target, target_consumer)
        pending = {
            k
            for k, p in by_tp.items()
            if p.status != "stopped" and (p.start < p.end or p.start < starts[k] or k in self.resets)
        }
        return by_tp, common, pending, ends, tps, isolation

    def _copy(
        self,
        report: RunReport,
        lock: FamilyLock,
        by_tp: dict[tuple[str, int], PartitionReport],
        common: dict[str, Any],
        pending: set[tuple[str, int]],
        ends: dict[tuple[str, int], int],
        progress_partitions: int,
    ) -> None:
        """Waves of units until every pending partition is done, failed, or out of retries."""
        flow = self.flow
        retry_until: dict[tuple[str, int], float] = {}
        wave = 0
        while pending:
            if not lock.held:
                report.errors.append(f"{flow.name} family {self.family}: lost the run lock: {lock.lost_reason}")
                break
            wave += 1
            units = [self._unit(common, by_tp[k], ends[k], progress_partitions) for k in sorted(pending)]
            log.info("%s family %s: wave %d, %d work unit(s)", flow.name, self.family, wave, len(units))
            to_retry = 0
            for result in self.executor.run(units):
                key = (result.topic, result.partition)
                if result.status == "deferred":
                    continue  # its lane's time was up before it began (``copy.copy_units``): the next wave has it
                report.add_phase("commit", result.commit_seconds)
                if result.truncated or result.loss is not None:
                    self.truncated.add(key)  # the plan's log start is out of date there
                if result.reset_applied and result.status in ("copied", "noop"):
                    self.resets.pop(key, None)
                if self._retry(by_tp[key], result, retry_until.setdefault(key, time.monotonic() + self.timeout)):
                    to_retry += 1
                    continue
                self._record(report, by_tp[key], result)
                done = result.position is None or result.position >= ends[key]
                # Records deleted under the unit (perhaps before its first fetch: noop): the next one asks the
                # broker for the log start and reports the loss in this run.
                again = result.truncated and result.status in ("copied", "noop")
                if done or ((result.status != "copied" or result.records == 0) and not again):
                    pending.discard(key)
            copied = sum(p.records for p in by_tp.values())
            log.info(
                "%s family %s: %d record(s) copied so far, %d partition(s) short of the end this run planned",
                flow.name,
                self.family,
                copied,
                len(pending),
            )
            if to_retry:
                time.sleep(min(10.0, 0.5 * 2 ** min(wave, 5)))  # let a restarting broker come back

    def _check_incarnations(
        self,
        report: RunReport,
        remote: dict[str, str],
        tps: list[TopicPartition],
        stored: dict[tuple[str, int], Any],
        starts: dict[tuple[str, int], int],
        ends: dict[tuple[str, int], int],
    ) -> None:
        """Find partitions whose stored progress belongs to another incarnation of the source or remote topic (the
        topic ids are the plan's, ``source_ids`` and ``target_ids``)."""
        known = [tp for tp in tps if (tp.topic, tp.partition) in stored]
        if not known:
            return
        uncommitted = IsolationLevel.READ_UNCOMMITTED
        remote_tps = [TopicPartition(remote[tp.topic], tp.partition) for tp in known]
        # Read uncommitted, the plan's ends are the high watermarks already.
        watermarks = ends if self.isolation == uncommitted else None
        source_hw, target_hw, fingerprints = _together(
            lambda: (
                watermarks
                or _offsets(self.source_admin, known, OffsetSpec.latest(), uncommitted, self.timeout, self.on_source)
            ),
            lambda: _offsets(
                self.target_admin, remote_tps, OffsetSpec.latest(), uncommitted, self.timeout, self.on_target
            ),
            lambda: self._fingerprints(known, stored, starts, ends),
        )
        for tp in known:
            key = (tp.topic, tp.partition)
            now = PartitionNow(
                tp.topic,
                tp.partition,
                remote[tp.topic],
                starts[key],
                source_hw[key],
                self.source_ids.get(tp.topic),
                self.target_ids.get(remote[tp.topic]),
                target_hw.get((remote[tp.topic], tp.partition)),
                fingerprints.get(key),
            )
            planned = plan_reset(stored[key], now, self.flow.get("mirrorflow.truncation"))
            if planned is None:
                continue
            event, reset = planned
            log.error("%s", event.describe())
            report.reset_events.append(asdict(event))
            if reset is not None:
                self.resets[key] = reset

    def _fingerprints(
        self,
        known: list[TopicPartition],
        stored: dict[tuple[str, int], Any],
        starts: dict[tuple[str, int], int],
        ends: dict[tuple[str, int], int],
    ) -> dict[tuple[str, int], str | None]:
        """Records now at the last copied offsets, where topic ids cannot tell incarnations apart, of the partitions
        this run would copy from their stored progress. A partition with nothing new copies nothing, so a new
        incarnation there can wait for the run that has records to copy, which reads its fingerprint: a scheduled
        run with nothing new reads no record (one per partition was most of its plan on a wide flow)."""
        wanted = {}
        for tp in known:
            key = (tp.topic, tp.partition)
            offset = fingerprint_offset(stored[key].source_last)
            ids_known = stored[key].source_topic_id and self.source_ids.get(tp.topic)
            pending = ends[key] > stored[key].offset + 1
            if offset is not None and not ids_known and starts[key] <= offset and pending:
                wanted[key] = offset
        source_consumer = clients.client_properties(self.flow, "source", "consumer")
        return fingerprints_now(source_consumer, wanted, self.timeout)

    def _retry(self, part: PartitionReport, result: UnitResult, until: float) -> bool:
        """True when a transiently failed unit is to run again (what it committed still counts)."""
        if result.status != "failed" or not result.retriable or time.monotonic() >= until:
            return False
        self.retried.add((part.topic, part.partition))
        part.retries += 1
        self._count(part, result)
        log.warning(
            "%s[%d]: attempt %d failed, retrying until %.0f s from now: %s",
            part.topic,
            part.partition,
            part.retries,
            until - time.monotonic(),
            result.error,
        )
        return True

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
        where = (part.topic, part.partition)
        return UnitSpec(
            topic=part.topic,
            remote_topic=part.remote_topic,
            partition=part.partition,
            end=end,
            default_start=part.start,
            transactional_id=transactional_id(self.flow.name, self._family_of(part.topic), part.topic, part.partition),
            progress_partition=partition,
            progress_key=key,
            source_topic_id=self.source_ids.get(part.topic),
            target_topic_id=self.target_ids.get(part.remote_topic),
            reset=self.resets.get(where),
            stored=self.stored.get(where),
            progress_from=self.progress_reached.get(partition, -1),
            log_start=-1 if where in self.truncated else self.log_starts.get(where, -1),
            share_transaction=where not in self.retried,
            **common,
        )

    def _family_of(self, topic: str) -> str:
        """The family ``topic`` is copied under (its transactional ids are the family's, see ``copy``); ``*`` for a
        topic no family of the flow claims (a failback copies chosen topics back along a flow that may have none)."""
        if self.family is not None:
            return self.family
        name = self.topic_families.get(topic)
        if name is None:
            try:
                name = self.flow.family_of(topic).name
            except (KeyError, ValueError):  # no family claims it (no default family), or two do
                name = "*"
            self.topic_families[topic] = name
        return name

    def _count(self, part: PartitionReport, result: UnitResult) -> None:
        """Add what a unit committed, so the report counts each record copied once.

        A unit that starts below what earlier units of this run reported committed means their commit did
        not survive on the target (a broker that lost it in a restart): those records were copied again,
        and are counted once. It is logged, because a target losing acknowledged writes is worth knowing.
        """
        ledger = self.ledger.setdefault((part.topic, part.partition), [])
        if result.start is not None and result.start < part.position and not result.reset_applied and ledger:
            lost = 0
            for i, (first, last, records, size) in enumerate(ledger):
                if last >= result.start:
                    gone = records if first >= result.start else min(records, last - result.start + 1)
                    ledger[i] = (first, result.start - 1, records - gone, size * (records - gone) // max(records, 1))
                    lost += gone
            part.records = sum(u[2] for u in ledger)
            part.bytes = sum(u[3] for u in ledger)
            log.warning(
                "%s[%d]: the stored progress went back from %d to %d: the target lost %d committed record(s), "
                "copied again",
                part.topic,
                part.partition,
                part.position - 1,
                result.start - 1,
                lost,
            )
        if result.start is not None and result.start > part.position and not result.reset_applied and not result.loss:
            # An attempt whose result never came back (its executor died; Spark ran the unit again) committed up to
            # here: count those offsets, or the report would say fewer records than the target received.
            unreported = result.start - part.position
            ledger.append((part.position, result.start - 1, unreported, 0))
            part.records += unreported
            log.warning(
                "%s[%d]: %d offset(s) from %d were committed by an attempt that did not report (a lost executor, "
                "retried); counted as copied (bytes unknown)",
                part.topic,
                part.partition,
                unreported,
                part.position,
            )
        if result.records and result.first_offset is not None and result.last_offset is not None:
            ledger.append((result.first_offset, result.last_offset, result.records, result.bytes))
        part.records += result.records
        part.bytes += result.bytes
        if result.first_offset is not None and part.first_offset is None:
            part.first_offset = result.first_offset
        if result.last_offset is not None:
            part.last_offset = result.last_offset
        if result.position is not None:
            part.position = max(part.position, result.position) if not result.reset_applied else result.position

    def _record(self, report: RunReport, part: PartitionReport, result: UnitResult) -> None:
        part.units += 1
        self._count(part, result)
        if result.loss is not None:
            report.loss_events.append(asdict(result.loss))
            log.error(result.loss.describe())
        if result.status in ("failed", "stopped"):
            part.status, part.error = result.status, result.error or (result.loss.describe() if result.loss else None)
            where = f"{part.topic}[{part.partition}]"
            report.errors.append(part.error if (part.error or "").startswith(where) else f"{where}: {part.error}")
        elif result.status == "copied" or part.status == "planned":
            part.status = result.status


def enabled_flow(config: MirrorConfig, flow_name: str, family: str | None, require_enabled: bool = True) -> FlowConfig:
    source, _, target = flow_name.partition("->")
    flow = config.flow(source, target)
    if require_enabled and not flow.enabled:
        raise ValueError(f"flow {flow_name} is not enabled in {config.path}")
    if family is not None:
        flow.family(family)  # KeyError names the flow's families
    return flow


def family_lock(flow: FlowConfig, family: str | None, timeout: float = 60.0) -> FamilyLock:
    """The lease on what a run copies: one family of the flow, or every family (``*``) when ``family`` is None,
    so a run over all topics and a one-family run exclude each other. ``timeout`` bounds the wait for a target
    that is not ready yet (see ``lock.py``). The claim reads back one ACL sync interval of run history (and a
    minute for the syncing run's length), so that a sync that is not due yet is always in what it read; the same for
    topic configs."""
    intervals = [
        flow.get_int(f"sync.topic.{kind}.interval.seconds")
        for kind in ("acls", "configs")
        if flow.get_bool(f"sync.topic.{kind}.enabled")
    ]
    lookback = max(intervals, default=0)
    return FamilyLock(
        clients.client_properties(flow, "target", "admin"),
        flow.name,
        [family] if family else None,
        ttl_s=flow.get_seconds("mirrorflow.lock.ttl"),
        wait_s=timeout,
        lookback_s=lookback + 60 if lookback else 0,
    )


def _last_syncs(flow: FlowConfig, lock: FamilyLock) -> dict[str, int | None]:
    """When the lock's scope last had its topic ACLs and topic configs synced (``prepare_family``'s arguments): by
    this holder (an earlier batch), else by the newest run in the history its claim read back (None: not within
    the interval, so a sync is due)."""
    if lock.acls_synced_ms is None or lock.configs_synced_ms is None:
        history = parse_history(lock.read_back, flow.name)
        if lock.acls_synced_ms is None:
            lock.acls_synced_ms = last_sync(history, lock.scope, "acls_synced_ms")
        if lock.configs_synced_ms is None:
            lock.configs_synced_ms = last_sync(history, lock.scope, "configs_synced_ms")
    return {"acls_synced_ms": lock.acls_synced_ms, "configs_synced_ms": lock.configs_synced_ms}


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
    The report counts the Kafka calls the run made outside its units (``kafka_calls``).
    """
    with kafka_calls.counting() as calls:
        report = _replicate(config, flow_name, family, executor, only_topics, timeout, lock, require_enabled)
    report.kafka_calls = kafka_calls.summary(calls)
    return report


def _replicate(
    config: MirrorConfig,
    flow_name: str,
    family: str | None,
    executor: UnitExecutor,
    only_topics: set[str] | None,
    timeout: float,
    lock: FamilyLock | None,
    require_enabled: bool,
) -> RunReport:
    flow = enabled_flow(config, flow_name, family, require_enabled)
    report = RunReport(flow.name, family, flow.delivery, datetime.now(UTC).isoformat(timespec="seconds"))
    started, started_ms = time.monotonic(), int(time.time() * 1000)
    run = _Run(config, flow, family, executor, only_topics, timeout)
    held_here = contextlib.ExitStack()  # the lock this call claims (none when the caller holds one)
    claimed: FamilyLock | None = None
    held: FamilyLock | None = lock
    crashed = True  # until the run ends its own way
    try:
        with phase(report, "lock"):
            if lock is None:
                held = claimed = held_here.enter_context(family_lock(flow, family, timeout))
        assert held is not None
        run.execute(report, held)
        crashed = False
    except LockError as exc:
        report.errors.append(str(exc))
        crashed = False
    finally:
        if held is not None:
            report.warnings += held.take_warnings()
        if claimed is not None:  # the release this call writes carries the run's summary (history.py)
            claimed.summary = summarize(flow, report, started_ms, time.monotonic() - started, crashed, claimed)
        with phase(report, "release"):
            held_here.close()
    with phase(report, "finish"):
        if report.loss_events or report.reset_events:
            # The run that finds a loss or reset alerts on it, whoever started the run (CLI, Spark app, DAG).
            send_run_events(flow.get(WEBHOOK_KEY), report.to_dict(), log)  # a failed POST is logged, never fatal
    report.batches = 1
    report.seconds = round(time.monotonic() - started, 3)
    return report


def summarize(
    flow: FlowConfig, report: RunReport, started_ms: int, seconds: float, crashed: bool, lock: FamilyLock
) -> dict[str, Any]:
    """The run's summary for its ``lock``'s release (``history.run_summary``), families named by the flow's
    patterns, with when the lock's holder last synced ACLs."""

    def family_of(topic: str) -> str:
        try:
            return flow.family_of(topic).name
        except Exception:  # noqa: BLE001 - a topic two families claim was a run error already; keep the run's name
            return report.family or "?"

    return run_summary(
        report.to_dict(),
        started_ms=started_ms,
        seconds=seconds,
        family_of=family_of,
        crashed=crashed,
        acls_synced_ms=lock.acls_synced_ms,
        configs_synced_ms=lock.configs_synced_ms,
    )


__all__ = ["PHASES", "LossEvent", "PartitionReport", "RunReport", "phase", "replicate"]
