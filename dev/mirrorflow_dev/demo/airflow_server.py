"""A local ``airflow standalone`` for the demo and end-to-end tests, and a small client for its REST API v2.

Why this exists: the demo and the end-to-end tests need a real Airflow (scheduler, DAG processor,
triggerer, API server) running this checkout's DAGs, started in the background and stopped again
without leaving a scheduler or a Spark job behind, and they need to unpause and trigger DAGs and wait
for runs.  The server runs in its own session, recorded in ``<home>/pid``; stopping signals every
process group of that session (Airflow puts each task process in a group of its own), never anything
found by name.  The client uses only the standard library; the bearer token and the password are
never logged or put into error messages.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mirrorflow.config.overrides import ENV_VAR as OVERRIDES_ENV
from mirrorflow.processes import SessionProcess, port_is_free, port_owner
from mirrorflow_dev.demo.airflow_env import API_HOST, admin_login, airflow_environment

__all__ = ["AirflowApiError", "AirflowServer", "AirflowServerError", "AirflowStartError", "health_problem"]

HEALTH_PATH = "/api/v2/monitor/health"
FINISHED_STATES = ("success", "failed")
#: The components ``/api/v2/monitor/health`` reports; the first two are required for a healthy answer.
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")

_START_MARKER = "=== mirrorflow: starting airflow standalone"
_LOG_TAIL_LINES = 25
_POLL_SECONDS = 1.0


class AirflowServerError(RuntimeError):
    """The Airflow server could not be started, reached or used; the message is meant for a person."""


class AirflowStartError(AirflowServerError):
    """Airflow did not become healthy; ``unhealthy`` names the components (``api_server`` if it never answered)."""

    def __init__(self, message: str, unhealthy: list[str]) -> None:
        super().__init__(message)
        self.unhealthy = unhealthy


class AirflowApiError(AirflowServerError):
    """The REST API answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def health_problem(status: int | None, body: Any) -> tuple[list[str], str] | None:
    """None when the health answer says every component is healthy; else (unhealthy components, a sentence).

    ``status`` None: the API server did not answer at all (not listening yet, or crashed).
    """
    if status is None:
        return ["api_server"], "the API server did not answer"
    if status != 200 or not isinstance(body, Mapping):
        return ["api_server"], f"the API server answered HTTP {status}: {_detail(body)}"
    reported = {name: v for name, v in body.items() if isinstance(v, Mapping)}
    names = [n for n in HEALTH_COMPONENTS if n in reported] + sorted(set(reported) - set(HEALTH_COMPONENTS))
    bad = [n for n in names if reported[n].get("status") != "healthy"]
    bad += [n for n in ("metadatabase", "scheduler") if n not in reported]
    if not bad:
        return None
    return bad, "not healthy: " + ", ".join(f"{n} ({_component_state(reported.get(n))})" for n in bad)


def _component_state(component: Mapping[str, Any] | None) -> str:
    """``unhealthy, last heartbeat 2026-...`` or ``not reported`` for one component of the health answer."""
    if component is None:
        return "not reported"
    state = str(component.get("status") or "no status")
    beats = [str(v) for k, v in component.items() if k.startswith("latest_") and v]
    return f"{state}, last heartbeat {beats[0]}" if beats else f"{state}, no heartbeat yet"


def _detail(body: Any) -> str:
    """The error text of an API answer (FastAPI puts it in ``detail``)."""
    if isinstance(body, Mapping) and "detail" in body:
        return json.dumps(body["detail"]) if not isinstance(body["detail"], str) else body["detail"]
    return str(body)[:300]


class AirflowServer:
    """``airflow standalone`` for one Airflow home, bound to 127.0.0.1:``api_port``.

    Files under ``home``: ``pid`` (JSON: pid, pgid, start time, port), ``standalone.log`` (all
    components' output, appended per start), Airflow's own files (``airflow.db`` when on SQLite,
    ``logs/``), and the secrets written by :func:`airflow_environment`.  ``database_url``: the metadata
    database (the demo's PostgreSQL); None for SQLite under ``home``.
    """

    def __init__(
        self,
        home: Path,
        api_port: int,
        config_path: Path,
        spark_url: str | None = None,
        *,
        database_url: str | None = None,
        settings: str | None = None,
    ) -> None:
        self.home = Path(home).absolute()
        self.settings = settings  # MIRRORFLOW_CONFIG_OVERRIDES of every Airflow process (the demo's alert receiver)
        self.api_port = api_port
        self.config_path = Path(config_path).absolute()
        self.spark_url = spark_url  # the Spark Connect server of the replicate tasks (else local spark-submit)
        self.database_url = database_url  # contains a password: never printed
        self._process = self.session(self.home)
        self._token: str | None = None

    @staticmethod
    def session(home: Path) -> SessionProcess:
        """The recorded session of the server of ``home`` (its processes carry AIRFLOW_HOME=home)."""
        home = Path(home).absolute()
        return SessionProcess(home / "pid", home / "standalone.log", owner_env=("AIRFLOW_HOME", str(home)))

    @classmethod
    def recorded_port(cls, home: Path) -> int | None:
        """The API port of the server of ``home`` if it is running, else None."""
        record = cls.session(home).record()
        return record.port if record is not None else None

    @property
    def url(self) -> str:
        return f"http://{API_HOST}:{self.api_port}"

    @property
    def log_file(self) -> Path:
        return self._process.log_file

    @property
    def pid(self) -> int | None:
        record = self._process.record()
        return record.pid if record is not None else None

    # -- lifecycle ---------------------------------------------------------------

    def running(self) -> bool:
        """True while a process of the recorded session is ours and alive."""
        return self._process.running()

    def start(self, timeout: float = 300) -> float:
        """Start the server (unless it runs already) and wait until it is healthy; return the seconds waited.

        On failure (AirflowStartError names the components not healthy and the log to read), a server this
        call launched is stopped again and the message says so; one that ran before is left running.
        """
        t0 = time.monotonic()
        deadline = t0 + timeout
        record = self._process.record()
        if record is not None:
            if record.port != self.api_port:
                raise AirflowServerError(
                    f"Airflow of {self.home} already runs on port {record.port} (pid {record.pid}), "
                    f"not on {self.api_port}; stop it first."
                )
        else:
            self._launch()
        try:
            self._wait_healthy(t0, deadline)
        except BaseException as exc:
            if record is not None:
                raise
            detail = self.stop(timeout=30)
            if isinstance(exc, AirflowStartError):
                stopped = f"Stopped the airflow standalone this start began ({detail})."
                raise AirflowStartError(f"{exc}\n{stopped}", exc.unhealthy) from None
            raise
        return time.monotonic() - t0

    def _launch(self) -> None:
        if not port_is_free(API_HOST, self.api_port):
            owner = port_owner(self.api_port)
            raise AirflowServerError(
                f"cannot start Airflow: port {self.api_port} on {API_HOST} is in use by {owner or 'another process'}"
            )
        airflow = Path(sys.executable).parent / "airflow"
        if not airflow.exists():
            raise AirflowServerError(f"{airflow} not found: run `make install`")
        env = airflow_environment(
            self.home,
            api_port=self.api_port,
            config_path=self.config_path,
            spark_url=self.spark_url,
            database_url=self.database_url,
        )
        if self.settings:
            env[OVERRIDES_ENV] = self.settings
        self._token = None
        self._process.start(
            [str(airflow), "standalone"],
            env=env,
            cwd=self.home,
            port=self.api_port,
            banner=f"{_START_MARKER} on {self.url} at {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
        )

    def _wait_healthy(self, t0: float, deadline: float) -> None:
        while True:
            if not self._process.leader_alive():
                raise AirflowStartError(
                    f"airflow standalone exited during startup.\n{self._log_hint()}", ["airflow standalone"]
                )
            problem = health_problem(*self.health())
            if problem is None:
                return
            if time.monotonic() >= deadline:
                unhealthy, sentence = problem
                raise AirflowStartError(
                    f"Airflow at {self.url} was not healthy after {time.monotonic() - t0:.0f} s: {sentence} "
                    f"({self.url}{HEALTH_PATH}).\n{self._log_hint()}",
                    unhealthy,
                )
            time.sleep(_POLL_SECONDS)

    def _log_hint(self) -> str:
        return (
            f"Read {self.log_file} (every Airflow component writes there); its last lines:\n"
            f"{self._process.tail(_LOG_TAIL_LINES, marker=_START_MARKER)}"
        )

    def stop(self, timeout: float = 60) -> str:
        """Stop every process of the recorded session (TERM, then KILL after ``timeout``); a detail line."""
        self._token = None
        return self._process.stop(timeout=timeout)

    def health(self) -> tuple[int | None, Any]:
        """(HTTP status, JSON body) of the health endpoint; (None, None) when the API server does not answer."""
        try:
            return self._http("GET", HEALTH_PATH, timeout=5)
        except AirflowServerError:
            return None, None

    def healthy(self) -> bool:
        """True when the API answers and every component it reports (database, scheduler, ...) is healthy."""
        return health_problem(*self.health()) is None

    # -- REST API v2 ---------------------------------------------------------------

    def _http(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, timeout: float = 30
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, _parse(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _parse(exc.read())
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AirflowServerError(f"no answer from Airflow at {self.url}: {reason}") from None

    def token(self) -> str:
        """A bearer token for the admin user (POST /auth/token; Airflow answers 201)."""
        user, password = admin_login(self.home)
        status, body = self._http("POST", "/auth/token", {"username": user, "password": password})
        if status not in (200, 201) or not isinstance(body, Mapping) or "access_token" not in body:
            raise AirflowApiError(status, f"login as '{user}' at {self.url}/auth/token failed: HTTP {status}")
        return str(body["access_token"])

    def request(self, method: str, path: str, json: Any = None) -> Any:
        """Call the API as the admin user; the parsed JSON answer, or AirflowApiError for a 4xx/5xx."""
        for attempt in (1, 2):
            if self._token is None:
                self._token = self.token()
            status, body = self._http(method, path, json, token=self._token)
            if status == 401 and attempt == 1:  # expired token: log in again once
                self._token = None
                continue
            if status >= 400:
                raise AirflowApiError(status, f"{method} {path}: HTTP {status}: {_detail(body)}")
            return body
        raise AssertionError("unreachable")

    def import_errors(self) -> list[str]:
        """Airflow's DAG import errors, one line each: file and the last line of the error."""
        body = self.request("GET", "/api/v2/importErrors?limit=20")
        out = []
        for item in body.get("import_errors", []):
            lines = [ln for ln in str(item.get("stack_trace", "")).splitlines() if ln.strip()]
            out.append(f"{item.get('filename')}: {lines[-1] if lines else '?'}")
        return out

    def dag_exists(self, dag_id: str) -> bool:
        try:
            self.request("GET", f"/api/v2/dags/{_q(dag_id)}")
        except AirflowApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def wait_for_dags(self, dag_ids: Iterable[str], timeout: float, *, settle: float | None = None) -> list[str]:
        """Wait until every DAG is known to the API; return them.

        With ``settle``, return the DAGs found so far once ``settle`` seconds passed after the first
        one appeared (DAGs of one file appear together; a missing one is then a real problem).
        Raises AirflowServerError naming the missing DAGs and Airflow's import errors on timeout.
        """
        wanted = list(dict.fromkeys(dag_ids))
        found: list[str] = []
        deadline = time.monotonic() + timeout
        first_seen: float | None = None
        while True:
            found += [d for d in wanted if d not in found and self.dag_exists(d)]
            now = time.monotonic()
            if found and first_seen is None:
                first_seen = now
            if len(found) == len(wanted):
                return [d for d in wanted if d in found]
            if settle is not None and first_seen is not None and now - first_seen >= settle:
                return [d for d in wanted if d in found]
            if now >= deadline:
                raise AirflowServerError(self.missing_dags_message(wanted, found, timeout))
            time.sleep(2 * _POLL_SECONDS)

    def missing_dags_message(self, wanted: list[str], found: list[str], timeout: float) -> str:
        """Which DAGs are missing after ``timeout`` seconds, and Airflow's import errors (why, usually)."""
        missing = [d for d in wanted if d not in found]
        try:
            errors = self.import_errors()
        except AirflowServerError as exc:
            errors = [f"(could not read import errors: {exc})"]
        lines = [f"DAGs still unknown to Airflow after waiting {timeout:.0f} s: {', '.join(missing)}"]
        lines += ["Import errors:", *(f"  {e}" for e in errors)] if errors else ["No import errors reported."]
        return "\n".join(lines)

    def ensure_pool(self, name: str, slots: int, description: str) -> str:
        """Create the pool, or set its slots and description if it exists (idempotent); what was done."""
        body = {"name": name, "slots": slots, "description": description, "include_deferred": False}
        try:
            self.request("POST", "/api/v2/pools", body)
            return "created"
        except AirflowApiError as exc:
            if exc.status != 409:
                raise
        current = self.request("GET", f"/api/v2/pools/{_q(name)}")
        if current.get("slots") == slots and current.get("description") == description:
            return "unchanged"
        # The patch body names the pool "pool" (the create body: "name"), and Airflow validates it whole.
        patch = {"pool": name, "slots": slots, "description": description, "include_deferred": False}
        self.request("PATCH", f"/api/v2/pools/{_q(name)}", patch)
        return "updated"

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{_q(dag_id)}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Start a run now (no logical date); its run id."""
        body = self.request(
            "POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", {"logical_date": None, "conf": dict(conf or {})}
        )
        return str(body["dag_run_id"])

    def run_count(self, dag_id: str) -> int:
        """How many runs the DAG has (any state)."""
        body = self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns?limit=1")
        return int(body.get("total_entries", 0))

    def run_state(self, dag_id: str, run_id: str) -> str:
        body = self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")
        return str(body["state"])

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        """Wait until the run finished; its final state (``success`` or ``failed``)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.run_state(dag_id, run_id)
            if state in FINISHED_STATES:
                return state
            if time.monotonic() >= deadline:
                raise AirflowServerError(f"run {run_id} of {dag_id} still '{state}' after {timeout:.0f} s")
            time.sleep(2 * _POLL_SECONDS)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")
