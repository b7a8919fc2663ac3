"""``make demo`` / ``make demo-stop``: the whole demo stack, started and stopped in the right order.

Why this exists: a first-time user should see replication working after one command, and get back
a clean machine after another.  ``demo_up`` starts the two local Kafka clusters, creates the demo
topics and starts the demo traffic, starts the Spark Connect server, PostgreSQL (Airflow's metadata
database) and Airflow with the mirror DAGs, creates the Airflow pool of the Spark jobs, unpauses the DAGs
and triggers a first run of each, then prints where to look and how to log in.  ``demo_down`` stops what
the demo started, through recorded PIDs and process groups only.  Both are idempotent.

A ``demo up`` that fails stops again what that call started (newest first) and says so; what ran before
it keeps running.  So ``make demo`` after a failure or after ``make demo-stop`` starts from a clean slate.

State lives under ``$MIRRORFLOW_HOME/demo`` (default ``<repo>/.mirrorflow/demo``): ``airflow/``
(Airflow home, its log ``standalone.log``), ``postgres/`` (data, ``postgres.log``), ``traffic/`` (PID
file and ``traffic.log``) and ``state.json`` (which clusters the demo started).  The clusters keep theirs
under ``.../dev``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorflow.alerts import WEBHOOK_KEY
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, load_config, overrides
from mirrorflow.config.properties import Entry
from mirrorflow.processes import ProcessControlError, SessionProcess, file_lock, port_is_free, port_owner
from mirrorflow.replication import local_connect
from mirrorflow_dev import CHECKOUT
from mirrorflow_dev.demo.airflow_env import API_HOST, admin_login
from mirrorflow_dev.demo.airflow_server import AirflowServer, AirflowServerError, AirflowStartError
from mirrorflow_dev.demo.alert_sink import AlertSink, AlertSinkError, SinkEndpoint
from mirrorflow_dev.demo.postgres import PostgresError, PostgresServer
from mirrorflow_dev.demo.spark_standalone import spark_mode, standalone_down, standalone_up, web_ui
from mirrorflow_dev.demo.traffic import DEFAULT_RATE, DEMO_GROUPS, DEMO_TOPICS, ensure_topics
from mirrorflow_dev.devcluster import (
    DEFAULT_CLUSTERS,
    ClusterStatus,
    DevClusterError,
    DevClusters,
    free_port,
    state_root,
    wait_for_kafka,
)
from mirrorflow_dev.sparkcluster import SparkClusterError

__all__ = [
    "DemoPaths",
    "MirrorDag",
    "StartedHere",
    "airflow_down",
    "airflow_up",
    "demo_dags",
    "demo_down",
    "demo_paths",
    "demo_status",
    "demo_up",
    "spark_pool_slots",
    "start_timeout",
]

Out = Callable[[str], None]

PORT_ENV = "MIRRORFLOW_DEMO_PORT"
DEFAULT_PORT = 8080
#: How long ``demo up`` waits for Airflow to report healthy (``--start-timeout`` overrides both).  Generous:
#: a first start migrates the database, and a loaded 2-core machine once needed more than the 180 s it had.
START_TIMEOUT_ENV = "MIRRORFLOW_DEMO_START_TIMEOUT"
DEFAULT_START_TIMEOUT = 300.0
#: initdb (first start only) and the server's start; seconds on an idle machine.
POSTGRES_START_TIMEOUT = 120.0
#: The configuration key naming the Airflow pool of the replicate tasks (the demo creates that pool).
SPARK_POOL_KEY = "mirrorflow.spark.pool"
#: How long to wait for the mirror DAGs, and for the rest once the first one appeared.
DAG_TIMEOUT = 180.0
DAG_SETTLE = 30.0
#: After unpausing, how long to wait for the scheduler's own first run before triggering one.
FIRST_RUN_GRACE = 10.0

_TRAFFIC_OWNER_ENV = "MIRRORFLOW_DEMO_TRAFFIC"
_INCOMPLETE = "The demo is not complete. `make demo-stop` stops what started; `make demo` tries again."
_UNDONE = "The demo did not start. `make demo` tries again; `make demo-stop` stops anything left from earlier runs."

#: What a step of ``demo up`` may fail with; the message is shown as is.
_KAFKA_FAILURES = (KafkaException, TimeoutError)
_FAILURES = (
    DevClusterError,
    AirflowServerError,
    PostgresError,
    AlertSinkError,
    local_connect.LocalServerError,
    SparkClusterError,
    ProcessControlError,
    OSError,
    ValueError,
    *_KAFKA_FAILURES,
)


def _print(line: str = "") -> None:
    print(line, flush=True)


# --------------------------------------------------------------------------
# Where things are
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoPaths:
    """The demo's state directory and what lies in it."""

    root: Path

    @property
    def airflow_home(self) -> Path:
        return self.root / "airflow"

    @property
    def postgres_dir(self) -> Path:
        return self.root / "postgres"

    @property
    def traffic_dir(self) -> Path:
        return self.root / "traffic"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"


def demo_paths() -> DemoPaths:
    """``$MIRRORFLOW_HOME/demo``, else ``<repo>/.mirrorflow/demo``."""
    return DemoPaths((state_root() / "demo").absolute())


def config_path() -> Path:
    """``$MIRRORFLOW_CONFIG``, else the example configuration ``include/config/mm2.properties``."""
    return Path(os.environ.get("MIRRORFLOW_CONFIG") or CHECKOUT / "include" / "config" / "mm2.properties").absolute()


def _primary_bootstrap() -> str:
    return DEFAULT_CLUSTERS[0].bootstrap


def _postgres(paths: DemoPaths) -> PostgresServer:
    return PostgresServer(paths.postgres_dir)


def _traffic(paths: DemoPaths) -> SessionProcess:
    directory = paths.traffic_dir
    return SessionProcess(directory / "pid", directory / "traffic.log", owner_env=(_TRAFFIC_OWNER_ENV, str(directory)))


def _show(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (shorter to read and to paste)."""
    with suppress(ValueError):
        return str(path.relative_to(Path.cwd()))
    return str(path)


def _load_state(paths: DemoPaths) -> dict[str, list[str]]:
    try:
        raw = json.loads(paths.state_file.read_text())
        return {"clusters_started": [str(a) for a in raw.get("clusters_started", [])]}
    except (OSError, ValueError, AttributeError):
        return {"clusters_started": []}


def _save_state(paths: DemoPaths, state: dict[str, list[str]]) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.state_file.write_text(json.dumps(state, indent=2) + "\n")


# --------------------------------------------------------------------------
# What is replicated
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class MirrorDag:
    """One mirror DAG of the configuration, with the demo topics it copies (source -> remote name)."""

    dag_id: str
    flow: FlowConfig
    family: str
    schedule: str
    topics: tuple[tuple[str, str], ...]


def _schedule_text(kind: str, text: str) -> str:
    return {"interval": f"every {text}", "none": "manual runs only"}.get(kind, text)


def demo_dags(config: MirrorConfig, topics: Iterable[str] = tuple(t.name for t in DEMO_TOPICS)) -> list[MirrorDag]:
    """``mirror__<src>__<tgt>__<family>`` for every enabled flow and family, with the demo topics each copies."""
    topics = list(topics)
    out = []
    for flow in config.enabled_flows():
        for family in flow.families:
            mine = tuple(
                (t, flow.policy.format_remote_topic(flow.source, t))
                for t in topics
                if flow.should_replicate_topic(t) and flow.family_of(t).name == family.name
            )
            out.append(
                MirrorDag(
                    dag_id=flow.dag_id("mirror", family.name),
                    flow=flow,
                    family=family.name,
                    schedule=_schedule_text(family.schedule.kind, family.schedule.text),
                    topics=mine,
                )
            )
    return out


# --------------------------------------------------------------------------
# demo up
# --------------------------------------------------------------------------


class StartedHere:
    """What one ``demo up`` started, so that a failure can stop exactly that again, newest first.

    Each step registers a stop function only for what it started itself; what ran before the call is
    never stopped by it.
    """

    def __init__(self) -> None:
        self._stops: list[tuple[str, Callable[[], str]]] = []

    def add(self, name: str, stop: Callable[[], str]) -> None:
        self._stops.append((name, stop))

    def __bool__(self) -> bool:
        return bool(self._stops)

    def undo(self, out: Out) -> None:
        """Stop everything registered, newest first; a failure to stop one is said and does not stop the rest."""
        while self._stops:
            name, stop = self._stops.pop()
            try:
                out(f"  {name}: {stop()}")
            except _FAILURES as exc:
                out(f"  {name}: could not stop: {exc}")


def start_timeout(value: float | None = None) -> float:
    """Seconds to wait for Airflow: ``value`` (``--start-timeout``), else $MIRRORFLOW_DEMO_START_TIMEOUT, else 300."""
    source = "--start-timeout"
    if value is None:
        text = os.environ.get(START_TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_START_TIMEOUT
        source = START_TIMEOUT_ENV
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{START_TIMEOUT_ENV} must be a number of seconds, not {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{source} must be a positive number of seconds, not {value!r}")
    return value


def _cpu_count() -> int:
    """CPUs this process may use (its affinity, e.g. a container's limit), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def spark_pool_slots(cpus: int | None = None) -> int:
    """Slots of the Spark pool: one per two CPUs, at least one (one Spark job at a time on 2 cores)."""
    return max(1, (cpus if cpus is not None else _cpu_count()) // 2)


def _clusters_up(paths: DemoPaths, out: Out, started: StartedHere) -> list[ClusterStatus]:
    specs = ", ".join(f"{s.alias} {s.bootstrap}" for s in DEFAULT_CLUSTERS)
    out(f"starting Kafka clusters ({specs})...")
    statuses = DevClusters().up()
    state = _load_state(paths)
    new = [s.alias for s in statuses if s.detail.startswith("started")]
    state["clusters_started"] = sorted(set(state["clusters_started"]) | set(new))
    _save_state(paths, state)
    for status in statuses:
        out(f"  {status.alias:<8} {status.bootstrap:<16} {status.detail}")
    if new:
        started.add(f"Kafka clusters {', '.join(new)}", lambda: _stop_clusters(paths, new))
    return statuses


def _stop_clusters(paths: DemoPaths, aliases: Iterable[str]) -> str:
    """Stop the demo's clusters named (by their recorded PIDs) and forget that the demo started them."""
    wanted = set(aliases)
    clusters = DevClusters()
    mine = [s for s in clusters.specs if s.alias in wanted]
    details = [f"{st.alias} {st.detail}" for st in DevClusters(clusters.state_dir, mine).down()]
    state = _load_state(paths)
    state["clusters_started"] = [a for a in state["clusters_started"] if a not in wanted]
    _save_state(paths, state)
    return "; ".join(details) or "not running"


def _traffic_up(paths: DemoPaths, out: Out, started: StartedHere) -> None:
    process = _traffic(paths)
    bootstrap = _primary_bootstrap()
    created = ensure_topics(bootstrap)
    if created:
        out(f"created demo topics on primary: {', '.join(created)}")
    record = process.record()
    if record is not None:
        out(f"demo traffic already running (pid {record.pid})")
        return
    cmd = [sys.executable, "-m", "mirrorflow.cli", "demo", "traffic", "--bootstrap", bootstrap]
    pythonpath = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath}
    record = process.start(cmd, env=env, cwd=CHECKOUT, banner=f"=== mirrorflow demo traffic to {bootstrap}")
    started.add("demo traffic", lambda: process.stop(timeout=30))
    out(f"started demo traffic (pid {record.pid}, about {DEFAULT_RATE:.0f} records/s to {bootstrap})")


def _wanted_port() -> int:
    text = os.environ.get(PORT_ENV) or str(DEFAULT_PORT)
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{PORT_ENV} must be a TCP port number, not {text!r}")
    return int(text)


def _airflow_port(paths: DemoPaths, out: Out) -> int:
    """The running server's port, else $MIRRORFLOW_DEMO_PORT (default 8080), else a free port (said so)."""
    recorded = AirflowServer.recorded_port(paths.airflow_home)
    if recorded is not None:
        return recorded
    wanted = _wanted_port()
    if port_is_free(API_HOST, wanted):
        return wanted
    port = free_port(API_HOST)
    owner = port_owner(wanted)
    out(f"port {wanted} is in use{f' by {owner}' if owner else ''}; Airflow will listen on port {port} instead")
    return port


def _spark_connect_up(paths: DemoPaths, out: Out, started: StartedHere) -> str:
    """The machine's Spark Connect server (the one ``mirrorflow replicate`` uses), started if it does not run; with
    ``SPARK=standalone``, a standalone cluster and a Spark Connect server on it instead."""
    if spark_mode() == "standalone":
        return standalone_up(paths.root, out, started.add)
    running = local_connect.status()
    if running.running and running.url:
        out(f"Spark Connect server already running (pid {running.pid}) at {running.url}")
    else:
        out(f"starting the Spark Connect server (about 15 s; log {_show(running.log_file)})...")
    url = local_connect.ensure_local_server(progress=False)
    if not (running.running and running.url):
        started.add("Spark Connect server", local_connect.stop_local_server)
    out(f"  Spark Connect at {url}: the mirror DAGs' replicate tasks submit their work units there")
    return url


def _postgres_up(paths: DemoPaths, out: Out, started: StartedHere) -> PostgresServer:
    """Airflow's metadata database: the demo's PostgreSQL server, started (initdb the first time) unless it runs."""
    database = _postgres(paths)
    if database.running():
        out(f"PostgreSQL already running (pid {database.pid}) on {API_HOST}:{database.port}")
    else:
        first = "" if database.initialized() else "; the first start creates the database"
        out(f"starting PostgreSQL, Airflow's metadata database (log {_show(database.log_file)}{first})...")
    result = database.start(timeout=POSTGRES_START_TIMEOUT)
    if result.started:
        started.add("PostgreSQL", database.stop)
    out(f"  PostgreSQL ready on {API_HOST}:{result.port} after {result.seconds:.0f} s")
    return database


def _airflow_start_hint(error: AirflowStartError, database: PostgresServer) -> str:
    """What to read and try after Airflow did not become healthy."""
    lines = [str(error)]
    if "metadatabase" in error.unhealthy:
        lines.append(f"Airflow's metadata database is the demo's PostgreSQL: read {_show(database.log_file)} too.")
    lines.append(
        f"If this machine is just slow, wait longer: `.venv/bin/mirrorflow demo up --start-timeout 600` "
        f"(or {START_TIMEOUT_ENV}=600 make demo)."
    )
    return "\n".join(lines)


def _pools_up(server: AirflowServer, config: MirrorConfig, out: Out) -> None:
    """The Airflow pools the configuration's replicate tasks run in (``mirrorflow.spark.pool``), one slot per 2 CPUs.

    Without the pool Airflow would never schedule those tasks; with it, at most that many Spark jobs run at
    once (three at once used to start on 2 cores).
    """
    names = sorted({flow.get(SPARK_POOL_KEY).strip() for flow in config.enabled_flows()} - {""})
    slots = spark_pool_slots()
    for name in names:
        what = server.ensure_pool(name, slots, "mirrorflow replicate tasks: one Spark job per slot")
        out(f"  Airflow pool {name}: {slots} slot(s) ({what}), so at most {slots} replicate task(s) run at once")


def _alert_sink_up(paths: DemoPaths, out: Out, started: StartedHere) -> SinkEndpoint:
    """The local webhook receiver the demo's alerts go to (started before Airflow, whose tasks POST to it)."""
    sink = AlertSink(paths.root)
    running = sink.endpoint()
    endpoint = running or sink.start()
    if running is None:
        started.add("alert receiver", lambda: sink.stop(timeout=10))
    out(f"alerts: POSTed to a local receiver at {endpoint.url}, one JSON line each in {_show(endpoint.file)}")
    return endpoint


def alert_settings(endpoint: SinkEndpoint) -> str:
    """``MIRRORFLOW_CONFIG_OVERRIDES`` naming the demo's receiver as every flow's alert webhook: the example
    configuration stays as a user would copy it (no webhook), and Airflow's processes still alert somewhere visible."""
    return overrides.encode([Entry(WEBHOOK_KEY, endpoint.url, "the demo's alert receiver", 0)])


def airflow_up(
    paths: DemoPaths,
    config_file: Path,
    config: MirrorConfig,
    spark_url: str,
    out: Out,
    started: StartedHere,
    *,
    timeout: float,
    port: int | None = None,
    settings: str | None = None,
) -> AirflowServer:
    """PostgreSQL, then Airflow on it (healthy within ``timeout`` seconds), then the Spark pool.

    What this call starts is registered in ``started``; an Airflow that does not become healthy is stopped
    by :meth:`AirflowServer.start` itself, and the error names the components and the logs to read.
    ``port``: the API port (default: the running server's, else $MIRRORFLOW_DEMO_PORT or 8080, else free).
    ``settings``: configuration overrides (``MIRRORFLOW_CONFIG_OVERRIDES``) for every Airflow process.
    """
    database = _postgres_up(paths, out, started)
    api_port = port if port is not None else _airflow_port(paths, out)
    server = AirflowServer(
        paths.airflow_home, api_port, config_file, spark_url, database_url=database.database_url(), settings=settings
    )
    was_running = server.running()
    if was_running:
        out(f"Airflow already running (pid {server.pid}) at {server.url}")
    else:
        out(f"starting Airflow (usually 30-60 s; waiting up to {timeout:.0f} s; log {_show(server.log_file)})...")
    try:
        took = server.start(timeout=timeout)
    except AirflowStartError as exc:
        raise AirflowStartError(_airflow_start_hint(exc, database), exc.unhealthy) from None
    if not was_running:
        started.add("Airflow", lambda: server.stop(timeout=60))
    out(f"  Airflow healthy at {server.url} after {took:.0f} s (metadata database: PostgreSQL, LocalExecutor)")
    _pools_up(server, config, out)
    return server


def airflow_down(paths: DemoPaths, out: Out) -> None:
    """Stop Airflow, then its PostgreSQL (a database stopped first would fail Airflow's last writes)."""
    out(f"Airflow: {AirflowServer.session(paths.airflow_home).stop(timeout=60)}")
    out(f"PostgreSQL: {_postgres(paths).stop(timeout=60)}")


def _dags_up(server: AirflowServer, dags: list[MirrorDag], out: Out) -> dict[str, str]:
    """Unpause every mirror DAG and make sure each has a first run; dag_id -> what happened.

    Unpausing a scheduled DAG makes the scheduler start a run at once; a manual run is triggered
    only for DAGs that have none shortly after (no schedule, or a slow scheduler), so that the
    first copy is not queued twice.
    """
    out(f"waiting for the mirror DAGs ({', '.join(d.dag_id for d in dags)})...")
    found = server.wait_for_dags([d.dag_id for d in dags], timeout=DAG_TIMEOUT, settle=DAG_SETTLE)
    result = {d.dag_id: "NOT FOUND in Airflow (see above)" for d in dags if d.dag_id not in found}
    if result:
        out(f"error: {server.missing_dags_message([d.dag_id for d in dags], found, DAG_SETTLE)}")
    ran_before = {d for d in found if server.run_count(d) > 0}
    for dag_id in found:
        server.unpause(dag_id)
    deadline = time.monotonic() + FIRST_RUN_GRACE
    waiting = [d for d in found if d not in ran_before]
    while waiting and time.monotonic() < deadline:
        time.sleep(1)
        waiting = [d for d in waiting if server.run_count(d) == 0]
    for dag_id in found:
        if dag_id in ran_before:
            result[dag_id] = "active; it has run before"
        elif dag_id in waiting:
            result[dag_id] = f"unpaused; first run triggered ({server.trigger(dag_id, {})})"
        else:
            result[dag_id] = "unpaused; its schedule started the first run"
    return result


def _companion_dags_up(server: AirflowServer, config: MirrorConfig, out: Out) -> None:
    """Unpause each flow's checkpoints, heartbeats and verify DAGs: the demo's groups then show up on the target,
    and a verification can be triggered from the UI."""
    for flow in config.enabled_flows():
        companions = (
            ("checkpoints", "after every mirror run"),
            ("heartbeats", "every minute"),
            ("verify", "trigger it to compare the copy with the source, record by record"),
        )
        for kind, what in companions:
            dag_id = flow.dag_id(kind)
            if server.dag_exists(dag_id):
                server.unpause(dag_id)
                out(f"  {dag_id}: unpaused ({what})")
        out(
            f"  try: .venv/bin/mirrorflow translate --config {_show(config_path())} --flow '{flow.name}' "
            "--group order-service"
        )
        out(f"  try: .venv/bin/mirrorflow verify --config {_show(config_path())} --flow '{flow.name}' --since 10m")


def _stack_up(paths: DemoPaths, config_file: Path, config: MirrorConfig, timeout: float, out: Out) -> AirflowServer:
    """Every process of the demo, in order; on any failure, what this call started is stopped again."""
    started = StartedHere()
    try:
        _clusters_up(paths, out, started)
        _traffic_up(paths, out, started)
        spark_url = _spark_connect_up(paths, out, started)
        alerts = _alert_sink_up(paths, out, started)
        return airflow_up(
            paths, config_file, config, spark_url, out, started, timeout=timeout, settings=alert_settings(alerts)
        )
    except (*_FAILURES, KeyboardInterrupt) as exc:
        out(f"error: {exc}" if not isinstance(exc, KeyboardInterrupt) else "interrupted")
        if started:
            out("stopping what this attempt started (what ran before it keeps running):")
            started.undo(out)
        else:
            out("this attempt started nothing: what runs was started before it")
        raise


def demo_up(out: Out = _print, *, start_timeout_s: float | None = None) -> int:
    """Start (or complete) the demo and print where to look; 0 when everything runs, else 1.

    ``start_timeout_s``: how long to wait for Airflow (``--start-timeout``; default $MIRRORFLOW_DEMO_START_TIMEOUT,
    else 300 s).
    """
    paths = demo_paths()
    config_file = config_path()
    try:
        timeout = start_timeout(start_timeout_s)
        spark_mode()  # a wrong SPARK= is said before anything starts
    except ValueError as exc:
        out(f"error: {exc}")
        return 1
    try:
        config = load_config(config_file)
    except (ConfigError, OSError) as exc:  # ConfigError's message lists every problem
        out(f"error: cannot use {_show(config_file)}: {exc}")
        return 1
    dags = demo_dags(config)
    t0 = time.monotonic()
    try:
        with file_lock(paths.root):
            server = _stack_up(paths, config_file, config, timeout, out)
            try:
                result = _dags_up(server, dags, out)
                _companion_dags_up(server, config, out)
            except AirflowServerError as exc:  # Airflow runs: still show where to look at the import errors
                out(f"error: {exc}")
                result = {d.dag_id: "NOT FOUND in Airflow (see above)" for d in dags}
    except _FAILURES:
        out(_UNDONE)
        return 1
    _final_block(paths, server, dags, result, config_file, out, time.monotonic() - t0)
    if any("NOT FOUND" in r for r in result.values()):
        out("")
        out(_INCOMPLETE)
        return 1
    return 0


def _final_block(
    paths: DemoPaths,
    server: AirflowServer,
    dags: list[MirrorDag],
    result: dict[str, str],
    config_file: Path,
    out: Out,
    took: float,
) -> None:
    user, password = admin_login(paths.airflow_home)
    database = _postgres(paths)
    primary, backup = (s.bootstrap for s in DEFAULT_CLUSTERS)
    topics = ", ".join(t.name for t in DEMO_TOPICS)
    groups = ", ".join(g.group for g in DEMO_GROUPS)
    lines = [
        "",
        f"mirrorflow demo is running (ready in {took:.0f} s)",
        "",
        f"  Airflow UI   {server.url}",
        f"  Login        {user} / {password}",
        f"  Database     PostgreSQL on {API_HOST}:{database.port} (Airflow's metadata; LocalExecutor)",
        f"  Kafka        primary {primary}  ->  backup {backup}",
        f"  Traffic      about {DEFAULT_RATE:.0f} records/s to {topics} on primary;",
        f"               consumer groups {groups} commit offsets on primary",
        f"  Alerts       {_show(AlertSink(paths.root).alerts_file)} (tail -f; stale heartbeats, data loss, resets)",
        *_spark_lines(paths),
        "",
        f"Replicating ({_show(config_file)}):",
    ]
    for dag in dags:
        lines.append(f"  {dag.flow.name}  family {dag.family:<10} DAG {dag.dag_id}  ({dag.schedule})")
        lines.append(f"      {result.get(dag.dag_id, '')}")
        for source, remote in dag.topics:
            lines.append(f"      {source:<15} -> {remote}  on {dag.flow.target}")
    lines += [
        "",
        "Watch it:",
        f"  open {server.url} (DAGs -> a mirror DAG -> Grid: runs, task logs with per-partition records and lag)",
        "  .venv/bin/mirrorflow demo status     # what runs; end offsets on primary and backup; consumer lag",
        f"  logs: {_show(server.log_file)}, {_show(database.log_file)},",
        f"        {_show(_traffic(paths).log_file)}, {_show(AlertSink(paths.root).log_file)},",
        f"        {_show(DevClusters().state_dir)}/<cluster>/broker.log",
        "",
        "Stop it:",
        "  make demo-stop",
    ]
    for line in lines:
        out(line)


def _spark_lines(paths: DemoPaths) -> list[str]:
    ui = web_ui(paths.root)
    return [f"  Spark        standalone cluster (master and two workers), web UI {ui}"] if ui else []


# --------------------------------------------------------------------------
# demo down
# --------------------------------------------------------------------------


def _clusters_down(paths: DemoPaths, out: Out) -> None:
    state = _load_state(paths)
    ours = set(state["clusters_started"])
    clusters = DevClusters()
    if ours:
        mine = [s for s in clusters.specs if s.alias in ours]
        for status in DevClusters(clusters.state_dir, mine).down():
            out(f"Kafka cluster {status.alias} ({status.bootstrap}): {status.detail}")
    state["clusters_started"] = []
    _save_state(paths, state)
    still = [s.alias for s in clusters.status() if s.running]
    if still:
        out(f"Kafka clusters {', '.join(still)} were not started by the demo and keep running (`make dev-down`).")


def demo_down(out: Out = _print) -> int:
    """Stop the traffic, Airflow, PostgreSQL, Spark Connect and the clusters the demo started (recorded PIDs
    only); idempotent.

    Each step runs even if an earlier one failed; the exit code is 1 if any failed.  PostgreSQL stops after
    Airflow, whose last writes go to it.
    """
    paths = demo_paths()
    steps: list[tuple[str, Callable[[], object]]] = [
        ("demo traffic", lambda: out(f"demo traffic: {_traffic(paths).stop(timeout=30)}")),
        ("Airflow", lambda: out(f"Airflow: {AirflowServer.session(paths.airflow_home).stop(timeout=60)}")),
        ("alert receiver", lambda: out(f"alert receiver: {AlertSink(paths.root).stop(timeout=10)}")),
        ("PostgreSQL", lambda: out(f"PostgreSQL: {_postgres(paths).stop(timeout=60)}")),
        ("Spark Connect", lambda: out(f"Spark Connect server: {local_connect.stop_local_server()}")),
        ("Spark standalone", lambda: standalone_down(paths.root, out)),
        ("Kafka clusters", lambda: _clusters_down(paths, out)),
    ]
    failed = 0
    with file_lock(paths.root):
        for name, step in steps:
            try:
                step()
            except (DevClusterError, SparkClusterError, ProcessControlError, PostgresError, OSError) as exc:
                out(f"{name}: could not stop: {exc}")
                failed += 1
    return 1 if failed else 0


# --------------------------------------------------------------------------
# demo status
# --------------------------------------------------------------------------


@functools.cache
def _admin(bootstrap: str) -> AdminClient:
    """One admin client per cluster for ``demo status``; librdkafka's info-level chatter at exit is hidden."""
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.connection.setup.timeout.ms": 3000,
            "log_level": 4,
            "allow.auto.create.topics": False,
        }
    )


def _partition_ends(bootstrap: str, topics: Iterable[str]) -> dict[tuple[str, int], int]:
    """End offset of every partition of the topics that exist; raises if the cluster does not answer."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(bootstrap)
    metadata = admin.list_topics(timeout=5).topics
    request = {
        TopicPartition(t, p): OffsetSpec.latest() for t in topics if t in metadata for p in metadata[t].partitions
    }
    if not request:
        return {}
    futures = admin.list_offsets(request, request_timeout=10)
    return {(tp.topic, tp.partition): future.result(timeout=10).offset for tp, future in futures.items()}


def _per_topic(offsets: dict[tuple[str, int], int], topic: str) -> int | None:
    values = [v for (t, _p), v in offsets.items() if t == topic]
    return sum(values) if values else None


def _copied(config: MirrorConfig, flow: FlowConfig) -> dict[tuple[str, int], int]:
    """Next offset to copy per source partition, from the flow's progress topic (MM2's format) on the target."""
    from mirrorflow.replication.progress import progress_topic, read_progress

    consumer = {
        "bootstrap.servers": config.clusters[flow.target].bootstrap_servers,
        "group.id": "mirrorflow-demo-status",
        "receive.message.max.bytes": 100 * 1024 * 1024,
        "log_level": 4,
    }
    progress = read_progress(consumer, progress_topic(flow.source), flow.source, timeout=10)
    return {tp: last + 1 for tp, last in progress.items()}


def _group_lag(bootstrap: str, group: str) -> tuple[int, int] | None:
    """(committed offsets, lag) summed over the group's partitions; None if it committed nothing."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = _admin(bootstrap).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
    committed = {
        (tp.topic, tp.partition): tp.offset
        for tp in futures[group].result(timeout=10).topic_partitions or []
        if tp.offset >= 0
    }
    if not committed:
        return None
    ends = _partition_ends(bootstrap, {t for t, _p in committed})
    return sum(committed.values()), sum(max(0, ends.get(tp, off) - off) for tp, off in committed.items())


def _status_processes(paths: DemoPaths, out: Out) -> bool:
    statuses = DevClusters().status()
    for s in statuses:
        out(f"Kafka {s.alias:<8} {s.bootstrap:<16} {s.detail}{f' (pid {s.pid})' if s.pid else ''}")
    traffic = _traffic(paths).record()
    out(f"demo traffic         {f'running (pid {traffic.pid})' if traffic else 'not running'}")
    database = _postgres(paths)
    db_pid, db_port = database.pid, database.port
    out(f"PostgreSQL           {f'running (pid {db_pid}) on {API_HOST}:{db_port}' if db_pid else 'not running'}")
    sink = AlertSink(paths.root)
    endpoint = sink.endpoint()
    received = f", {len(sink.alerts())} alert(s) in {_show(sink.alerts_file)}" if endpoint else ""
    out(f"alert receiver       {f'running at {endpoint.url}{received}' if endpoint else 'not running'}")
    ui = web_ui(paths.root)
    if ui:
        out(f"Spark standalone     running, web UI {ui}")
    port = AirflowServer.recorded_port(paths.airflow_home)
    healthy = False
    if port is not None:
        server = AirflowServer(paths.airflow_home, port, config_path())
        healthy = server.healthy()
        out(
            f"Airflow              running (pid {server.pid}) at {server.url}, {'healthy' if healthy else 'NOT healthy'}"
        )
    else:
        out("Airflow              not running")
    return all(s.running for s in statuses) and traffic is not None and db_pid is not None and healthy


@functools.cache
def _answers(bootstrap: str) -> bool:
    """True if the cluster answers a metadata request within 2 s (so status never hangs on a stopped one)."""
    try:
        wait_for_kafka(bootstrap, timeout=2)
    except DevClusterError:
        return False
    return True


def _status_flow(config: MirrorConfig, dag: MirrorDag, out: Out) -> None:
    flow = dag.flow
    down = [a for a in (flow.source, flow.target) if not _answers(config.clusters[a].bootstrap_servers)]
    if down:
        out(f"  {dag.dag_id}: cluster {' and '.join(down)} not answering; no offsets")
        return
    try:
        ends = _partition_ends(config.clusters[flow.source].bootstrap_servers, [t for t, _ in dag.topics])
        copied = _copied(config, flow)
        remote_ends = _partition_ends(config.clusters[flow.target].bootstrap_servers, [r for _, r in dag.topics])
    except _KAFKA_FAILURES as exc:  # a cluster down: say so, keep going
        out(f"  {dag.dag_id}: cannot read offsets ({exc})")
        return
    for topic, remote in dag.topics:
        parts = [tp for tp in ends if tp[0] == topic]
        done = sum(min(copied.get(tp, 0), ends[tp]) for tp in parts)
        lag = sum(ends[tp] for tp in parts) - done
        out(
            f"  {flow.source} {topic:<14} end {_num(_per_topic(ends, topic)):>7}  copied {done:>7}  lag {lag:>6}"
            f"   {flow.target} {remote:<22} end {_num(_per_topic(remote_ends, remote)):>7}   ({dag.family})"
        )


def _status_topics(config: MirrorConfig, out: Out) -> None:
    out("")
    out("Replication (offsets summed over partitions; 'copied' is the progress MM2 and mirrorflow record;")
    out("the backup's end offsets also count transaction markers):")
    for dag in demo_dags(config):
        if dag.topics:
            _status_flow(config, dag, out)


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _status_groups(out: Out) -> None:
    bootstrap = _primary_bootstrap()
    out("")
    out(f"Consumer groups on primary ({bootstrap}):")
    if not _answers(bootstrap):
        out("  cluster not answering; no offsets")
        return
    for group in DEMO_GROUPS:
        try:
            lag = _group_lag(bootstrap, group.group)
        except _KAFKA_FAILURES as exc:
            out(f"  {group.group}: cannot read offsets ({exc})")
            continue
        text = f"committed {lag[0]:>7}  lag {lag[1]:>6}" if lag else "nothing committed yet"
        out(f"  {group.group:<14} {text}  ({', '.join(group.topics)})")


def demo_status(out: Out = _print) -> int:
    """Print what runs and how far replication got; 0 when everything runs, else 3."""
    paths = demo_paths()
    everything = _status_processes(paths, out)
    try:
        config = load_config(config_path())
    except (ConfigError, OSError) as exc:
        out(f"cannot use {_show(config_path())}: {exc}")
        return 3
    _status_topics(config, out)
    _status_groups(out)
    return 0 if everything else 3
