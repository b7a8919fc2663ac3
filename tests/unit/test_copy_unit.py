"""The copier's bookkeeping against fake clients: where each copy landed, kept producers, failures named.

The real clients are covered by the integration tests (tests/integration/test_replication.py, test_faults.py);
these pin what does not depend on a broker: target offsets paired with source offsets whatever order the
delivery reports come in, a kept transactional producer reused and replaced once fenced, the record a refused
batch is named by, and the consumer paused once the unit's last record is in hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow.replication import copy, producers, tuning, unit_reads
from mirrorflow.replication import lanes as lane_rules
from mirrorflow.replication.lane_transaction import LaneTransaction
from mirrorflow.replication.progress import StoredProgress
from mirrorflow.replication.unit_copy import UnitCopy
from mirrorflow.replication.units import Reset, Run, UnitSpec
from mirrorflow.wire import source_offset_value


class FakeMessage:
    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        self._topic, self._partition, self._offset, self._key, self._value = topic, partition, offset, key, value
        self._error: KafkaError | None = None

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]] | None:
        return [("h", b"1")]

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self._offset)


def eof(partition: int = 0) -> FakeMessage:
    message = FakeMessage("src", partition, -1, None, None)
    message._error = KafkaError(KafkaError._PARTITION_EOF)
    return message


class FakeConsumer:
    """One source partition holding ``values`` from offset 0."""

    def __init__(self, values: list[bytes]) -> None:
        self.values = values
        self.position_ = 0
        self.paused = False
        self.was_paused = False
        self.assigned: list[Any] = []
        self.closed = False
        self.low = 0  # the log start: records below it were deleted (a fetch there is out of range)
        self.watermark_asks = 0
        self.metadata_asks: list[str] = []  # topics whose metadata was asked for (``kept_clients.learn_topic``)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.metadata_asks.append(topic or "*")
        return SimpleNamespace(topics={"src": None})

    def get_watermark_offsets(self, _tp: Any, *_args: Any, **_kwargs: Any) -> tuple[int, int]:
        self.watermark_asks += 1
        return self.low, len(self.values)

    def assign(self, tps: list[Any]) -> None:
        self.assigned = tps
        self.position_ = tps[0].offset

    def assignment(self) -> list[Any]:
        return self.assigned

    def unassign(self) -> None:
        self.assigned = []

    def resume(self, _tps: list[Any]) -> None:
        self.paused = False

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        assert not self.paused, "consumed after pausing"
        start = self.position_
        if start < self.low:  # auto.offset.reset=error: librdkafka reports the out-of-range position
            message = FakeMessage("src", self.assigned[0].partition, start, None, None)
            message._error = KafkaError(KafkaError._AUTO_OFFSET_RESET)
            return [message]
        batch = [
            FakeMessage("src", self.assigned[0].partition, offset, b"k%d" % offset, self.values[offset])
            for offset in range(start, min(len(self.values), start + num_messages))
        ]
        self.position_ += len(batch)
        if len(batch) < num_messages and self.position_ == len(self.values):
            batch.append(eof(self.assigned[0].partition))
        return batch

    def pause(self, _tps: list[Any]) -> None:
        self.paused = self.was_paused = True

    def position(self, tps: list[Any]) -> list[Any]:
        tps[0].offset = self.position_
        return tps

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    """A producer of one broker: offsets per topic, delivery reports served by poll/flush.

    ``reverse``: serve each poll's reports last-sent first. ``fenced``: every delivery fails as fenced.
    ``max_size``: records with a larger value fail with their whole batch (everything not yet reported).
    ``interleave``: another producer's record lands after every ``interleave`` records of this one.
    Like librdkafka, a record that failed (reported or not) makes the transaction's commit fail (abortable), an
    abort purges what was not yet reported, and only records produced with a callback are reported.
    """

    made: ClassVar[list[FakeProducer]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.offsets: dict[str, int] = {}
        self.pending: list[tuple[Any, FakeMessage]] = []
        self.log: dict[str, list[FakeMessage]] = {}
        self.inits = 0
        self.commits = 0
        self.reverse = False
        self.fenced = False
        self.max_size: int | None = None
        self.interleave = 0
        self.aborts = 0
        self.sent = 0
        self.reported = 0  # delivery callbacks called
        self.txn_failed: KafkaError | None = None
        self.txn: list[FakeMessage] = []  # records of the open transaction
        self.stored: int | None = None  # offset in the last committed progress record
        FakeProducer.made.append(self)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        """The metadata request a new producer makes first (connects it); nothing to learn here."""

    def init_transactions(self, _timeout: float) -> None:
        self.inits += 1

    def begin_transaction(self) -> None:
        pass

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        self.sent += 1
        if self.interleave and topic == "src.src" and self.sent % self.interleave == 0:
            self.offsets[topic] = self.offsets.get(topic, 0) + 1  # a foreign record
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        message = FakeMessage(topic, partition, offset, key, value)
        self.log.setdefault(topic, []).append(message)
        self.txn.append(message)
        self.pending.append((callback or on_delivery, message))

    def poll(self, _timeout: float = 0) -> int:
        pending, self.pending = self.pending, []
        too_large = self.max_size is not None and any(len(m.value() or b"") > self.max_size for _, m in pending)
        if too_large:
            self.txn_failed = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
        for callback, message in reversed(pending) if self.reverse else pending:
            if callback is None:
                continue
            self.reported += 1
            if self.fenced:
                callback(KafkaError(KafkaError._FENCED, "fenced", fatal=True), message)
            elif too_large:
                callback(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), message)
            else:
                callback(None, message)
        return len(pending)

    def purge(self) -> None:
        self.purged = True
        pending, self.pending = self.pending, []
        for callback, message in pending:
            if callback is not None:
                callback(KafkaError(KafkaError._PURGE_QUEUE), message)

    def flush(self, _timeout: float = 0) -> int:
        self.poll()
        return 0

    def commit_transaction(self, _timeout: float) -> None:
        if self.fenced:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        self.flush()
        if self.txn_failed is not None:
            raise KafkaException(KafkaError(self.txn_failed.code(), "a record failed", txn_requires_abort=True))
        self.commits += 1
        progress = [m for m in self.txn if m.topic() == "mm2-offsets.src.internal"]
        if progress:
            self.stored = json.loads(progress[-1].value() or b"")["offset"]
        self.txn = []

    def abort_transaction(self, _timeout: float) -> None:
        if self.fenced:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        self.aborts += 1
        self.purge()
        self.txn, self.txn_failed = [], None


def refuse_values_over(monkeypatch: pytest.MonkeyPatch, max_size: int) -> None:
    """Every FakeProducer made from now on refuses records whose value is larger than ``max_size`` bytes."""
    real = FakeProducer.__init__

    def limited(self: FakeProducer, config: dict[str, Any]) -> None:
        real(self, config)
        self.max_size = max_size

    monkeypatch.setattr(FakeProducer, "__init__", limited)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {"values": [b"v%d" % i for i in range(25)], "consumers": []}

    def consumer(_spec: UnitSpec, **_overrides: Any) -> FakeConsumer:
        made = FakeConsumer(state["values"])
        made.low = state.get("low", 0)
        state["consumers"].append(made)
        return made

    FakeProducer.made = []
    monkeypatch.setattr(producers, "Producer", FakeProducer)
    monkeypatch.setattr(unit_reads, "source_consumer", consumer)

    def stored(_spec: UnitSpec) -> StoredProgress | None:
        # No stored progress (each unit from 0), unless a test follows what the units committed.
        kept = [p.stored for p in FakeProducer.made if p.stored is not None]
        return StoredProgress(kept[-1]) if state.get("follow_progress") and kept else None

    monkeypatch.setattr(unit_reads, "stored", stored)
    state["lane_reads"] = 0

    def stored_many(specs: list[UnitSpec]) -> dict[tuple[str, int], StoredProgress | None]:
        state["lane_reads"] += 1
        return {(spec.topic, spec.partition): stored(spec) for spec in specs}

    monkeypatch.setattr(unit_reads, "stored_many", stored_many)
    producers.close_kept_clients()
    yield state
    producers.close_kept_clients()


def unit(delivery: str = "exactly-once", end: int = 25, **overrides: Any) -> UnitSpec:
    fields: dict[str, Any] = {
        "source_alias": "src",
        "target_alias": "dst",
        "topic": "src",
        "remote_topic": "src.src",
        "partition": 0,
        "end": end,
        "default_start": 0,
        "max_records": 1000,
        "max_bytes": 10**9,
        "delivery": delivery,
        "transactional_id": "mirrorflow|f|src|0",
        "source_consumer": {},
        "target_producer": {"bootstrap.servers": "x"},
        "target_consumer": {},
        "progress_topic": "mm2-offsets.src.internal",
        "progress_partition": 0,
        "progress_key": b"k",
        "syncs_topic": "mm2-offset-syncs.dst.internal",
        "syncs_on_target": True,
        "syncs_producer": {"bootstrap.servers": "x"},
        "emit_syncs": True,
        "truncation": "continue",
    }
    fields.update(overrides)
    return UnitSpec(**fields)


def test_a_unit_copies_in_order_and_pauses_once_it_has_its_last_record(fakes: dict[str, Any]) -> None:
    result = copy.copy_unit(unit())
    assert (result.status, result.records, result.error) == ("copied", 25, None)
    assert result.runs == [Run(0, 0, 24, 24)]
    (producer,) = FakeProducer.made
    assert [m.value() for m in producer.log["src.src"]] == fakes["values"]
    assert producer.commits == 1
    (consumer,) = fakes["consumers"]
    assert consumer.was_paused
    assert consumer.metadata_asks == ["*"]  # a consumer learns every topic once, before its first assignment
    # Given back unassigned and resumed, kept for the next unit of this process, closed with the kept clients.
    assert (consumer.assigned, consumer.paused, consumer.closed) == ([], False, False)
    producers.close_kept_clients()
    assert consumer.closed


def test_a_unit_takes_the_log_start_from_the_plan_and_asks_only_when_it_is_unknown_or_above_the_start(
    fakes: dict[str, Any],
) -> None:
    assert copy.copy_unit(unit(log_start=0)).records == 25
    assert copy.copy_unit(unit(log_start=-1)).records == 25
    fakes["consumers"][0].low = 3
    loss = copy.copy_unit(unit(log_start=3)).loss  # the plan saw records lost: asked again, reported
    assert loss is not None and (loss.first_missing, loss.last_missing) == (0, 2)
    assert [c.watermark_asks for c in fakes["consumers"]] == [2]  # one kept consumer: asked by the last two


def test_records_deleted_after_the_plan_stop_the_unit_as_truncated_with_nothing_claimed(
    fakes: dict[str, Any],
) -> None:
    fakes["low"] = 5  # retention deleted 0..4 after the run planned with log start 0
    result = copy.copy_unit(unit(log_start=0))
    assert (result.status, result.truncated, result.records, result.loss) == ("noop", True, 0, None)
    (consumer,) = fakes["consumers"]
    assert consumer.watermark_asks == 0  # the run's next unit asks (``run._Run.truncated``)
    assert not FakeProducer.made[0].log.get("src.src")


def test_target_offsets_pair_with_source_offsets_whatever_order_reports_come_in(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = FakeProducer.__init__

    def reversed_reports(self: FakeProducer, config: dict[str, Any]) -> None:
        real(self, config)
        self.reverse = True
        self.offsets["src.src"] = 100  # the remote topic already holds 100 records

    monkeypatch.setattr(FakeProducer, "__init__", reversed_reports)
    result = copy.copy_unit(unit())
    assert result.status == "copied"
    assert result.runs == [Run(0, 100, 24, 124)]


@pytest.mark.parametrize("idle", ["long idle: probe first", "next unit of a lane: no probe"])
def test_a_kept_producer_is_reused_and_a_fenced_one_replaced(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch, idle: str
) -> None:
    if idle.startswith("long"):
        monkeypatch.setattr(tuning, "PROBE_AFTER_IDLE_S", 0.0)
    fakes["values"] = [b"v%d" % i for i in range(10)]
    first = copy.copy_unit(unit(end=10))
    assert first.status == "copied" and len(FakeProducer.made) == 1
    fakes["values"] += [b"w%d" % i for i in range(10)]
    second = copy.copy_unit(unit(end=20))
    assert second.status == "copied" and len(FakeProducer.made) == 1  # reused: no new producer, no new init
    assert FakeProducer.made[0].inits == 1
    FakeProducer.made[0].fenced = True  # another process took the transactional.id since
    third = copy.copy_unit(unit(end=20))
    assert (third.status, third.records) == ("copied", 20)
    assert len(FakeProducer.made) == 2 and FakeProducer.made[1].inits == 1
    assert FakeProducer.made[1].commits == 1 and FakeProducer.made[0].commits == 2  # the fenced one committed nothing
    # After a long idle, the fenced producer learned it after one record (the probe); in a lane, after its span.
    # Either way it is not kept, and the unit was copied again by a new producer. (No stored progress here: each unit
    # copies from offset 0.)
    sent_by_third = 1 if idle.startswith("long") else 20
    assert len(FakeProducer.made[0].log["src.src"]) == 10 + 20 + sent_by_third
    assert producers.KEPT_PRODUCERS.clients() == [FakeProducer.made[1]]
    producers.close_kept_clients()
    assert len(producers.KEPT_PRODUCERS) == 0


def test_kept_producers_are_bounded(fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuning, "KEEP_PRODUCERS", 2)
    for partition in range(3):
        assert copy.copy_unit(unit(partition=partition, transactional_id=f"t{partition}")).status == "copied"
    assert len(producers.KEPT_PRODUCERS) == 2
    assert producers.KEPT_PRODUCERS.clients() == FakeProducer.made[1:]  # the least recently used went


def test_a_refused_batch_names_its_largest_record(fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    fakes["values"] = [b"small-%d" % i for i in range(10)] + [b"L" * 5000] + [b"after-%d" % i for i in range(5)]
    refuse_values_over(monkeypatch, 2000)
    result = copy.copy_unit(unit(end=16))
    assert result.status == "failed" and result.records == 0
    assert "source offset 10" in (result.error or "") and "5003 bytes" in (result.error or ""), result.error


def test_at_least_once_checkpoints_inside_a_consumer_batch(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY_RECORDS", 10)
    result = copy.copy_unit(unit("at-least-once"))
    assert (result.status, result.records) == ("copied", 25)
    assert result.runs == [Run(0, 0, 9, 9), Run(10, 10, 19, 19), Run(20, 20, 24, 24)]
    (producer,) = FakeProducer.made
    assert [m.value() for m in producer.log["mm2-offsets.src.internal"]] == [
        b'{"offset":9}',
        b'{"offset":19}',
        b'{"offset":24}',
    ]
    (consumer,) = fakes["consumers"]
    assert consumer.was_paused  # one consumer batch held all 25 records


def test_an_exactly_once_unit_chains_bounded_transactions_on_one_consumer(fakes: dict[str, Any]) -> None:
    result = copy.copy_unit(unit(max_records=10))
    assert (result.status, result.records, result.position) == ("copied", 25, 25)
    assert result.runs == [Run(0, 0, 9, 9), Run(10, 10, 19, 19), Run(20, 20, 24, 24)]
    (producer,) = FakeProducer.made
    assert producer.commits == 3
    assert [m.value() for m in producer.log["mm2-offsets.src.internal"]] == [
        b'{"offset":9}',
        b'{"offset":19}',
        b'{"offset":24}',
    ]
    assert [m.value() for m in producer.log["src.src"]] == fakes["values"]
    assert len(fakes["consumers"]) == 1  # the next transaction went on where the last one stopped


def test_a_transaction_full_by_bytes_leaves_the_rest_of_the_batch_to_the_next(fakes: dict[str, Any]) -> None:
    # Each record is 2 bytes of key ("k0") + 2-3 of value + 2 of header: a 40-byte span holds 6 or 7.
    result = copy.copy_unit(unit(max_bytes=40))
    assert (result.status, result.records) == ("copied", 25)
    (producer,) = FakeProducer.made
    assert [m.value() for m in producer.log["src.src"]] == fakes["values"]  # nothing skipped, nothing twice
    assert producer.commits > 3
    assert (result.runs[0].start_upstream, result.runs[0].start_downstream) == (0, 0)
    assert all(r.end_upstream + 1 == n.start_upstream for r, n in zip(result.runs, result.runs[1:]))


def test_a_unit_whose_time_is_up_returns_after_its_first_transaction(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuning, "UNIT_SECONDS", 0.0)
    result = copy.copy_unit(unit(max_records=10))
    assert (result.status, result.records, result.position) == ("copied", 10, 10)
    assert FakeProducer.made[0].commits == 1
    assert fakes["consumers"][0].assigned == []


def test_a_failure_in_a_later_transaction_keeps_what_earlier_ones_committed(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes["values"] = [b"v%d" % i for i in range(22)] + [b"L" * 5000] + [b"after"]
    refuse_values_over(monkeypatch, 2000)
    fakes["follow_progress"] = True
    result = copy.copy_unit(unit(end=24, max_records=10))
    assert (result.status, result.records, result.position) == ("failed", 20, 20)
    assert "source offset 22" in (result.error or ""), result.error


def test_exactly_once_hears_only_of_each_consumer_batch_first_and_last_record(fakes: dict[str, Any]) -> None:
    """A report per record cost ~1 us of the copier's ~8; the two ends of a batch prove where all of it landed."""
    fakes["values"] = [b"v%d" % i for i in range(12_000)]
    result = copy.copy_unit(unit(end=12_000, max_records=100_000))
    assert (result.status, result.records, result.runs) == ("copied", 12_000, [Run(0, 0, 11_999, 11_999)])
    (producer,) = FakeProducer.made
    batches = -(-12_000 // tuning.CONSUME_BATCH)
    assert producer.reported == 2 * batches + 1  # + the progress record's report
    assert [m.value() for m in producer.log["src.src"]] == fakes["values"]


def test_at_least_once_hears_of_every_record(fakes: dict[str, Any]) -> None:
    """No transaction refuses to commit after a failed record: at-least-once needs each record's report."""
    result = copy.copy_unit(unit("at-least-once"))
    assert (result.status, result.records) == ("copied", 25)
    assert FakeProducer.made[0].reported == 25 + 1


def test_foreign_records_among_a_batch_send_the_span_again_with_a_report_per_record(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another producer writing the remote partition breaks the proof of a batch's two ends: the span is aborted
    (nothing of it visible) and copied again reporting each record, so the offset mapping stays exact."""
    real = FakeProducer.__init__

    def shared(self: FakeProducer, config: dict[str, Any]) -> None:
        real(self, config)
        self.interleave = 10

    monkeypatch.setattr(FakeProducer, "__init__", shared)
    fakes["follow_progress"] = True
    result = copy.copy_unit(unit(max_records=10))
    assert (result.status, result.records, result.position, result.start) == ("copied", 25, 25, 0)
    (producer,) = FakeProducer.made
    # Every claimed pair is where the record really landed, and every record is claimed once.
    landed = {m.offset(): m.value() for m in producer.log["src.src"]}
    claimed = [
        (u, d)
        for r in result.runs
        for u, d in zip(range(r.start_upstream, r.end_upstream + 1), range(r.start_downstream, r.end_downstream + 1))
    ]
    assert [u for u, _ in claimed] == list(range(25))
    assert all(landed[d] == fakes["values"][u] for u, d in claimed)
    assert len(result.runs) > 3  # the gaps the foreign records left are gaps between runs
    assert producer.aborts == 1  # the first span, once; every later span reported each record


def test_units_of_a_process_run_in_threads_and_results_keep_their_order(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuning, "KEEP_PRODUCERS", 16)
    specs = [unit(partition=p, transactional_id=f"t{p}") for p in range(20)]
    results = copy.copy_units(specs, threads=4)
    assert [(r.partition, r.status, r.records) for r in results] == [(p, "copied", 25) for p in range(20)]
    assert len(FakeProducer.made) == 20  # one producer per unit (transactional.id), never shared by two units
    assert len(producers.KEPT_PRODUCERS) == tuning.KEEP_PRODUCERS  # kept ones bounded under threads too


def test_a_wave_is_spread_over_tasks_by_its_records_whole_lanes_each() -> None:
    def units(topics: int, partitions: int, records: int) -> list[UnitSpec]:
        return [
            unit(
                topic=f"t{t}",
                partition=p,
                end=records,
                transactional_id=lane_rules.transactional_id("f", "default", f"t{t}", p),
            )
            for t in range(topics)
            for p in range(partitions)
        ]

    def ids(shares: list[list[int]], specs: list[UnitSpec]) -> list[set[str]]:
        return [{specs[i].transactional_id for i in share} for share in shares]

    big = units(1, 4, 250_000)
    assert lane_rules.task_shares(big) == [[0], [1], [2], [3]]  # a task per partition: each copy a core to itself
    few = units(1, 4, 100)
    assert lane_rules.task_shares(few) == [[0, 1, 2, 3]]  # small: one task, its threads overlap the waits
    wide = units(1, 1000, 10)
    assert [sorted(share) for share in lane_rules.task_shares(wide)] == [list(range(1000))]
    widest = units(1000, 10, 2)  # a whole cluster's first run: 20,000 records, but 10,000 units' own work
    assert (
        len(lane_rules.task_shares(widest))
        == -(-10_000 * (2 + lane_rules.UNIT_RECORDS) // lane_rules.TASK_RECORDS)
        == 5
    )
    wide_and_big = units(1, 1000, 10_000)
    shares = lane_rules.task_shares(wide_and_big)
    assert len(shares) == lane_rules.TRANSACTION_SLOTS  # a task per lane: 64 producers for 1,000 partitions
    assert sorted(i for share in shares for i in share) == list(range(1000))
    assert all(len(lane) == 1 for lane in ids(shares, wide_and_big))  # a lane never spans two tasks
    many = units(50, 4, 100_000)
    shares = lane_rules.task_shares(many)
    assert (
        len(shares) == len(lane_rules.lanes(many)) <= lane_rules.TASK_UNITS
    )  # a family's lanes are its id slots at most
    assert all(len(lane) == 1 for lane in ids(shares, many))
    assert len({spec.transactional_id for spec in units(1000, 10, 1)}) == lane_rules.TRANSACTION_SLOTS  # across topics
    resumed = unit(end=300_000, stored=StoredProgress(299_989))  # planned from its stored progress: 10 records
    assert lane_rules.task_shares([resumed, *units(1, 1, 20)]) == [[1, 0]]  # 30 records: one task
    assert lane_rules.task_shares([unit(end=300_000), *units(1, 1, 20)]) == [[0], [1]]  # from offset 0: two
    loose = [unit(delivery="at-least-once", partition=p) for p in range(3)]  # no transactional producer to share
    assert lane_rules.lanes(loose) == [[0], [1], [2]]


def test_units_sharing_a_transactional_id_run_one_after_the_other_on_one_producer_until_their_time_is_up(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = [
        unit(partition=p, transactional_id=lane_rules.transactional_id("f", "default", "src", p))
        for p in (0, 64, 128, 1)
    ]
    results = copy.copy_units(specs, threads=4)
    assert [(r.partition, r.status, r.records) for r in results] == [(p, "copied", 25) for p in (0, 64, 128, 1)]
    assert [p.inits for p in FakeProducer.made] == [1, 1]  # one producer per lane, reused by its later units
    assert [p.commits for p in FakeProducer.made] == [1, 1]  # small units of a lane share one transaction
    lane = FakeProducer.made[0].log
    assert [m.partition() for m in lane["src.src"]] == [0] * 25 + [64] * 25 + [128] * 25
    assert [m.partition() for m in lane["mm2-offsets.src.internal"]] == [0, 0, 0]  # a progress record per unit
    assert fakes["lane_reads"] == 2  # each lane read its units' stored progress once
    monkeypatch.setattr(tuning, "UNIT_SECONDS", 0.0)
    results = copy.copy_units(specs, threads=4)
    # The first unit of a lane always runs (a wave moves on); the rest wait for the next wave.
    assert [(r.partition, r.status) for r in results] == [
        (0, "copied"),
        (64, "deferred"),
        (128, "deferred"),
        (1, "copied"),
    ]
    assert results[1].position is None and results[1].records == 0
    # The lane committed what unit 0 left open, and kept its producer under its id: the next wave reuses it.
    assert [p.commits for p in FakeProducer.made] == [2, 2]
    monkeypatch.setattr(tuning, "UNIT_SECONDS", 30.0)
    copy.copy_units(specs[1:3], threads=4)
    assert len(FakeProducer.made) == 2 and [p.inits for p in FakeProducer.made] == [1, 1]


def test_a_lane_reads_its_progress_once_per_producer_and_each_answer_serves_one_read(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = [
        unit(partition=p, transactional_id=lane_rules.transactional_id("f", "default", "src", p)) for p in (0, 64, 128)
    ]
    single: list[int] = []
    monkeypatch.setattr(unit_reads, "stored", lambda spec: single.append(spec.partition))
    lane = LaneTransaction()
    lane.specs = specs
    first, second = FakeProducer({}), FakeProducer({})
    lane.stored(specs[0], first)
    lane.stored(specs[1], first)
    assert (fakes["lane_reads"], single) == (1, [])
    lane.stored(specs[1], first)  # read again (a span copied again): what its own commits stored since, its own read
    assert (fakes["lane_reads"], single) == (1, [64])
    lane.stored(specs[2], second)  # a new producer holds the id now (the one before was fenced): read again
    assert (fakes["lane_reads"], single) == (2, [64])


def test_the_source_consumer_reads_ahead_a_bounded_amount_unless_the_flow_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """librdkafka's default read-ahead (100,000 records / 64 MiB) fetched records past a unit's end that were thrown
    away, and on a broker answering end-of-partition fetches at once it turned into a fetch loop."""
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(unit_reads, "Consumer", lambda config: made.append(config))
    unit_reads.source_consumer(unit())
    unit_reads.source_consumer(unit(source_consumer={"queued.min.messages": 500, "queued.max.messages.kbytes": 1024}))
    assert (made[0]["queued.min.messages"], made[0]["queued.max.messages.kbytes"]) == (10_000, 32 * 1024)
    assert (made[1]["queued.min.messages"], made[1]["queued.max.messages.kbytes"]) == (500, 1024)
    assert all(config["enable.partition.eof"] and config["auto.offset.reset"] == "error" for config in made)


def test_a_consumer_batch_of_another_partition_is_refused_and_nothing_of_it_committed(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source consumer is a kept one that copied other partitions before: a record of one of those (which
    librdkafka discards on assign) would land in the wrong remote partition, so a batch's ends are checked."""
    real = FakeConsumer.consume

    def stale(self: FakeConsumer, num_messages: int, timeout: float) -> list[FakeMessage]:
        batch = real(self, num_messages, timeout)
        return [FakeMessage("src", 7, 3, b"k", b"from partition 7"), *batch]

    monkeypatch.setattr(FakeConsumer, "consume", stale)
    result = copy.copy_unit(unit())
    assert (result.status, result.records, result.retriable) == ("failed", 0, True)
    assert "src[0]: the source consumer returned a record of src[7]" in (result.error or "")
    (producer,) = FakeProducer.made
    assert producer.commits == 0 and "src.src" not in producer.log
    assert fakes["consumers"][0].closed  # not kept after a failure


def test_when_a_lane_transaction_is_aborted_its_earlier_units_fail_retriably_having_committed_nothing(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units 0 and 64 share a transaction id: unit 0 leaves its span in the open transaction, unit 64 meets a
    record the target refuses, so the transaction is aborted: unit 0 must not claim records it never committed."""
    fakes["values"] = [b"v%d" % i for i in range(10)] + [b"L" * 5000] + [b"w%d" % i for i in range(5)]
    refuse_values_over(monkeypatch, 2000)
    specs = [
        unit(partition=p, end=end, transactional_id=lane_rules.transactional_id("f", "default", "src", p))
        for p, end in ((0, 10), (64, 16))
    ]
    first, second = copy.copy_units(specs)
    assert (first.status, first.records, first.retriable, first.position, first.runs) == ("failed", 0, True, None, [])
    assert "nothing of it was committed" in (first.error or "")
    assert (second.status, second.records) == ("failed", 0)
    assert "source offset 10" in (second.error or "")  # the refused record, named
    (producer,) = FakeProducer.made
    assert producer.commits == 0 and producer.aborts >= 1 and producer.stored is None
    assert len(producers.KEPT_PRODUCERS) == 0  # a producer whose lane failed is not kept


def test_a_unit_that_committed_before_never_leaves_its_last_span_to_the_lane(fakes: dict[str, Any]) -> None:
    specs = [
        unit(partition=p, max_records=10, transactional_id=lane_rules.transactional_id("f", "default", "src", p))
        for p in (0, 64)
    ]
    results = copy.copy_units(specs)
    assert [(r.status, r.records) for r in results] == [("copied", 25), ("copied", 25)]
    # 3 transactions each (10 + 10 + 5 records), none shared: a shared one would hold more than max_records.
    assert FakeProducer.made[0].commits == 6


def test_a_partitions_transactional_id_is_a_function_of_its_flow_family_topic_and_partition_alone() -> None:
    ids = [lane_rules.transactional_id("a->b", "orders", "t", p) for p in range(lane_rules.TRANSACTION_SLOTS)]
    assert len(set(ids)) == lane_rules.TRANSACTION_SLOTS, (
        "a topic's partitions take consecutive slots: no two share one"
    )
    assert lane_rules.transactional_id("a->b", "orders", "t", lane_rules.TRANSACTION_SLOTS) == ids[0]
    assert ids == [lane_rules.transactional_id("a->b", "orders", "t", p) for p in range(lane_rules.TRANSACTION_SLOTS)]
    other_family = lane_rules.transactional_id("a->b", "payments", "t", 0)
    assert other_family != ids[0] and "|payments|" in other_family, "two families' runs never fence each other"


def test_the_spans_a_lane_shares_are_flushed_together_and_stored_before_its_commit(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    flushes: list[int] = []
    plain_flush = FakeProducer.flush

    def counted_flush(self: FakeProducer, timeout: float = 0) -> int:
        flushes.append(len(self.txn))
        return plain_flush(self, timeout)

    monkeypatch.setattr(FakeProducer, "flush", counted_flush)
    specs = [
        unit(partition=p, transactional_id=lane_rules.transactional_id("f", "default", "src", p)) for p in (0, 64, 128)
    ]
    results = copy.copy_units(specs)
    assert [(r.status, r.records, r.position) for r in results] == [("copied", 25, 25)] * 3
    (producer,) = FakeProducer.made
    assert producer.commits == 1
    # One flush by the last unit (its commit flushes again): not one per unit.
    assert len(flushes) == 2, flushes
    progress = producer.log["mm2-offsets.src.internal"]
    assert [m.value() for m in progress] == [source_offset_value(24)] * 3, "each unit's progress, in the transaction"


def test_a_unit_copied_again_after_a_failure_keeps_a_transaction_of_its_own(fakes: dict[str, Any]) -> None:
    specs = [
        unit(
            partition=p, share_transaction=False, transactional_id=lane_rules.transactional_id("f", "default", "src", p)
        )
        for p in (0, 64)
    ]
    results = copy.copy_units(specs)
    assert [(r.status, r.records) for r in results] == [("copied", 25), ("copied", 25)]
    (producer,) = FakeProducer.made
    assert producer.commits == 2, "a transaction per unit: a refused record fails its own partition alone"


def test_an_unexpected_error_in_a_unit_aborts_what_its_lane_left_open(
    fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain_store = UnitCopy.store_progress

    def broken_for_128(self: Any, position: int, producer: Any) -> Any:
        if self.spec.partition == 128:
            raise RuntimeError("a bug")
        return plain_store(self, position, producer)

    monkeypatch.setattr(UnitCopy, "store_progress", broken_for_128)
    specs = [
        unit(partition=p, transactional_id=lane_rules.transactional_id("f", "default", "src", p)) for p in (0, 64, 128)
    ]
    results = copy.copy_units(specs)
    assert [(r.status, r.records, r.retriable) for r in results[:2]] == [("failed", 0, True)] * 2
    assert (results[2].status, results[2].error) == ("failed", "RuntimeError: a bug")
    (producer,) = FakeProducer.made
    assert producer.commits == 0 and producer.aborts >= 1, "records without their progress must never commit"


def test_a_lanes_reader_plans_only_the_partitions_whose_start_the_run_knows() -> None:
    known = {"progress_from": 5, "log_start": 0}
    specs = [
        unit(partition=0, stored=StoredProgress(9), **known),  # from 10
        unit(partition=1, **known),  # nothing stored: from the default start
        unit(partition=2, stored=StoredProgress(24), **known),  # nothing new
        unit(partition=3, progress_from=-1, log_start=0),  # its progress is read in full by the unit: unknown
        unit(partition=4, progress_from=5, log_start=-1),  # its log start is asked for by the unit
        unit(partition=5, stored=StoredProgress(2), progress_from=5, log_start=7),  # records lost: read alone
        unit(partition=6, reset=Reset(stored_offset=3, start=0, keep_target_next=False), **known),
        unit(partition=7, source_consumer={"isolation.level": "read_uncommitted"}, **known),  # another consumer
    ]
    assert lane_rules.lane_plan(specs) == {("src", 0): (10, 25), ("src", 1): (0, 25)}
