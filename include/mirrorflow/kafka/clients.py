"""confluent-kafka clients for a flow's clusters, built from MM2's Java-named client settings.

``mm2.properties`` carries Java client properties (``sasl.jaas.config``, ``ssl.truststore.location``,
``max.poll.records``); confluent-kafka is librdkafka, which names some of them differently and
refuses the ones it does not know. Every Kafka client of mirrorflow is created here, with the translation
``config validate`` checks (``client_settings``), so that it, the secret handling (nothing secret is ever logged or
put in an error) and the ``client.id`` convention live in one place.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from ..client_settings import ClientSettingError, translate
from ..config.model import FlowConfig, Role, Side
from .calls import CountingAdmin, note

log = logging.getLogger(__name__)

# "PLAINTEXT://host:9092", "[::1]:9092", "host:9092" -> ("host", 9092); librdkafka accepts all three.
_SERVER = re.compile(r"^(?:[A-Za-z_]+://)?\[?(?P<host>[^\[\]]+?)\]?:(?P<port>\d+)$")
_NO_SUCH_PROPERTY = re.compile(r"No such configuration property: \"([^\"]+)\"")

RECEIVE_MAX = 200 * 1024 * 1024
"""``receive.message.max.bytes`` of the copier's and the verifier's source consumers: a broker that answers a fetch
with a partition's whole backlog (the embedded test broker) needs a large receive limit. Harmless against Apache
Kafka, which honours fetch sizes."""

BOUNDED_READ_WAIT_MS = 10
"""``fetch.wait.max.ms`` of a bounded reader (see :func:`bounded_reader`)."""

BOUNDED_READER: dict[str, Any] = {
    "enable.partition.eof": True,
    "enable.auto.commit": False,
    "fetch.wait.max.ms": BOUNDED_READ_WAIT_MS,
}
"""librdkafka settings of every bounded reader (see :func:`bounded_reader`); applied over the flow's settings."""


def bounded_reader(config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """``config`` made a bounded reader's: a consumer (assign() only) that reads up to an end offset it knows.

    Stored progress, offset syncs, the lease log, heartbeats' tails, verify chunks and the copier's units all read
    up to an end they learned first. Apache Kafka holds a fetch that finds no records for ``fetch.wait.max.ms``
    (librdkafka's default 500 ms), and such a reader often learns it reached its end only from that empty fetch:
    the end-of-partition event, or a read_committed range ending in a transaction marker, which is never delivered.
    A kept consumer (``replication.kept_clients``) also waits out the fetch its last assignment left at the broker
    before its next assignment's first fetch. That cost an exactly-once run with nothing new most of its plan,
    and a copy about as much per unit. A reader that knows its end never waits for new records, so it asks for a short
    wait (``BOUNDED_READ_WAIT_MS``) over whatever the flow sets (a long poll suits a consumer waiting for new
    records; no mirrorflow reader is one): at its end, a few more empty fetches before it stops; while records
    remain, fetches return them at once as before.
    """
    return {**config, **BOUNDED_READER, **overrides}


def server_address(server: str) -> tuple[str, int] | None:
    """``(host, port)`` of one ``bootstrap.servers`` entry, None when it is not ``[PROTOCOL://]HOST:PORT``."""
    match = _SERVER.match(server.strip())
    return (match["host"], int(match["port"])) if match else None


class ClientConfigError(ValueError):
    """A client setting librdkafka cannot honour; the message names the key, never its value."""


LIBRDKAFKA_LOGGER = "mirrorflow.librdkafka"


class LibrdkafkaLog:
    """librdkafka's log as DEBUG records of the ``mirrorflow.librdkafka`` logger, for every client mirrorflow creates.

    Without it librdkafka writes its own lines to stderr: dozens of ``%3|...|FAIL|...`` lines while a broker restarts,
    which a run rides through. What is a real problem reaches mirrorflow as an error (a failed request, a delivery
    report, an error event) and is said once, in words; ``--debug`` (or any DEBUG logging configuration) shows the
    client's own lines again. confluent-kafka calls ``log(level, fmt, *args)`` when the client is polled. Stateless and
    with a fixed ``repr``, so a client configuration holding it pickles to Spark executors and keys kept clients.
    """

    def log(self, level: int, msg: str, *args: Any) -> None:
        logging.getLogger(LIBRDKAFKA_LOGGER).debug("librdkafka (level %d): " + msg, level, *args)

    def __repr__(self) -> str:
        return "LibrdkafkaLog()"


LIBRDKAFKA_LOG = LibrdkafkaLog()


def librdkafka_config(java_props: Mapping[str, str], client_id: str | None = None) -> dict[str, Any]:
    """Translate Java client properties into librdkafka properties (``client_settings.translate``)."""
    try:
        config: dict[str, Any] = dict(translate(java_props).config)
    except ClientSettingError as exc:
        raise ClientConfigError(str(exc)) from None
    if client_id:
        config.setdefault("client.id", client_id)
    return config


def build_client(factory: type, config: dict[str, Any], what: str) -> Any:
    """Create a client, dropping (and naming) keys librdkafka does not know; never echo values."""
    dropped: list[str] = []
    while True:
        try:
            return factory(config)
        except (KafkaException, ValueError, TypeError) as exc:
            match = _NO_SUCH_PROPERTY.search(str(exc))
            if match and match.group(1) in config:
                dropped.append(match.group(1))
                config = {k: v for k, v in config.items() if k != match.group(1)}
                log.warning("%s: librdkafka has no setting '%s'; ignored", what, match.group(1))
                continue
            message = str(exc)
            for key, value in config.items():
                if isinstance(value, str) and value and value in message:
                    message = message.replace(value, f"<{key}>")
            raise ClientConfigError(f"{what}: {message}") from None


def client_config(java_props: Mapping[str, str], client_id: str) -> dict[str, Any]:
    """librdkafka properties of a mirrorflow client from Kafka (Java) client properties.

    ``allow.auto.create.topics`` is off unless the user sets it: librdkafka turns it on for producer-type
    handles (the AdminClient is one), and with the broker's default ``auto.create.topics.enable=true`` a
    metadata request or a produce would create a missing topic with the broker's defaults (1 partition,
    ``cleanup.policy=delete``). mirrorflow creates its topics itself (``topics/``, ``internal_topics.py``).
    """
    config = librdkafka_config(java_props, client_id)
    config.setdefault("allow.auto.create.topics", False)
    config.setdefault("logger", LIBRDKAFKA_LOG)
    return config


def client_properties(flow: FlowConfig, side: Side, role: Role, **overrides: Any) -> dict[str, Any]:
    """librdkafka properties of one client of a flow (``client.id`` follows MM2's convention)."""
    config = client_config(flow.client_config(side, role), f"mirrorflow|{flow.name}|{side}-{role}")
    if role == "consumer":
        config["group.id"] = f"mirrorflow-{flow.source}-{flow.target}"  # assign() only; never committed
    config.update(overrides)
    return config


def admin(flow: FlowConfig, side: Side, **overrides: Any) -> AdminClient:
    """An admin client whose calls a run counts (``kafka_calls``)."""
    note("new admin")
    built = build_client(
        AdminClient, client_properties(flow, side, "admin", **overrides), f"{flow.name} {side} admin client"
    )
    return CountingAdmin(built)  # type: ignore[return-value]  # the same methods, counted


def consumer(flow: FlowConfig, side: Side, **overrides: Any) -> Consumer:
    note("new consumer")
    return build_client(
        Consumer, client_properties(flow, side, "consumer", **overrides), f"{flow.name} {side} consumer"
    )


def producer(flow: FlowConfig, side: Side, **overrides: Any) -> Producer:
    note("new producer")
    return build_client(
        Producer, client_properties(flow, side, "producer", **overrides), f"{flow.name} {side} producer"
    )
