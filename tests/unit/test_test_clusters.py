"""MIRRORFLOW_TEST_CLUSTERS: how the suite is pointed at existing clusters, and what it skips there.

Why test the test harness: a user runs the suite against their own Kafka before trusting mirrorflow with
it. A typo in the variable must stop the session with the variable and the bad part named (not fall back to
embedded brokers, nor write to a cluster the user did not mean), and the tests that stop a broker must be
skipped there, saying why, rather than fail or, worse, try.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import TEST_CLUSTERS_VARIABLE, external_test_clusters, parse_test_clusters

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


def test_two_clusters_by_name_in_any_order() -> None:
    assert parse_test_clusters("primary=127.0.0.1:9092,backup=kafka-b.example:19092") == {
        "primary": "127.0.0.1:9092",
        "backup": "kafka-b.example:19092",
    }
    assert parse_test_clusters(" backup = b:2 , primary = a:1 ") == {"primary": "a:1", "backup": "b:2"}


def test_a_cluster_of_several_brokers_lists_them_after_its_name() -> None:
    assert parse_test_clusters("primary=a1:9092,a2:9092,backup=b1:9092,b2:9092,b3:9092") == {
        "primary": "a1:9092,a2:9092",
        "backup": "b1:9092,b2:9092,b3:9092",
    }


@pytest.mark.parametrize(
    ("value", "bad_part", "why"),
    [
        ("primary=a:1", "primary=a:1", "no backup cluster"),
        ("backup=b:1", "backup=b:1", "no primary cluster"),
        ("primary=a:1,backup=b:1,dr=c:1", "dr=c:1", "unknown cluster name 'dr'"),
        ("primary=a:1,primary=c:1,backup=b:1", "primary=c:1", "cluster 'primary' given twice"),
        ("primary=a,backup=b:1", "'a'", "not HOST:PORT"),
        ("primary=:9092,backup=b:1", "':9092'", "not HOST:PORT"),
        ("primary=a:port,backup=b:1", "'a:port'", "port 'port' is not a number"),
        ("primary=a:70000,backup=b:1", "'a:70000'", "port '70000' is not a number from 1 to 65535"),
        ("primary=a:1,,backup=b:1", "''", "empty item"),
        ("a:1,primary=a:2,backup=b:1", "'a:1'", "a broker before any cluster name"),
        ("primary=a:1,backup=a:1", "'a:1'", "the same broker in primary and backup"),
        ("primary=http://a:1,backup=b:1", "'http://a:1'", "not HOST:PORT"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_bad_part(value: str, bad_part: str, why: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_test_clusters(value)
    message = str(error.value)
    assert message.startswith(f"{TEST_CLUSTERS_VARIABLE}={value!r}: ")
    assert why in message and bad_part in message, message
    assert "primary=HOST:PORT,backup=HOST:PORT" in message  # and what is expected instead


def test_unset_or_blank_means_the_embedded_brokers() -> None:
    assert external_test_clusters({}) is None
    assert external_test_clusters({TEST_CLUSTERS_VARIABLE: "  "}) is None
    assert external_test_clusters({TEST_CLUSTERS_VARIABLE: "primary=a:1,backup=b:2"}) == {
        "primary": "a:1",
        "backup": "b:2",
    }


INNER_TESTS = """
import pytest

@pytest.mark.stops_brokers
def test_stops_a_broker():
    pass

@pytest.mark.embedded_brokers
def test_the_embedded_brokers():
    pass

@pytest.mark.fixed_names
def test_the_demo_topics():
    pass

def test_anything_else():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """A session with this repository's conftest hooks (as ``tests/conftest.py`` registers them) and four tests.

    Run in a subprocess: the hooks configure Airflow's environment, which must not leak into this session.
    """
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems, pytest_configure  # noqa: F401\n")
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester


def run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str | None) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    if value is None:
        monkeypatch.delenv(TEST_CLUSTERS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(TEST_CLUSTERS_VARIABLE, value)
    return pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider", "--strict-markers")


def test_on_existing_clusters_broker_stopping_tests_are_skipped_with_the_reason(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_inner(inner, monkeypatch, "primary=127.0.0.1:1,backup=127.0.0.1:2")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(
        [
            (
                f"SKIPPED * {TEST_CLUSTERS_VARIABLE} is set: stops, restarts or freezes a broker, and the clusters "
                f"{TEST_CLUSTERS_VARIABLE} names are not the suite's to stop"
            ),
            f"SKIPPED * {TEST_CLUSTERS_VARIABLE} is set: tests the embedded noida-db brokers themselves*",
            f"SKIPPED * {TEST_CLUSTERS_VARIABLE} is set: writes topics or groups of fixed names*",
        ]
    )


def test_embedded_brokers_run_every_test(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The markers are registered (``--strict-markers`` passes) and skip nothing when the variable is unset."""
    run_inner(inner, monkeypatch, None).assert_outcomes(passed=4)


def test_a_bad_value_stops_the_session_before_any_test(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_inner(inner, monkeypatch, "primary=127.0.0.1:9092,backup=127.0.0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{TEST_CLUSTERS_VARIABLE}=*: not HOST:PORT in '127.0.0.1'*"])
    assert "passed" not in result.stdout.str()  # nothing ran
