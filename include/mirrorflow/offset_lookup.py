"""One ListOffsets pass over many partitions, each partition's answer an offset or the words of its error.

Why: the status page and ``verify`` ask for the offsets of every partition of a flow at once, and one partition
that fails (a remote topic not created yet, a leader moving) is that partition's status, not the whole answer's.
The run itself asks through ``replication.run`` instead: there a failed partition stops the run and is retried.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition

from .replication.copy import kafka_words


def offsets_or_errors(
    admin: Any, tps: list[TopicPartition], spec: Any, isolation: IsolationLevel, timeout: float
) -> dict[tuple[str, int], int | str]:
    """The offset of ``spec`` (``OffsetSpec``) per ``(topic, partition)``, or the error's words where it failed."""
    if not tps:
        return {}
    futures = admin.list_offsets({tp: spec for tp in tps}, isolation_level=isolation, request_timeout=timeout)
    found: dict[tuple[str, int], int | str] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = future.result(timeout).offset
        except Exception as exc:  # noqa: BLE001 - one partition's error is that partition's answer
            found[(tp.topic, tp.partition)] = kafka_words(exc.args[0] if exc.args else exc)
    return found


__all__ = ["offsets_or_errors"]
