"""One ListOffsets pass over many partitions, each partition's answer an offset or the words of its error.

Why: the status page and ``verify`` ask for the offsets of every partition of a flow at once, and one partition
that fails (a remote topic not created yet, a leader moving) is that partition's status, not the whole answer's.
The run itself asks through ``replication.run`` instead: there a failed partition stops the run and is retried.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition

from . import calls as kafka_calls
from .errors import kafka_words

LIST_OFFSETS_CHUNK = 1_000
"""Partitions per ListOffsets admin call (``list_offsets``)."""


def list_offsets(
    admin: Any, tps: list[TopicPartition], spec: Any, isolation: IsolationLevel, timeout: float
) -> dict[TopicPartition, Any]:
    """The futures of one ``OffsetSpec`` for every partition, asked in calls of ``LIST_OFFSETS_CHUNK`` partitions.

    Why chunks: one admin call's cost grows faster than its partition count (docs/performance.md), while the calls of
    the chunks are all sent before any answer is awaited, so a chunk costs no extra round trip and is counted as part
    of one call (``kafka_calls.one_call``).
    """
    futures: dict[TopicPartition, Any] = {}
    with kafka_calls.one_call():
        for first in range(0, len(tps), LIST_OFFSETS_CHUNK):
            request = {tp: spec for tp in tps[first : first + LIST_OFFSETS_CHUNK]}
            futures.update(admin.list_offsets(request, isolation_level=isolation, request_timeout=timeout))
    return futures


def offsets_or_errors(
    admin: Any, tps: list[TopicPartition], spec: Any, isolation: IsolationLevel, timeout: float
) -> dict[tuple[str, int], int | str]:
    """The offset of ``spec`` (``OffsetSpec``) per ``(topic, partition)``, or the error's words where it failed."""
    if not tps:
        return {}
    futures = list_offsets(admin, tps, spec, isolation, timeout)
    found: dict[tuple[str, int], int | str] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = future.result(timeout).offset
        except Exception as exc:  # noqa: BLE001 - one partition's error is that partition's answer
            found[(tp.topic, tp.partition)] = kafka_words(exc.args[0] if exc.args else exc)
    return found


__all__ = ["list_offsets", "offsets_or_errors"]
