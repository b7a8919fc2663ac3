"""The report an Airflow task gets back in cluster deploy mode, from the run's lock release summary."""

from __future__ import annotations

from mirrorflow.replication.history import RunRecord
from mirrorflow.replication.remote_report import report_from_run


def test_a_summary_becomes_a_report_publish_report_can_read() -> None:
    run = {"result": "ok", "records": 12, "bytes": 340, "lag_records": 3, "max_lag_seconds": 1.5, "seconds": 2.0}
    report = report_from_run(RunRecord("a->b", ("orders",), "h", 1000, run), "a->b", "orders")
    assert (report["ok"], report["records"], report["lag"], report["max_lag_seconds"]) == (True, 12, 3, 1.5)
    assert report["partitions"] == [] and report["errors"] == [] and report["loss_events"] == []


def test_a_failed_run_says_where_to_look() -> None:
    report = report_from_run(RunRecord("a->b", ("*",), "h", 1000, {"result": "failed"}), "a->b", "orders")
    assert report["ok"] is False and "driver's log" in report["errors"][0]
