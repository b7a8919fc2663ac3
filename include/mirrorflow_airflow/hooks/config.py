"""The Airflow side of mirrorflow's configuration: the file plus ``kafka_<alias>`` connections.

Credentials belong in Airflow's connections (and from there in a secrets backend), not in a
properties file in a Git repository. This hook loads the configuration named by ``MIRRORFLOW_CONFIG``,
applies the settings of ``MIRRORFLOW_CONFIG_OVERRIDES`` from the environment, and lets a connection
``kafka_<alias>`` replace cluster ``<alias>``'s settings; every secret value it takes from either is
registered with Airflow's secrets masker first, so it can never reach a log.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import mask_secret

from mirrorflow.config import FlowConfig, MirrorConfig, load_config
from mirrorflow.config import overrides as config_overrides
from mirrorflow.config.location import config_path
from mirrorflow.config.properties import Entry
from mirrorflow.redact import is_secret_key


def masked_entries(conn: Any, alias: str, *, name: str | None = None) -> list[Entry]:
    """``<alias>.*`` settings from an Airflow connection (``config.overrides.connection_entries``), its password and
    every secret setting registered with Airflow's secrets masker first, so none can reach a log."""
    if conn.password:
        mask_secret(conn.password)
    entries = config_overrides.connection_entries(
        alias,
        host=conn.host,
        port=conn.port,
        login=conn.login,
        password=conn.password,
        extra=conn.extra_dejson,
        name=name,
    )
    for entry in entries:
        if is_secret_key(entry.key):
            mask_secret(entry.value)
    return entries


class MirrorflowHook(BaseHook):
    """Loads mirrorflow's configuration for a task, with cluster settings from Airflow connections."""

    hook_name = "mirrorflow"

    def __init__(self, config: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_file = Path(config) if config else config_path()

    def connection_overrides(self, aliases: list[str]) -> list[Entry]:
        """Entries from the ``kafka_<alias>`` connections that exist (absent ones are simply skipped)."""
        entries: list[Entry] = []
        for alias in aliases:
            conn_id = config_overrides.connection_id(alias)
            try:
                conn = self.get_connection(conn_id)
            except AirflowNotFoundException:
                continue
            found = masked_entries(conn, alias)
            self.log.info("cluster '%s': settings %s from connection %s", alias, [e.key for e in found], conn_id)
            entries += found
        return entries

    @cached_property
    def overrides(self) -> list[Entry]:
        """Settings of ``MIRRORFLOW_CONFIG_OVERRIDES`` (a deployment's environment, e.g. the demo's alert
        receiver), then those of the ``kafka_<alias>`` connections (which win); secrets masked."""
        from_env = config_overrides.from_environment()
        for entry in from_env:
            if is_secret_key(entry.key):
                mask_secret(entry.value)
        aliases = list(load_config(self.config_file, partial=True).clusters)
        return from_env + self.connection_overrides(aliases)

    def load(self) -> MirrorConfig:
        return load_config(self.config_file, overrides=self.overrides)

    def flow(self, name: str) -> FlowConfig:
        source, _, target = name.partition("->")
        return self.load().flow(source, target)

    def spark_environment(self) -> dict[str, str]:
        """What the Spark app needs to see the same settings (``MIRRORFLOW_CONFIG_OVERRIDES``)."""
        return {config_overrides.ENV_VAR: config_overrides.encode(self.overrides)} if self.overrides else {}
