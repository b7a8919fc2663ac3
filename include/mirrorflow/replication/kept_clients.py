"""Kafka clients a process keeps between work units, so a unit of a few records does not pay for new ones.

Why: a unit's clients cost more than its copy when it has little to copy: a new source consumer's first watermark
read, assign and close, the progress consumer's read, and a transactional producer's connect and
``init_transactions`` were most of a small unit's time (docs/performance.md). MM2's task uses one consumer and one
producer for all its partitions.

So a process keeps idle clients, by configuration, and lends them to its units: consumers are re-assigned (a
consumer holds no state a unit depends on once it is unassigned; librdkafka discards what it fetched for a
partition no longer assigned), and a transactional producer is kept per ``transactional.id`` (see ``producers``).
A lent client is used by one unit (one thread) at a time. Spark reuses its Python workers, so on Spark Connect
the clients also last from one run to the next; the in-process executor closes them after each wave.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from confluent_kafka import Consumer, KafkaException

Client = TypeVar("Client")


def client_key(config: dict[str, Any]) -> str:
    """Clients with equal configurations are interchangeable (the key never leaves this process)."""
    return repr(sorted(config.items()))


class KeptClients(Generic[Client]):
    """Idle clients of one kind, by configuration; the least recently kept are let go first (``discard``).

    Taken out while in use, so no two units share one; ``limit`` is read at each ``keep`` (a setting).
    """

    def __init__(self, limit: Callable[[], int], discard: Callable[[Client], None]) -> None:
        self._idle: OrderedDict[tuple[str, int], tuple[Client, float]] = OrderedDict()  # with when it was kept
        self._serial = 0
        self._limit = limit
        self._discard = discard
        self._lock = threading.Lock()

    def take(self, key: str) -> tuple[Client, float] | None:
        """The most recently kept idle client of this configuration, if any, and how long it was idle (seconds)."""
        with self._lock:
            for slot in reversed(self._idle):
                if slot[0] == key:
                    client, kept_at = self._idle.pop(slot)
                    return client, time.monotonic() - kept_at
        return None

    def keep(self, key: str, client: Client) -> None:
        """Keep an idle client for a later unit; over the limit, the least recently kept one goes."""
        dropped: list[Client] = []
        with self._lock:
            self._serial += 1
            self._idle[(key, self._serial)] = (client, time.monotonic())
            while len(self._idle) > self._limit():
                dropped.append(self._idle.popitem(last=False)[1][0])
        for client_ in dropped:
            self._discard(client_)

    def holds(self, client: Client) -> bool:
        with self._lock:
            return any(kept is client for kept, _ in self._idle.values())

    def clients(self) -> list[Client]:
        """The idle clients, least recently kept first."""
        with self._lock:
            return [client for client, _ in self._idle.values()]

    def drain(self) -> list[Client]:
        """Take every idle client out (the caller closes them)."""
        with self._lock:
            clients = [client for client, _ in self._idle.values()]
            self._idle.clear()
        return clients

    def __len__(self) -> int:
        with self._lock:
            return len(self._idle)


KEEP_CONSUMERS = 16
"""Idle consumers kept per process: a source consumer and a progress reader for each of ``tuning.UNIT_THREADS``."""


_KNOWN_TOPICS: dict[int, tuple[float, set[str]]] = {}
"""When each consumer (by ``id``) last asked for every topic's metadata, and the topics it knows since
(``learn_topic``); ``close_consumer`` forgets them."""

KNOWN_TOPIC_S = 60.0
"""How long a consumer's metadata is taken as known (``learn_topic``): well within librdkafka's
``metadata.max.age.ms`` (15 minutes), after which a topic's cached metadata may be gone."""


def close_consumer(consumer: Any) -> None:
    """Close a consumer, whatever state a failure left it in."""
    _KNOWN_TOPICS.pop(id(consumer), None)
    with contextlib.suppress(KafkaException, RuntimeError):
        consumer.close()


CONSUMERS: KeptClients[Any] = KeptClients(lambda: KEEP_CONSUMERS, close_consumer)


@contextlib.contextmanager
def lent_consumer(config: dict[str, Any], make: Callable[[], Any] | None = None) -> Iterator[Any]:
    """A consumer of this configuration (kept, or ``make()``, by default ``Consumer(config)``), unassigned.

    Given back unassigned (its partitions resumed first) when the block ends normally; closed when it raises,
    since a failure may have left it in any state.
    """
    key = client_key(config)
    kept = CONSUMERS.take(key)
    if kept is not None:
        consumer = kept[0]
    else:
        consumer = make() if make is not None else Consumer(config)
    try:
        yield consumer
    except BaseException:
        close_consumer(consumer)
        raise
    try:
        assigned = consumer.assignment()
        if assigned:
            consumer.resume(assigned)  # a paused partition would stay paused when assigned again
        consumer.unassign()
    except (KafkaException, RuntimeError):
        close_consumer(consumer)
        return
    CONSUMERS.keep(key, consumer)


def learn_topic(consumer: Any, topic: str, timeout: float) -> None:
    """Make sure ``consumer`` knows where ``topic``'s partitions are before it is assigned one of them.

    Why: librdkafka asks for the metadata of a topic its consumer has not seen only at its next topic scan, once a
    second, so a kept consumer re-assigned to another topic waited about 1 s before its first fetch, per unit (a
    new consumer does not: its first metadata request covers the topic). A consumer asks for every topic's metadata
    once per ``KNOWN_TOPIC_S``, so the units it copies next, whatever their topics, fetch at once without a metadata
    round trip of their own (which a source cluster in another region makes costly); a topic created since is asked
    for alone. A cluster that does not answer raises ``KafkaException`` (retriable).
    """
    now = time.monotonic()
    learned_at, known = _KNOWN_TOPICS.get(id(consumer), (-KNOWN_TOPIC_S, set()))
    if now - learned_at >= KNOWN_TOPIC_S:
        learned_at, known = now, set(consumer.list_topics(timeout=timeout).topics)
        _KNOWN_TOPICS[id(consumer)] = (learned_at, known)
    if topic not in known:
        consumer.list_topics(topic, timeout=timeout)
        known.add(topic)


def close_kept_consumers() -> None:
    for consumer in CONSUMERS.drain():
        close_consumer(consumer)
