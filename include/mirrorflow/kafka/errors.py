"""Kafka errors: in words (the error's name and librdkafka's description), and whether a later attempt may not meet them."""

from __future__ import annotations

from confluent_kafka import KafkaError


def kafka_words(error: object) -> str:
    """A Kafka error as its name and description (``MSG_SIZE_TOO_LARGE (Broker: Message size too large)``)."""
    if isinstance(error, KafkaError):
        return f"{error.name()} ({error.str()})"
    return str(error)


FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)

# Errors Kafka itself does not flag retriable but that a broker restart or a moving leader produces.
TRANSIENT = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._WAIT_COORD,
    KafkaError._RESOLVE,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.CONCURRENT_TRANSACTIONS,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.INVALID_TXN_STATE,
    KafkaError.UNKNOWN_PRODUCER_ID,
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
}


def is_retriable(error: object) -> bool:
    """True for errors a later attempt of the same unit may not meet (transient broker conditions)."""
    if not isinstance(error, KafkaError):
        return False
    if error.code() in FENCED or error.fatal():
        return False
    return bool(error.retriable()) or error.code() in TRANSIENT


def is_fenced(error: object) -> bool:
    """True for the errors a transactional producer gets once a newer holder of its id exists."""
    return isinstance(error, KafkaError) and error.code() in FENCED


__all__ = ["FENCED", "TRANSIENT", "is_fenced", "is_retriable", "kafka_words"]
