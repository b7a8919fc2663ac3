"""Settings from the entries of one scope (top level, a cluster, a flow): where a value came from, a key's default,
and which client setting each key of a scope sets, as Kafka's ``MirrorMakerConfig`` reads them.

The order in which the scopes' client settings are layered is MM2's precedence (``resolve``); this module only
says what one scope contributes, so every layer is read the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache

from .keys import CLIENT_ROLES, MIRRORFLOW_PREFIX, KeySpec, client_spec, is_client_key
from .model import Origin, Setting
from .properties import Entry


def origin_of(entry: Entry) -> Origin:
    """Where an entry's value came from: its file, line and key (and the config provider it went through)."""
    return Origin("file", entry.file, entry.line, entry.key, via=entry.via)


@cache
def default_of(spec: KeySpec) -> Setting:
    """The default of a key (one shared, immutable Setting: every flow without the key has it)."""
    kind = "mirrorflow-default" if spec.name.startswith(MIRRORFLOW_PREFIX) else "mm2-default"
    return Setting(spec.default or "", Origin(kind))


#: The client setting a key of a scope sets, or None.
Mapper = Callable[[str], "str | None"]


def strip_prefix(prefix: str, client_only: bool = False) -> Mapper:
    """Maps ``<prefix><name>`` to ``name`` (with ``client_only``, only when it is a client setting)."""

    def mapper(key: str) -> str | None:
        if not key.startswith(prefix):
            return None
        name = key[len(prefix) :]
        return name if name and (not client_only or is_client_key(name)) else None

    return mapper


def client_key(key: str) -> str | None:
    """A key that is itself a client setting (``security.protocol``), else None."""
    return key if is_client_key(key) else None


def project(scope: Mapping[str, Entry], mapper: Mapper) -> dict[str, Setting]:
    """``{client setting: value}`` of the keys of ``scope`` that ``mapper`` maps to a client setting."""
    result: dict[str, Setting] = {}
    for key, entry in scope.items():
        name = mapper(key)
        if name:
            value = entry.value.strip() if client_spec(name) else entry.value  # typed: as Java's ConfigDef reads it
            result[name] = Setting(value, origin_of(entry))
    return result


def flow_client_key(key: str) -> str | None:
    """The client setting a flow-level key sets (``source.consumer.x``, ``consumer.x``, ``source.cluster.x``)."""
    for side in ("source", "target"):
        if key.startswith(f"{side}.cluster."):
            name = key[len(side) + len(".cluster.") :]
            return name if is_client_key(name) else None
        for role in CLIENT_ROLES:
            if key.startswith(f"{side}.{role}."):
                return key[len(side) + len(role) + 2 :]
    role, dot, name = key.partition(".")
    return name if dot and role in CLIENT_ROLES else None
