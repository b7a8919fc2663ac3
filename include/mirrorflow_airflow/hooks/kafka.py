"""A Kafka cluster as an Airflow connection: the ``mirrorflow_kafka`` connection type and its Test button.

A connection ``kafka_<alias>`` gives cluster ``<alias>`` of ``mm2.properties`` its client settings
(:class:`~mirrorflow_airflow.hooks.config.MirrorflowHook` reads it), so credentials live in Airflow's
connections and secrets backends, not in a file. The form's fields are a Kafka client's as MirrorMaker 2
reads them: bootstrap servers (host), the SASL login and password, the security protocol, the SASL mechanism
and a PEM truststore; any other client property goes in the extra by its Kafka (Java) name.

Why not the Apache Kafka provider's ``kafka`` type: its extra holds librdkafka's names, while mirrorflow's
configuration, and every MM2 user's, speaks Kafka's Java client names; a connection of that type still works
(its ``bootstrap.servers`` extra is read), it just has no fields of its own.

Test asks the cluster for its metadata, bounded by the default ``mirrorflow.cluster.timeout``, and says what
answered or why not (the broker's or librdkafka's words: refused, unresolvable, authentication failed, TLS).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from mirrorflow.config import overrides as config_overrides
from mirrorflow.config.keys import CONNECTOR_KEYS
from mirrorflow.config.model import parse_duration
from mirrorflow.kafka.clients import ClientConfigError
from mirrorflow.preflight import TIMEOUT_KEY, ClusterUnreachableError, check_connection
from mirrorflow.redact import is_secret_key

CONN_TYPE = "mirrorflow_kafka"

#: The connection form's own fields (stored in the extra by these names), as the provider info declares them.
FORM_FIELDS: dict[str, dict[str, Any]] = {
    "security_protocol": {
        "label": "Security protocol",
        "schema": {"type": ["string", "null"], "enum": ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]},
        "description": "security.protocol (SASL_SSL when a login is given and this is empty)",
    },
    "sasl_mechanism": {
        "label": "SASL mechanism",
        "schema": {"type": ["string", "null"], "enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]},
        "description": "sasl.mechanism for the login and password (PLAIN when empty)",
    },
    "ssl_truststore_location": {
        "label": "Truststore (PEM file)",
        "schema": {"type": ["string", "null"]},
        "description": "ssl.truststore.location: CA certificates in PEM, readable on every worker",
    },
}

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema"],
    "relabeling": {"host": "Bootstrap servers", "login": "SASL username", "password": "SASL password"},
    "placeholders": {
        "host": "broker1:9092,broker2:9092",
        "extra": '{"ssl.endpoint.identification.algorithm": "https"}',
    },
}


def cluster_timeout_s() -> float:
    """The default of ``mirrorflow.cluster.timeout``: how long Test waits for the cluster."""
    return float(parse_duration(str(CONNECTOR_KEYS[TIMEOUT_KEY].default)))


class KafkaClusterHook(BaseHook):
    """The Kafka client properties of one cluster, from a connection; ``test_connection`` asks the cluster."""

    conn_name_attr = "kafka_conn_id"
    default_conn_name = "kafka_default"
    conn_type = CONN_TYPE
    hook_name = "Kafka cluster (mirrorflow)"

    def __init__(self, kafka_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id

    def client_properties(self) -> dict[str, str]:
        """Kafka (Java) client properties of the connection's cluster; every secret registered with the masker."""
        conn = self.get_connection(self.kafka_conn_id)
        if conn.password:
            mask_secret(conn.password)
        entries = config_overrides.connection_entries(
            "cluster",
            host=conn.host,
            port=conn.port,
            login=conn.login,
            password=conn.password,
            extra=conn.extra_dejson,
            name=f"connection '{self.kafka_conn_id}'",
        )
        props = {entry.key.removeprefix("cluster."): entry.value for entry in entries}
        for key, value in props.items():
            if is_secret_key(key):
                mask_secret(value)
        return props

    def test_connection(self) -> tuple[bool, str]:
        """(True, what answered) or (False, one line saying what failed), within the cluster timeout."""
        try:
            props = self.client_properties()
            if not props.get("bootstrap.servers"):
                return False, "no bootstrap servers: fill in the Bootstrap servers field (host:port, comma-separated)"
            return True, check_connection("the cluster", props, cluster_timeout_s())
        except (ClusterUnreachableError, ClientConfigError, config_overrides.OverrideError) as exc:
            return False, str(exc)
