"""Kafka errors: in words (the error's name and librdkafka's description), and whether a later attempt may not meet them."""

from __future__ import annotations

import re

from confluent_kafka import KafkaError

FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)

#: Kafka's retriable errors: the protocol errors whose Java exception extends ``RetriableException``
#: (``org.apache.kafka.common.protocol.Errors``; ``InvalidMetadataException`` is one, refresh metadata and ask
#: again). A broker that restarts answers ``FENCED_LEADER_EPOCH`` or ``NOT_LEADER_OR_FOLLOWER`` for a moment, and
#: librdkafka does not flag every such answer of an admin request retriable, so the table is read as well.
KAFKA_RETRIABLE_CODES = {
    "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "REPLICA_NOT_AVAILABLE": 9,
    "NETWORK_EXCEPTION": 13,
    "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "NOT_CONTROLLER": 41,
    "CONCURRENT_TRANSACTIONS": 51,
    "KAFKA_STORAGE_ERROR": 56,
    "FETCH_SESSION_ID_NOT_FOUND": 70,
    "INVALID_FETCH_SESSION_EPOCH": 71,
    "LISTENER_NOT_FOUND": 72,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "OFFSET_NOT_AVAILABLE": 78,
    "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "UNSTABLE_OFFSET_COMMIT": 88,
    "THROTTLING_QUOTA_EXCEEDED": 89,
    "UNKNOWN_TOPIC_ID": 100,
    "INCONSISTENT_TOPIC_ID": 103,
}
"""Kafka's names and protocol codes (numbers, which every confluent-kafka version shares; names vary)."""
KAFKA_RETRIABLE = frozenset(KAFKA_RETRIABLE_CODES.values())

#: librdkafka's own errors of a connection or a request that a broker coming back ends, and Kafka errors the
#: Java client does not call retriable but a restart or a moving leader produces (a transaction's state).
TRANSIENT = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._RESOLVE,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.INVALID_TXN_STATE,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
    }
)


#: Errors that say the cluster did not answer (a broker down, a network cut), not that it refused anything.
UNREACHABLE = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)


def is_unreachable(error: object) -> bool:
    """True when the error means no answer came (so nothing was refused)."""
    return isinstance(error, KafkaError) and error.code() in UNREACHABLE


def is_retriable(error: object) -> bool:
    """True for errors a later attempt may not meet: librdkafka's retriable flag, Kafka's table, transient states."""
    if not isinstance(error, KafkaError):
        return False
    if error.code() in FENCED or error.fatal():
        return False
    return bool(error.retriable()) or error.code() in KAFKA_RETRIABLE or error.code() in TRANSIENT


def is_fenced(error: object) -> bool:
    """True for the errors a transactional producer gets once a newer holder of its id exists."""
    return isinstance(error, KafkaError) and error.code() in FENCED


# "127.0.0.1:19092/bootstrap: Connect to ipv4#127.0.0.1:19092 failed: Connection refused (after 0ms in state
# CONNECT, 3 identical error(s) suppressed)" -> "Connect to ipv4#127.0.0.1:19092 failed: Connection refused"
_BROKER_PREFIX = re.compile(r"^\S+/\S+: ")
_STATE_SUFFIX = re.compile(r"\s*\(after \d+ms in state \w+(?:[^()]|\([^()]*\))*\)\s*$")


def event_words(error: KafkaError) -> str:
    """A client's error event without the broker's name before it and librdkafka's state after it."""
    return _STATE_SUFFIX.sub("", _BROKER_PREFIX.sub("", error.str(), count=1))


#: Kafka's authorization errors and the ACLs mirrorflow's principal needs on that kind of resource.
DENIED = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: (
        "ACLs on the topic: DESCRIBE and READ on the source's topics, DESCRIBE, WRITE and CREATE on the target's"
    ),
    KafkaError.GROUP_AUTHORIZATION_FAILED: "ACLs on the consumer group: DESCRIBE and READ",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: (
        "ACLs on the cluster: DESCRIBE, DESCRIBE_CONFIGS, and CREATE where mirrorflow creates topics, ALTER where it "
        "syncs ACLs"
    ),
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (
        "WRITE and DESCRIBE on the transactional ids mirrorflow uses (a PREFIXED ACL on 'mirrorflow|')"
    ),
}


def kafka_words(error: object) -> str:
    """A Kafka error as its name and description (``MSG_SIZE_TOO_LARGE (Broker: Message size too large)``); an
    authorization error says that an ACL denied it and which ACLs mirrorflow's principal needs."""
    if isinstance(error, KafkaError):
        if error.code() in DENIED:
            return f"denied by ACL: {error.name()} ({error.str()}); the principal needs {DENIED[error.code()]}"
        return f"{error.name()} ({error.str()})"
    return str(error)


__all__ = [
    "FENCED",
    "KAFKA_RETRIABLE",
    "TRANSIENT",
    "UNREACHABLE",
    "is_fenced",
    "is_retriable",
    "is_unreachable",
    "kafka_words",
]
