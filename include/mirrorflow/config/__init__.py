"""mirrorflow's configuration: MirrorMaker 2's ``mm2.properties``, resolved as MM2 resolves it.

``load_config(path)`` returns a :class:`MirrorConfig` or raises :class:`ConfigError` listing every
problem with its file and line.
"""

from __future__ import annotations

from .load import load_config, parse_config
from .model import (
    ClusterConfig,
    Family,
    FamilyConflictError,
    FlowConfig,
    FlowTable,
    MirrorConfig,
    Origin,
    Schedule,
    Setting,
)
from .problems import ConfigError, Problem

__all__ = [
    "ClusterConfig",
    "ConfigError",
    "Family",
    "FamilyConflictError",
    "FlowConfig",
    "FlowTable",
    "MirrorConfig",
    "Origin",
    "Problem",
    "Schedule",
    "Setting",
    "load_config",
    "parse_config",
]
