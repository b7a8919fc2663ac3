"""Plain data passed between the driver and Spark tasks: a work unit and what it did.

Work units travel to executors by pickling, so they are frozen dataclasses of plain values (client
configurations already translated, topic names already resolved): an executor needs no config file
and no Airflow, only confluent-kafka.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .progress import StoredProgress


@dataclass(frozen=True)
class LossEvent:
    """Records the source deleted (retention) before they were copied: never silent."""

    topic: str
    partition: int
    first_missing: int
    last_missing: int
    action: str  # "continued from log start" | "stopped"

    def describe(self) -> str:
        count = self.last_missing - self.first_missing + 1
        return (
            f"DATA LOSS: {self.topic}[{self.partition}] offsets {self.first_missing}..{self.last_missing} "
            f"({count} records) were deleted on the source before they were copied; {self.action}"
        )


@dataclass(frozen=True)
class ResetEvent:
    """A partition whose stored progress belongs to another incarnation of a topic: never skipped silently.

    ``side`` says which topic changed: ``source`` (deleted and recreated, or truncated below the progress)
    or ``target`` (the remote topic was deleted, recreated or truncated after records were copied into it).
    """

    topic: str
    partition: int
    side: str  # source | target
    stored_progress: int  # the last copied offset the stored progress claims
    log_start: int  # the source partition's log start and end now
    end: int
    reason: str
    action: str  # "copied the new incarnation from offset N" | "stopped"

    def describe(self) -> str:
        return (
            f"RESET: {self.topic}[{self.partition}] {self.reason}; stored progress {self.stored_progress}, "
            f"source log start {self.log_start}, end {self.end}; {self.action}"
        )


@dataclass(frozen=True)
class Reset:
    """What a unit must do about a reset the driver detected: start over at ``start``.

    It applies only while the stored progress still reads ``stored_offset`` (a unit that already copied the
    new incarnation has written other progress), so a retried or later unit never starts over twice.
    ``keep_target_next``: the remote topic is the same one (only the source changed).
    """

    stored_offset: int
    start: int
    keep_target_next: bool


@dataclass(frozen=True)
class Fault:
    """An injected failure for tests: kill the task process after ``after_records`` records.

    ``marker`` is a file created when the fault fires, so the retry (or the next run) survives.
    ``stage`` is ``before-commit`` (records written, transaction open) or ``before-progress``
    (at-least-once: records acknowledged, progress not yet written).
    """

    after_records: int
    marker: str
    stage: str = "before-commit"


@dataclass(frozen=True)
class UnitSpec:
    """One bounded piece of work: copy ``topic[partition]`` from the stored progress up to ``end``.

    ``max_records`` and ``max_bytes`` bound one transaction (exactly-once) or the records between two progress
    checkpoints (at-least-once); a unit chains them until ``end`` or its time is up (``tuning.UNIT_SECONDS``).
    """

    source_alias: str
    target_alias: str
    topic: str
    remote_topic: str
    partition: int
    end: int  # exclusive: last stable offset (read_committed) at planning time
    default_start: int  # where to start when no progress is stored (auto.offset.reset)
    max_records: int
    max_bytes: int
    delivery: str  # exactly-once | at-least-once
    transactional_id: str
    source_consumer: dict[str, Any]
    target_producer: dict[str, Any]
    target_consumer: dict[str, Any]
    progress_topic: str
    progress_partition: int
    progress_key: bytes
    syncs_topic: str
    syncs_on_target: bool
    syncs_producer: dict[str, Any]
    emit_syncs: bool
    truncation: str  # continue | stop
    fault: Fault | None = None
    timeout_s: float = 120.0
    source_topic_id: str | None = None  # as the brokers report them (None: not reported)
    target_topic_id: str | None = None
    reset: Reset | None = None
    # The run's reading of this partition's progress when it planned: the unit reads only what was written to its
    # progress partition since ``progress_from`` (-1: read it all), with ``stored`` as the answer until then.
    stored: StoredProgress | None = None
    progress_from: int = -1
    # The source partition's log start when the run planned (-1: the unit asks the broker). A unit at or above it
    # needs no ListOffsets of its own; records deleted under it since surface as an out-of-range fetch
    # (``UnitResult.truncated``), and the run's next unit of that partition asks the broker again.
    log_start: int = -1
    # Exactly-once: the unit may leave its last span in a transaction its lane's later units share
    # (``lane_transaction.LaneTransaction``). A partition whose unit failed is copied again in a transaction of its own, so a
    # record the target refuses is named, and fails that partition alone.
    share_transaction: bool = True


@dataclass(frozen=True)
class Run:
    """A contiguous copied range: upstream and downstream offsets advance together."""

    start_upstream: int
    start_downstream: int
    end_upstream: int
    end_downstream: int


@dataclass
class UnitResult:
    """What one work unit did; ``status`` is copied, noop, fenced, stopped, failed or deferred (not begun: its lane
    ran out of time, see ``copy.copy_units``).

    The counts are what the unit committed (records whose progress is stored), never what it merely sent:
    a failed unit counts the transactions (exactly-once) or checkpoints (at-least-once) it completed.
    ``retriable``: the failure was transient (a broker restarting, a leader moving): the run retries it.
    """

    topic: str
    partition: int
    status: str
    start: int | None = None
    position: int | None = None  # next offset to copy after the unit
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    runs: list[Run] = field(default_factory=list)
    syncs: int = 0
    loss: LossEvent | None = None
    truncated: bool = False  # the source deleted records under the reader; the next unit reports the loss
    reset_applied: bool = False  # the unit started over at spec.reset.start
    error: str | None = None
    retriable: bool = False
    commit_seconds: float = 0.0  # time spent storing progress and committing (flush, commit_transaction)
    seconds: float = 0.0

    def void(self, error: str) -> None:
        """Nothing of the unit was committed after all (the transaction it shared was aborted): failed, retriable."""
        self.status, self.error, self.retriable = "failed", error, True
        self.records = self.bytes = self.syncs = 0
        self.start = self.position = self.first_offset = self.last_offset = None
        self.runs = []
        self.loss, self.truncated, self.reset_applied = None, False, False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
