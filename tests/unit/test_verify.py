"""The pure parts of `mirrorflow verify`: record encoding, classifying a difference, chunks cut at copied runs (a
range copied twice, records before the first copy), retention-deleted ranges as not verifiable (never as different),
chunks grouped into tasks, lanes and waves, a range fed records, verdicts and exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from mirrorflow.verify.chunk import ChunkSpec, _Range
from mirrorflow.verify.compare import first_difference
from mirrorflow.verify.mapping import Anchor, Span, plan_spans, runs_by_partition
from mirrorflow.verify.plan import PartitionPlan, _plan_one
from mirrorflow.verify.reader import chains, lanes, task_shares, waves
from mirrorflow.verify.records import decode, differing_fields, encode, fields, new_digest
from mirrorflow.verify.report import PartitionVerdict, VerifyReport, render_text
from mirrorflow.wire import CopiedRun, OffsetSync


class Message:
    """What confluent-kafka's Message offers the encoder."""

    def __init__(
        self, key: Any = b"k", value: Any = b"v", headers: Any = None, timestamp: int = 1000, offset: int = 0
    ) -> None:
        self._key, self._value, self._headers, self._timestamp = key, value, headers, timestamp
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def headers(self) -> Any:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp


def test_encoding_tells_apart_what_a_copy_must_keep() -> None:
    base = encode(Message(headers=[("a", b"1"), ("b", None)]))
    assert decode(base) == (b"k", b"v", [("a", b"1"), ("b", None)], 1000)
    variants = [
        Message(key=None, headers=[("a", b"1"), ("b", None)]),  # null key is not empty
        Message(key=b"", headers=[("a", b"1"), ("b", None)]),
        Message(value=None, headers=[("a", b"1"), ("b", None)]),  # a tombstone
        Message(headers=[("b", None), ("a", b"1")]),  # header order
        Message(headers=[("a", b"1"), ("b", b"")]),  # a null header value is not an empty one
        Message(headers=[("a", b"1")]),
        Message(headers=[("a", b"1"), ("b", None)], timestamp=1001),
        Message(key=b"kv", value=b"", headers=[("a", b"1"), ("b", None)]),  # lengths, not concatenation
    ]
    assert len({base, *(encode(m) for m in variants)}) == len(variants) + 1
    assert differing_fields(base, encode(variants[3])) == ["headers"]
    assert differing_fields(base, encode(Message(key=None, value=b"x", timestamp=5))) == [
        "key",
        "value",
        "headers",
        "timestamp",
    ]


def test_the_digest_depends_on_order_and_content_not_on_batches() -> None:
    one, two, three = (fields(Message(value=b"%d" % i, headers=[("h", b"%d" % i)])) for i in range(3))

    def digest(*batches: list[Any]) -> str:
        d = new_digest()
        for batch in batches:
            d.add(batch)
        return d.hexdigest()

    assert digest([one, two, three]) == digest([one], [two, three]) == digest([one, two], [], [three])
    assert digest([one, two, three]) != digest([two, one, three])
    changed = fields(Message(value=b"1", headers=[("h", b"x")]))
    assert digest([one, two, three]) != digest([one, changed, three])
    moved = (b"k1", b"", [("h", b"1")], 1000)  # the same bytes, split differently between key and value
    assert digest([(b"k", b"1", [("h", b"1")], 1000)]) != digest([moved])


def records(first: int, values: str) -> list[tuple[int, bytes]]:
    return [(first + i, encode(Message(value=v.encode()))) for i, v in enumerate(values)]


def test_a_skipped_range_is_missing_with_its_offsets() -> None:
    d = first_difference(records(5, "cdefg"), records(9, "fg"), source_done=True, target_done=True)
    assert (d.kind, d.source_offset, d.source_last, d.target_offset, d.count) == ("missing", 5, 7, 9, 3)
    assert "source offset(s) 5..7 (3 record(s)) before target offset 9" in d.describe()


def test_records_no_source_has_are_extra() -> None:
    d = first_difference(records(10, "cd"), records(20, "xycd"), source_done=True, target_done=True)
    assert (d.kind, d.target_offset, d.target_last, d.source_offset, d.count) == ("extra", 20, 21, 10, 2)
    at_end = first_difference([], records(30, "x"), source_done=True, target_done=True)
    assert (at_end.kind, at_end.target_offset, at_end.source_offset) == ("extra", 30, None)


def test_a_record_changed_in_place_names_its_fields() -> None:
    source = [(4, encode(Message(headers=[("h", b"a")]))), *records(5, "z")]
    target = [(8, encode(Message(headers=[("h", b"b")]))), *records(9, "z")]
    d = first_difference(source, target, source_done=True, target_done=True)
    assert (d.kind, d.source_offset, d.target_offset, d.fields, d.count) == ("differs", 4, 8, ["headers"], 1)


def test_missing_at_a_chunk_end_names_the_next_target_record() -> None:
    d = first_difference(records(5, "abc"), [], source_done=True, target_done=True, target_next=42)
    assert (d.kind, d.source_offset, d.source_last, d.target_offset) == ("missing", 5, 7, 42)


def sync(topic: str, upstream: int, downstream: int, run: tuple[int, int] | None, prev: int = -1) -> OffsetSync:
    copied = None if run is None else CopiedRun(run[0], run[1], prev, -1 if prev < 0 else run[1] - 1)
    return OffsetSync(topic, 0, upstream, downstream, copied)


def test_runs_come_from_start_and_end_syncs_and_a_recopy_drops_older_runs() -> None:
    syncs = [
        sync("t", 0, 0, (0, 0)),
        sync("t", 4, 4, (0, 0)),
        sync("t", 8, 6, (8, 6), prev=4),
        sync("t", 10, 8, (8, 6), prev=4),
    ]
    assert runs_by_partition(syncs)[("t", 0)] == [Anchor(0, 0, 4, 4), Anchor(8, 6, 10, 8)]
    recopied = runs_by_partition([*syncs, sync("t", 0, 20, (0, 20)), sync("t", 3, 23, (0, 20))])
    assert recopied[("t", 0)] == [Anchor(0, 20, 3, 23)]
    mm2 = runs_by_partition([sync("m", 5, 50, None), sync("m", 9, 54, None)])
    assert mm2[("m", 0)] == [Anchor(5, 50, 5, 50), Anchor(9, 54, 9, 54)]


def test_a_range_copied_again_keeps_where_the_first_copies_are() -> None:
    """Progress lost after 0..9 were copied: 5..9 copied again at 11..15. The first run is cut where the second
    starts (its 0..4 still hold), so the first copies of 5..9 lie between two anchors: inside a chunk."""
    syncs = [sync("t", 0, 0, (0, 0)), sync("t", 9, 9, (0, 0)), sync("t", 5, 11, (5, 11), prev=4)]
    syncs.append(sync("t", 9, 15, (5, 11), prev=4))
    runs = runs_by_partition(syncs)[("t", 0)]
    assert runs == [Anchor(0, 0, 4, 4), Anchor(5, 11, 9, 15)]
    spans, gaps = plan_spans(runs, 0, 10, 17, chunk_records=3)
    assert not gaps
    assert [(s.source_begin, s.source_end, s.target_begin, s.target_end) for s in spans] == [
        (0, 5, 0, 11),
        (5, 10, 11, 17),
    ]
    # MM2 copying again from an earlier offset: its pins from there on go, the ones before stay.
    rewound = runs_by_partition([sync("m", 0, 0, None), sync("m", 6, 6, None), sync("m", 3, 9, None)])
    assert rewound[("m", 0)] == [Anchor(0, 0, 0, 0), Anchor(3, 9, 3, 9)]


def test_target_records_before_the_first_copy_are_compared_when_the_whole_partition_is() -> None:
    """Verified from source offset 0: the first chunk begins at the target's log start, not at the first copy."""
    run = [Anchor(0, 3, 13, 16)]  # 0..13 landed at 3..16: something sits at target 0..2
    (span,), gaps = plan_spans(run, 0, 14, 18, chunk_records=100, target_start=0)
    assert (span.source_begin, span.target_begin, span.target_fetch, span.begin_is_record) == (0, 0, 0, False)
    assert not gaps
    (span,), _ = plan_spans(run, 0, 14, 18, chunk_records=100)  # a start of its own (--from-offsets): the copy's
    assert span.target_begin == 3
    (span,), _ = plan_spans(run, 0, 14, 18, chunk_records=100, target_start=2)  # the target's retention: from there
    assert span.target_begin == 2

    gap = [Anchor(10, 3, 19, 12)]  # nothing known of source 0..9; target 0..2 may hold their copies
    (span,), gaps = plan_spans(gap, 0, 20, 13, chunk_records=100, target_start=0)
    assert (span.source_begin, span.target_begin, span.begin_is_record, gaps) == (0, 0, False, [])
    (span,), (unverifiable,) = plan_spans(gap, 0, 20, 13, chunk_records=100, target_start=1)
    assert (span.source_begin, span.target_begin, unverifiable.first, unverifiable.last) == (10, 3, 0, 9)
    started_at_end = [Anchor(10, 0, 19, 9)]  # a copy that began at the source's end: the target holds nothing before
    (span,), (unverifiable,) = plan_spans(started_at_end, 0, 20, 10, chunk_records=100, target_start=0)
    assert (span.source_begin, span.target_begin, unverifiable.first, unverifiable.last) == (10, 0, 0, 9)

    plan = PartitionPlan("t", "primary.t", 0)
    _plan_one(plan, run, requested=0, low=0, end=14, target_end=18, chunk_records=100, target_low=0)
    assert plan.spans[0].target_begin == 0
    retained = PartitionPlan("t", "primary.t", 0)  # the source's log start moved: target 0..2 may copy its deleted
    _plan_one(
        retained, [Anchor(2, 3, 13, 14)], requested=0, low=2, end=14, target_end=15, chunk_records=100, target_low=0
    )
    assert retained.spans[0].target_begin == 3


def test_chunks_are_cut_at_run_starts_and_fetch_from_the_gap_before() -> None:
    runs = [Anchor(0, 0, 4, 4), Anchor(8, 6, 12, 10), Anchor(13, 12, 20, 19)]
    spans, gaps = plan_spans(runs, 0, 21, 22, chunk_records=5)
    assert not gaps
    assert [(s.source_begin, s.source_end, s.target_begin, s.target_end) for s in spans] == [
        (0, 8, 0, 6),
        (8, 13, 6, 12),
        (13, 21, 12, 22),  # the last chunk reaches the target's end: records after the last copy are compared
    ]
    assert spans[2].target_fetch == 11  # the marker before the run, never a transaction's first record
    assert [s.end_is_record for s in spans] == [True, True, False]


def test_a_long_run_is_split_inside() -> None:
    spans, _ = plan_spans([Anchor(0, 100, 999, 1099)], 0, 1000, 1101, chunk_records=300)
    assert [(s.source_begin, s.target_begin) for s in spans] == [(0, 100), (300, 400), (600, 700)]
    assert spans[-1].source_end == 1000 and spans[-1].target_end == 1101


def test_a_start_inside_a_run_maps_exactly_and_before_every_run_is_unverifiable() -> None:
    runs = [Anchor(10, 3, 19, 12)]
    (span,), gaps = plan_spans(runs, 14, 20, 13, chunk_records=100)
    assert (span.source_begin, span.target_begin, span.begin_is_record) == (14, 7, True) and not gaps
    (span,), (gap,) = plan_spans(runs, 0, 20, 13, chunk_records=100)
    assert (span.source_begin, span.target_begin) == (10, 3) and (gap.first, gap.last) == (0, 9)
    assert plan_spans([], 0, 20, 13, 100) == ([], [plan_spans([], 0, 20, 13, 100)[1][0]])
    assert plan_spans(runs, 20, 20, 13, 100) == ([], [])


def test_records_retention_deleted_are_not_verifiable_never_different() -> None:
    """What the integration test shows on the embedded broker, as the pure rule: below the log start nothing is
    compared, the range is named, and the verdict stays identical."""
    plan = PartitionPlan("t", "primary.t", 0)
    _plan_one(plan, [Anchor(0, 0, 19, 19)], requested=0, low=12, end=20, target_end=21, chunk_records=100)
    (gone,) = plan.unverifiable
    assert (gone.first, gone.last) == (0, 11) and "deleted on the source" in gone.reason
    assert [(s.source_begin, s.target_begin) for s in plan.spans] == [(12, 12)]
    requested = PartitionPlan("t", "primary.t", 0)
    _plan_one(requested, [Anchor(0, 0, 19, 19)], requested=15, low=12, end=20, target_end=21, chunk_records=100)
    assert not requested.unverifiable  # a start after the log start: nothing was asked for below it
    everything = PartitionPlan("t", "primary.t", 0)
    _plan_one(everything, [Anchor(0, 0, 19, 19)], requested=0, low=25, end=20, target_end=21, chunk_records=100)
    assert [(u.first, u.last) for u in everything.unverifiable] == [(0, 19)] and not everything.spans

    verdict = PartitionVerdict("t", "primary.t", 0, unverifiable=[{"first": 0, "last": 11, "reason": "gone"}])
    verdict.chunks.append({"identical": True})
    report = VerifyReport("primary->backup", None, "now", partitions=[verdict])
    assert (verdict.status, report.status, report.exit_code) == ("identical", "identical", 0)
    verdict.chunks.clear()
    assert verdict.status == "not verifiable" and report.exit_code == 0


@pytest.mark.parametrize(
    ("difference", "errors", "status", "code"),
    [(None, [], "identical", 0), ("extra", [], "different", 1), (None, ["cannot read"], "error", 2)],
)
def test_exit_codes(difference: str | None, errors: list[str], status: str, code: int) -> None:
    verdict = PartitionVerdict("t", "primary.t", 0, 0, 9, 0, 9, 10, 10, chunks=[{"identical": difference is None}])
    if difference:
        verdict.differences.append({"kind": "extra", "source_offset": None, "target_offset": 10, "count": 1})
    report = VerifyReport("primary->backup", None, "now", partitions=[verdict], errors=errors)
    assert (report.status, report.exit_code, report.to_dict()["status"]) == (status, code, status)
    text = render_text(report)
    assert text.splitlines()[0].split()[:3] == ["source", "target", "source"]
    assert status.upper() in text or status in text


def test_spans_are_plain_data() -> None:
    assert Span(0, 1, 0, 1, 0, 0).begin_is_record


def chunk(index: int, topic: str, partition: int, records: int, begin: int = 0) -> ChunkSpec:
    end = begin + records
    return ChunkSpec(index, topic, f"primary.{topic}", partition, begin, end, begin, end, begin, begin, True, {}, {})


def test_chunks_are_grouped_into_tasks_lanes_waves_and_chains() -> None:
    """Small chunks share a task and a lane; large ones get their own; a partition's consecutive chunks are one
    chain (read once, on from one into the next), kept together unless that leaves too few groups; a wave never
    reads a partition twice."""
    small = [chunk(i, "t", i, 3) for i in range(200)]
    assert task_shares(small) == [list(range(200))] and lanes(small) == [list(range(200))]
    large = [chunk(i, "t", i, 250_000) for i in range(4)]
    assert task_shares(large) == [[0], [1], [2], [3]] and lanes(large, threads=2) == [[0, 2], [1, 3]]
    assert len(task_shares([chunk(i, "t", i, 200_000) for i in range(100)])) == 64

    split = [chunk(p * 5 + k, "t", p, 10_000, begin=k * 10_000) for p in range(4) for k in range(5)]
    assert chains(split) == [list(range(p * 5, p * 5 + 5)) for p in range(4)]
    assert task_shares(split) == [[0, 1, 2, 3, 4, 10, 11, 12, 13, 14], [5, 6, 7, 8, 9, 15, 16, 17, 18, 19]]
    one_partition = [chunk(k, "t", 0, 250_000, begin=k * 250_000) for k in range(4)]  # spread: too few partitions
    assert task_shares(one_partition) == [[0], [1], [2], [3]]

    same_partition = [chunk(0, "a", 0, 5), chunk(1, "a", 0, 5, begin=7), chunk(2, "b", 0, 5), chunk(3, "a", 1, 5)]
    assert waves(same_partition) == [[[0], [3], [2]], [[1]]]  # 1 does not continue 0 (a gap): another wave
    contiguous = [chunk(0, "a", 0, 5), chunk(1, "a", 0, 5, begin=5)]
    assert waves(contiguous) == [[[0, 1]]]
    assert waves([chunk(i, "t", i, 1) for i in range(5)], size=2) == [[[0], [1]], [[2], [3]], [[4]]]


def test_a_range_digests_what_lies_in_it_and_ends_at_its_last_record_or_its_partition_end() -> None:
    def messages(first: int, count: int) -> list[Message]:
        return [Message(value=b"%d" % (first + i), offset=first + i) for i in range(count)]

    r = _Range({}, "t", 0, 5, 10, False, 1.0)
    r.keep = False
    r.take(messages(3, 4))  # 3 and 4 come before the range (a fetch from the marker before it)
    assert (r.count, r.done) == (2, False)
    r.take(messages(7, 5))  # 9 is the range's last offset: complete, 10 and 11 dropped
    assert (r.count, r.done) == (5, True)
    whole = new_digest()
    whole.add([fields(m) for m in messages(5, 5)])
    assert r.digest.hexdigest() == whole.hexdigest()

    ends_in_marker = _Range({}, "t", 0, 0, 4, False, 1.0)
    ends_in_marker.take(messages(0, 3))  # offset 3 is a commit marker: never delivered
    assert not ends_in_marker.done
    ends_in_marker.reached(3)
    assert not ends_in_marker.done
    ends_in_marker.reached(4)
    assert ends_in_marker.done and ends_in_marker.count == 3 and len(ends_in_marker.recs) == 3
