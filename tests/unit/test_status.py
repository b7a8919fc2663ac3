"""The status model's arithmetic without clusters: lag in records and seconds, states, worst-first order, and a
wide flow summarised per topic and paged."""

from __future__ import annotations

import pytest

from mirrorflow.status import (
    BEHIND,
    CAUGHT_UP,
    ERROR,
    LOST,
    NO_PROGRESS,
    FamilyStatus,
    FlowStatus,
    StatusPages,
    partition_status,
    render_json,
    render_text,
    summarize_groups,
    summarize_topics,
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


# ------------------------------------------------------------------------------ a wide flow: summary and pages


def wide(topics: int = 30, partitions: int = 4) -> FlowStatus:
    """``t000``.. in family ``main`` (``u``.. in ``other`` for the last third): t007 lags most in seconds, t003 has
    the most records behind, t011 has a loss and u020 an error; the rest are caught up."""
    fams = {"main": FamilyStatus("main"), "other": FamilyStatus("other")}
    for t in range(topics):
        family = "main" if t < 2 * topics // 3 else "other"
        name = f"{'t' if family == 'main' else 'u'}{t:03d}"
        plan = TopicPlan(name, f"primary.{name}", partitions)
        for i in range(partitions):
            if t == 7 and i == 1:
                p = partition_status(plan, i, family, 20, 0, 9, (None, NOW_MS - 90_000), NOW_MS)
            elif t == 3:
                p = partition_status(plan, i, family, 500, 0, 99, (None, NOW_MS - 5_000), NOW_MS)
            elif t == 11 and i == 0:
                p = partition_status(plan, i, family, 50, 20, 9, (None, NOW_MS - 1_000), NOW_MS)
            elif t == 20 and i == 2:
                p = partition_status(plan, i, family, "NOT_LEADER_FOR_PARTITION", 0, None, (None, None), NOW_MS)
            else:
                p = partition_status(plan, i, family, 10, 0, 9, (None, None), NOW_MS)
            fams[family].partitions.append(p)
    return FlowStatus("primary->backup", NOW_MS, families=list(fams.values()))


def test_topics_are_summarised_worst_first_errors_losses_then_seconds_then_records() -> None:
    st = wide()
    tops = summarize_topics(st.partitions)
    assert len(tops) == 30 and sum(t.partitions for t in tops) == 120
    assert [t.topic for t in tops[:4]] == ["u020", "t011", "t007", "t003"]
    failed, lost, slow, big = tops[:4]
    assert (failed.failures, failed.status, failed.partitions_behind) == (1, ERROR, 0)
    assert "NOT_LEADER_FOR_PARTITION" in (failed.error or "")
    assert (lost.failures, lost.status, lost.lost_records, lost.lag_records) == (1, LOST, 10, 30)
    assert (slow.partitions, slow.partitions_behind, slow.lag_records, slow.max_lag_seconds) == (4, 1, 10, 90.0)
    assert slow.status == BEHIND and slow.error is None
    assert (big.partitions_behind, big.lag_records, big.max_lag_seconds) == (4, 4 * 400, 5.0)
    assert [t.topic for t in tops[4:7]] == ["t000", "t001", "t002"]  # caught up: by name
    assert all((t.status, t.lag_records, t.failures) == (CAUGHT_UP, 0, 0) for t in tops[4:])
    assert (tops[0].family, tops[0].remote_topic) == ("other", "primary.u020")


def test_family_counts_topics_partitions_behind_and_failures() -> None:
    main, other = (f.to_dict() for f in wide().families)
    assert (main["topics"], main["partitions"], main["partitions_behind"], main["failures"]) == (20, 80, 6, 1)
    assert (other["topics"], other["partitions"], other["partitions_behind"], other["failures"]) == (10, 40, 0, 1)
    assert main["worst"][0] == {"topic": "t011", "partition": 0} and other["worst"][0]["topic"] == "u020"


def test_pages_of_partitions_and_topics_follow_the_worst_first_order() -> None:
    st = wide()
    pages = StatusPages(st)
    everything = pages.page()
    assert len(everything["partitions"]) == 120 and len(everything["topics"]) == 30
    assert everything["partitions"] == [p.to_dict() for p in worst_first(st.partitions)]
    assert (everything["partitions_total"], everything["topics_total"]) == (120, 30)

    first = pages.page(limit=50, topics_limit=10)
    second = pages.page(offset=50, limit=50, topics_offset=10, topics_limit=10)
    last = pages.page(offset=100, limit=50, topics_offset=20, topics_limit=10)
    rows = [(p["topic"], p["partition"]) for page in (first, second, last) for p in page["partitions"]]
    assert rows == [(p["topic"], p["partition"]) for p in everything["partitions"]]  # no row twice, none missed
    assert [t["topic"] for page in (first, second, last) for t in page["topics"]] == [
        t["topic"] for t in everything["topics"]
    ]
    assert first["partitions_page"] == {"offset": 0, "limit": 50, "matched": 120, "shown": 50}
    assert last["partitions_page"] == {"offset": 100, "limit": 50, "matched": 120, "shown": 20}
    assert first["topics_page"] == {"offset": 0, "limit": 10, "matched": 30, "shown": 10}
    assert pages.page(offset=500, limit=50)["partitions"] == []  # past the end: an empty page, not an error
    assert first["lag_records"] == st.to_dict()["lag_records"] and first["flow"] == "primary->backup"


def test_the_topic_filter_is_part_of_the_name_in_any_case_and_the_family_filter_exact() -> None:
    pages = StatusPages(wide())
    one = pages.page(topic="T00", limit=5)
    assert {p["topic"] for p in one["partitions"]} <= {f"t00{i}" for i in range(10)}
    assert one["partitions_page"]["matched"] == 40 and one["topics_page"]["matched"] == 10
    assert one["partitions"][0]["topic"] == "t007"  # still worst first within the filter
    assert one["partitions_total"] == 120  # the totals ignore the filter
    assert pages.page(topic="u02", family="main")["topics"] == []  # u020 is in family "other"
    others = pages.page(family="other")
    assert {t["family"] for t in others["topics"]} == {"other"} and others["topics_page"]["matched"] == 10
    assert pages.page(topic="  ")["topics_page"]["matched"] == 0  # spaces are part of the filter, never a name


def test_the_json_is_every_partition_and_topic_one_per_line() -> None:
    import json

    statuses = [wide(), FlowStatus("other->backup", NOW_MS)]
    text = render_json(statuses)
    assert json.loads(text) == {"flows": [st.to_dict() for st in statuses]}
    lines = text.splitlines()
    assert sum(1 for line in lines if line.lstrip().startswith('{"topic": ')) == 120 + 30
    assert '"partitions": []' in text and '"topics": []' in text  # the empty flow's lists


def test_a_partition_as_json_is_what_asdict_gave() -> None:
    from dataclasses import asdict

    p = partition_status(PLAN, 0, "main", 50, 20, 9, (None, NOW_MS - 4_000), NOW_MS, written_ms=NOW_MS - 60_000)
    p.loss_events.append({"topic": "orders", "partition": 0, "records": 10})
    assert p.to_dict() == asdict(p)


def test_the_table_of_a_wide_flow_lists_the_worst_topics_before_the_worst_partitions() -> None:
    text = render_text([wide()], limit=20)
    assert "family main: 80 partition(s) of 20 topic(s) (6 behind, 1 failed)" in text
    topics_at = text.index("max lag s")
    assert text.index("u020", topics_at) < text.index("t011", topics_at) < text.index("t007", topics_at)
    assert "... 20 more topic(s)" in text and "... 100 more partition(s)" in text
    assert "max lag s" not in render_text([wide(topics=3)], limit=50)  # every partition shown: no topic table


def test_metrics_have_four_series_per_partition_and_grow_with_the_partitions_only() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from mirrorflow.metrics import render

    def partition_samples(st: FlowStatus) -> int:
        return sum(
            1
            for family in text_string_to_metric_families(render([st]))
            for s in family.samples
            if "partition" in s.labels
        )

    small, large = wide(topics=30, partitions=4), wide(topics=300, partitions=4)
    measured = [p for p in large.partitions if p.end_offset is not None]  # an error is absent, not 0
    assert partition_samples(large) == 4 * len(measured)
    assert partition_samples(large) - partition_samples(small) == 4 * (len(large.partitions) - len(small.partitions))


def test_only_lagging_partitions_are_read_and_an_end_behind_the_stored_progress_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``_partitions`` with its Kafka calls replaced: which partitions it reads records of, and which ends twice."""
    from types import SimpleNamespace

    from mirrorflow.config import parse_config
    from mirrorflow.status import collect as module

    flow = parse_config(
        "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
        "a->b.topics = t.*\n"
    ).flow("a", "b")
    plans = [TopicPlan("t1", "a.t1", 3)]
    asked: list[list[tuple[str, int]]] = []
    ends = {("t1", 0): 10, ("t1", 1): 10, ("t1", 2): 10}

    def offsets(_admin, tps, spec, _isolation, _timeout):
        if type(spec).__name__ == "EarliestSpec":
            return {(tp.topic, tp.partition): 0 for tp in tps}
        asked.append([(tp.topic, tp.partition) for tp in tps])
        found = {(tp.topic, tp.partition): ends[(tp.topic, tp.partition)] for tp in tps}
        ends[("t1", 2)] = 14  # a run copied 4 more records meanwhile, and stored its progress before it was read
        return found

    stored = {key: SimpleNamespace(offset=off, written_ms=NOW_MS) for key, off in [(("t1", 0), 9), (("t1", 1), 5)]}
    stored[("t1", 2)] = SimpleNamespace(offset=12, written_ms=NOW_MS)
    read: list[dict[tuple[str, int], tuple[int, int, int]]] = []
    monkeypatch.setattr(module.clients, "admin", lambda *_a, **_k: object())
    monkeypatch.setattr(module.topics, "discover", lambda *_a, **_k: plans)
    monkeypatch.setattr(module, "offsets_or_errors", offsets)
    monkeypatch.setattr(module, "read_stored_progress", lambda *_a, **_k: stored)
    monkeypatch.setattr(module, "fetch_timestamps", lambda _c, wanted, _t: read.append(wanted) or {})

    [family] = [f for f in module._partitions(flow, None, 5.0) if f.partitions]
    parts = {p.partition: p for p in family.partitions}
    assert asked == [[("t1", 0), ("t1", 1), ("t1", 2)], [("t1", 2)]]  # the end behind the progress: asked again
    assert read == [{("t1", 1): (0, 6, 10), ("t1", 2): (0, 13, 14)}]  # the caught-up partition 0 is not read
    assert (parts[2].status, parts[2].end_offset, parts[2].lag_records) == (BEHIND, 14, 1)
    assert (parts[0].status, parts[1].status, parts[1].lag_records) == (CAUGHT_UP, BEHIND, 4)
