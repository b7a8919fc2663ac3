"""The Spark Connect engine's plain parts: addresses, session ids, the local server's command line."""

from __future__ import annotations

import pytest

from mirrorflow.config import parse_config
from mirrorflow.kafka.clients import client_properties
from mirrorflow.replication.connect import (
    cluster_identity,
    public_url,
    server_address,
    session_id_for,
    session_identity,
    with_session_id,
)
from mirrorflow.replication.local_connect import SERVER_CLASS, local_master, server_command


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sc://127.0.0.1:15002", "sc://127.0.0.1:15002/;session_id=S"),
        ("sc://spark:15002/", "sc://spark:15002/;session_id=S"),
        ("sc://spark:15002/;token=abc;use_ssl=true", "sc://spark:15002/;token=abc;use_ssl=true;session_id=S"),
        ("sc://spark:15002/;session_id=mine", "sc://spark:15002/;session_id=mine"),  # the user's own wins
    ],
)
def test_session_id_is_added_to_any_url_form(url: str, expected: str) -> None:
    assert with_session_id(url, "S") == expected


def test_public_url_never_shows_parameters_such_as_the_token() -> None:
    assert public_url("sc://spark:15002/;token=s3cret;user_id=me") == "sc://spark:15002"
    with pytest.raises(ValueError, match="sc://HOST:PORT") as raised:
        server_address("http://spark:15002/;token=s3cret")
    assert "s3cret" not in str(raised.value)


def test_server_address_defaults_to_sparks_port() -> None:
    assert server_address("sc://spark/;token=x") == ("spark", 15002)
    assert server_address("sc://127.0.0.1:20123") == ("127.0.0.1", 20123)


def test_session_ids_are_stable_per_flow_family_and_distinct_between_them() -> None:
    orders = session_id_for("primary->backup/orders")
    assert orders == session_id_for("primary->backup/orders")
    assert orders != session_id_for("primary->backup/payments")
    assert len(orders) == 36  # a UUID, as Spark Connect requires


def deployment(east: str, west: str) -> tuple[dict[str, object], dict[str, object]]:
    """The client configurations the units of ``east->west`` carry (source consumer, target producer), in a file
    whose aliases are always ``east`` and ``west`` and whose clusters sign in with SASL."""
    config = parse_config(
        f"clusters = east, west\neast.bootstrap.servers = {east}\nwest.bootstrap.servers = {west}\n"
        "east->west.enabled = true\nsecurity.protocol = SASL_SSL\nsasl.mechanism = PLAIN\n"
        'sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror" '
        'password="s3cr3t-pw";\nssl.key.password = k3y-pw\n'
    )
    flow = config.flow("east", "west")
    return client_properties(flow, "source", "consumer"), client_properties(flow, "target", "producer")


def test_session_identity_tells_clusters_apart_behind_the_same_aliases() -> None:
    """Two files whose aliases are both ``east`` and ``west`` but name different clusters share a Spark Connect
    server: their sessions must differ, or one run's start interrupts the other's job. The same clusters, however
    their bootstrap lists are written, are one session (a run must find what a killed run of them left)."""
    staging = deployment("kafka-a1:9092,kafka-a2:9092", "kafka-b1:9092")
    production = deployment("kafka-c1:9092", "kafka-d1:9092,kafka-d2:9092")
    swapped = deployment("kafka-b1:9092", "kafka-a1:9092,kafka-a2:9092")
    same = deployment(" SASL_SSL://KAFKA-A2:9092, kafka-a1 ", "kafka-b1")  # other order, case, prefix, default port

    def session_id(clusters: tuple[dict[str, object], dict[str, object]], name: str = "east->west/orders") -> str:
        return session_id_for(session_identity(name, *clusters, "v1"))

    assert len({session_id(staging), session_id(production), session_id(swapped)}) == 3
    assert session_id(staging) == session_id(same) == session_id(deployment("kafka-a1:9092,kafka-a2:9092", "kafka-b1"))
    assert session_id(staging) != session_id(staging, "east->west/payments")
    assert session_id_for(session_identity("east->west/orders", *staging, "v2")) != session_id(staging)
    assert session_identity("east->west/orders", *same, "v1") == (
        "east->west/orders kafka-a1:9092,kafka-a2:9092->kafka-b1:9092@v1"
    )


def test_session_identity_holds_no_secret() -> None:
    source, target = deployment("kafka-a1:9092", "kafka-b1:9092")
    assert source["sasl.password"] == "s3cr3t-pw" and target["ssl.key.password"] == "k3y-pw"  # the units carry them
    identity = session_identity("east->west/orders", source, target, "v1")
    for secret in ("s3cr3t-pw", "k3y-pw", "mirror", "PLAIN", "SASL"):
        assert secret not in identity


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ("b:1,A:2", "a:2,b:1"),
        (" PLAINTEXT://Broker1.example.com.:9093 , broker2", "broker1.example.com:9093,broker2:9092"),
        ("[::1]:9093,[::1]", "[::1]:9092,[::1]:9093"),
        ("h:1,h:1,H:1", "h:1"),
    ],
)
def test_cluster_identity_normalises_bootstrap_servers(servers: str, expected: str) -> None:
    assert cluster_identity({"bootstrap.servers": servers, "sasl.password": "x"}) == expected


def test_local_server_listens_on_loopback_with_task_retries() -> None:
    command = server_command(20123)
    assert command[command.index("--class") + 1] == SERVER_CLASS
    assert command[command.index("--master") + 1] == local_master()
    assert (local_master(1), local_master(2), local_master(8)) == ("local[4,4]", "local[4,4]", "local[16,4]")
    confs = {command[i + 1] for i, arg in enumerate(command) if arg == "--conf"}
    assert {"spark.connect.grpc.binding.port=20123", "spark.connect.grpc.binding.address=127.0.0.1"} <= confs
