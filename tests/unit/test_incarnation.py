"""Incarnation checks and failure wording: pure functions, no broker."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirrorflow.kafka.errors import is_retriable, kafka_words
from mirrorflow.replication.incarnation import PartitionNow, find_reset, plan_reset
from mirrorflow.replication.progress import StoredProgress


def now(**changes: object) -> PartitionNow:
    fields: dict[str, object] = {
        "topic": "orders",
        "partition": 0,
        "remote_topic": "primary.orders",
        "log_start": 0,
        "high_watermark": 1000,
        "source_topic_id": None,
        "target_topic_id": None,
        "target_high_watermark": 1001,
    }
    fields.update(changes)
    return PartitionNow(**fields)  # type: ignore[arg-type]


def test_a_normal_resume_is_no_reset() -> None:
    assert find_reset(StoredProgress(999, "a", "b", 1001), now(source_topic_id="a", target_topic_id="b")) is None
    assert find_reset(StoredProgress(499), now()) is None  # MM2's progress: no headers, offsets agree


def test_a_source_that_ends_before_the_progress_was_recreated() -> None:
    side, reason = find_reset(StoredProgress(999), now(high_watermark=300)) or ("", "")
    assert side == "source" and "ends at offset 300" in reason and "999" in reason


def test_a_changed_source_topic_id_is_a_reset_even_when_the_new_topic_is_longer() -> None:
    found = find_reset(StoredProgress(999, "old-id"), now(high_watermark=1300, source_topic_id="new-id"))
    assert found is not None and found[0] == "source" and "old-id" in found[1] and "new-id" in found[1]


def test_another_record_at_the_last_copied_offset_means_a_recreated_topic() -> None:
    stored = StoredProgress(999, source_last="999:1:2:3")
    assert find_reset(stored, now(high_watermark=1300, source_fingerprint="999:1:2:3")) is None
    found = find_reset(stored, now(high_watermark=1300, source_fingerprint="999:7:8:9"))
    assert found is not None and found[0] == "source" and "offset 999 is not the one that was copied" in found[1]
    assert find_reset(stored, now(high_watermark=1300, source_fingerprint=None)) is None  # not read: unknown


def test_a_remote_topic_that_ends_before_what_was_copied_into_it_was_recreated() -> None:
    found = find_reset(StoredProgress(999, None, None, 1001), now(target_high_watermark=0))
    assert found is not None and found[0] == "target" and "primary.orders[0]" in found[1]


def test_unknown_ids_are_never_a_reset() -> None:
    assert (
        find_reset(StoredProgress(999, "a", "b", None), now(source_topic_id=None, target_high_watermark=None)) is None
    )


@pytest.mark.parametrize(("truncation", "action"), [("continue", "copying from source offset 7"), ("stop", "stopped")])
def test_plan_reset_copies_from_the_log_start_or_stops(truncation: str, action: str) -> None:
    planned = plan_reset(StoredProgress(999), now(high_watermark=300, log_start=7), truncation)
    assert planned is not None
    event, reset = planned
    assert event.action.startswith(action) and event.stored_progress == 999 and event.end == 300
    assert "RESET: orders[0]" in event.describe()
    if truncation == "stop":
        assert reset is None
    else:
        assert reset is not None and (reset.stored_offset, reset.start, reset.keep_target_next) == (999, 7, True)


def test_progress_headers_round_trip_and_mm2_records_have_none() -> None:
    stored = StoredProgress(41, "src-id", "tgt-id", 57, "41:1:2:3")
    assert StoredProgress.from_message(41, stored.headers()) == stored
    assert StoredProgress.from_message(41, None) == StoredProgress(41)
    assert StoredProgress(41).headers() == []


def test_kafka_errors_are_worded_by_name_and_classified() -> None:
    too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    assert kafka_words(too_large).startswith("MSG_SIZE_TOO_LARGE (")
    assert not is_retriable(too_large)
    assert is_retriable(KafkaError(KafkaError._TRANSPORT))
    assert is_retriable(KafkaError(KafkaError.NOT_COORDINATOR))
    assert not is_retriable(KafkaError(KafkaError.PRODUCER_FENCED))


def test_start_up_requests_are_retried_while_kafka_calls_the_failure_transient() -> None:
    from confluent_kafka import KafkaException

    from mirrorflow.replication.run import RunStartError, retrying

    failures = [KafkaError(KafkaError.LEADER_NOT_AVAILABLE), KafkaError(KafkaError._TRANSPORT)]

    def flaky() -> str:
        if failures:
            raise KafkaException(failures.pop(0))
        return "answer"

    assert retrying(flaky, "listing offsets", timeout=10) == "answer"

    def refused() -> str:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(RunStartError, match="listing offsets: denied by ACL: TOPIC_AUTHORIZATION_FAILED"):
        retrying(refused, "listing offsets", timeout=10)
