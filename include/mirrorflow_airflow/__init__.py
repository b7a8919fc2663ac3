"""mirrorflow's Airflow provider: hooks, operators, sensors, triggers, notifications, the Replication page and
the DAG factories. Thin: the replication logic is in the ``mirrorflow`` library, which never imports Airflow.

Airflow finds it through the ``apache_airflow_provider`` entry point, which names :func:`get_provider_info`, and
the Replication page through the ``airflow.plugins`` entry point. The page is not in the provider info's
``plugins``: Airflow loads a provider's plugins only with ``[core] lazy_discover_providers = False`` (not the
default), and with that setting a plugin named in both places is registered twice (an import error in the UI).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("mirrorflow")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0.0.0"


def get_provider_info() -> dict[str, Any]:
    """What ``airflow providers list`` shows and what the UI's connection form offers (Airflow's provider schema)."""
    from mirrorflow_airflow.hooks.connection_form import CONN_TYPE, FORM_FIELDS, UI_FIELD_BEHAVIOUR

    return {
        "package-name": "mirrorflow",
        "name": "mirrorflow",
        "description": "Kafka cluster replication compatible with MirrorMaker 2, orchestrated by Airflow, run by Spark.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "mirrorflow",
                "external-doc-url": "https://kafka.apache.org/documentation/#georeplication",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": "mirrorflow",
                "python-modules": ["mirrorflow_airflow.hooks.config", "mirrorflow_airflow.hooks.kafka"],
            }
        ],
        "connection-types": [
            {
                "connection-type": CONN_TYPE,
                "hook-class-name": "mirrorflow_airflow.hooks.kafka.KafkaClusterHook",
                "hook-name": "Kafka cluster (mirrorflow)",
                "ui-field-behaviour": UI_FIELD_BEHAVIOUR,
                "conn-fields": FORM_FIELDS,
            }
        ],
        "operators": [
            {"integration-name": "mirrorflow", "python-modules": ["mirrorflow_airflow.operators.mirror_family"]}
        ],
        "sensors": [
            {"integration-name": "mirrorflow", "python-modules": ["mirrorflow_airflow.sensors.heartbeat_freshness"]}
        ],
        "triggers": [
            {"integration-name": "mirrorflow", "python-modules": ["mirrorflow_airflow.triggers.heartbeat_freshness"]}
        ],
        "notifications": ["mirrorflow_airflow.notifications.alerting.ReplicationAlertNotifier"],
    }
