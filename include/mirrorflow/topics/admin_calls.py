"""Waiting on an admin future, and the short reason a failed one gives, for every step of target preparation.

Every future is waited with a timeout, so a broker that does not answer cannot hang a run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from ..kafka.errors import is_retriable, kafka_words

T = TypeVar("T")


def error_text(exc: BaseException, timeout: float) -> str:
    """A short reason for a failed admin future (a timeout says how long was waited)."""
    if isinstance(exc, FutureTimeout):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return kafka_words(exc.args[0])  # an authorization error says which ACLs are missing
    return str(exc) or type(exc).__name__


def error_code(exc: BaseException) -> int | None:
    """The Kafka error code of a failed admin future, None when it failed otherwise."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code()
    return None


def wait(future: Future, timeout: float) -> Any:
    """The result of an admin future, waited at most ``timeout`` seconds."""
    return future.result(timeout=timeout)


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
                wait(futures[name], timeout)
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
