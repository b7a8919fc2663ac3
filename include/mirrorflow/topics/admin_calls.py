"""Waiting on an admin future, and the short reason a failed one gives, for every step of target preparation.

Every future is waited with a timeout, so a broker that does not answer cannot hang a run.
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ..kafka.errors import kafka_words


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
