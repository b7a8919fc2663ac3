"""Count the Kafka calls a run's driver makes: admin requests by name, and the clients it creates.

Why: the lock, discovery, metadata and progress reads of a run must cost milliseconds, and the way to
keep them there is to know how many requests they make. Every run report carries the count (``kafka_calls``), so
a change that adds a request per topic or a client per partition shows in the report, and a test can hold the
count of a run with nothing new (a number, unlike a timing, that does not depend on the machine).

Counting is on only inside :func:`counting` (one run), in the thread that opened it: the work units' own clients
(one consumer and producer per unit, in Spark tasks or the in-process executor's threads) are counted as units,
not here.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_CURRENT: ContextVar[Counter[str] | None] = ContextVar("mirrorflow_kafka_calls", default=None)
#: The kinds already counted in the current :func:`one_call` block, if one is open.
_ONE_CALL: ContextVar[set[str] | None] = ContextVar("mirrorflow_kafka_one_call", default=None)
#: A counter may be shared by threads started in a copy of its context (the status's parallel parts).
_LOCK = threading.Lock()


def note(kind: str, count: int = 1) -> None:
    """Count ``count`` calls of ``kind`` (``admin list_offsets``, ``new consumer``) in the current run, if any."""
    current = _CURRENT.get()
    counted = _ONE_CALL.get()
    if counted is not None:
        if kind in counted:
            return
        counted.add(kind)
    if current is not None:
        with _LOCK:
            current[kind] += count


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count the calls made in this block (this thread only); the counter is filled as they happen."""
    calls: Counter[str] = Counter()
    token = _CURRENT.set(calls)
    try:
        yield calls
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def one_call() -> Iterator[None]:
    """Count each kind at most once in this block: the chunks of one batched request, all sent before any answer.

    Why: a request cut into chunks of a fixed size (ListOffsets) is still one round trip, and its count should say
    how many times the driver asks, which must not grow with the partition count.
    """
    token = _ONE_CALL.set(set())
    try:
        yield
    finally:
        _ONE_CALL.reset(token)


class CountingAdmin:
    """An ``AdminClient`` whose method calls are counted (``admin <method>``); everything else passes through."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._admin, name)
        if not callable(value) or name.startswith("_"):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            note(f"admin {name}")
            return value(*args, **kwargs)

        return counted


def summary(calls: Counter[str]) -> dict[str, Any]:
    """The report's form: totals first, then each kind, most frequent first."""
    admin = sum(n for kind, n in calls.items() if kind.startswith("admin "))
    clients = sum(n for kind, n in calls.items() if kind.startswith("new "))
    return {"admin": admin, "clients": clients, "by_kind": dict(calls.most_common())}


def merged(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two summaries added up (the batches of a continuous run)."""
    calls: Counter[str] = Counter(total.get("by_kind") or {})
    calls.update(more.get("by_kind") or {})
    return summary(calls)


__all__ = ["CountingAdmin", "counting", "merged", "note", "one_call", "summary"]
