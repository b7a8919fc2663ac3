"""Idle clients kept per process: taken by configuration, one unit at a time, the least recently kept let go first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mirrorflow.replication import kept_clients
from mirrorflow.replication.kept_clients import KeptClients, client_key


def test_clients_are_taken_by_configuration_most_recent_first_and_bounded() -> None:
    discarded: list[str] = []
    kept: KeptClients[str] = KeptClients(lambda: 3, discarded.append)
    kept.keep("a", "a1")
    kept.keep("b", "b1")
    kept.keep("a", "a2")
    taken = kept.take("a")
    assert taken is not None and taken[0] == "a2" and len(kept) == 2  # taken out: no two units share one
    assert 0 <= taken[1] < 60  # how long it was idle
    assert kept.take("c") is None
    kept.keep("a", "a2")
    kept.keep("b", "b2")  # a fourth: the least recently kept goes
    assert discarded == ["a1"]
    assert kept.clients() == ["b1", "a2", "b2"]
    assert kept.holds("a2") and not kept.holds("a1")
    assert kept.drain() == ["b1", "a2", "b2"] and len(kept) == 0


def test_the_key_is_the_whole_configuration_in_any_order() -> None:
    assert client_key({"a": 1, "b": 2}) == client_key({"b": 2, "a": 1})
    assert client_key({"a": 1}) != client_key({"a": 1, "b": 2})


class FakeConsumer:
    def __init__(self) -> None:
        self.assigned: list[Any] = []
        self.resumed: list[Any] = []
        self.closed = False

    def assignment(self) -> list[Any]:
        return self.assigned

    def resume(self, tps: list[Any]) -> None:
        self.resumed = tps

    def unassign(self) -> None:
        self.assigned = []

    def close(self) -> None:
        self.closed = True


def test_a_lent_consumer_comes_back_unassigned_and_resumed_or_is_closed_after_a_failure() -> None:
    kept_clients.close_kept_consumers()
    made: list[FakeConsumer] = []

    def make() -> FakeConsumer:
        made.append(FakeConsumer())
        return made[-1]

    with kept_clients.lent_consumer({"k": 1}, make) as consumer:
        consumer.assigned = ["tp0"]
    assert (consumer.assigned, consumer.resumed, consumer.closed) == ([], ["tp0"], False)
    with kept_clients.lent_consumer({"k": 1}, make) as again:
        assert again is consumer  # kept: no new consumer
    with kept_clients.lent_consumer({"k": 2}, make) as other:
        assert other is not consumer  # another configuration
    assert len(made) == 2
    with pytest.raises(ValueError), kept_clients.lent_consumer({"k": 1}, make):
        raise ValueError("the unit failed")
    assert consumer.closed and len(kept_clients.CONSUMERS) == 1
    kept_clients.close_kept_consumers()
    assert made[1].closed and len(kept_clients.CONSUMERS) == 0


class MetadataConsumer:
    """Answers metadata requests from a fixed topic list and counts them."""

    def __init__(self, topics: set[str]) -> None:
        self.topics, self.asked, self.closed = topics, [], False

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> SimpleNamespace:
        self.asked.append(topic or "*")
        return SimpleNamespace(topics={t: None for t in self.topics if topic in (None, t)})

    def close(self) -> None:
        self.closed = True


def test_a_consumer_learns_every_topic_once_a_while_and_a_newer_topic_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = MetadataConsumer({"a", "b"})
    for topic in ("a", "b", "a"):
        kept_clients.learn_topic(consumer, topic, 5)
    assert consumer.asked == ["*"], "one request for all the topics its units will meet"
    consumer.topics.add("c")
    kept_clients.learn_topic(consumer, "c", 5)
    kept_clients.learn_topic(consumer, "c", 5)
    assert consumer.asked == ["*", "c"], "a topic created since is asked for alone, once"
    monkeypatch.setattr(kept_clients, "KNOWN_TOPIC_S", 0.0)
    kept_clients.learn_topic(consumer, "a", 5)
    assert consumer.asked == ["*", "c", "*"], "asked again once the cached metadata may be gone"
    monkeypatch.setattr(kept_clients, "KNOWN_TOPIC_S", 60.0)
    kept_clients.close_consumer(consumer)
    kept_clients.learn_topic(consumer, "b", 5)
    assert consumer.asked == ["*", "c", "*", "*"], "a closed consumer's knowledge is forgotten"
