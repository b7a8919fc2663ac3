"""The demo's Airflow on PostgreSQL, with real processes: it starts, stops and starts again, and the REST API
keeps working while a mirror run writes.

Why: on SQLite, triggering the failover DAG and unpausing DAGs returned HTTP 500 (``database is locked``)
while a mirror run wrote, and ``make demo`` after ``make demo-stop`` failed every time.  One start-stop-start
cycle of the stack's own ``airflow_up`` / ``airflow_down`` (PostgreSQL, Airflow, the Spark pool) is shared by
the tests of this module; its state lives in a throwaway directory (never the developer's ``.mirrorflow``)
and every process is stopped by its recorded PID at the end.
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.config import load_config
from mirrorflow.processes import session_members
from mirrorflow_dev.demo.airflow_env import admin_login
from mirrorflow_dev.demo.airflow_server import FINISHED_STATES, AirflowServer
from mirrorflow_dev.demo.postgres import DB_NAME, PostgresServer
from mirrorflow_dev.demo.stack import DemoPaths, StartedHere, airflow_down, airflow_up, spark_pool_slots
from mirrorflow_dev.devcluster import free_port
from tests.integration.test_airflow_e2e import write_config
from tests.kafka_helpers import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]

POOL = "mirrorflow_spark"
MIRROR = "mirror__primary__backup__busy"
FAILOVER = "failover__primary__backup"


@dataclass
class Cycle:
    """What the start-stop-start cycle saw, and the server left running for the other tests."""

    server: AirflowServer
    database: PostgresServer
    prefix: str
    lines: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # each airflow_up, PostgreSQL included
    left_after_stop: list[int] = field(default_factory=list)  # session members after airflow_down
    running_after_stop: tuple[bool, bool] = (True, True)  # (Airflow, PostgreSQL)
    config_file: Path | None = None


def _reachable_tmpdir() -> Path:
    """A private temporary directory the server's user can traverse (as root it runs as ``nobody``)."""
    root = Path(tempfile.mkdtemp(prefix="mirrorflow-demo-pg-"))
    root.chmod(0o711)
    return root


@pytest.fixture(scope="module")
def cycle(kafka_clusters: Any, spark_connect: str) -> Iterator[Cycle]:
    root = _reachable_tmpdir()
    paths = DemoPaths(root / "demo")
    prefix = f"pg{uuid.uuid4().hex[:6]}"
    config_file = write_config(
        root / "mm2.properties",
        kafka_clusters,
        prefix,
        family="busy",
        extra=f"mirrorflow.spark.pool = {POOL}\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "mirrorflow.alerts.lag.max.seconds = 60\n",  # the Replication page shows a partition over it in red
    )
    config = load_config(config_file)
    port = free_port()
    database = PostgresServer(paths.postgres_dir)
    result = Cycle(server=None, database=database, prefix=prefix, config_file=config_file)  # type: ignore[arg-type]
    lines = result.lines

    def stop_all() -> None:
        airflow_down(paths, lines.append)

    def up() -> AirflowServer:
        t0 = time.monotonic()
        server = airflow_up(
            paths, config_file, config, spark_connect, lines.append, StartedHere(), timeout=300, port=port
        )
        result.seconds.append(time.monotonic() - t0)
        return server

    atexit.register(stop_all)  # the session dying without teardown must not leave a server behind
    try:
        first = up()
        sessions = [first._process.record(), database._process.record()]
        stop_all()
        result.running_after_stop = (first.running(), database.running())
        result.left_after_stop = [pid for r in sessions if r is not None for pid in session_members(r.pgid)]
        result.server = up()
        yield result
    finally:
        stop_all()
        atexit.unregister(stop_all)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(900)
def test_airflow_on_postgresql_starts_stops_and_starts_again(cycle: Cycle) -> None:
    server, database = cycle.server, cycle.database
    report = "\n".join(cycle.lines)
    assert cycle.running_after_stop == (False, False), report
    assert cycle.left_after_stop == [], report  # every process of both sessions stopped
    assert server.healthy(), f"see {server.log_file}\n{report}"
    assert len(cycle.seconds) == 2
    print(f"airflow_up with PostgreSQL: first {cycle.seconds[0]:.1f} s, after a stop {cycle.seconds[1]:.1f} s")

    import psycopg2

    conn = psycopg2.connect(
        host="127.0.0.1", port=database.port, user="mirrorflow", password=database.password(), dbname=DB_NAME
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'dag_run'")
            assert cur.fetchone() == (1,)  # Airflow's schema lives in PostgreSQL ...
    finally:
        conn.close()
    assert not (server.home / "airflow.db").exists()  # ... and no SQLite file was made
    assert database.password() not in report  # the URL with the password is never printed

    pool = server.request("GET", f"/api/v2/pools/{POOL}")
    assert pool["slots"] == spark_pool_slots()
    assert any(f"Airflow pool {POOL}: {spark_pool_slots()} slot(s) (created)" in line for line in cycle.lines)
    assert any(f"Airflow pool {POOL}: {spark_pool_slots()} slot(s) (unchanged)" in line for line in cycle.lines)


def _task_state(server: AirflowServer, run_id: str, task_id: str) -> str | None:
    body = server.request("GET", f"/api/v2/dags/{MIRROR}/dagRuns/{run_id}/taskInstances/{task_id}")
    return body.get("state")


def _keep_producing(bootstrap: str, topic: str, stop: threading.Event) -> None:
    while not stop.is_set():
        produce(bootstrap, topic, [{"key": b"k%d" % i, "value": b"x" * 200} for i in range(200)])
        stop.wait(0.5)


@pytest.mark.timeout(600)
def test_unpause_and_trigger_failover_succeed_while_a_mirror_run_writes(cycle: Cycle, kafka_clusters: Any) -> None:
    server = cycle.server
    topic = create_topic(kafka_clusters.primary, f"{cycle.prefix}.busy", partitions=2)
    produce(kafka_clusters.primary, topic, [{"key": b"k%d" % i, "value": b"x" * 200} for i in range(5000)])
    companions = ["checkpoints__primary__backup", "heartbeats__primary__backup"]
    found = server.wait_for_dags([MIRROR, FAILOVER, *companions], timeout=180)
    assert MIRROR in found and FAILOVER in found

    server.unpause(MIRROR)
    run_id = server.trigger(MIRROR, {"topics": topic, "duration": "25s"})  # continuous: writes for 25 s
    stop = threading.Event()
    producer = threading.Thread(target=_keep_producing, args=(kafka_clusters.primary, topic, stop), daemon=True)
    producer.start()
    try:
        deadline = time.monotonic() + 180
        while _task_state(server, run_id, "replicate") != "running":
            assert time.monotonic() < deadline, f"replicate never ran; see {server.log_file}"
            assert server.run_state(MIRROR, run_id) not in FINISHED_STATES
            time.sleep(1)

        # While it writes: every call succeeds (an HTTP error raises AirflowApiError with its status).
        for dag_id in [FAILOVER, *companions, MIRROR]:
            server.unpause(dag_id)
        failover_run = server.trigger(FAILOVER, {"mode": "planned", "dry_run": True})
        for dag_id in [FAILOVER, *companions]:
            server.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": True})
            server.unpause(dag_id)
        assert _task_state(server, run_id, "replicate") == "running"  # the calls overlapped the writing
    finally:
        stop.set()
        producer.join(timeout=30)

    assert server.wait_for_run(MIRROR, run_id, timeout=300) == "success", f"see {server.home}/logs"
    assert server.wait_for_run(FAILOVER, failover_run, timeout=300) in FINISHED_STATES


# ------------------------------------------------------------------------------------ the Replication page

CHROMIUM = Path("/usr/bin/chromium")
PAGE_ROWS = "tr[data-topic='{topic}'][data-partition='{partition}']"


def _anonymous(server: AirflowServer, path: str, accept: str = "application/json") -> tuple[int, str]:
    """(status, Location header) of a request without any credential; redirects are not followed."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    request = urllib.request.Request(server.url + path, headers={"Accept": accept})
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as answer:
            return answer.status, answer.headers.get("Location", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Location", "")


def _metrics(server: AirflowServer) -> dict[tuple[str, str, str], float]:
    """``/mirrorflow/metrics`` with a bearer token, parsed by the Prometheus client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    request = urllib.request.Request(
        server.url + "/mirrorflow/metrics", headers={"Authorization": f"Bearer {server.token()}"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        text = answer.read().decode()
    return {
        (s.name, s.labels.get("topic", ""), s.labels.get("partition", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.timeout(600)
def test_the_replication_page_shows_what_mirrorflow_status_measures(cycle: Cycle, kafka_clusters: Any) -> None:
    """Records of known ages, never copied: the page (in Chromium, logged in through Airflow's form), the
    metrics endpoint and ``mirrorflow status --json`` agree; without a login the page and the data are refused."""
    server = cycle.server
    topic = create_topic(kafka_clusters.primary, f"{cycle.prefix}.page", partitions=2)
    now_ms = int(time.time() * 1000)
    produce(kafka_clusters.primary, topic, [{"value": b"a", "partition": 0, "timestamp": now_ms - 120_000}] * 7)
    produce(kafka_clusters.primary, topic, [{"value": b"b", "partition": 1, "timestamp": now_ms - 30_000}] * 3)

    assert _anonymous(server, "/mirrorflow/api/status")[0] == 401
    assert _anonymous(server, "/mirrorflow/metrics")[0] == 401
    status, location = _anonymous(server, "/mirrorflow/", accept="text/html")
    assert status == 303 and "/auth/login" in location  # a person is sent to Airflow's login

    cli = subprocess.run(
        [sys.executable, "-m", "mirrorflow.cli", "status", "--config", str(cycle.config_file), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        check=False,
    )
    measured_at = time.time()
    assert cli.returncode == 0, cli.stderr
    [flow] = json.loads(cli.stdout)["flows"]
    expected = {(p["topic"], p["partition"]): p for p in flow["partitions"] if p["topic"] == topic}
    assert {k: v["lag_records"] for k, v in expected.items()} == {(topic, 0): 7, (topic, 1): 3}

    deadline = time.monotonic() + 60  # the page's figures are cached for a few seconds: wait for this topic
    while True:
        samples = _metrics(server)
        if ("mirrorflow_partition_lag_records", topic, "0") in samples or time.monotonic() > deadline:
            break
        time.sleep(2)
    for partition in (0, 1):
        assert samples[("mirrorflow_partition_lag_records", topic, str(partition))] == 7 if partition == 0 else 3
        seconds = samples[("mirrorflow_partition_lag_seconds", topic, str(partition))]
        assert abs(seconds - expected[(topic, partition)]["lag_seconds"]) <= time.time() - measured_at + 12

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium): the in-browser part was not run")
    from mirrorflow_dev.docs.screenshots import Target, browser_context, login_with_form

    user, password = admin_login(server.home)
    with browser_context(str(CHROMIUM)) as context:
        page = context.new_page()
        login_with_form(page, Target(server.url, user, password))
        page.goto(f"{server.url}/plugin/replication", wait_until="networkidle")
        frame = page.frame_locator("iframe")
        for partition, records in ((0, 7), (1, 3)):
            row = frame.locator(PAGE_ROWS.format(topic=topic, partition=partition))
            row.wait_for(timeout=60_000)
            assert int(row.locator("td.lag-records").get_attribute("data-value") or "-1") == records
            shown = float(row.locator("td.lag-seconds").get_attribute("data-value") or "-1")
            assert abs(shown - expected[(topic, partition)]["lag_seconds"]) <= time.time() - measured_at + 12
        old = frame.locator(PAGE_ROWS.format(topic=topic, partition=0))
        assert "over" in (old.get_attribute("class") or "")  # 2 minutes behind, over the 60 s threshold: red
        assert page.get_by_role("link", name="Replication").count() >= 1  # the navigation entry
