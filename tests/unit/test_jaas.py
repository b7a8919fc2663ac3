"""``sasl.jaas.config`` read by the grammar Kafka's Java client reads it with, checked against Java itself.

Why this exists: a JAAS line Java accepts (an unquoted value, options in any order) was refused by a hand-written
pattern, and one Java refuses could pass it. The cases below follow the grammar's rules one by one; the last test
runs Java's own ``StreamTokenizer``, set up as Kafka's ``JaasConfig`` sets it up (``java/JaasParse.java``), on
thousands of generated texts and requires the same answer for each.
"""

from __future__ import annotations

import base64
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from mirrorflow.jaas import JaasError, parse, parse_entries

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.mark.parametrize(
    ("text", "options"),
    [
        (f'{PLAIN} required username="admin" password="s3cret";', {"username": "admin", "password": "s3cret"}),
        (f"{PLAIN} required username=admin password=s3cret;", {"username": "admin", "password": "s3cret"}),
        (f"{PLAIN} required password='s3 cret' username=admin ;", {"username": "admin", "password": "s3 cret"}),
        (f'{PLAIN} required username="a" password="p\\"w\\\\x";', {"username": "a", "password": 'p"w\\x'}),
        (f'{PLAIN} required username="a" password="tab\\there";', {"username": "a", "password": "tab\there"}),
        (f'{PLAIN} required username="a" password="\\101\\1012\\08";', {"username": "a", "password": "AA2\x008"}),
        (f"{PLAIN}\n  required\n  username=a\n  password=b\n  ;", {"username": "a", "password": "b"}),
        (f"{PLAIN} required /* note */ username=a // rest of line\n password=b;", {"username": "a", "password": "b"}),
        (f"{PLAIN} required username=a password=p@ss$w0rd!{{x}};", {"username": "a", "password": "p@ss$w0rd!{x}"}),
        (
            f"{PLAIN} required username=a password=b extra=1 username=c;",
            {"username": "c", "password": "b", "extra": "1"},
        ),
        (f'{PLAIN} required username="" password=b;', {"username": "", "password": "b"}),
        (f"{PLAIN} required username=é€ password=b;", {"username": "é€", "password": "b"}),
        (f'{PLAIN} required username="unterminated\n password=b;', {"username": "unterminated", "password": "b"}),
    ],
)
def test_what_java_accepts_is_read_with_javas_options(text: str, options: dict[str, str]) -> None:
    entry = parse(text)
    assert entry.login_module == PLAIN and entry.module_name == "PlainLoginModule"
    assert entry.control_flag == "REQUIRED"
    assert entry.options == options


@pytest.mark.parametrize("flag", ["required", "REQUIRED", "Requisite", "sufficient", "optional"])
def test_every_control_flag_in_any_case(flag: str) -> None:
    assert parse(f"M {flag};").control_flag == flag.upper()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "Login module not specified in JAAS config"),
        ("   // only a comment", "Login module not specified in JAAS config"),
        (f"{PLAIN}", "Login module control flag not specified in JAAS config"),
        (f"{PLAIN} mandatory username=a;", "Invalid login module control flag 'mandatory' in JAAS config"),
        (f"{PLAIN} ; username=a;", "Login module control flag is not available in the JAAS config"),
        (f"{PLAIN} required username=a password=b", "JAAS config entry not terminated by semi-colon"),
        (f"{PLAIN} required username password=b;", "Value not specified for key 'username' in JAAS config"),
        (f"{PLAIN} required username=;", "Value not specified for key 'username' in JAAS config"),
        (f"{PLAIN} required username==a;", "Value not specified for key 'username' in JAAS config"),
        # '/' starts a comment, so an unquoted path swallows the rest of the line
        ("Krb5LoginModule required keyTab=/etc/kafka.keytab principal=p;", "Value not specified for key 'keyTab'"),
        (f"{PLAIN} required; {PLAIN} required;", "contains 2 login modules, should be 1 module"),
    ],
)
def test_what_java_refuses_is_refused_with_javas_reason(text: str, reason: str) -> None:
    with pytest.raises(JaasError, match=reason.replace("(", r"\(")):
        parse(text)


def test_several_entries_are_read_but_a_client_takes_one() -> None:
    entries = parse_entries("A required a=1; B optional b=2;")
    assert [(e.login_module, e.control_flag, e.options) for e in entries] == [
        ("A", "REQUIRED", {"a": "1"}),
        ("B", "OPTIONAL", {"b": "2"}),
    ]


def test_a_refusal_never_quotes_an_option_value() -> None:
    with pytest.raises(JaasError) as err:
        parse(f'{PLAIN} required username="admin" password="hunter2"')
    assert "hunter2" not in str(err.value) and "admin" not in str(err.value)


# -- against Java ----------------------------------------------------------------------------------------------

_ALPHABET = list("ab Mz09_-.$@{}é€\t\n\r\"'\\/*;=7") + ["\x85", "\x00", "\u2028", "\U0001f600"]


def _random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:  # free text over the characters the grammar treats specially
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 30)))
    parts = [
        rng.choice(["M", "a.b.PlainLoginModule", '"q m"', "'x'", ""]),
        rng.choice(["required"] * 3 + ["OPTIONAL", "x"]),
    ]
    for _ in range(rng.randint(0, 4)):
        key = rng.choice(["username", "password", "k", '"k k"', "x/y"] + ["username"] * 3)
        value = rng.choice(
            ["v", '"v \\" w"', "'v'", "p@$$", '"\\101\\7777"', '"a\\', "/path", '"/path"', ""] + ["v"] * 4
        )
        parts.append(f"{key}{rng.choice(['=', ' = ', '==', '=', '='])}{value}")
    return " ".join(parts) + rng.choice([";", " ;", "", "; M required;", " // c", " /* c */;", ";", ";"])


def _python_answer(text: str) -> str:
    try:
        entry = parse(text)
    except JaasError:
        return "ERR"

    def b64(value: str) -> str:
        return base64.b64encode(value.encode("utf-8", "surrogatepass")).decode()

    options = " ".join(f"{b64(k)}:{b64(v)}" for k, v in sorted(entry.options.items()))
    return f"OK {b64(entry.login_module)} {b64(entry.control_flag)}" + (f" {options}" if options else "")


def test_the_parser_answers_as_javas_tokenizer_does_on_generated_texts(tmp_path: Path) -> None:
    javac, java = shutil.which("javac"), shutil.which("java")
    if not (javac and java):
        pytest.skip("no JDK (javac, java) on this machine: the comparison with Java was not run")
    source = Path(__file__).with_name("java") / "JaasParse.java"
    subprocess.run([javac, "-d", str(tmp_path), str(source)], check=True, timeout=120)
    rng = random.Random(20261127)
    # Java's UTF-16 strings and Python's code points differ only above U+FFFF, which both read as word characters.
    texts = [_random_text(rng) for _ in range(3000)]
    feed = "\n".join(base64.b64encode(t.encode("utf-8")).decode() for t in texts) + "\n"
    done = subprocess.run(
        [java, "-cp", str(tmp_path), "JaasParse"], input=feed, capture_output=True, text=True, check=True, timeout=120
    )
    answers = done.stdout.splitlines()
    assert len(answers) == len(texts)
    differ = [(t, a, _python_answer(t)) for t, a in zip(texts, answers, strict=True) if a != _python_answer(t)]
    assert not differ, f"{len(differ)} texts read differently, first: {differ[0]!r}"
    assert sum(a.startswith("OK") for a in answers) > 200  # the generator reaches the accepting paths too
