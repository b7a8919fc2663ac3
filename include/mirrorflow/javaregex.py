"""Translate MirrorMaker 2 (Java) regular expressions into Python ``re`` patterns.

Why this exists: MM2 filter settings (``topics``, ``topics.exclude``, ``groups``,
``groups.exclude``, ``config.properties.exclude``) are ``java.util.regex``
patterns tested with ``Matcher.matches()``.  mirrorflow must select exactly the
same topics, groups and config keys as MM2 would, and the two dialects disagree in
ways that fail silently: Python reads ``(?<name>`` as a broken lookbehind, treats
``x{,5}`` or ``{foo}`` as literal text where Java reports "Illegal repetition",
makes ``\\w``/``\\d``/``\\s`` and ``(?i)`` Unicode-aware (Java is ASCII-only by
default), rejects mid-pattern ``(?i)`` (Java scopes it to the rest of the group),
and reads ``[a-z[0-9]]`` or ``&&`` completely differently.

So rather than handing the text to ``re`` and hoping, a small one-pass scanner
rewrites every Java construct into its Python equivalent, and rejects - with a
:class:`JavaRegexError` naming the construct and position - anything Python
cannot express faithfully.  A rejected filter is a configuration error the
operator can fix; a silently different filter replicates the wrong data.

Output patterns must be compiled with ``re.ASCII`` (:func:`compile_java` does).

One module, not a package: the translator is a single scanner whose steps share one position, group stack and
flag state, so any cut through ``_Translator`` would pass that state back and forth rather than separate concerns.

Known, documented approximations (all irrelevant to Kafka topic, group and config
names, which never contain these characters):

* ``.``, ``^``, ``$`` and ``(?m)`` pass through, so only ``\\n`` is a line
  terminator - Java also counts ``\\r``, ``\\u0085``, ``\\u2028`` and ``\\u2029``.
  Python therefore behaves as if Java's UNIX_LINES were always on, which is why
  the ``d`` flag is accepted and otherwise ignored (it only narrows ``\\Z``).
* ``u`` (UNICODE_CASE) and ``U`` (UNICODE_CHARACTER_CLASS) both become Python's
  scoped ``u`` flag, which switches case folding *and* ``\\w \\d \\s \\b`` to
  Unicode; under ``u`` alone those shorthands are pinned back to ASCII with
  ``(?a:...)``.  ``-u``/``-U`` become ``a`` (ASCII).  Python's Unicode ``\\w``/``\\d``
  and Java's differ slightly in which marks/digits they include.
* MULTILINE ``^`` also matches at the very end of the input in Python, not in Java.
* ``\\b`` follows JDK 19+ (ASCII word characters, consistent with ``\\w``).
* Some things Java accepts are refused by Python's ``re`` itself and reported as
  :class:`JavaRegexError`: quantified anchors (``^*``) and lookbehinds that are
  bounded but not fixed-width (``(?<=a{1,3})``).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import NoReturn

__all__ = ["JavaRegexError", "compile_java", "compile_pattern_list", "full_match", "translate"]

_HSPACE = " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
_VSPACE = "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"
_LINEBREAK = f"(?:\\r\\n|[{_VSPACE}])"
_END_BEFORE_TERMINATOR = "(?=(?:\\r\\n|[\\n\\r\\u0085\\u2028\\u2029])?\\Z)"
_HEX = "0123456789abcdefABCDEF"
_SPACE = " \t\n\x0b\f\r"  # what Java's COMMENTS mode skips (ASCII.isSpace)
# Java's US-ASCII POSIX classes, as the inside of a Python character class.
_POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "\\x21-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7e",
    "Graph": "\\x21-\\x7e",
    "Print": "\\x20-\\x7e",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
}
_ASCII_SHORTHAND = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\x0b\\f\\r"}
_SIMPLE_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "a": 0x07, "e": 0x1B}
_CTRL_NAMES = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x0C: "\\f"}
# Java's counted quantifiers are ints: a larger count is its "Illegal repetition range".
_MAX_REPEAT = 2**31 - 1
# Python's re compiles groups recursively: a pattern nested deeper than this would raise RecursionError
# (how deep depends on the caller's stack, e.g. Airflow's DAG parser), so it is refused at a fixed depth.
MAX_NESTING = 100
# A pattern quoted in an error message is cut here: a 100 kB pattern must not become a 100 kB message.
_SHOWN = 120


class JavaRegexError(ValueError):
    """A Java regex that is invalid in Java, or that Python's ``re`` cannot express.

    Raised instead of returning a pattern that would match differently from MM2.
    """

    def __init__(
        self, pattern: str, position: int | None, reason: str, construct: str | None = None, kind: str = "unsupported"
    ) -> None:
        self.pattern = pattern
        self.position = position
        self.reason = reason
        self.construct = construct
        self.kind = kind
        where = f" at position {position}" if position is not None else ""
        what = f" construct '{_cut(construct)}'" if construct else ""
        super().__init__(f"{kind} Java regex{what}{where} in '{_cut(pattern)}': {reason}")

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # keep picklable (custom __init__)
        return (type(self), (self.pattern, self.position, self.reason, self.construct, self.kind))


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _hex(cp: int) -> str:
    """Python escape for code point ``cp`` (valid inside and outside classes)."""
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _lit(cp: int) -> str:
    """A literal character, escaped so it is safe anywhere, including in ``[...]``."""
    c = chr(cp)
    if cp in _CTRL_NAMES:
        return _CTRL_NAMES[cp]
    if c.isascii() and (c.isalnum() or c == "_"):
        return c
    if 0x20 <= cp < 0x7F:
        return "\\" + c  # escaping ASCII punctuation is always a literal in Python
    return c if cp > 0x7F and c.isprintable() else _hex(cp)


def _tokenize(pattern: str) -> list[tuple[str, int, bool]]:
    """Split into (char, position, quoted) tokens, resolving ``\\Q...\\E`` like Java's
    ``RemoveQEQuoting`` does before parsing: quoted chars are plain literals (also
    inside classes), an unterminated ``\\Q`` quotes to the end of the pattern, and
    any other backslash stays paired with the character it escapes."""
    toks: list[tuple[str, int, bool]] = []
    i, n, quoting = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if quoting:
            if c == "\\" and pattern.startswith("E", i + 1):
                quoting, i = False, i + 2
                continue
            toks.append((c, i, True))
            i += 1
        elif c == "\\" and pattern.startswith("Q", i + 1):
            quoting, i = True, i + 2
        elif c == "\\" and i + 1 < n:
            toks += [(c, i, False), (pattern[i + 1], i + 1, False)]
            i += 2
        else:
            toks.append((c, i, False))
            i += 1
    return toks


def _py_flags(on: set[str], off: set[str]) -> str:
    """Python inline-flag letters for a Java ``(?on-off)`` (``x`` and ``d`` dropped)."""
    pos = "".join(f for f in "ims" if f in on and f not in off)
    neg = "".join(f for f in "ims" if f in off)
    if "u" in off:
        pos += "a"
    elif "u" in on:
        pos += "u"
    return pos + ("-" + neg if neg else "")


@dataclass
class _Frame:
    """One group nesting level: Java flags in force and open scoped-flag groups."""

    flags: frozenset[str]
    start: int = 0
    scopes: list[str] = field(default_factory=list)


class _Translator:
    """One-pass scanner: Java tokens in, Python text pieces (with source positions) out."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.toks = _tokenize(pattern)
        self.k = 0
        self.out: list[tuple[str, int]] = []
        self.stack = [_Frame(frozenset())]
        self.groups = 0
        self.names: set[str] = set()
        self.quantifiable = False

    # -- helpers -------------------------------------------------------------
    def _peek(self, off: int = 0) -> str:
        """Unquoted char at k+off, or '' at the end or for a \\Q-quoted literal."""
        j = self.k + off
        return self.toks[j][0] if j < len(self.toks) and not self.toks[j][2] else ""

    def _peek_in(self, chars: str, off: int = 0) -> bool:
        c = self._peek(off)
        return c != "" and c in chars

    def _pos(self) -> int:
        return self.toks[self.k][1] if self.k < len(self.toks) else len(self.pattern)

    def _take(self, chars: str, limit: int = 1 << 30) -> str:
        got = ""
        while len(got) < limit and self._peek_in(chars):
            got += self._peek()
            self.k += 1
        return got

    def _fail(self, reason: str, start: int, end: int | None = None, invalid: bool = False) -> NoReturn:
        end = self._pos() if end is None else end
        raise JavaRegexError(
            self.pattern,
            start,
            reason,
            self.pattern[start : max(end, start + 1)],
            "invalid" if invalid else "unsupported",
        )

    def _bad(self, reason: str, start: int, end: int | None = None) -> NoReturn:
        """Fail for something Java itself rejects (a PatternSyntaxException in MM2)."""
        self._fail(reason, start, end, invalid=True)

    def _emit(self, text: str, pos: int, quantifiable: bool = True) -> None:
        self.out.append((text, pos))
        self.quantifiable = quantifiable

    def _skip_space(self) -> None:
        """In Java COMMENTS mode ((?x)) skip whitespace and #-comments, even in classes."""
        flags = self.stack[-1].flags
        if "x" not in flags:
            return
        eol = "\n" if "d" in flags else "\n\r\x85\u2028\u2029"
        while self._peek_in(_SPACE + "#"):
            if self._peek() == "#":
                while self.k < len(self.toks) and self.toks[self.k][0] not in eol:
                    self.k += 1
            else:
                self.k += 1

    # -- driver ----------------------------------------------------------------
    def run(self) -> tuple[str, list[int], list[int]]:
        while True:
            self._skip_space()
            if self.k >= len(self.toks):
                break
            ch, pos, quoted = self.toks[self.k]
            if quoted:
                self.k += 1
                self._emit(re.escape(ch), pos)
            elif ch == "\\":
                text, _ = self._escape(in_class=False)
                self._emit(text, pos)
            elif ch == "[":
                self._emit(self._class(), pos)
            elif ch == "(":
                self._open_group()
            elif ch == ")":
                if len(self.stack) == 1:
                    self._bad("unmatched closing ')'", pos)
                self.k += 1
                self._emit(")" * (len(self.stack.pop().scopes) + 1), pos)
            elif ch == "|":
                self.k += 1
                scopes = self.stack[-1].scopes
                self._emit(")" * len(scopes) + "|" + "".join(scopes), pos, quantifiable=False)
            elif ch in "*+?{":
                self._quantifier()
            else:  # '.', '^', '$' and plain literals mean the same in both dialects
                self.k += 1
                self._emit(ch, pos)
        if len(self.stack) > 1:
            start = self.stack[-1].start
            self._bad("unclosed group", start, start + 1)
        self._emit(")" * len(self.stack[0].scopes), len(self.pattern))
        offsets = [0, *accumulate(len(text) for text, _ in self.out)][:-1]
        return "".join(t for t, _ in self.out), offsets, [pos for _, pos in self.out]

    # -- quantifiers -------------------------------------------------------------
    def _quantifier(self) -> None:
        start, c = self._pos(), self._peek()
        self.k += 1
        text = c
        if c == "{":  # Java: only {n}, {n,} and {n,m}; anything else is an error
            lo = self._take("0123456789")
            if not lo:
                self._bad("illegal repetition: '{' must start {n}, {n,} or {n,m}; write \\{ for a literal brace", start)
            comma = self._take(",", 1)
            hi = self._take("0123456789") if comma else ""
            if self._peek() != "}":
                self._bad("unclosed counted quantifier: expected {n}, {n,} or {n,m}", start)
            self.k += 1
            for count in (lo, hi):
                if count and (len(count) > 10 or int(count) > _MAX_REPEAT):
                    self._bad(f"illegal repetition range: {_cut(count)} is too large (at most {_MAX_REPEAT})", start)
            if hi and int(hi) < int(lo):
                self._bad("illegal repetition range: maximum is below minimum", start)
            text = "{" + lo + comma + hi + "}"
        self._skip_space()
        if self._peek_in("?+"):  # lazy / possessive: Python 3.11 has both
            text += self._peek()
            self.k += 1
        if not self.quantifiable and c == "{":
            text = ""  # Java repeats an empty string here (e.g. "a{2}{3}"): a no-op
        elif not self.quantifiable:
            self._bad(f"dangling quantifier '{c}': there is nothing before it to repeat", start, start + 1)
        self._emit(text, start, quantifiable=False)

    # -- groups and inline flags -------------------------------------------------
    def _push(self, opener: str, start: int, flags: frozenset[str]) -> None:
        self._emit(opener, start, quantifiable=False)
        self.stack.append(_Frame(flags, start))
        self._check_depth(start)

    def _check_depth(self, start: int) -> None:
        """Refuse nesting Python's recursive compiler may not survive (groups and scoped-flag groups)."""
        if len(self.stack) + sum(len(f.scopes) for f in self.stack) > MAX_NESTING:
            self._fail(f"groups are nested more than {MAX_NESTING} deep (Python's re compiles them recursively)", start)

    def _open_group(self) -> None:
        start = self._pos()
        flags = self.stack[-1].flags
        self.k += 1
        if self._peek() != "?":
            self.groups += 1
            return self._push("(", start, flags)
        self.k += 1
        c = self._peek()
        if c != "" and c in ":=!>":
            self.k += 1
            return self._push("(?" + c, start, flags)
        if c == "<" and self._peek_in("=!", 1):
            self.k += 2
            return self._push("(?<" + self._peek(-1), start, flags)
        if c == "<":
            self.k += 1
            name = self._group_name(start)
            if name in self.names:
                self._bad(f"named group <{name}> is already defined", start)
            self.names.add(name)
            self.groups += 1
            return self._push(f"(?P<{name}>", start, flags)
        on: set[str] = set()
        off: set[str] = set()
        target = on
        while (c := self._peek()) not in ("", ")", ":"):
            if c == "-" and target is on:
                target = off
            elif c == "c":
                self._fail("CANON_EQ (canonical equivalence) has no Python re equivalent", start, self._pos() + 1)
            elif c in "imsxduU":
                target.update({c, "u"} if c == "U" else {c})
            else:
                self._bad(f"unknown inline flag '{c}' (Java knows i d m s u x U)", start, self._pos() + 1)
            self.k += 1
        if c == "":
            self._bad("unknown group construct or unclosed inline flags", start)
        self.k += 1
        new_flags = frozenset((flags | on) - off)
        prefix = _py_flags(on, off)
        if c == ":":
            return self._push(f"(?{prefix}:" if prefix else "(?:", start, new_flags)
        # A bare (?flags) applies until the end of the enclosing group, across '|'.
        frame = self.stack[-1]
        frame.flags = new_flags
        if not prefix:
            self.quantifiable = False
        elif start == 0 and "-" not in prefix and "u" not in prefix and "a" not in prefix:
            self._emit(f"(?{prefix})", start, quantifiable=False)  # leading: stays global
        else:
            frame.scopes.append(f"(?{prefix}:")
            self._emit(f"(?{prefix}:", start, quantifiable=False)
            self._check_depth(start)

    def _group_name(self, start: int) -> str:
        name = self._take("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        if not name or not name[0].isalpha():
            self._bad("a group name must start with an ASCII letter", start)
        if self._peek() != ">":
            self._bad("group name is missing its closing '>'", start)
        self.k += 1
        return name

    # -- character classes ---------------------------------------------------------
    def _class(self) -> str:
        start = self._pos()
        self.k += 1
        parts = ["["]
        if self._peek() == "^":
            parts.append("^")
            self.k += 1
        empty = True
        while True:
            self._skip_space()
            if self.k >= len(self.toks):
                self._bad("unclosed character class", start)
            pos, c = self.toks[self.k][1], self._peek()
            if c == "]" and not empty:
                self.k += 1
                return "".join(parts) + "]"
            if c == "[":
                msg = "nested character classes / unions like [a-z[0-9]] are not supported; use one flat class or \\["
                self._fail(msg, pos, pos + 1)
            if c == "&" and self._peek(1) == "&":
                self._fail("character class intersection '&&' has no Python re equivalent", pos, pos + 2)
            empty = False
            text, cp = self._class_atom(start)
            self._skip_space()
            if cp is not None and self._peek() == "-" and self._peek(1) not in ("]", "["):
                self.k += 1
                end_text, end_cp = self._class_atom(start, is_range=True)
                if end_cp is None or end_cp < cp:
                    self._bad("illegal character range", pos)
                text = f"{text}-{end_text}"
            parts.append(text)

    def _class_atom(self, start: int, is_range: bool = False) -> tuple[str, int | None]:
        if self.k >= len(self.toks):
            self._bad("unclosed character class", start)
        ch, _, quoted = self.toks[self.k]
        if quoted or ch != "\\":
            self.k += 1
            return _lit(ord(ch)), ord(ch)
        return self._escape(in_class=True, is_range=is_range)

    # -- escapes -------------------------------------------------------------------
    def _escape(self, in_class: bool, is_range: bool = False) -> tuple[str, int | None]:
        """Translate the escape at ``k``: (python text, code point if a single char)."""
        start = self._pos()
        if self.k + 1 >= len(self.toks):
            self._bad("the pattern ends with a lone backslash", start)
        c = self.toks[self.k + 1][0]
        self.k += 2
        if c in _SIMPLE_ESCAPES:
            cp = _SIMPLE_ESCAPES[c]
            return _lit(cp) if cp in _CTRL_NAMES else _hex(cp), cp
        if c == "0":
            digits = self._take("01234567", 2 if self._peek_in("4567") else 3)
            if not digits:
                self._bad("\\0 must be followed by 1-3 octal digits", start)
            return _hex(int(digits, 8)), int(digits, 8)
        if c == "x":
            if self._peek() == "{":
                self.k += 1
                digits = self._take(_HEX)
                if not digits or self._peek() != "}":
                    self._bad("\\x{...} needs hex digits and a closing '}'", start)
                self.k += 1
                cp = int(digits, 16)
                if cp > 0x10FFFF:
                    self._bad("hexadecimal code point is too big", start)
                return f"\\U{cp:08x}", cp
            digits = self._take(_HEX, 2)
            if len(digits) != 2:
                self._bad("\\x needs exactly two hex digits or \\x{...}", start)
            return _hex(int(digits, 16)), int(digits, 16)
        if c == "u":
            digits = self._take(_HEX, 4)
            if len(digits) != 4:
                self._bad("\\u needs exactly four hex digits", start)
            cp = int(digits, 16)
            low = "".join(self._peek(j) for j in range(6))
            if 0xD800 <= cp < 0xDC00 and re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", low):
                self.k += 6  # Java joins an escaped surrogate pair into one code point
                cp = 0x10000 + ((cp - 0xD800) << 10) + (int(low[-4:], 16) - 0xDC00)
            return _hex(cp), cp
        if c == "c":
            if self.k >= len(self.toks):
                self._bad("\\c needs a control character letter", start)
            cp = ord(self.toks[self.k][0]) ^ 64
            self.k += 1
            return _hex(cp), cp
        if c == "N":
            name = self._braced(start, "\\N")
            try:
                cp = ord(unicodedata.lookup(name))
            except KeyError:
                self._bad(f"unknown Unicode character name '{name}'", start)
            return _hex(cp), cp
        if c in "dDwWsSbB" and "u" in self.stack[-1].flags and "U" not in self.stack[-1].flags:
            # Java's u (UNICODE_CASE) alone only widens case folding; keep these ASCII.
            if not in_class:
                return ("(?!(?a:\\b))" if c == "B" else f"(?a:\\{c})"), None
            if c in "dws":
                return _ASCII_SHORTHAND[c], None
            if c in "DWS":
                self._fail("a negated shorthand class in [...] under (?u) cannot stay ASCII-only in Python", start)
        if c in "dDwWsS":
            return "\\" + c, None
        if c == "v" and in_class and (is_range or self._peek() == "-"):
            return _hex(0x0B), 0x0B  # Java: \v as a range endpoint means VT
        if c in "hv":
            body = _HSPACE if c == "h" else _VSPACE
            return (body if in_class else f"[{body}]"), None
        if in_class and c in "HVP":
            if c == "P":
                self._property(start)  # rejects non-POSIX names first
            self._fail("a negated class inside a character class cannot be expressed in Python's re", start)
        if c in "HV":
            return f"[^{_HSPACE if c == 'H' else _VSPACE}]", None
        if c in "pP":
            body = self._property(start)
            return (body if in_class else f"[{'^' if c == 'P' else ''}{body}]"), None
        if c.isdigit() and c.isascii() and not in_class:
            return self._backref(int(c)), None
        if in_class and c in "123456789ABGRXZbzk":
            self._bad("this escape is not allowed inside a character class", start)
        if c == "b" and self._peek() == "{" and self._peek(1) == "g" and self._peek(2) == "}":
            self.k += 3
            self._fail("Python's re has no grapheme cluster boundaries", start)
        if c in "Ab":
            return "\\" + c, None
        if c == "B":
            return "(?!\\b)", None  # Python 3.11's \B never matches an empty string; Java's does
        if c == "z":
            return "\\Z", None
        if c == "Z":
            return ("(?=\\n?\\Z)" if "d" in self.stack[-1].flags else _END_BEFORE_TERMINATOR), None
        if c == "R":
            return _LINEBREAK, None
        if c == "G":
            self._fail("Python's re has no end-of-previous-match anchor", start)
        if c == "X":
            self._fail("Python's re has no extended grapheme cluster matcher", start)
        if c == "k":
            if self._peek() != "<":
                self._bad("\\k must be followed by <name>", start)
            self.k += 1
            name = self._group_name(start)
            if name not in self.names:
                self._bad(f"named group <{name}> does not exist", start)
            return f"(?P={name})", None
        if c.isascii() and c.isalnum():
            self._bad(f"'\\{c}' is not a Java escape sequence", start)
        return _lit(ord(c)), ord(c)  # escaped punctuation / non-ASCII: a literal

    def _backref(self, num: int) -> str:
        # Java takes more digits only while they still name an existing group.
        while self._peek_in("0123456789") and num * 10 + int(self._peek()) <= self.groups:
            num = num * 10 + int(self._peek())
            self.k += 1
        if num > self.groups:
            return "(?!)"  # Java compiles it; a group that never matched never matches
        nxt = self.toks[self.k][0] if self.k < len(self.toks) else ""
        # Keep a following digit (or, in (?x) mode, a digit after skipped space) literal.
        wrap = nxt.isdigit() or "x" in self.stack[-1].flags
        return f"(?:\\{num})" if wrap else f"\\{num}"

    def _braced(self, start: int, what: str) -> str:
        """The text of a ``{...}`` argument (as in ``\\p{Lower}``, ``\\N{name}``)."""
        if self._peek() != "{":
            self._bad(f"{what} must be followed by {{...}}", start)
        first = self.k + 1
        while self.k < len(self.toks) and self._peek() != "}":
            self.k += 1
        if self.k >= len(self.toks):
            self._bad(f"unclosed {what}{{...}}", start)
        self.k += 1
        return "".join(t[0] for t in self.toks[first : self.k - 1])

    def _property(self, start: int) -> str:
        """Inside of a class for \\p{...}/\\pX (POSIX ASCII only), else reject."""
        if self._peek() != "{" and self.k < len(self.toks):  # one-letter form \pL
            self.k += 1
            name = self.toks[self.k - 1][0]
        else:
            name = self._braced(start, "\\p")
        if name in _POSIX and "U" not in self.stack[-1].flags:
            return _POSIX[name]
        key = name.split("=", 1)[0].lower() if "=" in name else ""
        if name in _POSIX:
            self._fail("under (?U) Java's POSIX classes are Unicode properties, which Python's re lacks", start)
        if name.startswith("In") or key in ("blk", "block"):
            what = "block classes"
        elif name.startswith("java"):
            what = "java.lang.Character classes"
        elif name.startswith("Is") or key in ("sc", "script"):
            what = "script or binary property classes"
        else:
            what = "category/property classes (only POSIX names like \\p{Alpha} translate)"
        self._fail(f"Python's re has no Unicode {what}; use an explicit character range", start)


def translate(java_pattern: str) -> str:
    """Return a Python pattern, to compile with ``re.ASCII``, equivalent to ``java_pattern``.

    Raises :class:`JavaRegexError` for Java syntax errors and for constructs Python's
    ``re`` cannot express faithfully, so a filter never silently matches differently.
    """
    return _Translator(java_pattern).run()[0]


@lru_cache(maxsize=4096)
def compile_java(java_pattern: str) -> re.Pattern[str]:
    """Translate and compile with ``re.ASCII`` (Java's default ASCII semantics).

    Any remaining Python compile error is re-raised as :class:`JavaRegexError` with the
    position mapped back into the Java pattern, so callers handle one exception type.
    Cached: every flow of a file compiles the same few filter lists (compiled patterns are immutable).
    """
    py, offsets, positions = _Translator(java_pattern).run()
    try:
        return re.compile(py, re.ASCII)
    except (re.error, OverflowError, RecursionError) as exc:
        at = getattr(exc, "pos", None)
        pos = positions[bisect_right(offsets, at) - 1] if at is not None and offsets else None
        msg = getattr(exc, "msg", None) or str(exc)
        if isinstance(exc, RecursionError):
            msg = "too deeply nested for Python's re"
        raise JavaRegexError(java_pattern, pos, f"Python's re rejects the translation {_cut(py)!r}: {msg}") from exc


def compile_pattern_list(items: Sequence[str]) -> re.Pattern[str] | None:
    """Mirror MM2's ``MirrorUtils.compilePatternList``: join the (already split and
    trimmed) items with ``|`` into ONE Java regex and compile it; ``None`` if empty.

    Joining before translating is what Java does, so e.g. a mid-pattern ``(?i)`` in one
    item keeps applying to the following items, exactly as in MM2.
    """
    if isinstance(items, str):
        raise TypeError("compile_pattern_list expects a sequence of patterns, not a str")
    if not items:
        return None  # MM2: an empty list matches nothing
    return compile_java("|".join(items))


def full_match(pattern: re.Pattern[str] | None, text: str) -> bool:
    """Java ``Matcher.matches()`` semantics: the whole text must match; ``None`` never matches."""
    return pattern is not None and pattern.fullmatch(text) is not None
