"""Kafka errors in words: the error's name and librdkafka's description, as one line shows them."""

from __future__ import annotations

from confluent_kafka import KafkaError


def kafka_words(error: object) -> str:
    """A Kafka error as its name and description (``MSG_SIZE_TOO_LARGE (Broker: Message size too large)``)."""
    if isinstance(error, KafkaError):
        return f"{error.name()} ({error.str()})"
    return str(error)


__all__ = ["kafka_words"]
