"""The provider as Airflow sees it: its info valid against Airflow's schema, its connection type, its Test button."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mirrorflow_dev.devcluster import free_port


def test_the_provider_info_is_valid_for_airflow() -> None:
    import airflow

    from mirrorflow_airflow import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "mirrorflow"
    (conn,) = info["connection-types"]
    assert conn["connection-type"] == "mirrorflow_kafka"
    assert set(conn["conn-fields"]) == {"security_protocol", "sasl_mechanism", "ssl_truststore_location"}


def test_the_hook_module_imports_first_in_a_process() -> None:
    """Importing the hook imports Airflow, whose provider discovery calls ``get_provider_info``: that must not import
    the hook's module again half-way (it reads the form from an Airflow-free module)."""
    done = subprocess.run(
        [sys.executable, "-c", "import mirrorflow_airflow.hooks.kafka"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_airflow_finds_the_connection_type_and_its_form_fields() -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert manager.hooks["mirrorflow_kafka"].hook_class_name == "mirrorflow_airflow.hooks.kafka.KafkaClusterHook"
    widgets = manager.connection_form_widgets
    assert {"security_protocol", "sasl_mechanism", "ssl_truststore_location"} <= {
        w.field_name for w in widgets.values() if w.hook_class_name.endswith("KafkaClusterHook")
    }
    assert manager.field_behaviours["mirrorflow_kafka"]["relabeling"]["host"] == "Bootstrap servers"


def _connection(**fields: Any) -> Any:
    from airflow.models.connection import Connection

    return Connection(conn_id="kafka_check", conn_type="mirrorflow_kafka", **fields)


@pytest.mark.integration
def test_the_test_button_says_what_answered(kafka_clusters: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    host, port = kafka_clusters.primary.rsplit(":", 1)
    conn = _connection(host=host, port=int(port), extra=json.dumps({"security_protocol": "PLAINTEXT"}))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CHECK", conn.as_json())
    ok, message = conn.test_connection()  # what the connection form's Test does: the type's hook, test_connection()
    assert ok, message
    assert message.startswith(f"the cluster (bootstrap.servers {kafka_clusters.primary}) answered in ")
    assert "1 broker(s)" in message


@pytest.mark.integration
def test_the_test_button_names_what_failed_within_the_cluster_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"127.0.0.1:{free_port()}"
    conn = _connection(host=dead)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CHECK", conn.as_json())
    started = time.monotonic()
    ok, message = conn.test_connection()
    assert not ok and time.monotonic() - started < 25
    assert message.startswith(f"the cluster (bootstrap.servers {dead}) did not answer")
    assert message.endswith("failed: Connection refused"), message  # librdkafka's "(after 0ms in state ...)" cut


def test_the_test_button_names_a_wrong_field_without_echoing_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _connection(host="127.0.0.1:9", login="mirror")  # a login without its password
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CHECK", conn.as_json())
    ok, message = conn.test_connection()
    assert not ok
    assert message == "airflow connection 'kafka_check': login and password must be given together (SASL credentials)"
    conn = _connection(host="", extra=json.dumps({"sasl_mechanism": "PLAIN"}))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CHECK", conn.as_json())
    assert conn.test_connection() == (
        False,
        "no bootstrap servers: fill in the Bootstrap servers field (host:port, comma-separated)",
    )


def test_the_form_fields_become_kafka_client_properties() -> None:
    from mirrorflow.config.overrides import connection_entries

    entries = connection_entries(
        "east",
        host="b1:9093,b2",
        port=9093,
        login="mirror",
        password="pw",
        extra={
            "security_protocol": "SASL_SSL",
            "extra__mirrorflow_kafka__sasl_mechanism": "SCRAM-SHA-512",  # an older Airflow's prefix
            "ssl_truststore_location": "",  # an empty field is no setting
            "consumer.max.poll.records": 100,
        },
    )
    props = {e.key: e.value for e in entries}
    assert props["east.bootstrap.servers"] == "b1:9093,b2:9093"
    assert props["east.security.protocol"] == "SASL_SSL"
    assert props["east.sasl.mechanism"] == "SCRAM-SHA-512"
    assert "ScramLoginModule" in props["east.sasl.jaas.config"]
    assert props["east.consumer.max.poll.records"] == "100"
    assert "east.ssl.truststore.location" not in props
