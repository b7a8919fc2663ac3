"""The run report as text: one compact table, statements that agree with each other."""

from __future__ import annotations

from typing import Any

from mirrorflow.replication.report_text import headline, report_lines


def partition(topic: str, number: int, records: int, lag: int, status: str = "copied", **extra: Any) -> dict:
    first = 0 if records else None
    extra.setdefault("lag_seconds", 0.0 if not lag else 42.0)
    return {
        "topic": topic,
        "partition": number,
        "remote_topic": f"primary.{topic}",
        "records": records,
        "first_offset": first,
        "last_offset": records - 1 if records else None,
        "position": records,
        "lag": lag,
        "status": status,
        **extra,
    }


def report(**fields: Any) -> dict:
    base: dict[str, Any] = {
        "flow": "primary->backup",
        "family": "orders",
        "seconds": 2.13,
        "ok": True,
        "partitions": [partition("orders", 0, 1200, 0), partition("orders", 1, 0, 0, "up to date")],
        "loss_events": [],
        "reset_events": [],
        "warnings": [],
        "errors": [],
        "phases": {"engine": 0.51, "copy": 1.2},
    }
    base.update(fields)
    base["records"] = sum(p["records"] for p in base["partitions"])
    base["lag"] = sum(p["lag"] or 0 for p in base["partitions"])
    base["max_lag_seconds"] = max((p["lag_seconds"] or 0.0 for p in base["partitions"]), default=0.0)
    return base


def test_a_table_row_per_partition_that_did_something_and_the_phases_last() -> None:
    lines = report_lines(report())
    assert lines[0] == "primary->backup family orders: 1,200 record(s) in 2 partition(s), 2.1 s, lag 0"
    assert lines[1].split() == ["source", "target", "records", "offsets", "next", "lag", "lag", "s", "status"]
    assert lines[2].split() == ["orders[0]", "primary.orders", "1,200", "0..1199", "1200", "0", "0", "copied"]
    assert len(lines) == 4 and lines[-1] == "  phases: engine 0.51 s, copy 1.2 s"
    assert all("\n" not in line for line in lines)


def test_the_engine_steps_follow_the_phases_when_the_run_has_them() -> None:
    lines = report_lines(report(engine_steps={"package": 0.01, "client import": 0.81, "session": 0.05}))
    assert lines[-2:] == [
        "  phases: engine 0.51 s, copy 1.2 s",
        "  engine: package 0.01 s, client import 0.81 s, session 0.05 s",
    ]


def test_lag_left_after_a_clean_run_says_where_it_comes_from() -> None:
    text = headline(report(partitions=[partition("orders", 0, 300, 1125, lag_seconds=3600.24)]))
    assert text.endswith(
        ", lag 1,125, 3,600.2 s behind (records that arrived after this run planned its work: the next run copies them)"
    )
    failed = report(ok=False, partitions=[partition("orders", 0, 0, 40, "failed", error="x")])
    assert "arrived after" not in headline(failed)


def test_losses_errors_and_retries_each_get_their_own_line() -> None:
    lines = report_lines(
        report(
            partitions=[partition("orders", 0, 5, 0, retries=2)],
            loss_events=[
                {"topic": "orders", "partition": 0, "first_missing": 0, "last_missing": 9, "action": "continued"}
            ],
            errors=["orders[1]: boom"],
        )
    )
    assert "copied (2 retried)" in lines[2]
    assert "  LOSS orders[0] 0..9: continued" in lines
    assert "  ERROR orders[1]: boom" in lines


def test_lag_in_seconds_sits_next_to_the_lag_in_records() -> None:
    lines = report_lines(
        report(
            partitions=[
                partition("orders", 0, 10, 0),
                partition("orders", 1, 10, 5, lag_seconds=600.72),
                partition("orders", 2, 0, 3, "up to date", lag_seconds=None),  # behind, nothing copied: shown
                partition("orders", 3, 0, 0, "up to date"),  # quiet: left out
            ]
        )
    )
    header = lines[1]
    lag_at, seconds_at = header.index("lag "), header.index("lag s")
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert set(rows) == {"orders[0]", "orders[1]", "orders[2]"}
    assert rows["orders[1]"][lag_at:].split()[:2] == ["5", "600.7"]
    assert rows["orders[0]"][seconds_at:].split()[0] == "0"
    assert rows["orders[2]"][lag_at:].split()[:2] == ["3", "-"], "not measured is not 0"
    assert "lag 8, 600.7 s behind" in lines[0]


def test_a_report_from_before_lag_seconds_still_renders() -> None:
    old = report()
    for p in old["partitions"]:
        del p["lag_seconds"]
    del old["max_lag_seconds"]
    lines = report_lines(old)
    assert lines[0].endswith("lag 0") and lines[2].split()[-2:] == ["-", "copied"]
