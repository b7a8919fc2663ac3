"""The producers the copier keeps in a process between units: idle record producers and offset-sync producers.

A transactional producer is kept per ``transactional.id``, so a later unit of the same partition in the same process
(a Spark Connect worker, a later wave on the same Spark worker) skips ``init_transactions``; a kept producer first
proves it still owns its id (``tuning.PROBE_AFTER_IDLE_S``), and a fenced one is replaced by a new producer that
fences the other holder. Offset syncs bound for the source cluster go through one idempotent producer per
configuration.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from confluent_kafka import KafkaException, Producer

from ..wire import OffsetSync
from . import tuning
from .kept_clients import KeptClients, client_key, close_kept_consumers
from .units import UnitSpec


def let_go(producer: Producer) -> None:
    """Purge what a producer that will not be used again still holds, so it is destroyed now rather than going on
    reconnecting (and logging) until ``message.timeout.ms``."""
    with contextlib.suppress(KafkaException, RuntimeError):
        producer.purge()
        producer.flush(0)


def _flush_producer(producer: Producer) -> None:
    producer.flush(10)


KEPT_PRODUCERS: KeptClients[Producer] = KeptClients(lambda: tuning.KEEP_PRODUCERS, _flush_producer)
"""Idle record producers for a later unit with the same configuration (and ``transactional.id``). Only producers
with nothing in flight and no open transaction are kept (a unit that ended normally); one that failed is dropped,
whatever its state."""
_SHARED_LOCK = threading.Lock()
"""Guards the offset-syncs producers: units of one process may run in threads."""


_SYNCS_PRODUCERS: dict[str, Producer] = {}


def syncs_producer(config: dict[str, Any]) -> Producer:
    """One idempotent producer of offset syncs per configuration and process, kept across units.

    A new producer costs a connection and a producer id, a large share of a small unit's time; Spark reuses its Python
    workers, so later units of a run skip that (the app, and with it its workers, ends with the run). In-process runs close them after each wave (``close_kept_clients``).
    Not for records: those go through the unit's own (transactional) producer.
    """
    key = client_key(config)
    with _SHARED_LOCK:
        producer = _SYNCS_PRODUCERS.get(key)
        if producer is None:
            producer = Producer({**tuning.PRODUCER_DEFAULTS, **config, "enable.idempotence": True, "acks": "all"})
            _SYNCS_PRODUCERS[key] = producer
    return producer


def close_kept_clients(timeout: float = 10.0) -> None:
    """Flush and drop the producers kept across units (offset syncs, and the idle record producers) and close the
    idle consumers, so a long-lived process (tests, an in-process run inside an Airflow worker) does not keep
    connections to clusters it no longer uses."""
    with _SHARED_LOCK:
        producers = [*_SYNCS_PRODUCERS.values()]
        _SYNCS_PRODUCERS.clear()
    for producer in [*producers, *KEPT_PRODUCERS.drain()]:
        producer.flush(timeout)
    close_kept_consumers()


def new_producer(config: dict[str, Any], topic: str, timeout: float) -> Producer:
    """A producer already connected to a broker the cluster's metadata named, so ``init_transactions`` gets a
    producer id at once.

    A producer made a moment ago is still moving from its bootstrap connection to the broker the metadata named
    (librdkafka lets the bootstrap connection go once it knows the cluster's brokers). ``init_transactions`` called
    then finds "no brokers available" and retries only when librdkafka's 500 ms timer fires. The first metadata
    request (for ``topic`` alone) is answered on the bootstrap connection; the second can only be answered by a
    named broker, so it returns once one is up. Not a request for the whole cluster's metadata, which also waits for
    that broker but costs in proportion to the cluster's partitions (see docs/performance.md).
    """
    producer = Producer(config)
    producer.list_topics(topic, timeout=timeout)
    producer.list_topics(topic, timeout=timeout)
    return producer


def write_source_syncs(spec: UnitSpec, syncs: list[OffsetSync]) -> bool:
    """Write offset syncs to the source cluster once the records they describe are committed; False when they were
    lost. Like MM2: a lost sync only costs translation precision, never a record."""
    try:
        producer = syncs_producer(spec.syncs_producer)
        produce_syncs(producer, spec.syncs_topic, syncs)
        producer.flush(spec.timeout_s)
    except (KafkaException, BufferError):
        with _SHARED_LOCK:
            _SYNCS_PRODUCERS.clear()  # a fresh producer next time
        return False
    return True


def produce_syncs(producer: Producer, topic: str, syncs: list[OffsetSync]) -> None:
    for sync in syncs:
        producer.produce(topic, key=sync.key(), value=sync.value(), partition=0)
