"""The count of a run's Kafka calls: only inside a run, only in its own thread, admin calls by name."""

from __future__ import annotations

import threading
from typing import Any

from mirrorflow.kafka import calls as kafka_calls


class FakeAdmin:
    timeout = 5

    def list_offsets(self, request: dict[str, Any]) -> dict[str, Any]:
        return request

    def describe_topics(self) -> str:
        return "described"


def test_admin_calls_and_new_clients_are_counted_inside_a_run_only() -> None:
    admin = kafka_calls.CountingAdmin(FakeAdmin())
    admin.list_offsets({})  # outside any run: not counted anywhere
    with kafka_calls.counting() as calls:
        assert admin.list_offsets({"a": 1}) == {"a": 1}  # the call goes through
        admin.list_offsets({})
        assert admin.describe_topics() == "described"
        assert admin.timeout == 5  # plain attributes pass through, uncounted
        kafka_calls.note("new consumer")
    assert dict(calls) == {"admin list_offsets": 2, "admin describe_topics": 1, "new consumer": 1}
    assert kafka_calls.summary(calls) == {
        "admin": 3,
        "clients": 1,
        "by_kind": {"admin list_offsets": 2, "admin describe_topics": 1, "new consumer": 1},
    }


def test_other_threads_calls_are_not_the_runs() -> None:
    """The units' clients (threads of the in-process executor) are counted as units, not as the run's calls."""
    with kafka_calls.counting() as calls:
        worker = threading.Thread(target=kafka_calls.note, args=("new producer",))
        worker.start()
        worker.join()
        kafka_calls.note("new admin")
    assert dict(calls) == {"new admin": 1}


def test_batches_add_up() -> None:
    one = kafka_calls.summary(kafka_calls.Counter({"admin list_offsets": 2, "new consumer": 1}))
    two = kafka_calls.summary(kafka_calls.Counter({"admin list_offsets": 1}))
    assert kafka_calls.merged(one, two)["by_kind"] == {"admin list_offsets": 3, "new consumer": 1}
    assert kafka_calls.merged({}, two)["admin"] == 1
