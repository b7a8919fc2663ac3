"""The Spark Connect engine's plain parts: addresses, session ids, the local server's command line."""

from __future__ import annotations

import pytest

from mirrorflow.replication.connect import (
    public_url,
    server_address,
    session_id_for,
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


def test_local_server_listens_on_loopback_with_task_retries() -> None:
    command = server_command(20123)
    assert command[command.index("--class") + 1] == SERVER_CLASS
    assert command[command.index("--master") + 1] == local_master()
    assert (local_master(1), local_master(2), local_master(8)) == ("local[4,4]", "local[4,4]", "local[16,4]")
    confs = {command[i + 1] for i, arg in enumerate(command) if arg == "--conf"}
    assert {"spark.connect.grpc.binding.port=20123", "spark.connect.grpc.binding.address=127.0.0.1"} <= confs
