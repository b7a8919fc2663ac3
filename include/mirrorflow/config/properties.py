"""Java ``.properties`` parsing with line numbers.

MirrorMaker 2 reads ``mm2.properties`` with ``java.util.Properties.load``. Existing MM2 users must be
able to hand us their file unchanged, so this parser follows the same rules (``=``, ``:`` or
whitespace separators, ``\\`` continuations, ``#``/``!`` comments, ``\\uXXXX`` and other escapes,
last duplicate wins). It also remembers where each entry came from, because every error mirrorflow
reports names the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class Entry:
    """One key/value pair and the place it was defined (the first physical line of the entry)."""

    key: str
    value: str
    file: str
    line: int
    via: str | None = None  # the ${provider:...} expression the value was resolved from, if any
    raw: str | None = None  # the value as written, before unescaping (to explain lost backslashes)


class PropertiesSyntaxError(ValueError):
    """A malformed entry; Java's loader would throw on it too (e.g. a bad ``\\uXXXX`` escape)."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines the way ``Properties.LineReader`` does.

    A line continues when it ends in an odd number of backslashes; leading whitespace of the
    continuation is dropped. Comment and blank lines never continue.
    """
    physical = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    result: list[tuple[int, str]] = []
    i = 0
    while i < len(physical):
        start = i
        line = physical[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(physical):
            line = line[:-1] + physical[i].lstrip(_WHITESPACE)
            i += 1
        if _ends_with_continuation(line):  # a backslash at end of file is dropped by Java
            line = line[:-1]
        result.append((start + 1, line))
    return result


def _ends_with_continuation(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _unescape(raw: str, file: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesSyntaxError(file, line, f"malformed \\uxxxx encoding: {raw[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped ``=``, ``:`` or whitespace, as ``Properties.load`` does."""
    i = 0
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        if ch in _WHITESPACE:
            key_end, value_start = i, i + 1
            break
        i += 1
    while value_start < len(line) and line[value_start] in _WHITESPACE:
        value_start += 1
    if not has_separator and value_start < len(line) and line[value_start] in "=:":
        value_start += 1
        while value_start < len(line) and line[value_start] in _WHITESPACE:
            value_start += 1
    return line[:key_end], line[value_start:]


def lost_backslashes(raw: str) -> bool:
    """True when unescaping dropped a backslash before an ordinary character (``\\.`` became ``.``).

    Java's loader does this silently; in a regex value it changes the meaning (``orders\\..*`` in a
    properties file is the regex ``orders..*``), a classic MM2 pitfall worth a warning.
    """
    i = 0
    while i < len(raw) - 1:
        if raw[i] == "\\":
            if raw[i + 1] not in "\\tnrfu":
                return True
            i += 2
            continue
        i += 1
    return False


def parse_properties(text: str, file: str = "<string>") -> list[Entry]:
    """Parse properties text into entries in file order (duplicates kept; the caller decides)."""
    entries: list[Entry] = []
    for line_no, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        entries.append(
            Entry(
                key=_unescape(raw_key, file, line_no),
                value=_unescape(raw_value, file, line_no),
                file=file,
                line=line_no,
                raw=raw_value,
            )
        )
    return entries


def read_properties_file(path: str | Path) -> list[Entry]:
    """Read a properties file.

    Java reads ``.properties`` streams as ISO-8859-1; we accept UTF-8 first because that is what
    editors write today, and fall back to ISO-8859-1 so no file Java can read is refused.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, str(path))
