"""``demo up`` when Airflow does not become healthy: how long it waits, what it says, what it stops.

Why these matter: a restart that failed six times out of six said only "did not report healthy in time",
with a fixed wait, and left the clusters and the traffic running without Airflow.  The wait is now
configurable, the error names the component that is not healthy and the log to read, and a failed start
stops what it started.  Checked here with a stand-in health endpoint, without starting Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest

from mirrorflow_dev import EXAMPLE_CONFIG as DEFAULT_CONFIG
from mirrorflow_dev.demo import stack
from mirrorflow_dev.demo.airflow_server import AirflowServer, AirflowStartError, health_problem
from mirrorflow_dev.demo.postgres import PostgresServer
from mirrorflow_dev.devcluster import free_port
from mirrorflow_dev.loopback_http import serving

HEALTHY = {
    "metadatabase": {"status": "healthy"},
    "scheduler": {"status": "healthy", "latest_scheduler_heartbeat": "2026-11-23T02:00:00+00:00"},
    "triggerer": {"status": "healthy", "latest_triggerer_heartbeat": "2026-11-23T02:00:00+00:00"},
    "dag_processor": {"status": "healthy", "latest_dag_processor_heartbeat": "2026-11-23T02:00:00+00:00"},
}


def test_health_names_the_components_not_healthy() -> None:
    assert health_problem(200, HEALTHY) is None
    body = {**HEALTHY, "scheduler": {"status": "unhealthy", "latest_scheduler_heartbeat": "2026-11-23T01:50:00"}}
    body["dag_processor"] = {"status": None, "latest_dag_processor_heartbeat": None}
    unhealthy, sentence = health_problem(200, body) or ([], "")
    assert unhealthy == ["scheduler", "dag_processor"]
    assert sentence == (
        "not healthy: scheduler (unhealthy, last heartbeat 2026-11-23T01:50:00), dag_processor (no status, "
        "no heartbeat yet)"
    )


def test_health_without_an_answer_or_without_the_scheduler() -> None:
    assert health_problem(None, None) == (["api_server"], "the API server did not answer")
    assert health_problem(503, {"detail": "starting"}) == (["api_server"], "the API server answered HTTP 503: starting")
    unhealthy, _ = health_problem(200, {"metadatabase": {"status": "healthy"}}) or ([], "")
    assert unhealthy == ["scheduler"]


class _Health(BaseHTTPRequestHandler):
    body: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        data = json.dumps(type(self).body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def health_endpoint() -> Iterator[int]:
    """A stand-in /api/v2/monitor/health on a free port: the triggerer is not healthy."""
    _Health.body = {**HEALTHY, "triggerer": {"status": "unhealthy", "latest_triggerer_heartbeat": None}}
    with serving(_Health) as base:
        yield int(urlsplit(base).port or 0)


def _pretend_started(server: AirflowServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Airflow "launched" (nothing is started) and alive; returns the record of stop calls."""
    stops: list[str] = []
    monkeypatch.setattr(server, "_launch", lambda: None)
    monkeypatch.setattr(server._process, "leader_alive", lambda: True)
    monkeypatch.setattr(server, "stop", lambda timeout=60: stops.append("stop") or "stopped in 0.1 s")
    return stops


def test_the_start_timeout_error_names_the_component_and_the_log(
    tmp_path: Path, health_endpoint: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = AirflowServer(tmp_path / "airflow", health_endpoint, DEFAULT_CONFIG)
    stops = _pretend_started(server, monkeypatch)
    with pytest.raises(AirflowStartError) as caught:
        server.start(timeout=1.5)
    message = str(caught.value)
    assert caught.value.unhealthy == ["triggerer"]
    assert "not healthy: triggerer (unhealthy, no heartbeat yet)" in message
    assert f"Read {server.log_file}" in message
    assert "Stopped the airflow standalone this start began (stopped in 0.1 s)" in message
    assert stops == ["stop"]


def test_no_answer_at_all_says_the_api_server_did_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = AirflowServer(tmp_path / "airflow", free_port(), DEFAULT_CONFIG)
    _pretend_started(server, monkeypatch)
    with pytest.raises(AirflowStartError, match="the API server did not answer") as caught:
        server.start(timeout=1)
    assert caught.value.unhealthy == ["api_server"]


def test_the_demo_adds_the_database_log_and_the_option(tmp_path: Path) -> None:
    database = PostgresServer(tmp_path / "postgres")
    error = AirflowStartError("Airflow at ... was not healthy after 300 s: not healthy: metadatabase", ["metadatabase"])
    hint = stack._airflow_start_hint(error, database)
    assert str(database.log_file) in hint
    assert "--start-timeout 600" in hint and "MIRRORFLOW_DEMO_START_TIMEOUT=600" in hint
    other = stack._airflow_start_hint(AirflowStartError("x", ["scheduler"]), database)
    assert str(database.log_file) not in other


def test_start_timeout_option_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stack.START_TIMEOUT_ENV, raising=False)
    assert stack.start_timeout() == 300
    monkeypatch.setenv(stack.START_TIMEOUT_ENV, "450")
    assert stack.start_timeout() == 450
    assert stack.start_timeout(90) == 90  # the CLI option wins
    monkeypatch.setenv(stack.START_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match="MIRRORFLOW_DEMO_START_TIMEOUT must be a number of seconds"):
        stack.start_timeout()
    with pytest.raises(ValueError, match="--start-timeout must be a positive number"):
        stack.start_timeout(0)


def test_the_cli_option_reaches_demo_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorflow import cli

    seen: list[float | None] = []
    monkeypatch.setattr(stack, "demo_up", lambda start_timeout_s=None: seen.append(start_timeout_s) or 0)
    assert cli.main(["demo", "up", "--start-timeout", "42"]) == 0
    assert seen == [42.0]


def test_a_failed_start_stops_what_it_started_newest_first() -> None:
    started = stack.StartedHere()
    order: list[str] = []
    started.add("Kafka clusters primary", lambda: order.append("kafka") or "stopped")
    started.add("PostgreSQL", lambda: order.append("postgres") or "stopped in 0.4 s")

    def refuse() -> str:
        raise OSError("permission denied")

    started.add("Airflow", refuse)
    lines: list[str] = []
    started.undo(lines.append)
    assert order == ["postgres", "kafka"]
    assert lines == [
        "  Airflow: could not stop: permission denied",
        "  PostgreSQL: stopped in 0.4 s",
        "  Kafka clusters primary: stopped",
    ]
    assert not started


def test_spark_pool_has_a_slot_per_two_cpus() -> None:
    assert [stack.spark_pool_slots(n) for n in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 8]
