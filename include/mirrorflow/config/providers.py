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

from .problems import Problems, shorten
from .properties import Entry, PropertiesSyntaxError, decode_utf8, parse_properties

# Kafka's ConfigTransformer.DEFAULT_PATTERN, verbatim.
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

# What an error quotes of a malformed reference: ``${`` and a provider-like name, never the rest.
_REFERENCE_START = re.compile(r"\$\{[\w.-]{0,40}:?", re.ASCII)

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


def _read(path: Path) -> bytes:
    """A regular file's bytes (a FIFO or ``/dev/zero`` behind a reference must not hang validation)."""
    try:
        if not path.is_file():
            what = "it is not a regular file" if path.exists() else "No such file or directory"
            raise ProviderLookupError(f"cannot read {path}: {what}")
        return path.read_bytes()
    except OSError as exc:
        raise ProviderLookupError(f"cannot read {path}: {exc.strerror or exc}") from None


def _lookup(kind: str, path: str | None, key: str, file_cache: dict[str, dict[str, str]]) -> str:
    if kind == "env":
        if path:
            raise ProviderLookupError("the env provider takes no path: write ${env:VARIABLE}")
        if not key:
            raise ProviderLookupError("no variable named: write ${env:VARIABLE}")
        if "\0" in key or "=" in key or key not in os.environ:
            raise ProviderLookupError(f"environment variable {key} is not set")
        return os.environ[key]
    if not path:
        if kind == "dir":
            raise ProviderLookupError("the dir provider needs a directory and a file name: write ${dir:/path:file}")
        raise ProviderLookupError("the file provider needs a path and a key: write ${file:/path:key}")
    if "\0" in path or "\0" in key:
        raise ProviderLookupError("a path cannot contain a NUL character")
    if kind == "dir":
        if not key or key in (".", "..") or "/" in key or "\\" in key:
            # DirectoryConfigProvider only reads the regular files directly in the directory.
            raise ProviderLookupError(f"'{key}' is not the name of a file in {path}")
        target = Path(path) / key
        try:
            return decode_utf8(_read(target), str(target))
        except PropertiesSyntaxError as exc:
            raise ProviderLookupError(exc.safe_message) from None
    if path not in file_cache:
        try:
            file_cache[path] = {e.key: e.value for e in parse_properties(decode_utf8(_read(Path(path)), path), path)}
        except PropertiesSyntaxError as exc:  # not UTF-8, or a malformed \uXXXX: names the file and line
            raise ProviderLookupError(exc.safe_message) from None
    values = file_cache[path]
    if key not in values:
        raise ProviderLookupError(f"{path} has no key '{key}'")
    return values[key]


def resolve_references(entries: Mapping[str, Entry], problems: Problems) -> dict[str, Entry]:
    """Replace provider references in every value; report each reference that cannot be resolved.

    A ``${`` that does not form a whole reference (``${env:``, ``${env:${env:X}}``) is an error too:
    Kafka would pass it on as literal text, e.g. as a password.
    """
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

        def fail(message: str, entry: Entry = entry) -> None:
            nonlocal failed
            failed = True
            problems.error(message, file=entry.file, line=entry.line, key=entry.key)

        for bad in _malformed(entry.value):
            fail(f"malformed config provider reference {bad!r}: write ${{provider:[path:]key}}")

        def substitute(match: re.Match[str], entry: Entry = entry) -> str:
            alias, path, key = match.group(1), match.group(3), match.group(4)
            shown = shorten(match.group(0), 300)
            if "${" in match.group(0)[2:]:
                fail(f"nested config provider references are not resolved (by Kafka either): {shown}")
                return match.group(0)
            kind = declared.get(alias) or BUILTIN_ALIASES.get(alias)
            if kind is None:
                fail(f"unknown config provider '{shorten(alias)}' in {shown}" if alias else f"no provider in {shown}")
                return match.group(0)
            if alias not in declared:
                problems.warning(
                    f"{shown} relies on mirrorflow's built-in '{alias}' provider; MM2 resolves it only with "
                    f"config.providers={alias} and config.providers.{alias}.class set",
                    file=entry.file,
                    line=entry.line,
                    key=entry.key,
                )
            try:
                return _lookup(kind, path, key, file_cache)
            except ProviderLookupError as exc:
                fail(f"cannot resolve {shown}: {exc}")
                return match.group(0)

        value = REFERENCE.sub(substitute, entry.value)
        resolved[name] = entry if failed else replace(entry, value=value, via=entry.value)
    return resolved


def _malformed(value: str) -> list[str]:
    """The ``${`` of ``value`` that start neither a reference nor a ``${NAME}`` and are not closed.

    Only the start of each is returned (``${env:``): the rest of the value may be a secret.
    """
    bad = []
    for start in (m.start() for m in re.finditer(r"\$\{", value)):
        if REFERENCE.match(value, start) or SHELL_VARIABLE.match(value, start):
            continue
        if "}" not in value[start:]:
            quoted = _REFERENCE_START.match(value, start)
            bad.append(quoted.group(0) if quoted else "${")
    return bad
