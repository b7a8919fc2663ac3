"""Record timestamps around a position: the lag in seconds of status, of a run's report and of a failover plan."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from . import clients
from .calls import note

#: How long a caller outside status waits for the timestamps it asked for (seconds).
READ_TIMEOUT_S = 15.0

#: Messages taken per ``consume`` call.
_BATCH = 1000


def fetch_timestamps(
    consumer_config: dict[str, Any], wanted: dict[tuple[str, int], tuple[int, int, int]], timeout: float
) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    """Per partition (start, copied, end): (timestamp of the record at copied - 1, of the first at/after copied).

    One consumer for every partition (callers pass only those they need), assigned at ``max(start, copied - 1)``;
    a partition is paused as soon as the record at or after ``copied`` arrived (or its end), so each costs about
    one fetch. Missing values (a control record there, nothing after it) are None. Messages are taken a batch at
    a time and the partitions done in a batch paused together: with thousands of partitions, a call per message
    was much of the cost, and partitions left unpaused were fetched again and again until the last was done.
    """
    result: dict[tuple[str, int], tuple[int | None, int | None]] = {key: (None, None) for key in wanted}
    assignment = [
        TopicPartition(t, p, max(start, copied - 1))
        for (t, p), (start, copied, end) in wanted.items()
        if max(start, copied - 1) < end
    ]
    if not assignment:
        return result
    note("new consumer")
    consumer = Consumer(
        clients.bounded_reader(  # it knows each partition's end: no long poll there
            consumer_config,
            **{
                "auto.offset.reset": "earliest",  # a position below the log start (expired records): the oldest left
                "receive.message.max.bytes": 100 * 1024 * 1024,  # noida-db answers a fetch with a whole backlog
            },
        )
    )
    try:
        consumer.assign(assignment)
        remaining = {(tp.topic, tp.partition) for tp in assignment}
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            done: list[TopicPartition] = []
            for message in consumer.consume(_BATCH, 0.05):
                key = (message.topic(), message.partition())
                if key not in remaining:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        remaining.discard(key)
                        done.append(TopicPartition(*key))
                    continue
                _start, copied, end = wanted[key]
                stamp_type, stamp = message.timestamp()
                stamp_ms = stamp if stamp_type and stamp >= 0 else None
                last, oldest = result[key]
                if message.offset() < copied:
                    result[key] = (stamp_ms, oldest)
                else:
                    result[key] = (last, stamp_ms)
                if message.offset() >= copied or message.offset() + 1 >= end:
                    remaining.discard(key)
                    done.append(TopicPartition(*key))
            if done:
                consumer.pause(done)
        return result
    finally:
        consumer.close()


__all__ = ["READ_TIMEOUT_S", "fetch_timestamps"]
