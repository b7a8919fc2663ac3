"""The status model's arithmetic without clusters: lag in records and seconds, states, worst-first order."""

from __future__ import annotations

from mirrorflow.status import (
    BEHIND,
    CAUGHT_UP,
    ERROR,
    LOST,
    NO_PROGRESS,
    FamilyStatus,
    FlowStatus,
    partition_status,
    render_text,
    summarize_groups,
    worst_first,
)
from mirrorflow.topics import TopicPlan

PLAN = TopicPlan("orders", "primary.orders", 3)
NOW_MS = 1_700_000_000_000


def status(end: int | str, start: int | str, stored: int | None, stamps=(None, None)):
    return partition_status(PLAN, 0, "main", end, start, stored, stamps, NOW_MS)


def test_caught_up_is_zero_records_and_zero_seconds_whatever_the_timestamps() -> None:
    p = status(10, 0, 9, (NOW_MS - 5_000, None))
    assert (p.copied_position, p.lag_records, p.lag_seconds, p.status) == (10, 0, 0.0, CAUGHT_UP)
    assert p.last_copied_timestamp_ms == NOW_MS - 5_000 and p.remote_topic == "primary.orders"


def test_behind_is_the_age_of_the_oldest_record_not_copied() -> None:
    p = status(10, 0, 5, (NOW_MS - 90_000, NOW_MS - 60_000))
    assert (p.copied_position, p.lag_records, p.lag_seconds, p.status) == (6, 4, 60.0, BEHIND)


def test_nothing_stored_starts_at_the_log_start() -> None:
    assert (status(0, 0, None).lag_records, status(0, 0, None).status) == (0, CAUGHT_UP)  # empty partition
    p = status(8, 3, None, (None, NOW_MS - 1_500))
    assert (p.copied_position, p.lag_records, p.lag_seconds, p.status) == (3, 5, 1.5, NO_PROGRESS)


def test_a_record_from_the_future_is_not_negative_lag() -> None:
    assert status(10, 0, 5, (None, NOW_MS + 10_000)).lag_seconds == 0.0


def test_errors_and_progress_beyond_the_end() -> None:
    failed = status("UNKNOWN_TOPIC_OR_PART", 0, None)
    assert failed.status == ERROR and "UNKNOWN_TOPIC_OR_PART" in (failed.error or "") and failed.lag_records == 0
    beyond = status(3, 0, 9)
    assert beyond.status == ERROR and beyond.lag_records == 0 and "beyond the source end 3" in (beyond.error or "")


def test_worst_first_errors_then_seconds_then_records() -> None:
    a = partition_status(PLAN, 0, "main", 10, 0, 5, (None, NOW_MS - 1_000), NOW_MS)
    b = partition_status(PLAN, 1, "main", 100, 0, 5, (None, NOW_MS - 1_000), NOW_MS)
    c = partition_status(PLAN, 2, "main", 10, 0, 8, (None, NOW_MS - 9_000), NOW_MS)
    bad = partition_status(PLAN, 2, "main", "broken", 0, None, (None, None), NOW_MS)
    assert worst_first([a, b, c, bad]) == [bad, c, b, a]
    family = FamilyStatus("main", [a, b, c])
    assert (family.lag_records, family.max_lag_seconds) == (4 + 94 + 1, 9.0)
    assert family.to_dict()["worst"][0] == {"topic": "orders", "partition": 2}


def test_the_table_shows_the_error_naming_the_cluster() -> None:
    st = FlowStatus("primary->backup", NOW_MS, errors=["error: cluster 'backup' (target ...) did not answer"])
    st.heartbeat = st.checkpoints = st.failover = {"error": "cluster 'backup' did not answer"}
    text = render_text([st])
    assert text.startswith("primary->backup: lag 0 record(s)") and "error: cluster 'backup'" in text


def test_records_deleted_before_they_were_copied_are_lost_not_lag() -> None:
    p = partition_status(PLAN, 0, "main", 50, 20, 9, (None, NOW_MS - 4_000), NOW_MS, written_ms=NOW_MS - 60_000)
    assert (p.copied_position, p.lost_records, p.lag_records, p.lag_seconds, p.status) == (10, 10, 30, 4.0, LOST)
    assert "10 record(s) (offsets 10-19) were deleted by retention" in (p.error or "")
    assert p.progress_written_ms == NOW_MS - 60_000
    behind = status(10, 0, 5, (None, NOW_MS - 1_000))
    assert worst_first([behind, p]) == [p, behind]  # a loss is worse than any lag


def test_groups_say_what_a_failover_now_would_do_per_checkpoint() -> None:
    def row(group: str, partition: int, upstream: int, downstream: int, rereads: int = 0, translated: bool = True):
        return {
            "group": group,
            "topic": "primary.t",
            "source_topic": "t",
            "partition": partition,
            "upstream_offset": upstream,
            "downstream_offset": downstream,
            "translated": translated,
            "rereads": rereads,
        }

    rows = [
        row("exact", 0, 10, 12),
        row("exact", 1, 5, 5),
        row("rereads", 0, 8, 9, rereads=3),  # an approximate translation inside the copy
        row("ahead", 1, 60, 41, rereads=20),  # committed 60, copied to 40: 20 not on the target yet
        row("nothing", 2, 7, 0, translated=False),
    ]
    summary = summarize_groups(rows, {("t", 0): 30, ("t", 1): 40, ("t", 2): 0})
    counts = (summary["groups"], summary["groups_exact"], summary["partitions"], summary["partitions_exact"])
    assert counts == (4, 1, 5, 2)
    assert summary["outcomes"] == {"exact": 2, "re-read": 1, "not-yet-copied": 1, "untranslated": 1}
    worst = summary["not_exact"][0]
    assert (worst["group"], worst["outcome"], worst["missing_records"], worst["re_read_records"]) == (
        "ahead",
        "not-yet-copied",
        20,
        0,
    )
    st = FlowStatus("primary->backup", NOW_MS, groups=summary)
    assert (
        "groups:      4 group(s) with checkpoints, 1 exact; 2 of 5 partition(s) translate exactly; "
        "worst: ahead primary.t[1] not yet copied: 20 record(s)"
    ) in render_text([st])
    st.groups = summarize_groups([], {})
    assert "groups:      no checkpoints on the target yet" in render_text([st])


def test_a_kept_checkpoint_without_a_count_is_never_called_exact() -> None:
    kept = {
        "group": "mm2-group",
        "topic": "primary.t",
        "source_topic": "t",
        "partition": 0,
        "upstream_offset": 10,
        "downstream_offset": 9,
        "translated": True,
        "exact": False,  # an MM2 checkpoint kept as the best answer; the syncs cannot count its re-reads
        "rereads": 0,
        "basis": "existing checkpoint",
    }
    summary = summarize_groups([kept], {("t", 0): 30})
    assert (summary["groups_exact"], summary["outcomes"]["re-read"]) == (0, 1)
    [row] = summary["not_exact"]
    assert (row["outcome"], row["re_read_records"], row["basis"]) == ("re-read", None, "existing checkpoint")
    assert "worst: mm2-group primary.t[0] re-reads an unknown number" in render_text(
        [FlowStatus("primary->backup", NOW_MS, groups=summary)]
    )
