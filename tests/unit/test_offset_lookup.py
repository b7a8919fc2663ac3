"""One ListOffsets pass: a partition that fails is that partition's answer, the others keep their offsets."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from mirrorflow.kafka.offsets import offsets_or_errors


class _Answer:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class _Admin:
    """Answers partition 0 with 42 and fails partition 1 as a broker without that topic would."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def list_offsets(self, request: dict[TopicPartition, Any], **kwargs: Any) -> dict[TopicPartition, Future]:
        self.asked.append(kwargs)
        futures: dict[TopicPartition, Future] = {}
        for tp in request:
            future: Future = Future()
            if tp.partition == 0:
                future.set_result(_Answer(42))
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            futures[tp] = future
        return futures


def test_each_partition_gets_its_offset_or_the_name_of_its_error() -> None:
    admin = _Admin()
    found = offsets_or_errors(
        admin, [TopicPartition("t", 0), TopicPartition("t", 1)], OffsetSpec.latest(), IsolationLevel.READ_COMMITTED, 5
    )
    assert found[("t", 0)] == 42
    assert isinstance(found[("t", 1)], str) and found[("t", 1)].startswith("UNKNOWN_TOPIC_OR_PART (")
    assert admin.asked == [{"isolation_level": IsolationLevel.READ_COMMITTED, "request_timeout": 5}]


def test_no_partitions_asks_nothing() -> None:
    admin = _Admin()
    assert offsets_or_errors(admin, [], OffsetSpec.latest(), IsolationLevel.READ_COMMITTED, 5) == {}
    assert admin.asked == []
