"""Copy work units: the code that runs inside a Spark task (or in the run's own process).

Exactly-once: a transactional producer with a stable ``transactional.id`` per lane (flow, family and slot, see
``lanes``) first fences every older holder of that id (a retried or speculative Spark task, a killed
executor's zombie, a concurrent run), then re-reads the stored progress (read_committed), copies the
records and writes the progress record (and, when they live on the target, the offset syncs) in the
same transaction. Either all of it becomes visible or none of it does, so consumers reading
read_committed never see a duplicate or a gap, whatever failed and whenever.

At-least-once: an idempotent producer; progress is written only after every record before it is
acknowledged, so a failure can repeat records but never lose one. Progress is checkpointed inside a unit
too (``tuning.CHECKPOINT_EVERY_RECORDS``, ``tuning.CHECKPOINT_EVERY_S``), so a crash repeats at most that many
records.

A unit is a chain of such transactions (or checkpoint intervals) over one partition, bounded in time
(``tuning.UNIT_SECONDS``): what a unit committed before a failure stays committed and counted. The rooms:
``unit_copy`` (one unit's copy loop), ``lane_transaction`` (the transaction a lane's small units share),
``delivery`` (delivery reports, runs and offset syncs, failures in Kafka's words), ``producers`` (producers kept
between units), ``unit_reads`` (the source consumer and the stored progress), ``tuning`` (the settings).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException

from . import tuning, unit_reads
from .kept_clients import close_consumer
from .lane_reader import LaneReader
from .lane_transaction import LaneTransaction
from .lanes import lane_plan, lanes
from .unit_copy import UnitCopy
from .units import UnitResult, UnitSpec


def copy_unit(
    spec: UnitSpec,
    started: float | None = None,
    lane: LaneTransaction | None = None,
    may_defer: bool = False,
    reader: LaneReader | None = None,
) -> UnitResult:
    """Run one unit and describe the outcome; never raises, so one bad partition cannot hide the others.

    ``started``: when its lane began (``copy_units``); the unit's ``UNIT_SECONDS`` count from there. ``lane``: the
    transaction its lane's earlier units left open, which it goes on in; ``may_defer``: it may leave its own last
    transaction open for the lane's next unit (see ``lane_transaction.LaneTransaction``); ``reader``: its lane's consumer.
    """
    started = time.monotonic() if started is None else started
    unit = UnitCopy(spec, started=started, lane=lane, may_defer=may_defer, reader=reader)
    result = unit.attempt()
    unit.drop_producer()
    if unit.reused and unit.producer_broken and result.records == 0:
        # A producer kept from an earlier unit was fenced since (another process took the partition's id, e.g. a
        # retried task) or broke while idle. Nothing was committed: do what a unit always did, with a new producer.
        unit = UnitCopy(spec, reuse=False, started=started, lane=lane, may_defer=may_defer, reader=reader)
        result = unit.attempt()
        unit.drop_producer()
    result.seconds = round(time.monotonic() - started, 3)
    return result


def copy_units(specs: Sequence[UnitSpec], threads: int | None = None) -> list[UnitResult]:
    """Copy several units in this process at once, a lane per thread (``threads``); results in the order of
    ``specs``.

    Why: a unit with a few records to copy is all waiting, not work (``init_transactions``, the stored progress read,
    the commit), and librdkafka releases the GIL while it waits; overlapped, the waits are paid ``threads`` at a
    time. The
    units of a wave never share a partition, so order within a partition is unaffected. Units sharing a
    ``transactional.id`` (a lane, see ``lanes``) run one after the other, each with its own transactions on the
    lane's producer; a lane's units share ``tuning.UNIT_SECONDS``: once it is spent, the rest of the lane is left for the
    next wave (status ``deferred``), so a wave returns to the driver in about that time. A lane of several units with
    records to copy also shares one source consumer (``lane_reader.LaneReader``), as an MM2 task's partitions do.
    """
    threads = tuning.UNIT_THREADS if threads is None else threads
    results: list[UnitResult | None] = [None] * len(specs)

    def run_lane(lane: list[int]) -> None:
        started = time.monotonic()
        shared = LaneTransaction()
        shared.specs = [specs[index] for index in lane]
        planned = lane_plan(shared.specs)
        with contextlib.ExitStack() as stack:
            reader = None
            if len(planned) > 1:
                first = shared.specs[0]
                try:
                    consumer = unit_reads.source_consumer(first)  # not a kept one: see ``lane_reader``
                    stack.callback(close_consumer, consumer)
                    reader = LaneReader(consumer, planned)
                except KafkaException:
                    reader = None  # a source that does not answer: each unit meets it, and names it, on its own
            for n, index in enumerate(lane):
                spec = specs[index]
                if n and time.monotonic() - started >= tuning.UNIT_SECONDS:
                    results[index] = UnitResult(spec.topic, spec.partition, "deferred")
                else:
                    last = n == len(lane) - 1
                    results[index] = copy_unit(spec, started, shared, may_defer=not last, reader=reader)
        shared.commit(specs[lane[-1]].timeout_s)

    lanes_ = lanes(specs)
    if len(lanes_) <= 1 or threads <= 1:
        for lane in lanes_:
            # In a context of their own, as in the pool's threads: a unit's clients are not the run's (kafka_calls).
            contextvars.Context().run(run_lane, lane)
    else:
        with ThreadPoolExecutor(min(threads, len(lanes_)), thread_name_prefix="mirrorflow-unit") as pool:
            list(pool.map(run_lane, lanes_))
    return [result for result in results if result is not None]
