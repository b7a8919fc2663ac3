"""Kafka config providers: ``${env:VAR}``, ``${file:/path:key}`` and ``${dir:/path:file}``.

MM2 users keep secrets out of ``mm2.properties`` with Kafka's ``ConfigTransformer``; the same
expressions must work here with the same meaning (``FileConfigProvider`` reads a key from a
properties file, ``DirectoryConfigProvider`` reads a whole file, ``EnvVarConfigProvider`` reads an
environment variable). Unlike Kafka, an unresolvable reference is an error naming the line, not a
literal ``${...}`` silently sent to a broker as a password.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .problems import Problems
from .properties import Entry, read_properties_file

# Kafka's ConfigTransformer.DEFAULT_PATTERN, verbatim.
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

# ``${NAME}`` without a provider: a shell habit that Kafka leaves as literal text.
SHELL_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
KIND_BY_CLASS = {FILE_PROVIDER: "file", DIRECTORY_PROVIDER: "dir", ENV_PROVIDER: "env"}
BUILTIN_ALIASES = {"file": "file", "dir": "dir", "env": "env"}


class ProviderLookupError(LookupError):
    """A reference that cannot be resolved; the message never contains the secret it was after."""


def declared_providers(entries: Mapping[str, Entry], problems: Problems) -> dict[str, str]:
    """Aliases declared with ``config.providers`` mapped to the kind of provider they are."""
    declared: dict[str, str] = {}
    decl = entries.get("config.providers")
    if decl is None:
        return declared
    for alias in [a.strip() for a in decl.value.split(",") if a.strip()]:
        class_key = f"config.providers.{alias}.class"
        cls = entries.get(class_key)
        if cls is None:
            problems.error(
                f"provider '{alias}' is declared without {class_key}",
                file=decl.file,
                line=decl.line,
                key="config.providers",
            )
            continue
        kind = KIND_BY_CLASS.get(cls.value.strip())
        if kind is None:
            problems.warning(
                f"config provider class {cls.value.strip()} is not supported by mirrorflow "
                f"(supported: {', '.join(sorted(KIND_BY_CLASS))}); references to ${{{alias}:...}} will fail",
                file=cls.file,
                line=cls.line,
                key=class_key,
            )
            continue
        declared[alias] = kind
    return declared


def _lookup(kind: str, path: str | None, key: str, file_cache: dict[str, dict[str, str]]) -> str:
    if kind == "env":
        if path:
            raise ProviderLookupError("the env provider takes no path: write ${env:VARIABLE}")
        if key not in os.environ:
            raise ProviderLookupError(f"environment variable {key} is not set")
        return os.environ[key]
    if not path:
        raise ProviderLookupError(f"the {kind} provider needs a path: write ${{{kind}:/path:{key}}}")
    if kind == "dir":
        target = Path(path) / key
        try:
            return target.read_text()
        except OSError as exc:
            raise ProviderLookupError(f"cannot read {target}: {exc.strerror or exc}") from None
    if path not in file_cache:
        try:
            file_cache[path] = {e.key: e.value for e in read_properties_file(path)}
        except OSError as exc:
            raise ProviderLookupError(f"cannot read {path}: {exc.strerror or exc}") from None
    values = file_cache[path]
    if key not in values:
        raise ProviderLookupError(f"{path} has no key '{key}'")
    return values[key]


def resolve_references(entries: Mapping[str, Entry], problems: Problems) -> dict[str, Entry]:
    """Replace provider references in every value; report each reference that cannot be resolved."""
    declared = declared_providers(entries, problems)
    file_cache: dict[str, dict[str, str]] = {}
    resolved: dict[str, Entry] = {}
    for name, entry in entries.items():
        for shell_var in SHELL_VARIABLE.findall(entry.value):
            problems.warning(
                f"${{{shell_var}}} is not expanded by Kafka or mirrorflow; write ${{env:{shell_var}}}",
                file=entry.file,
                line=entry.line,
                key=entry.key,
            )
        if "${" not in entry.value or name.startswith("config.providers"):
            resolved[name] = entry
            continue
        failed = False

        def substitute(match: re.Match[str], entry: Entry = entry) -> str:
            nonlocal failed
            alias, path, key = match.group(1), match.group(3), match.group(4)
            kind = declared.get(alias) or BUILTIN_ALIASES.get(alias)
            if kind is None:
                failed = True
                problems.error(
                    f"unknown config provider '{alias}' in {match.group(0)}",
                    file=entry.file,
                    line=entry.line,
                    key=entry.key,
                )
                return match.group(0)
            if alias not in declared:
                problems.warning(
                    f"{match.group(0)} relies on mirrorflow's built-in '{alias}' provider; MM2 resolves it only with "
                    f"config.providers={alias} and config.providers.{alias}.class set",
                    file=entry.file,
                    line=entry.line,
                    key=entry.key,
                )
            try:
                return _lookup(kind, path, key, file_cache)
            except ProviderLookupError as exc:
                failed = True
                problems.error(
                    f"cannot resolve {match.group(0)}: {exc}", file=entry.file, line=entry.line, key=entry.key
                )
                return match.group(0)

        value = REFERENCE.sub(substitute, entry.value)
        resolved[name] = entry if failed else replace(entry, value=value, via=entry.value)
    return resolved
