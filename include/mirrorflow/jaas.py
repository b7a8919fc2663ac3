"""``sasl.jaas.config`` read as Kafka's Java client reads it.

Kafka parses the value with ``org.apache.kafka.common.security.JaasConfig``: a ``java.io.StreamTokenizer`` set up
for the JAAS login configuration grammar of ``javax.security.auth.login.ConfigFile``,

    <loginModuleClass> <controlFlag> (<optionName>=<optionValue>)* ;

and a client takes exactly one such entry. This module follows that tokenizer character by character, so a value
Java accepts is accepted here with the same options, and a value Java refuses is refused with Java's reason:

* whitespace is every character up to and including space; a word is a run of the other characters up to 255
  except the quotes, ``/``, ``;`` and ``=`` (and every character above 255);
* a value may be a word (``username=admin``) or quoted with ``"`` or ``'``; inside quotes a backslash escapes the
  next character (``\\"``, ``\\\\``), ``\\n`` and the other C escapes and octal escapes (``\\101``) are decoded, and a
  line end or the end of the text closes an unterminated quote;
* ``/`` starts a comment (``//`` and ``/* */`` too), so a path must be quoted;
* the control flag is ``required``, ``requisite``, ``sufficient`` or ``optional`` in any case; options may come
  in any order, and a repeated option keeps its last value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The control flags of ``javax.security.auth.login.AppConfigurationEntry.LoginModuleControlFlag``.
CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")

_EOF = "EOF"
_WORD = "WORD"
_QUOTE_CHARS = "\"'"
_ORDINARY = ";="
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


class JaasError(ValueError):
    """A ``sasl.jaas.config`` value Kafka's Java client would refuse; the message never contains an option value."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry: its class, control flag (upper case) and options."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def module_name(self) -> str:
        """The class's simple name (``PlainLoginModule``)."""
        return self.login_module.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class _Token:
    kind: str  # _EOF, _WORD, a quote character, or an ordinary character
    text: str | None = None  # the word or the quoted string; None for ordinary characters and the end


def _is_whitespace(char: str) -> bool:
    return ord(char) <= 32


def _is_word_char(char: str) -> bool:
    code = ord(char)
    if code > 255:
        return True
    if char in _QUOTE_CHARS or char in _ORDINARY or char == "/":
        return False
    return 33 <= code <= 128 or 160 <= code <= 255


class _Tokenizer:
    """``java.io.StreamTokenizer`` as ``JaasConfig`` configures it."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = 0

    def _peek(self, ahead: int = 0) -> str | None:
        at = self._at + ahead
        return self._text[at] if at < len(self._text) else None

    def _skip_line(self) -> None:
        while (char := self._peek()) is not None and char not in "\r\n":
            self._at += 1

    def next(self) -> _Token:
        while True:
            char = self._peek()
            if char is None:
                return _Token(_EOF)
            if _is_whitespace(char):
                self._at += 1
                continue
            if _is_word_char(char):
                start = self._at
                while (c := self._peek()) is not None and _is_word_char(c):
                    self._at += 1
                return _Token(_WORD, self._text[start : self._at])
            if char in _QUOTE_CHARS:
                return self._quoted(char)
            if char == "/":
                after = self._peek(1)
                if after == "*":
                    end = self._text.find("*/", self._at + 2)
                    self._at = len(self._text) if end < 0 else end + 2
                elif after == "/":
                    self._skip_line()
                else:
                    # '/' alone is the comment character: Java has read the next character already (a line end
                    # included) and skips to the end of the line after it.
                    self._at += 2
                    self._skip_line()
                continue
            self._at += 1
            return _Token(char)  # ';', '=' and the C1 control characters

    def _quoted(self, quote: str) -> _Token:
        self._at += 1
        out: list[str] = []
        while (char := self._peek()) is not None and char != quote and char not in "\r\n":
            self._at += 1
            if char != "\\":
                out.append(char)
                continue
            escaped = self._peek()
            if escaped is None:
                out.append("\uffff")  # Java appends (char) -1, its end-of-stream marker
                break
            self._at += 1
            if "0" <= escaped <= "7":
                value = ord(escaped) - ord("0")
                if (second := self._peek()) is not None and "0" <= second <= "7":
                    self._at += 1
                    value = value * 8 + ord(second) - ord("0")
                    if (third := self._peek()) is not None and "0" <= third <= "7" and escaped <= "3":
                        self._at += 1
                        value = value * 8 + ord(third) - ord("0")
                out.append(chr(value))
            else:
                out.append(_ESCAPES.get(escaped, escaped))
        if self._peek() == quote:
            self._at += 1
        return _Token(quote, "".join(out))


def _entry(first: _Token, tokens: _Tokenizer) -> JaasEntry:
    flag = tokens.next()
    if flag.kind == _EOF:
        raise JaasError("Login module control flag not specified in JAAS config")
    if flag.text is None:
        raise JaasError("Login module control flag is not available in the JAAS config")
    if flag.text.upper() not in CONTROL_FLAGS:
        raise JaasError(f"Invalid login module control flag '{flag.text}' in JAAS config")
    options: dict[str, str] = {}
    token = tokens.next()
    while token.kind not in (_EOF, ";"):
        key = token.text if token.text is not None else "null"  # Java's message for a missing name
        if tokens.next().kind != "=":
            raise JaasError(f"Value not specified for key '{key}' in JAAS config")
        value = tokens.next()
        if value.kind == _EOF or value.text is None:
            raise JaasError(f"Value not specified for key '{key}' in JAAS config")
        options[key] = value.text
        token = tokens.next()
    if token.kind != ";":
        raise JaasError("JAAS config entry not terminated by semi-colon")
    if not first.text:
        raise JaasError("Login module not specified in JAAS config")  # AppConfigurationEntry refuses an empty name
    return JaasEntry(first.text, flag.text.upper(), options)


def parse_entries(text: str) -> list[JaasEntry]:
    """Every login module entry of a JAAS configuration text, as ``JaasConfig`` reads them."""
    tokens = _Tokenizer(text)
    entries = []
    while (token := tokens.next()).kind != _EOF:
        entries.append(_entry(token, tokens))
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries


def parse(text: str) -> JaasEntry:
    """The one login module entry of a client's ``sasl.jaas.config`` (Kafka's ``JaasContext`` takes exactly one)."""
    entries = parse_entries(text)
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]


__all__ = ["CONTROL_FLAGS", "JaasEntry", "JaasError", "parse", "parse_entries"]
