"""Tests for mirrorflow.javaregex: Java (MM2) regex -> Python re translation.

Each construct is checked twice: by what the translated pattern matches under
full-match semantics (what MM2's ``Matcher.matches()`` does), and - for
constructs Python cannot express or Java rejects - by the error it raises.
"""

from __future__ import annotations

import pickle
import re
import warnings

import pytest

from mirrorflow.javaregex import (
    JavaRegexError,
    compile_java,
    compile_pattern_list,
    full_match,
    translate,
)


def matches(java: str, text: str) -> bool:
    return full_match(compile_java(java), text)


def check(java: str, yes: list[str], no: list[str]) -> None:
    pattern = compile_java(java)
    for text in yes:
        assert full_match(pattern, text), f"{java!r} should match {text!r} (python: {pattern.pattern!r})"
    for text in no:
        assert not full_match(pattern, text), f"{java!r} should not match {text!r} (python: {pattern.pattern!r})"


# --- behaviour of translated constructs ---------------------------------------------------

BEHAVIOUR = [
    # plain syntax that passes through
    ("orders", ["orders"], ["orders2", "Orders", "xorders"]),
    ("pay.*", ["pay", "payments"], ["xpay"]),
    ("a+b*c?", ["a", "aab", "abbc"], ["", "bc"]),
    ("a{2}", ["aa"], ["a", "aaa"]),
    ("a{2,}", ["aa", "aaaa"], ["a"]),
    ("a{1,2}", ["a", "aa"], ["aaa"]),
    # Java repeats an empty string for a counted quantifier with nothing before it
    ("a{2}{3}", ["aa"], ["a", "aaaaaa"]),
    ("{2}x|y", ["x", "y"], ["{2}x"]),
    ("a*{2}+b", ["aab", "b"], []),
    ("a+?b*?c??", ["a", "abc"], ["bc"]),
    ("(ab|cd)+", ["ab", "abcd"], ["abc"]),
    ("(?:ab)+", ["abab"], ["aba"]),
    ("a(?=b).", ["ab"], ["ac"]),
    ("a(?!b).", ["ac"], ["ab"]),
    ("(?<=a)b|ab", ["ab"], ["b"]),
    (".(?<!a)b", ["cb"], ["ab"]),
    (r"(a)\1", ["aa"], ["ab"]),
    ("[a-c]+", ["abc", "cab"], ["abd"]),
    ("[^a-c]", ["d"], ["a"]),
    (r"\w+\s\d", ["ab_9 7"], ["ab 7x"]),
    (r"\W\S\D", ["-x-"], ["a x"]),
    (r"a\b.*", ["a b"], ["ab"]),
    (r"a\B.*", ["ab"], ["a b"]),
    (r"\B", [""], ["a"]),
    (r"\t\n\r\f", ["\t\n\r\f"], ["tnrf"]),
    ("}]", ["}]"], []),
    ("a b#c", ["a b#c"], ["ab"]),
    # escaped punctuation stays a literal
    (r"\.\-\#\ \\\*\(", [".-# \\*("], ["a-# \\*("]),
    (r"mm2\.offsets", ["mm2.offsets"], ["mm2xoffsets"]),
    # \Q...\E quoting, also unterminated and inside classes
    (r"\Qa.b*c\E", ["a.b*c"], ["axbbbc", "a.bc"]),
    (r"x\Q(.)", ["x(.)"], ["xa"]),
    (r"\Q\d\E", ["\\d"], ["1"]),
    (r"[\Q.]\E]+", [".]."], ["a"]),
    (r"[\Qa\E-c]", ["b"], ["-", "d"]),
    (r"\Qa\Eb\Qc", ["abc"], []),
    # named groups and named back references
    (r"(?<tag>ab)-\k<tag>", ["ab-ab"], ["ab-cd"]),
    (r"(?<first>a)(?<second>b)\k<second>", ["abb"], ["aba"]),
    # possessive quantifiers and atomic groups
    ("a*+a", [], ["aaa"]),
    ("a++b", ["aab"], ["aa"]),
    ("a?+a", ["aa"], ["a"]),
    ("a{1,3}+a", ["aaaa"], ["aaa"]),
    ("(?>ab|a)b", ["abb"], ["ab"]),
    # POSIX classes, outside and inside classes
    (r"\p{Lower}+", ["abc"], ["aBc", "é"]),
    (r"\p{Upper}", ["Q"], ["q"]),
    (r"\p{ASCII}", ["\x00", "~"], ["é"]),
    (r"\p{Alpha}+", ["aZ"], ["a1"]),
    (r"\p{Digit}", ["7"], ["a", "\u0663"]),
    (r"\p{Alnum}+", ["a1Z"], ["_"]),
    (r"\p{Punct}+", ['!/:@[`{~"\\'], ["a", " "]),
    (r"\p{Graph}+", ["a!~"], [" "]),
    (r"\p{Print}+", ["a !~"], ["\t"]),
    (r"\p{Blank}+", [" \t"], ["\n"]),
    (r"\p{Cntrl}+", ["\x00\x1f\x7f"], [" "]),
    (r"\p{XDigit}+", ["09afAF"], ["g"]),
    (r"\p{Space}+", [" \t\n\x0b\f\r"], ["\xa0"]),
    (r"\P{Digit}", ["a"], ["5"]),
    (r"\P{Lower}", ["A"], ["a"]),
    (r"[\p{Lower}\p{Digit}_]+", ["a_1"], ["A"]),
    (r"[^\p{Alpha}]", ["1"], ["b"]),
    # \h \H \v \V \R
    (r"\h+", [" \t\xa0\u2000\u3000"], ["\n"]),
    (r"\H", ["a", "\n"], [" ", "\xa0"]),
    (r"\v+", ["\n\x0b\f\r\x85\u2028\u2029"], [" "]),
    (r"\V", ["a", " "], ["\n", "\u2028"]),
    (r"[\h\v]+", [" \n\xa0\u2028"], ["a"]),
    (r"a\Rb", ["a\r\nb", "a\nb", "a\rb", "a\u2028b"], ["a\n\nb", "ab"]),
    (r"a\R\nb", ["a\r\nb"], []),  # \R backtracks out of \r\n like modern Java
    # escapes producing single characters
    (r"\e\a", ["\x1b\x07"], []),
    (r"\cA\c[\c?", ["\x01\x1b\x7f"], []),
    (r"\01\012\0101\0400", ["\x01\n\x41\x200"], []),
    (r"\x41\u00e9\x{1F600}\x{41}", ["Aé\U0001f600A"], []),
    (r"\uD83D\uDE00", ["\U0001f600"], ["\ud83d\ude00"]),
    (r"[\x41-\x43]+", ["ABC"], ["D"]),
    (r"[\x{61}-\x{63}]", ["b"], ["d"]),
    (r"\N{LATIN SMALL LETTER E WITH ACUTE}", ["é"], ["e"]),
    (r"[\v-\x0c]", ["\x0b", "\x0c"], ["\n"]),
    # anchors
    (r"\Aab\z", ["ab"], ["ab\n"]),
    (r"ab\Z\n?", ["ab", "ab\n"], []),
    (r"ab\Z\r\n", ["ab\r\n"], []),
    (r"ab\Z.", [], ["abc"]),
    (r"(?d)ab\Z\r?", ["ab"], []),
    ("^ab$", ["ab"], ["ab\n"]),
    # inline flags scoped like Java
    ("(?i)abc", ["ABC", "aBc"], ["abd"]),
    ("a(?i)b", ["aB", "ab"], ["AB"]),
    ("a(?i)b|c", ["aB", "C", "c"], ["AB"]),
    ("x(a(?i)b|c)y", ["xaBy", "xCy"], ["xCY", "XCy"]),
    ("(?i)a(?-i)b", ["Ab"], ["AB"]),
    ("(?i:a)b", ["Ab"], ["AB"]),
    ("(?i)(?-i:a)b", ["aB"], ["AB"]),
    ("a(?s).", ["a\n"], []),
    ("a.", ["ab"], ["a\n"]),
    ("(?s:a.)", ["a\n"], []),
    ("(?m)a$\\n^b", ["a\nb"], []),
    ("(?x) a b  # comment ( [ \n c", ["abc"], ["a b c"]),
    ("(?x)[a b]+", ["ab"], ["a b"]),
    (r"(?x)a\ b", ["a b"], ["ab"]),
    (r"(?x)\Qa b\E", ["a b"], ["ab"]),
    ("(?x:a b)c d", ["abc d"], ["abcd"]),
    ("a(?d)b", ["ab"], []),
    ("(?iu)é", ["É"], []),
    ("(?U)\\w", ["é"], []),
    ("(?i)(?u:é)", ["É"], []),
    ("(?iU)a(?-U)é", ["Aé"], ["AÉ"]),
    ("(?)a(?-)", ["a"], []),
]


@pytest.mark.parametrize(("java", "yes", "no"), BEHAVIOUR, ids=[b[0] for b in BEHAVIOUR])
def test_behaviour(java: str, yes: list[str], no: list[str]) -> None:
    check(java, yes, no)


@pytest.mark.parametrize(
    ("java", "python"),
    [
        ("a(?i)b|c", "a(?i:b)|(?i:c)"),
        ("(a(?i)b|c)d", "(a(?i:b)|(?i:c))d"),
        ("(?i)abc", "(?i)abc"),
        ("(?is)x(?-i)y", "(?is)x(?-i:y)"),
        ("(?u)x", "(?u:x)"),
        ("(?-i)x", "(?-i:x)"),
        ("(?x)a b", "ab"),
        ("(?d)a", "a"),
        ("(?i:a)", "(?i:a)"),
        ("(?x:a)", "(?:a)"),
        ("(?U-i:a)", "(?u-i:a)"),
        ("a(?-u)b", "a(?a:b)"),
        (r"\Qa.b\E", r"a\.b"),
        (r"(?<n>x)\k<n>", "(?P<n>x)(?P=n)"),
        (r"a\z", r"a\Z"),
        (r"a\Z", r"a(?=(?:\r\n|[\n\r\u0085\u2028\u2029])?\Z)"),
        (r"\R", r"(?:\r\n|[\n\x0b\f\r\x85\u2028\u2029])"),
        (r"\x{1F600}", r"\U0001f600"),
        (r"\e\a", r"\x1b\x07"),
        (r"\h", "[ \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000]"),
        (r"\V", "[^\\n\\x0b\\f\\r\\x85\\u2028\\u2029]"),
        (r"\p{Lower}", "[a-z]"),
        (r"\P{Digit}", "[^0-9]"),
        (r"[\p{Alpha}_]", "[a-zA-Z_]"),
        ("a*+b++c?+d{1,2}+(?>e)", "a*+b++c?+d{1,2}+(?>e)"),
        (".*[\\-\\.]internal", ".*[\\-\\.]internal"),
        ("[]a]", "[\\]a]"),
        ("[a-]", "[a\\-]"),
        (r"[\[]", r"[\[]"),
        (r"(a)\12", r"(a)(?:\1)2"),
    ],
)
def test_translation_text(java: str, python: str) -> None:
    assert translate(java) == python


# --- backreferences follow Java's digit rules -----------------------------------------------


def test_backreference_takes_digits_only_while_group_exists() -> None:
    # Java: \12 with one group is \1 followed by a literal '2'.
    check(r"(a)\12", ["aa2"], ["a"])
    twelve = "".join(f"({c})" for c in "abcdefghijkl")
    check(twelve + r"\12", ["abcdefghijkll"], ["abcdefghijkla2"])


def test_backreference_in_comments_mode_is_not_merged_with_a_later_digit() -> None:
    assert translate(r"(?x)(a)\1 2") == r"(a)(?:\1)2"
    check(r"(?x)(a)\1 2", ["aa2"], ["a"])


def test_backreference_to_missing_group_never_matches() -> None:
    # Java compiles it (the group "never matched"), Python would refuse it.
    check(r"a\2|b", ["b"], ["a", "a2"])


# --- ASCII semantics like Java's defaults ----------------------------------------------------


def test_shorthand_classes_are_ascii_only() -> None:
    assert not matches(r"\w", "é")
    assert not matches(r"\d", "\u0663")  # ARABIC-INDIC DIGIT THREE
    assert not matches(r"\s", "\xa0")
    assert matches(r"\W", "é")
    # é is not a word character in ASCII mode, so there is a boundary between a and é
    assert matches(r"a\b.", "aé")
    assert not matches(r"a\B.", "aé")
    assert not matches(r"(?U)a\b.", "aé")


def test_case_insensitive_is_ascii_only_unless_unicode_case() -> None:
    assert matches("(?i)abc", "ABC")
    assert not matches("(?i)é", "É")
    assert not matches("(?i)k", "\u212a")  # KELVIN SIGN folds to k only under Unicode rules
    assert matches("(?iu)é", "É")
    assert matches("(?iu)k", "\u212a")
    assert matches("(?i)(?u)é", "É")


def test_unicode_case_alone_keeps_shorthands_ascii() -> None:
    # Java's u (UNICODE_CASE) only changes case folding; \w \d \s \b stay ASCII.
    assert not matches(r"(?u)\w", "é")
    assert matches(r"(?iu)é\w", "Éa")
    assert not matches(r"(?iu)[\w]", "é")
    assert matches(r"(?iu)[\w]", "K")
    assert matches(r"(?u)a\b.", "aé")
    assert not matches(r"(?u)a\B.", "aé")
    assert matches(r"(?u)\B", "")
    with pytest.raises(JavaRegexError, match="negated shorthand"):
        compile_java(r"(?u)[\W]")


def test_unicode_character_class_flag() -> None:
    assert matches(r"(?U)\w+", "héllo")
    assert not matches(r"\w+", "héllo")
    assert matches(r"(?U:\d)", "\u0663")
    assert not matches(r"(?U)(?-U)\w", "é")


# --- MM2 default filters ---------------------------------------------------------------------

MM2_TOPICS_EXCLUDE = [r".*[\-\.]internal", r".*\.replica", r"__.*"]
MM2_GROUPS_EXCLUDE = ["console-consumer-.*", "connect-.*", "__.*"]
MM2_CONFIG_EXCLUDE = [
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
]


def _split(value: str) -> list[str]:
    """What the caller does before compile_pattern_list: split on commas and trim."""
    return [item.strip() for item in value.split(",") if item.strip()]


def test_mm2_default_topics_exclude() -> None:
    pattern = compile_pattern_list(_split(r".*[\-\.]internal, .*\.replica, __.*"))
    assert pattern is not None
    for topic in [
        "mm2-offsets.a.internal",
        "mm2-configs.b.internal",
        "x-internal",
        "x.internal",
        "heartbeats.replica",
        "__consumer_offsets",
        "__transaction_state",
        "connect-status-internal",
    ]:
        assert full_match(pattern, topic), topic
    for topic in [
        "orders",
        "internal",
        "xinternal",
        "a.internal.b",
        "replica",
        "_single",
        "orders.replicas",
        "heartbeats",
    ]:
        assert not full_match(pattern, topic), topic


def test_mm2_default_groups_exclude() -> None:
    pattern = compile_pattern_list(MM2_GROUPS_EXCLUDE)
    for group in ["console-consumer-12345", "connect-mm2", "__anything", "connect-"]:
        assert full_match(pattern, group), group
    for group in ["console-consumer", "my-connect-app", "orders-service", "_x"]:
        assert not full_match(pattern, group), group


def test_mm2_default_config_properties_exclude() -> None:
    pattern = compile_pattern_list(MM2_CONFIG_EXCLUDE)
    for key in [
        "follower.replication.throttled.replicas",
        "min.insync.replicas",
        "message.timestamp.type",
        "unclean.leader.election.enable",
    ]:
        assert full_match(pattern, key), key
    for key in [
        "followerXreplication.throttled.replicas",
        "retention.ms",
        "cleanup.policy",
        "min.insync.replicas2",
        "message.timestamp.typeX",
    ]:
        assert not full_match(pattern, key), key


def test_mm2_default_include_everything() -> None:
    pattern = compile_pattern_list([".*"])
    assert full_match(pattern, "orders") and full_match(pattern, "")


# --- compile_pattern_list / full_match ----------------------------------------------------


def test_empty_pattern_list_matches_nothing() -> None:
    assert compile_pattern_list([]) is None
    assert compile_pattern_list(()) is None
    assert full_match(None, "x") is False
    assert full_match(None, "") is False


def test_pattern_list_is_one_alternation() -> None:
    pattern = compile_pattern_list(["orders", "pay.*"])
    assert pattern is not None
    assert full_match(pattern, "payments")
    assert full_match(pattern, "orders")
    assert not full_match(pattern, "orders2")
    assert not full_match(pattern, "xpay")


def test_pattern_list_joins_before_translating() -> None:
    # Java: "a|(?i)b|c" - the (?i) keeps applying to the later alternative "c".
    pattern = compile_pattern_list(["a", "(?i)b", "c"])
    assert full_match(pattern, "B")
    assert full_match(pattern, "C")
    assert full_match(pattern, "a")
    assert not full_match(pattern, "A")


def test_pattern_list_leading_flag_applies_to_all_items() -> None:
    pattern = compile_pattern_list(["(?i)orders", "payments"])
    assert full_match(pattern, "ORDERS") and full_match(pattern, "PAYMENTS")


def test_pattern_list_error_reports_position_in_joined_pattern() -> None:
    with pytest.raises(JavaRegexError) as info:
        compile_pattern_list(["orders", "a{x}"])
    assert info.value.pattern == "orders|a{x}"
    assert info.value.position == 8


def test_pattern_list_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError):
        compile_pattern_list("orders")


def test_full_match_requires_the_whole_text() -> None:
    pattern = compile_java("ab|abc")
    assert full_match(pattern, "abc")  # alternation backtracks like Java matches()
    assert not full_match(compile_java("ab"), "abc")
    assert not full_match(compile_java("ab"), "xab")


# --- errors ------------------------------------------------------------------------------------

ERRORS = [
    # (java, construct, position, fragment of the reason)
    (r"a.*\p{InGreek}", r"\p{InGreek}", 3, "Unicode block"),
    (r"\p{block=Greek}", r"\p{block=Greek}", 0, "Unicode block"),
    (r"\p{L}", r"\p{L}", 0, "Unicode category"),
    (r"\pL", r"\pL", 0, "Unicode category"),
    (r"\p{Lu}", r"\p{Lu}", 0, "Unicode category"),
    (r"\p{IsLatin}", r"\p{IsLatin}", 0, "Unicode script"),
    (r"\p{IsAlphabetic}", r"\p{IsAlphabetic}", 0, "Unicode script"),
    (r"\p{script=Latin}", r"\p{script=Latin}", 0, "Unicode script"),
    (r"\p{javaLowerCase}", r"\p{javaLowerCase}", 0, "java.lang.Character"),
    (r"(?U)\p{Lower}", r"\p{Lower}", 4, "(?U)"),
    (r"[\P{Lower}]", r"\P{Lower}", 1, "negated class inside a character class"),
    (r"[\H]", r"\H", 1, "negated class inside a character class"),
    (r"[\V]", r"\V", 1, "negated class inside a character class"),
    (r"x\G", r"\G", 1, "no end-of-previous-match anchor"),
    (r"\X", r"\X", 0, "grapheme"),
    (r"a\b{g}", r"\b{g}", 1, "grapheme"),
    ("[a-z[0-9]]", "[", 4, "nested character classes"),
    ("[[a]]", "[", 1, "nested character classes"),
    ("[a-z&&[^e]]", "&&", 4, "intersection"),
    ("[a-z&&b]", "&&", 4, "intersection"),
    ("a{foo}", "{", 1, "illegal repetition"),
    ("x{,5}", "{", 1, "illegal repetition"),
    ("${topic}", "{", 1, "illegal repetition"),
    ("a{", "{", 1, "illegal repetition"),
    ("a{2", "{2", 1, "unclosed counted quantifier"),
    ("a{2,x}", "{2,", 1, "unclosed counted quantifier"),
    ("a{3,2}", "{3,2}", 1, "illegal repetition range"),
    (r"\y", r"\y", 0, "not a Java escape"),
    (r"a\i", r"\i", 1, "not a Java escape"),
    (r"\E", r"\E", 0, "not a Java escape"),
    (r"\C", r"\C", 0, "not a Java escape"),
    ("*a", "*", 0, "dangling quantifier"),
    ("a|+b", "+", 2, "dangling quantifier"),
    ("(?b", None, 0, None),
    ("(?i)*", "*", 4, "dangling quantifier"),
    ("a**", "*", 2, "dangling quantifier"),
    ("(a", "(", 0, "unclosed group"),
    ("(a(b)", "(", 0, "unclosed group"),
    ("a)", ")", 1, "unmatched closing ')'"),
    ("[abc", "[abc", 0, "unclosed character class"),
    ("[]", "[]", 0, "unclosed character class"),
    ("[b-a]", "b-a", 1, "illegal character range"),
    (r"[a-\d]", r"a-\d", 1, "illegal character range"),
    ("(?c)a", "(?c", 0, "CANON_EQ"),
    ("(?q)a", "(?q", 0, "unknown inline flag"),
    ("(?i-i-s)a", "(?i-i-", 0, "unknown inline flag"),
    ("(?#comment)a", "(?#", 0, "unknown inline flag"),
    ("(?P<n>a)", "(?P", 0, "unknown inline flag"),
    ("(?<1a>x)", "(?<1a", 0, "ASCII letter"),
    ("(?<a_b>x)", "(?<a", 0, "missing its closing '>'"),
    ("(?<n>a)(?<n>b)", "(?<n>", 7, "already defined"),
    (r"\k<zz>", r"\k<zz>", 0, "does not exist"),
    (r"\kzz", r"\k", 0, r"\k must be followed by <name>"),
    (r"[\1]", r"\1", 1, "not allowed inside a character class"),
    (r"[\b]", r"\b", 1, "not allowed inside a character class"),
    (r"[\R]", r"\R", 1, "not allowed inside a character class"),
    ("a\\", "\\", 1, "lone backslash"),
    (r"\0", r"\0", 0, "octal"),
    (r"\08", r"\0", 0, "octal"),
    (r"\x4", r"\x4", 0, "two hex digits"),
    (r"\x{}", r"\x{", 0, r"\x{...}"),
    (r"\x{110000}", r"\x{110000}", 0, "too big"),
    (r"\u12", r"\u12", 0, "four hex digits"),
    (r"\c", r"\c", 0, "control character"),
    (r"\N{NO SUCH CHARACTER NAME}", r"\N{NO SUCH CHARACTER NAME}", 0, "unknown Unicode character name"),
    (r"\p", r"\p", 0, "must be followed by {...}"),
    (r"\p{Lower", r"\p{Lower", 0, r"unclosed \p{...}"),
]


@pytest.mark.parametrize(("java", "construct", "position", "reason"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(java: str, construct: str | None, position: int, reason: str | None) -> None:
    with pytest.raises(JavaRegexError) as info:
        compile_java(java)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.pattern == java
    assert err.position == position
    if construct is not None:
        assert err.construct == construct
        assert f"'{construct}'" in str(err)
    if reason is not None:
        assert reason in err.reason
    assert f"in '{java}'" in str(err)
    # translate() raises the same error for everything the scanner itself detects
    with pytest.raises(JavaRegexError):
        translate(java)


def test_error_message_format() -> None:
    with pytest.raises(JavaRegexError) as info:
        compile_java(r"a.*\p{InGreek}")
    assert str(info.value) == (
        r"unsupported Java regex construct '\p{InGreek}' at position 3 in 'a.*\p{InGreek}': "
        "Python's re has no Unicode block classes; use an explicit character range"
    )
    assert info.value.reason == "Python's re has no Unicode block classes; use an explicit character range"


def test_error_survives_pickling() -> None:
    with pytest.raises(JavaRegexError) as info:
        compile_java("a{x}")
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.pattern, copy.position, copy.reason, copy.construct) == (
        str(info.value),
        "a{x}",
        1,
        info.value.reason,
        "{",
    )


def test_invalid_java_is_labelled_invalid() -> None:
    with pytest.raises(JavaRegexError, match=r"^invalid Java regex construct '\{' at position 1"):
        compile_java("a{x}")


def test_python_compile_errors_are_mapped_to_java_positions() -> None:
    # Java accepts a quantified anchor; Python's re refuses - reported at the '*'.
    with pytest.raises(JavaRegexError) as info:
        compile_java("ab^*")
    assert info.value.position == 3
    assert "nothing to repeat" in info.value.reason
    assert isinstance(info.value.__cause__, re.error)
    # Java allows bounded variable-width lookbehind; Python needs a fixed width.
    with pytest.raises(JavaRegexError, match="look-behind requires fixed-width"):
        compile_java("(?<=a{1,3})b")
    with pytest.raises(JavaRegexError, match="too large"):
        compile_java("a{99999999999}")


def test_translation_is_warning_free() -> None:
    patterns = [java for java, _, _ in BEHAVIOUR] + [
        "[&a|~-]",
        "[--/]",
        "[a&b]",
        "[||]",
        "[~~]",
        r"[\[\]]",
        r"[\Q[&&~~\E]",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for java in patterns:
            compile_java(java)
    check("[&a|~-]+", ["&a|~-"], ["b"])
    check("[--/]", ["-", ".", "/"], ["a"])
    check(r"[\Q[&&~~\E]+", ["[&~"], ["a"])


def test_unicode_and_non_ascii_literals_pass_through() -> None:
    check("café-€", ["café-€"], ["cafe-€"])
    check(r"\€", ["€"], [])
    check("[é-ë]", ["ê"], ["e"])
    check("\U0001f600+", ["\U0001f600\U0001f600"], [])


def test_deep_nesting_is_refused_at_a_fixed_depth_not_by_a_recursion_error() -> None:
    check("(" * 50 + "a" + ")" * 50, ["a"], ["b"])
    for nested in ("(" * 5000 + "a" + ")" * 5000, "(?:" * 101 + "a" + ")" * 101, "a(?i)b(?-i)" * 101):
        with pytest.raises(JavaRegexError, match="nested more than 100 deep") as info:
            compile_java(nested)
        assert info.value.kind == "unsupported" and len(str(info.value)) < 500  # the pattern is cut, not echoed


def test_repetition_counts_beyond_javas_int_are_invalid() -> None:
    for pattern in ("a{2147483648}", "a{1," + "9" * 5000 + "}"):
        with pytest.raises(JavaRegexError, match="illegal repetition range: .* is too large") as info:
            compile_java(pattern)
        assert info.value.kind == "invalid"


def test_compiled_patterns_are_cached() -> None:
    assert compile_java("orders\\..*") is compile_java("orders\\..*")
