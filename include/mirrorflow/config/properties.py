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
    """A malformed entry; Java's loader would throw on it too (e.g. a bad ``\\uXXXX`` escape).

    ``summary`` says what is wrong without quoting the file: a secrets file read by a config provider
    must not leak into an error message.
    """

    def __init__(self, file: str, line: int, message: str, summary: str | None = None) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message
        self.summary = summary or message

    @property
    def safe_message(self) -> str:
        return f"{self.file}:{self.line}: {self.summary}"


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
    if "\\" not in raw:
        return raw
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
                raise PropertiesSyntaxError(
                    file, line, f"malformed \\uxxxx encoding: {raw[i : i + 6]!r}", "malformed \\uxxxx encoding"
                )
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


def decode_utf8(data: bytes, file: str) -> str:
    """Text of a file that must be UTF-8; otherwise a ``PropertiesSyntaxError`` at the line of the first bad byte.

    Java reads ``.properties`` streams as ISO-8859-1, so a byte that is not UTF-8 is most likely a
    Latin-1 character: the message says how to write it portably (``\\u00e9``) rather than guessing
    an encoding and handing a mangled value (a password, a regex) to Kafka.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
        column = exc.start - max(before.rfind(b"\n"), before.rfind(b"\r")) if line > 1 else exc.start + 1
        byte = data[exc.start]
        hint = f"; as Latin-1 it would be '\\u{byte:04x}' ({chr(byte)!r})" if byte >= 0xA0 else ""
        raise PropertiesSyntaxError(
            file,
            line,
            f"not UTF-8: byte 0x{byte:02x} at offset {exc.start} (column {column}) cannot be decoded; "
            f"save the file as UTF-8 or write the character as a \\uXXXX escape{hint}",
            f"not UTF-8 (the byte at offset {exc.start} cannot be decoded)",
        ) from None


def read_properties_file(path: str | Path) -> list[Entry]:
    """Read a UTF-8 properties file (a file that is not UTF-8 is a ``PropertiesSyntaxError`` at its line).

    Java reads ``.properties`` streams as ISO-8859-1; editors write UTF-8 today, and decoding a file as
    one when it was written as the other silently changes non-ASCII values, so neither is guessed.
    """
    return parse_properties(decode_utf8(Path(path).read_bytes(), str(path)), str(path))
