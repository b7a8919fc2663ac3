"""Run history on the cluster (replication/history.py): the summary a release carries, and reading it back."""

from __future__ import annotations

import json
from typing import Any

from mirrorflow.replication.history import LOSS_EVENTS_KEPT, RunRecord, last_sync, parse_history, run_summary


def part(topic: str, number: int, records: int, lag: int, lag_s: float | None, status: str = "copied") -> dict:
    return {
        "topic": topic,
        "partition": number,
        "records": records,
        "bytes": records * 10,
        "lag": lag,
        "lag_seconds": lag_s,
        "status": status,
    }


def report(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "flow": "primary->backup",
        "family": None,
        "delivery": "exactly-once",
        "ok": True,
        "partitions": [
            part("orders.eu", 0, 100, 0, 0.0),
            part("orders.eu", 1, 50, 7, 63.5),
            part("payments", 0, 3, 2, None, "failed"),
        ],
        "loss_events": [],
        "errors": [],
    }
    base.update(fields)
    return base


def family_of(topic: str) -> str:
    return topic.split(".")[0]


def test_the_summary_totals_the_flow_and_each_family_without_a_partition_list() -> None:
    run = run_summary(report(), started_ms=1_700_000_000_123, seconds=2.34567, family_of=family_of)
    assert run == {
        "started_ms": 1_700_000_000_123,
        "seconds": 2.346,
        "result": "ok",
        "records": 153,
        "bytes": 1530,
        "lag_records": 9,
        "max_lag_seconds": 63.5,
        "delivery": "exactly-once",
        "families": {
            "orders": {"records": 150, "lag_records": 7, "max_lag_seconds": 63.5, "partitions": 2},
            "payments": {"records": 3, "lag_records": 2, "max_lag_seconds": 0.0, "partitions": 1},
        },
        "loss_events": [],
        "loss_events_total": 0,
    }
    assert len(json.dumps(run)) < 600  # a release record stays small


def test_the_result_says_failed_stopped_or_crashed() -> None:
    failed = report(ok=False, errors=["payments[0]: boom"])
    assert run_summary(failed, started_ms=0, seconds=1, family_of=family_of)["result"] == "failed"
    stopped = report(
        ok=False,
        partitions=[part("orders.eu", 0, 0, 5, 10.0, "stopped")],
        errors=["orders.eu[0]: DATA LOSS: ... stopped"],
    )
    assert run_summary(stopped, started_ms=0, seconds=1, family_of=family_of)["result"] == "stopped"
    stopped["errors"].append("lost the run lock")  # another error besides the stop: failed
    assert run_summary(stopped, started_ms=0, seconds=1, family_of=family_of)["result"] == "failed"
    assert run_summary(report(), started_ms=0, seconds=1, family_of=family_of, crashed=True)["result"] == "crashed"
    empty = run_summary({"partitions": []}, started_ms=0, seconds=0, family_of=family_of)
    assert (empty["records"], empty["max_lag_seconds"], empty["families"]) == (0, 0.0, {})


def test_loss_events_are_capped_and_counted() -> None:
    losses = [
        {"topic": "orders.eu", "partition": i, "first_missing": 0, "last_missing": 9, "action": "continued"}
        for i in range(LOSS_EVENTS_KEPT + 5)
    ]
    run = run_summary(report(loss_events=losses), started_ms=0, seconds=1, family_of=family_of)
    assert run["loss_events"] == losses[:LOSS_EVENTS_KEPT] and run["loss_events_total"] == LOSS_EVENTS_KEPT + 5


def lease(holder: str, state: str, ts: int, flow: str = "a->b", scope: list[str] | None = None, **extra: Any) -> tuple:
    value = {"flow": flow, "scope": scope or ["orders"], "holder": f"host {holder}", "ttl_ms": 30000, "state": state}
    return holder.encode(), json.dumps({**value, **extra}).encode(), ts


def test_history_keeps_the_flows_released_runs_with_a_summary_in_log_order() -> None:
    run1, run2 = {"records": 5, "max_lag_seconds": 1.5}, {"records": 0, "max_lag_seconds": 0.0}
    records = [
        lease("h1", "claim", 100),
        lease("h1", "renew", 110),
        lease("h1", "release", 120, run=run1),
        lease("old", "release", 125),  # an older mirrorflow: no summary
        lease("x", "release", 126, flow="other->b", run=run1),  # another flow
        (b"junk", b"not json", 127),  # foreign records
        (None, b"[1, 2]", 128),
        (b"k", None, 129),
        lease("bad", "release", 130, run="not a dict"),
        lease("h2", "claim", 140, scope=["*"]),
        lease("h2", "release", 150, scope=["*"], run=run2),
        lease("h2", "release", 151, scope=["*"], run=run2),  # the producer sent it twice
    ]
    history = parse_history(records, "a->b")
    assert history == [
        RunRecord("a->b", ("orders",), "host h1", 120, run1),
        RunRecord("a->b", ("*",), "host h2", 150, run2),
    ]
    assert history[0].covers("orders") and not history[0].covers("payments")
    assert history[1].covers("payments"), "a run over every family counts for every family"
    assert parse_history([], "a->b") == []


def test_the_last_acl_sync_is_the_newest_of_the_runs_that_covered_the_scope() -> None:
    records = [
        lease("h1", "release", 100, run={"acls_synced_ms": 1_000}),
        lease("h2", "release", 110, scope=["*"], run={"acls_synced_ms": 2_000}),
        lease("h3", "release", 120, scope=["payments"], run={"acls_synced_ms": 3_000}),  # another family
        lease("h4", "release", 130, run={"records": 1}),  # no sync known to that run
        lease("h5", "release", 140, run={"acls_synced_ms": "3500"}),  # not a number: ignored
    ]
    history = parse_history(records, "a->b")
    assert last_sync(history, ["orders"]) == 2_000, "a run over every family synced the family's ACLs too"
    assert last_sync(history, ["payments"]) == 3_000
    assert last_sync(history, ["*"]) == 2_000, "a one-family run never synced every family's ACLs"
    assert last_sync(history, ["orders", "payments"]) == 2_000
    assert last_sync([], ["orders"]) is None


def test_the_summary_carries_the_last_acl_sync_only_when_known() -> None:
    assert "acls_synced_ms" not in run_summary(report(), started_ms=0, seconds=1, family_of=family_of)
    run = run_summary(report(), started_ms=0, seconds=1, family_of=family_of, acls_synced_ms=1_700_000_000_000)
    assert run["acls_synced_ms"] == 1_700_000_000_000
    assert json.loads(json.dumps(run)) == run
