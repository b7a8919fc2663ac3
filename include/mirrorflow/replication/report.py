"""A run's report: per partition what was copied, the lag in records and in seconds, events, phases, Kafka calls.

Plain data (``to_dict`` is what the CLI prints, the task returns and the lock's release record summarises).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any


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
    # Age of the oldest source record not yet copied when the run ended (status.py's definition); 0 when caught
    # up, None when not measured (the run stopped before its end, or the record could not be read).
    lag_seconds: float | None = None
    status: str = "planned"
    error: str | None = None
    retries: int = 0  # units retried after a transient failure (a broker restart, a moving leader)


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
    reset_events: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # worth fixing, not failing the run (internal topics)
    # Seconds per phase, in order (see PHASES): where a run's time goes, in every report and log.
    phases: dict[str, float] = field(default_factory=dict)
    # Where the ``engine`` phase went on Spark Connect (client import, session, leftover jobs, package).
    engine_steps: dict[str, float] = field(default_factory=dict)
    # Kafka calls of the run's driver (admin requests, clients made; kafka_calls.summary): units not included.
    kafka_calls: dict[str, Any] = field(default_factory=dict)

    def add_phase(self, name: str, seconds: float) -> None:
        self.phases[name] = round(self.phases.get(name, 0.0) + seconds, 3)

    def order_phases(self) -> None:
        """Put ``phases`` in the order a run goes through them (PHASES; unknown names last)."""
        rank = {name: i for i, name in enumerate(PHASES)}
        self.phases = dict(sorted(self.phases.items(), key=lambda item: rank.get(item[0], len(rank))))

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

    @property
    def max_lag_seconds(self) -> float:
        """The oldest record the target still lacks, in seconds, over every partition (0 when caught up)."""
        return max((p.lag_seconds or 0.0 for p in self.partitions), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        # ``PartitionReport`` holds plain values only: a copy of its fields is what ``asdict`` would make, without
        # its recursion, which cost more than a scheduled run's plan on a wide flow.
        data = {**asdict(replace(self, partitions=[])), "partitions": [dict(vars(p)) for p in self.partitions]}
        data["ok"], data["records"], data["lag"] = self.ok, self.records, self.lag
        data["max_lag_seconds"] = self.max_lag_seconds
        return data

    def write_json(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))


PHASES = ("submit", "preflight", "engine", "lock", "prepare", "plan", "copy", "commit", "finish", "release", "shutdown")
"""A run's phases: submit (launcher to the app's first line: spark-submit's JVM, Python), preflight (config and
clusters), engine (Spark session start), lock, prepare (discovery, target preparation, internal topics), plan
(offsets, stored progress, incarnation checks), copy (the waves of units, wall clock), commit (within copy: the
units' progress writes and transaction commits, summed over units), finish (final lag, alerts), release (the lock),
shutdown (Spark session stop)."""


@contextlib.contextmanager
def phase(report: RunReport, name: str) -> Iterator[None]:
    """Add the time spent in the block to ``report.phases[name]``."""
    started = time.monotonic()
    try:
        yield
    finally:
        report.add_phase(name, time.monotonic() - started)
