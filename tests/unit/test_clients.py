"""Java client settings (as written in mm2.properties) translated for librdkafka, secrets kept out of errors."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirrorflow.config import parse_config
from mirrorflow.kafka.clients import (
    BOUNDED_READ_WAIT_MS,
    LIBRDKAFKA_LOG,
    ClientConfigError,
    bounded_reader,
    build_client,
    client_properties,
    librdkafka_config,
)

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="svc" password="p@ss \\"x\\"";'


def test_plain_and_scram_jaas_become_username_and_password() -> None:
    config = librdkafka_config({"sasl.jaas.config": JAAS, "sasl.mechanism": "PLAIN", "security.protocol": "SASL_SSL"})
    assert config == {
        "sasl.username": "svc",
        "sasl.password": 'p@ss "x"',
        "sasl.mechanisms": "PLAIN",
        "security.protocol": "SASL_SSL",
    }
    scram = librdkafka_config(
        {
            "sasl.jaas.config": JAAS.replace("plain.PlainLoginModule", "scram.ScramLoginModule"),
            "sasl.mechanism": "SCRAM-SHA-512",
        }
    )
    assert scram["sasl.username"] == "svc"


def test_unsupported_login_module_and_jks_stores_are_refused_by_name() -> None:
    with pytest.raises(ClientConfigError, match="login module JndiLoginModule cannot run in librdkafka"):
        librdkafka_config({"sasl.jaas.config": "com.sun.security.auth.module.JndiLoginModule required;"})
    with pytest.raises(ClientConfigError, match="ssl.truststore.location: librdkafka cannot read a JKS truststore"):
        librdkafka_config({"ssl.truststore.location": "/x.jks", "ssl.truststore.password": "secret"})
    pem = librdkafka_config({"ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM"})
    assert pem == {"ssl.ca.location": "/ca.pem"}
    assert librdkafka_config(
        {"ssl.keystore.location": "/k.p12", "ssl.keystore.type": "PKCS12", "ssl.keystore.password": "pw"}
    ) == {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}


def test_java_only_keys_are_dropped_and_renamed_keys_renamed() -> None:
    config = librdkafka_config({"max.poll.records": "5", "key.deserializer": "x", "delivery.timeout.ms": "9"})
    assert config == {"message.timeout.ms": "9"}


def test_unknown_keys_are_dropped_with_their_name_and_bad_values_hide_secrets() -> None:
    quiet = {"bootstrap.servers": "127.0.0.1:1", "logger": LIBRDKAFKA_LOG}
    producer = build_client(Producer, {**quiet, "max.request.size": "1"}, "test producer")
    assert producer is not None
    with pytest.raises(ClientConfigError) as err:
        build_client(
            Producer,
            {**quiet, "sasl.password": "hunter2", "linger.ms": "hunter2"},
            "test producer",
        )
    assert "hunter2" not in str(err.value)


def test_flow_client_properties_carry_mm2_precedence_and_a_client_id() -> None:
    flow = parse_config(
        "clusters = a, b\na.bootstrap.servers = h1:1\nb.bootstrap.servers = h2:1\na->b.enabled = true\n"
        # A backslash escapes in a properties file too: the JAAS line's \" is written \\" there.
        f"b.producer.sasl.jaas.config = {JAAS.replace(chr(92), chr(92) * 2)}\nb.sasl.mechanism = PLAIN\n"
    ).flow("a", "b")
    producer = client_properties(flow, "target", "producer")
    assert producer["sasl.username"] == "svc" and producer["sasl.mechanisms"] == "PLAIN"
    assert producer["client.id"] == "mirrorflow|a->b|target-producer"
    consumer = client_properties(flow, "source", "consumer")
    assert consumer["isolation.level"] == "read_committed" and consumer["enable.auto.commit"] == "false"


def test_every_flow_client_turns_topic_auto_creation_off_unless_the_user_sets_it() -> None:
    """librdkafka's producer-type handles (the AdminClient too) would let a metadata request create a topic."""
    base = "clusters = a, b\na.bootstrap.servers = h1:1\nb.bootstrap.servers = h2:1\na->b.enabled = true\n"
    flow = parse_config(base).flow("a", "b")
    for side in ("source", "target"):
        for role in ("consumer", "producer", "admin"):
            assert client_properties(flow, side, role)["allow.auto.create.topics"] is False, (side, role)
    idempotent = client_properties(flow, "target", "producer", **{"enable.idempotence": True})
    assert idempotent["allow.auto.create.topics"] is False
    # A user's explicit setting is honoured (no longer dropped as Java-only), for the role it is set on.
    chosen = parse_config(base + "b.admin.allow.auto.create.topics = true\n").flow("a", "b")
    assert client_properties(chosen, "target", "admin")["allow.auto.create.topics"] == "true"
    assert client_properties(chosen, "target", "producer")["allow.auto.create.topics"] is False
    assert librdkafka_config({"allow.auto.create.topics": "true"}) == {"allow.auto.create.topics": "true"}


def test_a_bounded_reader_asks_for_a_short_long_poll_whatever_the_flow_sets() -> None:
    """A reader that knows its end must not wait out the broker's long poll there (see ``clients.bounded_reader``);
    the flow's connection settings stay, and the reader's own settings win over the shared ones."""
    flow = parse_config(
        "clusters = a, b\na.bootstrap.servers = h1:1\nb.bootstrap.servers = h2:1\na->b.enabled = true\n"
        "consumer.fetch.wait.max.ms = 2000\nconsumer.enable.partition.eof = false\n"
    ).flow("a", "b")
    consumer = client_properties(flow, "target", "consumer")
    assert consumer["fetch.wait.max.ms"] == "2000"
    reader = bounded_reader(consumer, **{"isolation.level": "read_committed"})
    assert reader["fetch.wait.max.ms"] == BOUNDED_READ_WAIT_MS
    assert reader["enable.partition.eof"] is True and reader["enable.auto.commit"] is False
    assert reader["bootstrap.servers"] == "h2:1" and reader["isolation.level"] == "read_committed"
    assert bounded_reader(consumer, **{"fetch.wait.max.ms": 50})["fetch.wait.max.ms"] == 50
    assert consumer["fetch.wait.max.ms"] == "2000"  # the flow's own properties are left as they were
