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

from mirrorflow.config import overrides as config_overrides
from mirrorflow.config.keys import CONNECTOR_KEYS
from mirrorflow.config.model import parse_duration
from mirrorflow.kafka.clients import ClientConfigError
from mirrorflow.preflight import TIMEOUT_KEY, ClusterUnreachableError, check_connection
from mirrorflow_airflow.hooks.config import masked_entries
from mirrorflow_airflow.hooks.connection_form import CONN_TYPE


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
        entries = masked_entries(conn, "cluster", name=f"connection '{self.kafka_conn_id}'")
        return {entry.key.removeprefix("cluster."): entry.value for entry in entries}

    def test_connection(self) -> tuple[bool, str]:
        """(True, what answered) or (False, one line saying what failed), within the cluster timeout."""
        try:
            props = self.client_properties()
            if not props.get("bootstrap.servers"):
                return False, "no bootstrap servers: fill in the Bootstrap servers field (host:port, comma-separated)"
            return True, check_connection("the cluster", props, cluster_timeout_s())
        except (ClusterUnreachableError, ClientConfigError, config_overrides.OverrideError) as exc:
            return False, str(exc)
