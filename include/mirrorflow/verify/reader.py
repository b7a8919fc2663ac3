"""Verify many chunks at once: one consumer per cluster reads a lane's chunks together, lanes run in threads.

Why: a chunk is mostly waiting when it holds a few records (a consumer per side, a fetch, the end of the partition),
and a flow of many small partitions is one such chunk per partition. Read one after the other, each paid those
waits in full, far more than reading their records costs.
Here a lane's chunks are read by one source and one target consumer, each assigned every chunk's partition at once
(a *wave*), so a fetch serves many chunks and the end of every partition is learned in the same round trips. A
partition's consecutive chunks in a lane are one *chain*: read on from one chunk into the next, never fetched twice.
Lanes (``lanes``) overlap what waits remain, a thread each, as the copier's lanes do
(``replication.copy.copy_units``); on Spark, a task verifies a share of the chunks (``task_shares``), so a thousand
partitions are not a thousand Spark tasks, while a large partition's chunks still spread over tasks.

The first pass only digests both sides of every chunk; a chunk whose digests differ is then read again on its own,
in lockstep, to name its first difference (``chunk.name_difference``).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby
from operator import itemgetter
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from .chunk import (
    POLL_S,
    ChunkResult,
    ChunkSpec,
    _Range,
    _TargetTruncated,
    _Truncated,
    consumer,
    name_difference,
    new_result,
    next_batch,
    record_failure,
)

#: Lanes (threads, a source and a target consumer each) one process verifies at once at most.
LANE_THREADS = 2

#: Source offsets a lane is planned to read before its share is spread over one more lane. One consumer per side
#: already overlaps the waits of every partition it reads, so a lane more helps only a large verification (hashing
#: runs outside Python's lock) and costs two consumers.
LANE_RECORDS = 200_000

#: Partitions (chains of chunks) one consumer reads at once at most (assigned together, see the module docstring).
WAVE_CHAINS = 5_000

#: A verification runs as at most this many Spark tasks (``task_shares``), each verifying its share in lanes.
TASK_CHUNKS = 64

#: Source offsets a Spark task is planned to read before the chunks are spread over one more task: a task reads
#: about this many records a second; a smaller verification is mostly waits, which one task's consumers overlap as
#: well as more tasks would (each costs a Spark task and a Python worker, and they run only as many at once as the
#: server has slots). A large verification still gets a task per chunk: a chunk's records then have a core of their
#: own.
TASK_RECORDS = 100_000

#: Topics a consumer learns one by one before a wave; more are learned in one request (see ``_Reader._learn``).
_FEW_TOPICS = 8

_TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._RESOLVE}

Key = tuple[str, int]


def planned_records(spec: ChunkSpec) -> int:
    """Source offsets the chunk covers (at least 1: every chunk costs something)."""
    return max(1, spec.source_end - spec.source_begin)


def _continues(before: ChunkSpec, after: ChunkSpec) -> bool:
    """``after`` begins on both sides where ``before`` ends (the plan cuts a partition so): one reading serves both."""
    return (
        (before.topic, before.remote_topic, before.partition) == (after.topic, after.remote_topic, after.partition)
        and before.source_end == after.source_begin
        and before.target_end == after.target_begin
    )


def chains(specs: Sequence[ChunkSpec], members: Iterable[int] | None = None) -> list[list[int]]:
    """Indexes of ``specs`` (or of ``members``) in chains: a partition's chunks in offset order, each continuing the
    one before it on both sides."""
    order = sorted(
        range(len(specs)) if members is None else members,
        key=lambda i: (specs[i].topic, specs[i].partition, specs[i].source_begin),
    )
    found: list[list[int]] = []
    for index in order:
        if found and _continues(specs[found[-1][-1]], specs[index]):
            found[-1].append(index)
        else:
            found.append([index])
    return found


def _spread(specs: Sequence[ChunkSpec], count: int) -> list[list[int]]:
    """Indexes of ``specs`` in ``count`` groups of about equal planned records, each group in offset order.

    Whole chains where there are enough of them (a partition read once), else the largest chains halved until there
    are: a large partition's chunks then go to different groups. Each unit (largest first) goes to the group planned
    the fewest records so far."""
    units = chains(specs)
    count = max(1, min(count, len(specs)))
    while len(units) < count:
        units.sort(key=lambda unit: (len(unit) > 1, sum(planned_records(specs[i]) for i in unit)))
        largest = units.pop()
        units += [largest[: len(largest) // 2], largest[len(largest) // 2 :]]
    groups: list[tuple[int, list[int]]] = [(0, []) for _ in range(count)]
    weighed = [(sum(planned_records(specs[i]) for i in unit), unit) for unit in units]
    for records, unit in sorted(weighed, key=itemgetter(0), reverse=True):  # stable: equal units keep their order
        slot = min(range(count), key=lambda g: groups[g][0])
        planned, members = groups[slot]
        groups[slot] = (planned + records, members + unit)
    return sorted(sorted(members) for _, members in groups if members)


def task_shares(specs: Sequence[ChunkSpec]) -> list[list[int]]:
    """Indexes of ``specs`` per Spark task: a task per ``TASK_RECORDS`` planned records, no more than ``TASK_CHUNKS``
    tasks or chunks."""
    if not specs:
        return []
    total = sum(planned_records(spec) for spec in specs)
    return _spread(specs, min(len(specs), TASK_CHUNKS, -(-total // TASK_RECORDS)))


def lanes(specs: Sequence[ChunkSpec], threads: int = LANE_THREADS) -> list[list[int]]:
    """Indexes of ``specs`` per lane: a lane per ``LANE_RECORDS`` planned records, no more than ``threads``."""
    if not specs:
        return []
    total = sum(planned_records(spec) for spec in specs)
    return _spread(specs, min(len(specs), max(1, threads), -(-total // LANE_RECORDS)))


def waves(specs: Sequence[ChunkSpec], size: int = WAVE_CHAINS) -> list[list[list[int]]]:
    """The chains of ``specs`` in waves read together: at most ``size`` chains, and no partition twice on either side
    (a consumer reads a partition from one position), each chain in the first wave that can take it."""
    found: list[tuple[list[list[int]], set[Key], set[Key]]] = []
    for chain in chains(specs):
        spec = specs[chain[0]]
        source, target = (spec.topic, spec.partition), (spec.remote_topic, spec.partition)
        for members, sources, targets in found:
            if len(members) < size and source not in sources and target not in targets:
                break
        else:
            members, sources, targets = [], set(), set()
            found.append((members, sources, targets))
        members.append(chain)
        sources.add(source)
        targets.add(target)
    return [members for members, _, _ in found]


class _Reader:
    """One cluster's consumer for a lane: reads a wave's chains of ranges, each from its start to its end, together."""

    def __init__(self, config: dict[str, Any], timeout: float) -> None:
        self.config, self.timeout = config, timeout
        self._consumer: Consumer | None = None
        self._known: set[str] = set()
        self._open: dict[Key, list[_Range]] = {}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _learn(self, topics: set[str]) -> Consumer:
        """The consumer, knowing where ``topics``' partitions are.

        Why: librdkafka asks for the metadata of a topic its consumer has not seen only at its next topic scan, once
        a second, so a consumer assigned in a later wave to a topic it had not read waited up to that second before
        its first fetch. A new consumer does not: its first assignment's metadata request covers its topics.
        Many new topics are asked for in one request (every topic's metadata), a few one by one.
        """
        if self._consumer is None:
            self._consumer = consumer(self.config)
        else:
            unknown = sorted(topics - self._known)
            if len(unknown) > _FEW_TOPICS:
                self._consumer.list_topics(timeout=self.timeout)
            for topic in unknown if len(unknown) <= _FEW_TOPICS else []:
                self._consumer.list_topics(topic, timeout=self.timeout)
        self._known |= topics
        return self._consumer

    def assign(self, chained: dict[Key, list[_Range]]) -> None:
        """Start fetching every chain of ``chained`` (by topic and partition; its ranges in offset order, each from
        its ``start``); ``read`` reads them. Assigned before the other side is read, the consumer fetches meanwhile."""
        self._open = {}
        for key, ranges in chained.items():
            _drop_finished(ranges)
            if ranges:
                self._open[key] = ranges
        if self._open:
            reader = self._learn({topic for topic, _ in self._open})
            reader.assign([TopicPartition(t, p, ranges[0].start) for (t, p), ranges in self._open.items()])

    def read(self) -> None:
        """Read every assigned chain to its end: each range ends ``done``, or with its ``failure``."""
        open_ = self._open
        if not open_:
            return
        reader = self._consumer
        assert reader is not None
        single = next(iter(open_)) if len(open_) == 1 else None
        one_topic = len({topic for topic, _ in open_}) == 1
        last_progress = time.monotonic()
        while open_:
            batch = next_batch(reader, min(POLL_S, self.timeout))
            if not batch:
                if time.monotonic() - last_progress > self.timeout:
                    self._time_out(reader, open_)
                    break
                continue
            last_progress = time.monotonic()
            events = [m for m in batch if m.error() is not None]
            messages = [m for m in batch if m.error() is None] if events else batch
            touched: set[Key] = set()
            if single is not None:  # one partition assigned: every record is its
                if messages:
                    _feed(open_.get(single, []), messages)
                    touched.add(single)
            else:
                for key, grouped in _by_partition(messages, one_topic):
                    if key in open_:
                        _feed(open_[key], grouped)
                        touched.add(key)
            for event in events:  # after the records: an end-of-partition event follows the records it comes after
                touched |= self._event(reader, event, open_)
            finished = [key for key in touched if key in open_ and not open_[key]]
            for key in finished:
                del open_[key]
            if finished and open_:  # stop fetching what is complete (reading on would only fetch records to drop)
                reader.incremental_unassign([TopicPartition(topic, partition) for topic, partition in finished])
        reader.assign([])

    def _time_out(self, reader: Consumer, open_: dict[Key, list[_Range]]) -> None:
        for (topic, partition), ranges in open_.items():
            position = reader.position([TopicPartition(topic, partition)])[0].offset
            for r in ranges:
                r.failure = TimeoutError(
                    f"reading {topic}[{partition}]: no progress for {self.timeout:.0f} s at offset {position} "
                    f"(reading up to {r.end})"
                )
            ranges.clear()

    def _event(self, reader: Consumer, event: Any, open_: dict[Key, list[_Range]]) -> set[Key]:
        """Apply an event to its chain: end of partition, retention deleted what is to be read, or an error (a
        cluster-wide error that is not transient fails every open range; the no-progress timeout covers the rest).
        The keys of the chains it touched."""
        error = event.error()
        code = error.code()
        key = (event.topic(), event.partition())
        ranges = open_.get(key)
        if not ranges:
            if event.topic() is None and code not in _TRANSIENT and not error.retriable():
                for each in open_.values():
                    for r in each:
                        r.failure = RuntimeError(f"reading {r.topic}[{r.partition}]: {error.name()} ({error.str()})")
                    each.clear()
                return set(open_)
            return set()
        if code == KafkaError._PARTITION_EOF:
            position = reader.position([TopicPartition(*key)])[0].offset
            for r in ranges:
                try:
                    r.reached(position)
                except Exception as exc:  # noqa: BLE001 - as in _feed
                    r.failure = exc
        elif code == KafkaError._AUTO_OFFSET_RESET:
            low, _ = reader.get_watermark_offsets(TopicPartition(*key), timeout=self.timeout)
            for r in ranges:
                if r.begin < low:
                    r.failure = _Truncated(low)
            _drop_finished(ranges)
            if ranges:  # only records before what is left to read were deleted: read it from the log start
                reader.incremental_unassign([TopicPartition(*key)])
                reader.incremental_assign([TopicPartition(*key, max(low, ranges[0].start))])
        else:
            for r in ranges:
                r.failure = RuntimeError(f"reading {r.topic}[{r.partition}]: {error.name()} ({error.str()})")
        _drop_finished(ranges)
        return {key}


def _drop_finished(ranges: list[_Range]) -> None:
    """Remove the ranges at the head of a chain that are complete or failed."""
    while ranges and (ranges[0].done or ranges[0].failure is not None):
        del ranges[0]


def _feed(ranges: list[_Range], messages: list[Any]) -> None:
    """Hand a partition's records (in offset order) to its chain: the head takes them; once it is complete, what
    lies past its end goes on to the next range."""
    while ranges and messages:
        head = ranges[0]
        try:
            head.take(messages)
        except Exception as exc:  # noqa: BLE001 - the range's own failure (finding records the broker skipped)
            head.failure = exc
        if not (head.done or head.failure is not None):
            return
        del ranges[0]
        _drop_finished(ranges)
        if messages[-1].offset() < head.end:
            return
        messages = [m for m in messages if m.offset() >= head.end]


def _by_partition(messages: list[Any], one_topic: bool) -> Iterable[tuple[Key, list[Any]]]:
    """Consecutive messages of one partition together (a fetch delivers a partition's records in a row)."""
    if not messages:
        return
    if one_topic:
        topic = messages[0].topic()
        keys: list[Any] = [m.partition() for m in messages]
        for partition, grouped in groupby(zip(keys, messages, strict=True), key=itemgetter(0)):
            yield (topic, partition), [m for _, m in grouped]
        return
    keys = [(m.topic(), m.partition()) for m in messages]
    for key, grouped in groupby(zip(keys, messages, strict=True), key=itemgetter(0)):
        yield key, [m for _, m in grouped]


def _ranges(spec: ChunkSpec) -> tuple[_Range, _Range]:
    """A chunk's two ranges for the first pass (digests only), positioned; one its log start passed is failed."""
    source = _Range(
        spec.source_consumer,
        spec.topic,
        spec.partition,
        spec.source_begin,
        spec.source_end,
        spec.begin_is_record,
        spec.timeout_s,
    )
    target = _Range(
        spec.target_consumer,
        spec.remote_topic,
        spec.partition,
        spec.target_begin,
        spec.target_end,
        spec.begin_is_record,
        spec.timeout_s,
    )
    source.keep = target.keep = False
    source.start = max(min(spec.source_fetch, spec.source_begin), spec.source_low)
    target.start = max(min(spec.target_fetch, spec.target_begin), spec.target_low)
    if not source.done and spec.source_begin < spec.source_low:
        source.failure = _Truncated(spec.source_low)
    if not target.done and spec.target_begin < spec.target_low:
        target.failure = _TargetTruncated(spec.target_low)
    return source, target


def _verify_lane(specs: Sequence[ChunkSpec]) -> list[ChunkResult]:
    """Verify a lane's chunks: a wave at a time, the source side of the wave's chains, then their target side (both
    consumers assigned first, so the target's fetches overlap the source's reading); then name the difference of
    each chunk whose digests differ."""
    results = [new_result(spec) for spec in specs]
    if not specs:
        return results
    timeout = max(spec.timeout_s for spec in specs)
    source = _Reader(specs[0].source_consumer, timeout)
    target = _Reader(specs[0].target_consumer, timeout)
    try:
        for wave in waves(specs):
            started = time.monotonic()
            sides: dict[int, tuple[_Range, _Range]] = {}
            source_chains: dict[Key, list[_Range]] = {}
            target_chains: dict[Key, list[_Range]] = {}
            for chain in wave:
                head = specs[chain[0]]
                source_chain = source_chains[(head.topic, head.partition)] = []
                target_chain = target_chains[(head.remote_topic, head.partition)] = []
                for index in chain:
                    sides[index] = _ranges(specs[index])
                    source_chain.append(sides[index][0])
                    target_chain.append(sides[index][1])
            source.assign(source_chains)
            target.assign(target_chains)
            source.read()
            target.read()
            seconds = round(time.monotonic() - started, 3)
            for index, (s, t) in sides.items():
                _finish(results[index], specs[index], s, t, seconds)
    except Exception as exc:  # noqa: BLE001 - a consumer that could not be made: every chunk not done says why
        for result, spec in zip(results, specs, strict=True):
            if not (result.source_digest or result.error or result.unverifiable):
                record_failure(result, spec, exc)
    finally:
        source.close()
        target.close()
    for result, spec in zip(results, specs, strict=True):
        if result.source_digest and not result.identical and not (result.error or result.unverifiable):
            started = time.monotonic()
            name_difference(spec, result)
            result.seconds = round(result.seconds + time.monotonic() - started, 3)
    return results


def _finish(result: ChunkResult, spec: ChunkSpec, source: _Range, target: _Range, seconds: float) -> None:
    """A chunk's first-pass result from its two ranges (a failure of either side is the chunk's)."""
    result.seconds = seconds
    failure = source.failure or target.failure
    if failure is not None:
        if source.failure is None and type(failure) is _Truncated:
            failure = _TargetTruncated(failure.log_start)  # the target's own retention
        record_failure(result, spec, failure)
        return
    result.source_records, result.target_records = source.count, target.count
    result.source_digest, result.target_digest = source.digest.hexdigest(), target.digest.hexdigest()


def verify_chunks(specs: Sequence[ChunkSpec], threads: int = LANE_THREADS) -> list[ChunkResult]:
    """Every chunk's result, in the order of ``specs``; never raises (a failure is a result's ``error``), so one bad
    chunk hides no other. Lanes run in threads (``lanes``), each in a context of its own, as the copier's do."""
    results: list[ChunkResult | None] = [None] * len(specs)

    def run(lane: list[int]) -> None:
        for index, result in zip(lane, _verify_lane([specs[i] for i in lane]), strict=True):
            results[index] = result

    groups = lanes(specs, threads)
    if len(groups) <= 1:
        for lane in groups:
            contextvars.Context().run(run, lane)
    else:
        with ThreadPoolExecutor(len(groups), thread_name_prefix="mirrorflow-verify") as pool:
            list(pool.map(run, groups))
    return [result for result in results if result is not None]


def verify_chunk(spec: ChunkSpec) -> ChunkResult:
    """One chunk's result (``verify_chunks`` of one)."""
    return verify_chunks([spec])[0]


__all__ = ["LANE_THREADS", "chains", "lanes", "task_shares", "verify_chunk", "verify_chunks", "waves"]
