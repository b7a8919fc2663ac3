"""Plain data passed between the driver and Spark tasks: a work unit and what it did.

Work units travel to executors by pickling, so they are frozen dataclasses of plain values (client
configurations already translated, topic names already resolved): an executor needs no config file
and no Airflow, only confluent-kafka.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
    """One bounded piece of work: copy ``topic[partition]`` from the stored progress up to ``end``."""

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


@dataclass(frozen=True)
class Run:
    """A contiguous copied range: upstream and downstream offsets advance together."""

    start_upstream: int
    start_downstream: int
    end_upstream: int
    end_downstream: int


@dataclass
class UnitResult:
    """What one work unit did; ``status`` is copied, noop, fenced, stopped or failed."""

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
    error: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
