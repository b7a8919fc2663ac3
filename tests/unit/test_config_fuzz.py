"""Configuration fuzzing: whatever the file holds, loading it gives a configuration or ``file:line`` errors.

Why: fuzzing found tracebacks instead of errors (a deeply nested regex, a malformed ``${provider:...}``,
a file that is not UTF-8) and values that validated and then crashed ``replicate`` (a replication
factor of 10^20). Hypothesis writes properties files mixing valid and invalid keys, values,
separators, continuations, escapes, provider references, regexes, unicode and huge numbers; loading
one must return a ``MirrorConfig`` or raise ``ConfigError``, and every error must cite ``file:line``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorflow.config import ConfigError, MirrorConfig, load_config

BASE = [
    "clusters = A, B, C",
    "A.bootstrap.servers = a:9092",
    "B.bootstrap.servers = b:9092",
    "C.bootstrap.servers = c:9092",
    "A->B.enabled = true",
]

SETTINGS = [
    "topics",
    "topics.exclude",
    "groups",
    "groups.exclude",
    "config.properties.exclude",
    "enabled",
    "replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.lag.max",
    "tasks.max",
    "emit.checkpoints.interval.seconds",
    "sync.group.offsets.enabled",
    "replication.policy.class",
    "replication.policy.separator",
    "topic.filter.class",
    "use.defaults.from",
    "offset-syncs.topic.location",
    "topics.blacklist",
    "mirrorflow.families",
    "mirrorflow.family.orders.topics",
    "mirrorflow.family.pay.topics",
    "mirrorflow.family.orders.schedule",
    "mirrorflow.schedule",
    "mirrorflow.delivery",
    "mirrorflow.unit.max.records",
    "mirrorflow.unit.max.bytes",
    "mirrorflow.poll.interval",
    "mirrorflow.progress.partitions",
    "mirrorflow.heartbeats.max.age",
    "mirrorflow.alerts.notifiers",
    "consumer.linger.ms",
    "producer.linger.ms",
    "producer.enable.idempotence",
    "consumer.isolation.level",
    "source.consumer.fetch.max.bytes",
    "admin.request.timeout.ms",
    "security.protocol",
    "bootstrap.servers",
    "sync.group.offset.enabled",
]
PREFIXES = ["", "", "", "A->B.", "A->B.", "A->B.", "B->A.", "A.", "C->A.", "A->A.", "X->B.", "A->", "A→B."]
REGEXES = [
    "orders\\\\..*",
    ".*",
    "*",
    "(a|b",
    "[a-z&&[^x]]",
    "\\\\p{InGreek}",
    "a{99999999999}",
    "a{" + "9" * 5000 + "}",
    "(?<n>x)\\\\k<n>",
    "(?i)pay.*",
    ".*a.{16}",
    "\\\\Qa.b\\\\E",
    "é+",
]
REFERENCES = [
    "${env:HOME}",
    "${env:MIRRORFLOW_FUZZ_UNSET}",
    "${env:",
    "${:x}",
    "${file:}",
    "${dir:/tmp}",
    "${unknown:x}",
    "${env:${env:X}}",
    "${NAME}",
    "${}",
    "${env:}",
    "${file:/nonexistent:k}",
    "${dir:/dev:zero}",
    "${dir:/:..}",
    "${file:PROVIDED:pw}",
    "${file:PROVIDED:missing}",
    "${file:LATIN1:pw}",
    "${dir:DIR:pw}",
    "${dir:DIR:latin1}",
]
NUMBERS = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.sampled_from(["0", "-1", "32767", "32768", "2147483647", "2147483648", "9" * 5000, "1_000", "٣", "+5", "0x10"]),
)
WORDS = st.sampled_from(
    ["true", "false", "TRUE", "maybe", "", "5m", "0s", "99999999999999d", "*/2 * * * *", "99 * * * *", "@hourly"]
    + ["none", "exactly-once", "at-least-once", "orders, pay", "default", "com.example.X", "a.b.C", "target"]
)
TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from("\\${}:=#!\t\u2028\x00"),
    max_size=40,
)
NESTED = st.integers(min_value=1, max_value=6000).map(lambda n: "(" * n + "a" + ")" * n)
REGEX_TEXT = st.text(alphabet="()[]{}*+?|.^$\\-,&:!<>=#QEpPdDwWsSbBzZkxuc0123456789aé ", max_size=30)
REGEX_VALUES = st.one_of(NESTED, REGEX_TEXT, st.sampled_from(REGEXES), st.lists(REGEX_TEXT).map(", ".join))
VALUES = st.one_of(NUMBERS, WORDS, TEXT, REGEX_VALUES, st.sampled_from(REFERENCES))
REGEX_KEYS = [k for k in SETTINGS if k.endswith(("topics", "exclude", "groups", "blacklist"))]
NUMBER_KEYS = [
    k for k in SETTINGS if k.endswith(("factor", ".max", "seconds", "records", "bytes", "partitions", ".ms"))
]
SEPARATORS = st.sampled_from([" = ", "=", ":", " : ", " ", "\t", "  =  "])


@st.composite
def entry_line(draw: st.DrawFn) -> str:
    """One logical entry, sometimes escaped or continued over several physical lines."""
    kind = draw(st.sampled_from(["regex", "number", "any", "any"]))
    if kind == "regex":  # regexes where regexes are read, so the translator and the overlap check see them
        setting, value = draw(st.sampled_from(REGEX_KEYS)), draw(REGEX_VALUES)
    elif kind == "number":
        setting, value = draw(st.sampled_from(NUMBER_KEYS)), draw(NUMBERS)
    else:
        setting, value = draw(st.sampled_from(SETTINGS) | TEXT), draw(VALUES)
    key = draw(st.sampled_from(PREFIXES)) + setting
    if draw(st.booleans()) and len(value) > 2:
        cut = draw(st.integers(min_value=1, max_value=len(value) - 1))
        value = value[:cut] + "\\\n    " + value[cut:]
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        value += draw(st.sampled_from(["\\u00e9", "\\uZZ", "\\", "\\\\", "\\t", "\\ud800"]))
    return key.replace(" ", "\\ ") + draw(SEPARATORS) + value


LINES = st.one_of(
    entry_line(),
    entry_line(),
    entry_line(),
    st.sampled_from(["", "# comment \\", "! bang", "   ", "\\", "=", "==", ":x"]),
)


@st.composite
def properties_file(draw: st.DrawFn) -> bytes:
    """A file as bytes: mostly UTF-8, sometimes with a stray Latin-1 byte or a lone surrogate."""
    lines = (BASE if draw(st.integers(min_value=0, max_value=4)) else []) + draw(st.lists(LINES, max_size=12))
    lines = draw(st.permutations(lines)) if draw(st.booleans()) else lines
    text = draw(st.sampled_from(["\n", "\r\n", "\r"])).join(lines)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        at = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xe9", b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    return data


@pytest.fixture(scope="module")
def provided(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Files the provider references point at: good ones and ones that are not UTF-8."""
    root = tmp_path_factory.mktemp("providers")
    (root / "secrets.properties").write_text("pw = s3cret\n")
    (root / "latin1.properties").write_bytes(b"pw = caf\xe9\n")
    (root / "dir").mkdir()
    (root / "dir" / "pw").write_text("from-dir")
    (root / "dir" / "latin1").write_bytes(b"caf\xe9")
    return {
        "PROVIDED": str(root / "secrets.properties"),
        "LATIN1": str(root / "latin1.properties"),
        "DIR": str(root / "dir"),
        "CONFIG": str(root / "mm2.properties"),
    }


def assert_loads_or_cites_lines(path: Path) -> None:
    """The property: a config, or a ConfigError whose every error is one line starting ``path:LINE:``."""
    try:
        config = load_config(path)
    except ConfigError as exc:
        errors = [str(p) for p in exc.problems if p.severity == "error"]
        assert errors, "a ConfigError without errors"
        cited = re.compile(re.escape(str(path)) + r":[1-9][0-9]*: error: ")
        for error in errors:
            assert cited.match(error), error
            assert "\n" not in error and "\r" not in error, error
            error.encode("utf-8")  # printable: no lone surrogate
        return
    assert isinstance(config, MirrorConfig)
    for flow in config.enabled_flows():
        assert [f.name for f in flow.families][-1] == "default"
        flow.get_int("replication.factor")
    for warning in config.warnings:
        assert "\n" not in warning
        warning.encode("utf-8")


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=properties_file())
def test_any_file_loads_or_fails_with_file_and_line(data: bytes, provided: dict[str, str]) -> None:
    for name, path in provided.items():
        data = data.replace(name.encode(), path.encode())
    path = Path(provided["CONFIG"])
    path.write_bytes(data)
    assert_loads_or_cites_lines(path)


# -- the cases once reported, explicitly ---------------------------------------------------------------


def load_errors(tmp_path: Path, text: str | bytes) -> list[str]:
    path = tmp_path / "mm2.properties"
    if isinstance(text, str):
        path.write_text("\n".join(BASE) + "\n" + text)
    else:
        path.write_bytes(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return [str(p) for p in err.value.problems if p.severity == "error"]


def test_a_huge_deeply_nested_regex_is_an_error_at_its_line(tmp_path: Path) -> None:
    nested = "(" * 5000 + "a" + ")" * 5000
    errors = load_errors(
        tmp_path, f"A->B.topics = {nested}\nA->B.mirrorflow.families = f\nA->B.mirrorflow.family.f.topics = {nested}\n"
    )
    assert any(e.startswith(f"{tmp_path / 'mm2.properties'}:6: error: A->B.topics: bad regex") for e in errors)
    assert any(":8: error: A->B.mirrorflow.family.f.topics: bad regex" in e for e in errors)
    assert all("nested more than 100 deep" in e and len(e) < 1000 for e in errors)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("${env:", "malformed config provider reference '${env:'"),
        ("${:x}", "no provider in ${:x}"),
        ("${file:}", "the file provider needs a path and a key"),
        ("${dir:/path}", "the dir provider needs a directory and a file name"),
        ("${unknown:x}", "unknown config provider 'unknown'"),
        ("${env:${env:X}}", "nested config provider references are not resolved"),
        ("${env:}", "no variable named"),
        ("${dir:/:..}", "'..' is not the name of a file in /"),
    ],
)
def test_malformed_provider_references_are_errors_at_their_line(tmp_path: Path, reference: str, message: str) -> None:
    errors = load_errors(tmp_path, f"B.ssl.key.password = {reference}\n")
    assert any(e.startswith(f"{tmp_path / 'mm2.properties'}:6: error: B.ssl.key.password: ") for e in errors), errors
    assert any(message in e for e in errors), errors


def test_a_file_behind_dir_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "pw").write_bytes(b"ok\nnot \xff utf-8")
    (tmp_path / "s.properties").write_bytes(b"a = 1\npw = caf\xe9\n")
    errors = load_errors(
        tmp_path,
        f"B.ssl.key.password = ${{dir:{secrets}:pw}}\nA.ssl.key.password = ${{file:{tmp_path}/s.properties:pw}}\n",
    )
    assert any(
        ":6: error: B.ssl.key.password: cannot resolve" in e and f"{secrets / 'pw'}:2: not UTF-8" in e for e in errors
    ), errors
    assert any(":7: error: A.ssl.key.password" in e and f"{tmp_path}/s.properties:2: not UTF-8" in e for e in errors)
    assert not any("caf" in e for e in errors)  # nothing of a secrets file is quoted


def test_a_config_file_that_is_not_utf8_is_an_error_at_the_line(tmp_path: Path) -> None:
    errors = load_errors(tmp_path, b"clusters = A, B\n# r\xe9plication\nA.bootstrap.servers = a:1\n")
    (error,) = errors
    assert error.startswith(f"{tmp_path / 'mm2.properties'}:2: error: not UTF-8: byte 0xe9 at offset 19 (column 4)")
    assert "\\u00e9" in error


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("replication.factor = 99999999999999999999", "'99999999999999999999' is above the maximum 32767"),
        ("A->B.replication.factor = 32768", "above the maximum 32767"),
        ("checkpoints.topic.replication.factor = 0", "a replication factor of 0 is not possible"),
        ("offset.storage.replication.factor = -2", "below the minimum -1"),
        ("mirrorflow.progress.partitions = 2147483648", "above the maximum 2147483647"),
        ("mirrorflow.unit.max.records = 0", "below the minimum 1"),
        ("mirrorflow.unit.max.bytes = 9223372036854775808", "above the maximum 9223372036854775807"),
        ("tasks.max = 1_000", "is not an integer"),
        ("emit.checkpoints.interval.seconds = 99999999999", "above the maximum 2147483647"),
        ("mirrorflow.poll.interval = 99999999999d", "is too long"),
        ("mirrorflow.heartbeats.max.age = 0s", "must be longer than zero"),
        ("mirrorflow.schedule = 99 * * * *", "not a valid cron expression"),
        ("A->B.producer.linger.ms = 900001", "above the maximum 900000"),
        ("A.consumer.session.timeout.ms = -5", "below the minimum 1"),
        ("consumer.fetch.wait.max.ms = 1e3", "is not an integer"),
        ("A->B.source.admin.some.timeout.ms = 2147483648", "above the maximum 2147483647"),
        ("B.producer.enable.idempotence = maybe", "is not a boolean"),
        ("A->B.sync.group.offsets.enabled = yes", "is not a boolean"),
        ("A.consumer.isolation.level = committed", "is not one of read_committed, read_uncommitted"),
    ],
)
def test_values_that_reach_clients_and_admin_calls_are_range_checked(tmp_path: Path, line: str, message: str) -> None:
    errors = load_errors(tmp_path, line + "\n")
    key = line.split(" = ", 1)[0]
    assert any(f":6: error: {key}: " in e and message in e for e in errors), errors
