"""Cluster settings that override ``mm2.properties``: from an Airflow connection, carried to Spark.

Operators keep credentials in Airflow's connections (and their secrets backends: Vault, AWS Secrets
Manager...) rather than in a properties file. A connection ``kafka_<alias>`` becomes ``<alias>.*``
entries that replace the file's, with an origin naming the connection, so ``config show`` and every
error still say where a value came from. The Spark app is a separate process that cannot ask Airflow,
so the same entries travel to it in one environment variable (never on the command line, where
``ps`` and Airflow's task log would show them).

This module is plain data: the Airflow side (``mirrorflow_airflow.hooks``) reads the connection and calls
:func:`connection_entries`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .properties import Entry

#: Environment variable carrying override entries to the Spark app (JSON, see :func:`encode`).
ENV_VAR = "MIRRORFLOW_CONFIG_OVERRIDES"

#: Airflow connection id of a cluster alias.
CONNECTION_PREFIX = "kafka_"

_SCRAM = {"SCRAM-SHA-256", "SCRAM-SHA-512"}

#: The connection form's fields (``mirrorflow_kafka`` connections keep them in the extra under these names, an
#: older Airflow with its ``extra__<type>__`` prefix) and the Kafka client properties they stand for.
FORM_FIELDS = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "ssl_truststore_location": "ssl.truststore.location",
}
_FORM_PREFIX = re.compile(r"^extra__[a-z0-9_]+__")


class OverrideError(ValueError):
    """A connection that cannot become cluster settings; names the connection and field, never a value."""


def connection_id(alias: str) -> str:
    return f"{CONNECTION_PREFIX}{alias}"


def _bootstrap(host: str, port: int | None) -> str:
    servers = [s.strip() for s in host.split(",") if s.strip()]
    if port:
        servers = [s if ":" in s.rsplit("]", 1)[-1] else f"{s}:{port}" for s in servers]
    return ",".join(servers)


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _jaas(mechanism: str, username: str, password: str) -> str:
    module = (
        "org.apache.kafka.common.security.scram.ScramLoginModule"
        if mechanism.upper() in _SCRAM
        else "org.apache.kafka.common.security.plain.PlainLoginModule"
    )
    return f"{module} required username={_jaas_quote(username)} password={_jaas_quote(password)};"


def connection_entries(
    alias: str,
    *,
    host: str | None = None,
    port: int | None = None,
    login: str | None = None,
    password: str | None = None,
    extra: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> list[Entry]:
    """``<alias>.*`` entries from the fields of an Airflow connection ``kafka_<alias>``.

    * host (a comma-separated list allowed) and port give ``bootstrap.servers``;
    * extra holds client properties by their Kafka (Java) names, e.g. ``security.protocol``,
      ``sasl.mechanism``, ``ssl.truststore.location``, or ``consumer.*``/``producer.*`` role keys, and the
      connection form's fields (:data:`FORM_FIELDS`; an empty field is no setting; the truststore field is a PEM
      file, so it implies ``ssl.truststore.type=PEM`` unless the extra says otherwise);
      ``bootstrap.servers`` in extra is used when host is empty (the Kafka provider's habit);
    * login and password become ``sasl.jaas.config`` for ``sasl.mechanism`` (PLAIN unless SCRAM),
      and ``security.protocol`` defaults to SASL_SSL when they are given.
    """
    source = f"airflow {name or f'connection {connection_id(alias)!r}'}"
    props: dict[str, str] = {}
    for raw_key, value in (extra or {}).items():
        field = _FORM_PREFIX.sub("", str(raw_key))
        key = FORM_FIELDS.get(field, str(raw_key))
        if value is None or (field in FORM_FIELDS and str(value).strip() == ""):
            continue
        if isinstance(value, (dict, list)):
            raise OverrideError(f"{source}: extra field '{key}' must be a string, number or boolean")
        props[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
        if field == "ssl_truststore_location":
            props.setdefault("ssl.truststore.type", "PEM")  # the form's field is a PEM file (Java's default is JKS)
    if host:
        props["bootstrap.servers"] = _bootstrap(host, port)
    if login or password:
        if not (login and password):
            raise OverrideError(f"{source}: login and password must be given together (SASL credentials)")
        if "sasl.jaas.config" in props:
            raise OverrideError(f"{source}: give either login/password or extra 'sasl.jaas.config', not both")
        props["sasl.jaas.config"] = _jaas(props.get("sasl.mechanism", "PLAIN"), login, password)
        props.setdefault("sasl.mechanism", "PLAIN")
        props.setdefault("security.protocol", "SASL_SSL")
    return [Entry(f"{alias}.{key}", value, source, 0) for key, value in props.items()]


def encode(entries: Sequence[Entry]) -> str:
    """JSON for :data:`ENV_VAR` (keys, values and their origin)."""
    return json.dumps([{"key": e.key, "value": e.value, "source": e.file} for e in entries])


def decode(text: str) -> list[Entry]:
    try:
        raw = json.loads(text)
        return [Entry(str(item["key"]), str(item["value"]), str(item.get("source", ENV_VAR)), 0) for item in raw]
    except (ValueError, TypeError, KeyError) as exc:
        raise OverrideError(f"{ENV_VAR} is not a JSON list of {{key, value, source}} objects: {type(exc).__name__}")


def from_environment(environ: Mapping[str, str] | None = None) -> list[Entry]:
    """Override entries handed to this process (the Spark app) by the Airflow task that started it."""
    text = (environ if environ is not None else os.environ).get(ENV_VAR, "")
    return decode(text) if text.strip() else []


__all__ = [
    "CONNECTION_PREFIX",
    "ENV_VAR",
    "FORM_FIELDS",
    "OverrideError",
    "connection_entries",
    "connection_id",
    "decode",
    "encode",
    "from_environment",
]
