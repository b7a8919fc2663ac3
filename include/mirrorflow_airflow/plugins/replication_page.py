"""Registers mirrorflow's "Replication" page and its metrics endpoint with Airflow 3's API server and UI.

Airflow finds the plugin through the ``airflow.plugins`` entry point of the installed distribution; this module
only declares it. The app lives in ``status_app.py``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin

from mirrorflow_airflow.plugins.status_app import URL_PREFIX, app


class MirrorflowStatusPlugin(AirflowPlugin):
    """The page under ``/mirrorflow/`` (also ``/mirrorflow/api/status`` and ``/mirrorflow/metrics``), and a
    "Replication" entry in the UI's navigation that shows it inside the UI."""

    name = "mirrorflow"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": app, "url_prefix": URL_PREFIX, "name": "mirrorflow replication status"}
    ]
    external_views: ClassVar[list[dict[str, Any]]] = [
        {
            "name": "Replication",
            "href": f"{URL_PREFIX.lstrip('/')}/",
            "destination": "nav",
            "url_route": "replication",
        }
    ]
