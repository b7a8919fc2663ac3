"""Java properties syntax, as java.util.Properties.load reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorflow.config.properties import (
    PropertiesSyntaxError,
    lost_backslashes,
    parse_properties,
    read_properties_file,
)


def as_dict(text: str) -> dict[str, str]:
    return {e.key: e.value for e in parse_properties(text)}


def test_separators_equals_colon_and_whitespace() -> None:
    assert as_dict("a=1\nb:2\nc 3\nd\t=\t4\ne   :  5\nf\n") == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "5",
        "f": "",
    }


def test_value_keeps_later_separators_and_trailing_text() -> None:
    assert as_dict("url = http://h:1/p?x=y\n") == {"url": "http://h:1/p?x=y"}
    assert as_dict("k = = v\n") == {"k": "= v"}


def test_comments_and_blank_lines() -> None:
    assert as_dict("# c\n! c2\n   # indented comment\n\n  \nk=v # not a comment\n") == {"k": "v # not a comment"}


def test_continuation_lines_strip_leading_whitespace() -> None:
    text = "topics = a, \\\n          b, \\\n    c\nnext=1\n"
    entries = parse_properties(text)
    assert [(e.key, e.value, e.line) for e in entries] == [("topics", "a, b, c", 1), ("next", "1", 4)]


def test_even_backslashes_do_not_continue() -> None:
    assert as_dict("path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


def test_comment_line_never_continues() -> None:
    assert as_dict("# comment \\\nk=v\n") == {"k": "v"}


def test_escapes_in_keys_and_values() -> None:
    assert as_dict("my\\ key\\:x = a\\tb\\nc\\u00e9\\=\\q\n") == {"my key:x": "a\tb\nc\u00e9=q"}


def test_crlf_and_cr_line_endings() -> None:
    assert as_dict("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_duplicates_are_kept_in_order_for_the_resolver() -> None:
    entries = parse_properties("k=1\nk=2\n")
    assert [(e.value, e.line) for e in entries] == [("1", 1), ("2", 2)]


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesSyntaxError) as err:
        parse_properties("a=1\nb=\\u12g4\n", "f.properties")
    assert err.value.line == 2 and "f.properties:2" in str(err.value)


def test_lost_backslashes_detects_regex_escapes_eaten_by_the_loader() -> None:
    assert lost_backslashes(r"orders\..*")
    assert not lost_backslashes(r"orders\\..*")
    assert not lost_backslashes(r"a\tb")


def test_a_file_that_is_not_utf8_is_an_error_at_the_line_of_the_first_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes(b"a=1\r\n# caf\xe9\nb=2\n")
    with pytest.raises(PropertiesSyntaxError) as err:
        read_properties_file(path)
    assert err.value.file == str(path) and err.value.line == 2
    assert "not UTF-8: byte 0xe9 at offset 10 (column 6)" in err.value.message and "\\u00e9" in err.value.message
    assert err.value.safe_message == f"{path}:2: not UTF-8 (the byte at offset 10 cannot be decoded)"


def test_utf8_files_are_read_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("k = café\n", encoding="utf-8")
    assert [(e.key, e.value) for e in read_properties_file(path)] == [("k", "café")]


def test_the_safe_message_of_a_bad_escape_quotes_nothing() -> None:
    with pytest.raises(PropertiesSyntaxError) as err:
        parse_properties("pw=ab\\u12g4\n", "secret.properties")
    assert err.value.safe_message == "secret.properties:1: malformed \\uxxxx encoding"
