"""The ``mirrorflow_kafka`` connection form: its type, its own fields and how the standard ones are labelled.

Plain data, with no Airflow import: ``get_provider_info`` reads it while Airflow itself is still being imported (its
provider discovery), and a module importing Airflow there would be imported half-way.
"""

from __future__ import annotations

from typing import Any

from mirrorflow.config import overrides as config_overrides

CONN_TYPE = "mirrorflow_kafka"

#: What the connection form shows of each of its own fields (``config.overrides.FORM_FIELDS`` says which Kafka
#: property each one sets).
_FIELD_UI: dict[str, tuple[str, dict[str, Any], str]] = {
    "security_protocol": (
        "Security protocol",
        {"enum": ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]},
        "SASL_SSL when a login is given and this is empty",
    ),
    "sasl_mechanism": (
        "SASL mechanism",
        {"enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]},
        "for the login and password (PLAIN when empty)",
    ),
    "ssl_truststore_location": ("Truststore (PEM file)", {}, "CA certificates in PEM, readable on every worker"),
}

#: The connection form's own fields (stored in the extra by these names), as the provider info declares them.
FORM_FIELDS: dict[str, dict[str, Any]] = {
    field: {
        "label": _FIELD_UI[field][0],
        "schema": {"type": ["string", "null"], **_FIELD_UI[field][1]},
        "description": f"{java_name}: {_FIELD_UI[field][2]}",
    }
    for field, java_name in config_overrides.FORM_FIELDS.items()
}

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema"],
    "relabeling": {"host": "Bootstrap servers", "login": "SASL username", "password": "SASL password"},
    "placeholders": {
        "host": "broker1:9092,broker2:9092",
        "extra": '{"ssl.endpoint.identification.algorithm": "https"}',
    },
}


__all__ = ["CONN_TYPE", "FORM_FIELDS", "UI_FIELD_BEHAVIOUR"]
