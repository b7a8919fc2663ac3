"""Admin requests asked again while Kafka calls their failure retriable, until a deadline.

A broker that restarts, a leader or controller that moves, answers with errors Kafka calls retriable
(``errors.KAFKA_RETRIABLE``) for a moment; a batched admin request (topics to create, partitions to add) then fails
for some of its items only, and only those are asked for again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TypeVar

from confluent_kafka import KafkaException

from .errors import is_retriable

T = TypeVar("T")


def outcomes(
    ask: Callable[[list[T]], Mapping[str, Future]], items: Sequence[T], key: Callable[[T], str], timeout: float
) -> dict[str, BaseException | None]:
    """Each item's outcome of a batched admin request (None: done, else its exception), asking again, for the items
    whose error Kafka calls retriable (a leader or controller moving, a broker restarting), until ``timeout``."""
    deadline = time.monotonic() + timeout
    found: dict[str, BaseException | None] = {}
    pending, delay = list(items), 0.2
    while pending:
        futures = ask(pending)
        again = []
        for item in pending:
            name = key(item)
            try:
                futures[name].result(timeout=timeout)
                found[name] = None
            except Exception as exc:  # noqa: BLE001 - each item's own outcome
                found[name] = exc
                retriable = isinstance(exc, KafkaException) and exc.args and is_retriable(exc.args[0])
                if retriable and time.monotonic() + delay < deadline:
                    again.append(item)
        if again:
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
        pending = again
    return found


__all__ = ["outcomes"]
