"""Kafka's errors as a run reads them: which are retried, which mean "no answer", which an ACL denied.

Why this exists: an at-least-once run whose target broker restarted failed on ``FENCED_LEADER_EPOCH``, an error Kafka
calls retriable (refresh metadata, ask again) but librdkafka did not flag on that admin answer; and a target that did
not answer read "the target refused a record". The tables are Kafka's (``Errors.java``) and are checked here row by
row, with the run's own retry loop.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow.kafka.errors import DENIED, KAFKA_RETRIABLE, is_retriable, is_unreachable, kafka_words
from mirrorflow.replication.run import RunStartError, retrying

#: The errors a broker restart answers with (as Apache Kafka 3.7 did), each retriable in Kafka's table.
RESTART_ANSWERS = [
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.NOT_LEADER_FOR_PARTITION,  # NOT_LEADER_OR_FOLLOWER
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.KAFKA_STORAGE_ERROR,
]


@pytest.mark.parametrize("code", RESTART_ANSWERS)
def test_what_a_restarting_broker_answers_is_retried_even_unflagged(code: int) -> None:
    error = KafkaError(code)  # made here, so librdkafka's retriable flag is not set: the table decides
    assert not error.retriable()
    assert is_retriable(error)


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_CONFIG,
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
    ],
)
def test_what_no_later_attempt_changes_is_not_retried(code: int) -> None:
    assert not is_retriable(KafkaError(code))


def test_the_table_holds_kafkas_retriable_errors_only() -> None:
    assert KafkaError.FENCED_LEADER_EPOCH in KAFKA_RETRIABLE
    assert not KAFKA_RETRIABLE & set(DENIED)
    assert KafkaError.UNKNOWN not in KAFKA_RETRIABLE  # UNKNOWN_SERVER_ERROR


def test_the_run_asks_again_until_the_answer_comes() -> None:
    answers = [KafkaError(KafkaError.FENCED_LEADER_EPOCH), KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), None]

    def list_offsets() -> str:
        error = answers.pop(0)
        if error is not None:
            raise KafkaException(error)
        return "offsets"

    assert retrying(list_offsets, "listing offsets of orders", timeout=10) == "offsets"
    assert answers == []


def test_the_run_gives_up_at_its_deadline_in_kafkas_words() -> None:
    def always() -> None:
        raise KafkaException(KafkaError(KafkaError.FENCED_LEADER_EPOCH))

    started = time.monotonic()
    with pytest.raises(RunStartError, match=r"listing offsets of orders: FENCED_LEADER_EPOCH \("):
        retrying(always, "listing offsets of orders", timeout=1)
    assert time.monotonic() - started < 3


def test_a_denied_request_says_an_acl_denied_it_and_what_is_needed() -> None:
    words = kafka_words(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    assert words.startswith("denied by ACL: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (")
    assert "PREFIXED ACL on 'mirrorflow|'" in words
    assert "DESCRIBE and READ on the source's topics" in kafka_words(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(RunStartError, match="listing offsets of orders: denied by ACL: TOPIC_AUTHORIZATION_FAILED"):
        retrying(lambda: (_ for _ in ()).throw(KafkaException(KafkaError(29))), "listing offsets of orders", 5)


def test_no_answer_is_not_a_refusal() -> None:
    assert is_unreachable(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert not is_unreachable(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))


def test_records_the_target_did_not_acknowledge_in_time_are_named_as_not_copied() -> None:
    """A delivery timeout (the target stopped answering) is no refusal: the unit names the source range left."""
    from mirrorflow.replication.delivery import SpanReports, UnitFailed

    reports = SpanReports("orders[0] -> east.orders", per_record=True)
    reports.sent_offsets += [100, 101, 102, 103]
    reports.acked.append(7)
    reports.errors += [(u, KafkaError(KafkaError._MSG_TIMED_OUT), 10) for u in (101, 102, 103)]
    with pytest.raises(UnitFailed) as err:
        reports.raise_failure()
    assert str(err.value) == (
        "orders[0] -> east.orders: the target did not acknowledge 3 record(s) in time "
        "(_MSG_TIMED_OUT (Local: Message timed out)): source offsets 101 to 103 are not copied; "
        "the next attempt copies them"
    )
    assert err.value.retriable


def test_a_batched_admin_request_asks_again_for_the_items_kafka_calls_retriable() -> None:
    """Target preparation: a topic whose creation met a moving controller is asked for again, the others are not."""
    from concurrent.futures import Future

    from mirrorflow.kafka.retries import outcomes

    answers = {
        "a": [None],
        "b": [KafkaError(KafkaError.NOT_CONTROLLER), KafkaError(KafkaError.FENCED_LEADER_EPOCH), None],
        "c": [KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)],
    }
    asked: list[list[str]] = []

    def ask(items: list[str]) -> dict[str, Future[None]]:
        asked.append(list(items))
        futures: dict[str, Future[None]] = {}
        for item in items:
            futures[item] = Future()
            error = answers[item].pop(0)
            if error is None:
                futures[item].set_result(None)
            else:
                futures[item].set_exception(KafkaException(error))
        return futures

    found = outcomes(ask, ["a", "b", "c"], str, timeout=10)
    assert asked == [["a", "b", "c"], ["b"], ["b"]]
    assert found["a"] is None and found["b"] is None
    assert "TOPIC_AUTHORIZATION_FAILED" in str(found["c"])
