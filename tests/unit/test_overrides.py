"""Cluster settings from Airflow connections, carried to the Spark app, and partial loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorflow.config import ConfigError, load_config
from mirrorflow.config import overrides as ov
from mirrorflow.kafka.clients import librdkafka_config


def test_host_port_login_and_extra_become_cluster_settings() -> None:
    entries = ov.connection_entries(
        "primary",
        host="k1.example.com,k2.example.com:9093",
        port=9092,
        login="mirror",
        password='pa"ss\\word',
        extra={"sasl.mechanism": "SCRAM-SHA-512", "ssl.endpoint.identification.algorithm": "", "x": True},
    )
    got = {e.key: e.value for e in entries}
    assert got["primary.bootstrap.servers"] == "k1.example.com:9092,k2.example.com:9093"
    assert got["primary.security.protocol"] == "SASL_SSL"
    assert got["primary.sasl.mechanism"] == "SCRAM-SHA-512"
    assert got["primary.x"] == "true"
    assert got["primary.sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule")
    assert {e.file for e in entries} == {"airflow connection 'kafka_primary'"}
    # the JAAS line round-trips through the librdkafka translation, quotes and backslashes included
    rd = librdkafka_config({"sasl.jaas.config": got["primary.sasl.jaas.config"], "sasl.mechanism": "SCRAM-SHA-512"})
    assert rd == {"sasl.username": "mirror", "sasl.password": 'pa"ss\\word', "sasl.mechanisms": "SCRAM-SHA-512"}


def test_plain_is_the_default_mechanism_and_an_explicit_protocol_is_kept() -> None:
    got = {
        e.key: e.value
        for e in ov.connection_entries("b", login="u", password="p", extra={"security.protocol": "SASL_PLAINTEXT"})
    }
    assert "PlainLoginModule" in got["b.sasl.jaas.config"]
    assert got["b.security.protocol"] == "SASL_PLAINTEXT" and got["b.sasl.mechanism"] == "PLAIN"


def test_the_forms_truststore_field_is_a_pem_file() -> None:
    """The connection form's "Truststore (PEM file)": Java's default store type is JKS, which librdkafka cannot read,
    so the field implies PEM unless the extra names another type (which validation then refuses with keytool's
    command)."""
    field = {e.key: e.value for e in ov.connection_entries("b", extra={"ssl_truststore_location": "/etc/ca.pem"})}
    assert field["b.ssl.truststore.location"] == "/etc/ca.pem" and field["b.ssl.truststore.type"] == "PEM"
    assert librdkafka_config({k.removeprefix("b."): v for k, v in field.items()}) == {"ssl.ca.location": "/etc/ca.pem"}
    typed = {
        e.key: e.value
        for e in ov.connection_entries(
            "b", extra={"ssl.truststore.type": "PKCS12", "ssl_truststore_location": "/etc/ca.p12"}
        )
    }
    assert typed["b.ssl.truststore.type"] == "PKCS12"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"login": "u"}, "login and password must be given together"),
        ({"login": "u", "password": "p", "extra": {"sasl.jaas.config": "x"}}, "not both"),
        ({"extra": {"nested": {"a": 1}}}, "extra field 'nested'"),
    ],
)
def test_bad_connections_are_refused_naming_the_connection_not_the_secret(kwargs: dict, message: str) -> None:
    with pytest.raises(ov.OverrideError, match=message) as info:
        ov.connection_entries("primary", **kwargs)
    assert "kafka_primary" in str(info.value) and "'p'" not in str(info.value)


def test_entries_travel_through_the_environment() -> None:
    entries = ov.connection_entries("primary", host="h", port=1, extra={"client.rack": "r1"})
    assert ov.from_environment({ov.ENV_VAR: ov.encode(entries)}) == entries
    assert ov.from_environment({}) == []
    with pytest.raises(ov.OverrideError, match=ov.ENV_VAR):
        ov.decode("{not json")


def test_overrides_replace_the_file_and_show_their_origin(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = old:1\na.bootstrap.servers = old:2\nb.bootstrap.servers = b:1\n"
        "a->b.enabled = true\n"
    )
    entries = ov.connection_entries("a", host="new", port=9092)
    loaded = load_config(config, overrides=entries)
    setting = loaded.clusters["a"].properties["bootstrap.servers"]
    assert setting.value == "new:9092"
    assert setting.origin.describe() == "airflow connection 'kafka_a' (a.bootstrap.servers)"
    assert loaded.flow("a", "b").client_config("source", "consumer")["bootstrap.servers"] == "new:9092"


def test_partial_load_leaves_out_only_the_broken_flows(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b, c\na.bootstrap.servers = x:1\nb.bootstrap.servers = x:2\nc.bootstrap.servers = \n"
        "a->b.enabled = true\na->c.enabled = true\nb->a.enabled = true\nb->a.topics = [bad\n"
    )
    loaded = load_config(config, partial=True)
    assert [f.name for f in loaded.enabled_flows()] == ["a->b"]
    assert set(loaded.broken_flows) == {"a->c", "b->a", "c->a", "b->c", "c->b"}  # c's servers are empty
    assert any(":8:" in e and "b->a.topics" in e for e in loaded.broken_flows["b->a"])
    with pytest.raises(ConfigError):
        load_config(config)


def test_partial_load_still_raises_for_errors_no_flow_owns(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = x:2\nreplication.factor = x\n")
    with pytest.raises(ConfigError, match="replication.factor"):
        load_config(config, partial=True)
