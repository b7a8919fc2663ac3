"""Lanes and tasks of a wave: which units share a ``transactional.id`` and so run one after the other, how a wave is
spread over Spark tasks, and where each unit was planned to start."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from .units import UnitSpec

TRANSACTION_SLOTS = 64
"""Exactly-once: the partitions of a family share this many ``transactional.id``s (``transactional_id``), as an MM2
task's partitions share its one producer, so a run over thousands of partitions makes (and fences with
``init_transactions``) at most this many transactional producers, not one per partition, and its later units reuse
them (``tuning.KEEP_PRODUCERS``). A topic's partitions take consecutive slots from a point its name gives, so the partitions
of one topic do not share an id until it has more partitions than there are slots. Fencing is unchanged: every copy
of a partition, by any run, retry or zombie, uses the same id, so the newest holder fences all the others. The family
is part of the id because runs of two families of a flow may run at once and must not fence each other. Units that
share an id run one after the other in one thread of one task (``lanes``): two at once would fence each other."""


TASK_UNITS = 64
"""A wave runs as at most this many Spark tasks (``task_shares``), each copying its share with
``tuning.UNIT_THREADS`` threads."""

TASK_RECORDS = 50_000
"""Records a Spark task is planned to copy before the wave is spread over one more task (``task_shares``). A wave
this small is mostly waits on the clusters, which threads overlap as well as processes do; spread over one task per lane it paid a Spark task and a Python worker per lane and overlapped only as
many lanes as the server has task slots (docs/performance.md, "Figures behind the copier's settings"). A large wave
still gets a task per lane (a partition's copy then has a Python worker, and a core, to itself). A unit's own work
(its consumer's assignment and first fetch, its progress record) counts as ``UNIT_RECORDS`` records, so a wave of
thousands of small units, which holds a Python process's one core busy, is spread over a few tasks too."""

UNIT_RECORDS = 20
"""What one unit costs beyond its records, in records (``task_shares``)."""


def transactional_id(flow: str, family: str, topic: str, partition: int) -> str:
    """The ``transactional.id`` of every exactly-once copy of ``topic[partition]`` of ``family`` (see
    ``TRANSACTION_SLOTS``): a function of these alone, so every run, retry and zombie of a partition agrees on it."""
    slot = (zlib.crc32(topic.encode()) + partition) % TRANSACTION_SLOTS
    return f"mirrorflow|{flow}|{family}|{slot}"


def lane_plan(specs: Sequence[UnitSpec]) -> dict[tuple[str, int], tuple[int, int]]:
    """The ``(start, end)`` a lane's reader (``LaneReader``) reads each partition from and to: where the run planned
    each unit to start (its reading of the stored progress), for the units with records to copy. Left out, each to
    read alone: a reset, a start under the log start (records lost) or unknown, another consumer configuration."""
    planned: dict[tuple[str, int], tuple[int, int]] = {}
    for spec in specs:
        if spec.reset is not None or spec.progress_from < 0 or spec.log_start < 0:
            continue
        start = planned_start(spec)
        if spec.log_start <= start < spec.end and spec.source_consumer == specs[0].source_consumer:
            planned[(spec.topic, spec.partition)] = (start, spec.end)
    return planned


def lanes(specs: Sequence[UnitSpec]) -> list[list[int]]:
    """Indexes of ``specs`` in lanes: exactly-once units sharing a ``transactional.id`` (see
    ``TRANSACTION_SLOTS``) form one lane, in the order given; every other unit is a lane of its own."""
    by_id: dict[str, list[int]] = {}
    for index, spec in enumerate(specs):
        key = spec.transactional_id if spec.delivery == "exactly-once" else f"{index}#"
        by_id.setdefault(key, []).append(index)
    return list(by_id.values())


def task_shares(specs: Sequence[UnitSpec]) -> list[list[int]]:
    """Indexes of ``specs`` per Spark task: whole lanes (a lane never spans two tasks: its units would fence each
    other), a task per ``TASK_RECORDS`` planned records (a unit counting ``UNIT_RECORDS`` more) but no more tasks than
    lanes or ``TASK_UNITS``, the lanes with the most records placed first, each on the task planned to copy the fewest
    so far."""
    planned = [planned_records(spec) + UNIT_RECORDS for spec in specs]
    weighed = sorted(((sum(planned[i] for i in lane), lane) for lane in lanes(specs)), key=lambda w: w[0], reverse=True)
    count = min(len(weighed), TASK_UNITS, -(-sum(planned) // TASK_RECORDS))
    shares: list[tuple[int, list[int]]] = [(0, []) for _ in range(count)]
    for lane_records, lane in weighed:
        index = min(range(count), key=lambda i: shares[i][0])
        records, share = shares[index]
        shares[index] = (records + lane_records, share + lane)
    return [share for _, share in shares]


def planned_start(spec: UnitSpec) -> int:
    """Where the run planned the unit to start: after its stored progress as the run read it, else the default."""
    return spec.stored.offset + 1 if spec.stored is not None else spec.default_start


def planned_records(spec: UnitSpec) -> int:
    """Records the run planned the unit to copy (at least 1: every unit costs something)."""
    return max(1, spec.end - planned_start(spec))


__all__ = [
    "TASK_RECORDS",
    "TASK_UNITS",
    "TRANSACTION_SLOTS",
    "UNIT_RECORDS",
    "lane_plan",
    "lanes",
    "planned_records",
    "planned_start",
    "task_shares",
    "transactional_id",
]
