"""Configuration problems: collected, never thrown one at a time.

Operators fix a configuration faster when they see every problem in one pass, each naming the file,
the line and the key, so resolution appends problems here and raises one ``ConfigError`` at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]

# Characters that would break the one-line ``file:line: error: ...`` format (a value's newline) or
# cannot be printed at all (a lone surrogate from a ``\\uD800`` escape makes print() raise).
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def shorten(text: str, limit: int = 60) -> str:
    """A value as quoted in an error: a 5,000-digit number or a 100 kB regex is cut, not echoed whole."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Problem:
    """One finding about the configuration, located as precisely as we can."""

    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    key: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        key = f"{self.key}: " if self.key else ""
        return _UNPRINTABLE.sub(_escape, f"{where}{self.severity}: {key}{self.message}")


@dataclass
class Problems:
    """An accumulator passed through parsing and resolution."""

    items: list[Problem] = field(default_factory=list)

    def error(self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None) -> None:
        self.items.append(Problem("error", message, file, line, key))

    def warning(
        self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None
    ) -> None:
        self.items.append(Problem("warning", message, file, line, key))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "warning"]


class ConfigError(ValueError):
    """The configuration cannot be used; ``problems`` lists every error found (and the warnings)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        errors = [p for p in problems if p.severity == "error"]
        lines = "\n".join(f"  {p}" for p in errors)
        super().__init__(f"{len(errors)} configuration error(s):\n{lines}")


def dedupe_problems(problems: Problems) -> None:
    """Drop repeats of a problem (the same key read by several flows reports the same finding), keeping the first."""
    seen: set[tuple[object, ...]] = set()
    unique = []
    for p in problems.items:
        ident = (p.severity, p.message, p.file, p.line, p.key)
        if ident not in seen:
            seen.add(ident)
            unique.append(p)
    problems.items[:] = unique
