"""Loading a configuration: ``load_config`` (a file, with overrides, remembered per content) and ``parse_config``.

Both read the properties and hand the entries to ``resolve.resolve_entries``; a file that cannot be read or parsed
is a ``ConfigError`` at its line like any other problem. An unchanged file is resolved once per process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from .model import MirrorConfig
from .problems import ConfigError, Problems
from .properties import Entry, PropertiesSyntaxError, parse_properties, read_properties_file
from .resolve import resolve_entries

#: Resolved configurations by file content (its path and a digest of its bytes: a modification time can miss two
#: writes within the file system's clock tick) and arguments: a process that loads the same unchanged file again (a
#: DAG file's factories, the triggerer's sensors, a task's hooks) gets the same object without resolving it again.
#: Files with ``${provider:...}`` references are never cached, since what they point at can change while the file
#: does not.
_LOADED: dict[tuple[object, ...], MirrorConfig] = {}
_LOADED_MAX = 8


def _file_key(path: str | Path, overrides: Sequence[Entry], partial: bool) -> tuple[object, ...] | None:
    try:
        digest = hashlib.blake2b(Path(path).read_bytes(), digest_size=16).digest()
        key = (str(Path(path).resolve()), digest, partial, tuple(overrides))
        hash(key)
        return key
    except (OSError, ValueError, TypeError):  # unreadable (the load names the problem), or unhashable overrides
        return None


def load_config(path: str | Path, *, overrides: Sequence[Entry] = (), partial: bool = False) -> MirrorConfig:
    """Read and resolve a configuration file; raises ``ConfigError`` listing every problem.

    ``overrides`` (e.g. from an Airflow connection, see :mod:`.overrides`) replace the file's entries
    of the same key. With ``partial``, a flow whose own settings are broken is left out (and listed in
    ``MirrorConfig.broken_flows``) instead of failing the whole file, so the DAGs of the other flows
    still load; problems no flow can be blamed for still raise. An unchanged file is parsed once per
    process (see ``_LOADED``).
    """
    key = _file_key(path, overrides, partial)
    if key is not None and key in _LOADED:
        return _LOADED[key]
    config, cacheable = _load_config(path, overrides, partial)
    if key is not None and cacheable:
        if len(_LOADED) >= _LOADED_MAX:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = config
    return config


def _load_config(path: str | Path, overrides: Sequence[Entry], partial: bool) -> tuple[MirrorConfig, bool]:
    problems = Problems()
    try:
        entries = read_properties_file(path)
    except PropertiesSyntaxError as exc:  # also a file that is not UTF-8
        problems.error(exc.message, file=exc.file, line=exc.line)
        raise ConfigError(problems.items) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        problems.error(f"cannot read configuration file: {getattr(exc, 'strerror', None) or exc}", file=str(path))
        raise ConfigError(problems.items) from None
    if overrides:
        replaced = {e.key for e in overrides}
        entries = [e for e in entries if e.key not in replaced] + list(overrides)
    cacheable = not any(e.via or "${" in e.value for e in entries)
    return resolve_entries(entries, str(path), problems, partial=partial), cacheable


def parse_config(text: str, file: str = "<string>") -> MirrorConfig:
    """Resolve configuration text (tests, Airflow variables)."""
    problems = Problems()
    try:
        entries = parse_properties(text, file)
    except PropertiesSyntaxError as exc:
        problems.error(exc.message, file=exc.file, line=exc.line)
        raise ConfigError(problems.items) from None
    return resolve_entries(entries, file, problems)
