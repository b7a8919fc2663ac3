"""The run report of a Spark app whose driver ran on the cluster (``--deploy-mode cluster``).

Why: in client deploy mode the driver runs in the Airflow task's own machine and writes its report to a file the
task reads (``--report``).  In cluster deploy mode (YARN, Kubernetes) the driver runs in a container the task
cannot read, and its stdout stays in the cluster's logs.  Both can read Kafka: every run already appends a
release record to the target's lease log ``mirrorflow-locks.internal`` carrying its summary (``history.py``).
The family's lock lets one run of a family at a time, so the first release covering the family that started
after the submission is this run's.

What comes back is the summary, not the full report: totals, result, lag, loss events, no per-partition rows
(the release record stays small on purpose).  A run that never took its lock (a cluster unreachable, a bad
configuration) leaves no summary: the driver's log on the cluster says why.
"""

from __future__ import annotations

from typing import Any

from ..config.model import FlowConfig
from .history import RunRecord, read_run_history

#: How long to read the lease log after spark-submit returned.
READ_TIMEOUT_S = 30.0


def report_from_run(record: RunRecord, flow: str, family: str) -> dict[str, Any]:
    """A run report (the keys ``publish_report`` reads) from a release record's summary (pure)."""
    run = record.run
    result = str(run.get("result") or "")
    errors = [] if result == "ok" else [f"the run ended '{result}' (the driver's log on the cluster says why)"]
    return {
        "flow": flow,
        "family": family,
        "ok": result == "ok",
        "records": int(run.get("records") or 0),
        "bytes": int(run.get("bytes") or 0),
        "lag": int(run.get("lag_records") or 0),
        "max_lag_seconds": float(run.get("max_lag_seconds") or 0.0),
        "delivery": run.get("delivery", ""),
        "partitions": [],  # not in the summary
        "loss_events": list(run.get("loss_events") or []),
        "reset_events": [],
        "warnings": ["cluster deploy mode: the report is the run's summary from its lock release (no partitions)"],
        "errors": errors,
        "phases": {"run": float(run.get("seconds") or 0.0)},
        "report_source": "mirrorflow-locks.internal",
        "released_ms": record.released_ms,
    }


def released_report(
    flow: FlowConfig, family: str, since_ms: int, consumer_config: dict[str, Any], timeout: float = READ_TIMEOUT_S
) -> dict[str, Any] | None:
    """The report of the first run of ``family`` that started at or after ``since_ms`` (ms), None if none did.

    ``consumer_config``: librdkafka settings of a client of the flow's target (``clients.client_properties``)."""
    for record in read_run_history(consumer_config, flow.name, since_ms, timeout):
        if record.covers(family) and int(record.run.get("started_ms") or 0) >= since_ms:
            return report_from_run(record, flow.name, family)
    return None


__all__ = ["READ_TIMEOUT_S", "released_report", "report_from_run"]
