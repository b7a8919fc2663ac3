"""Benchmark: a wide flow (T topics x P partitions, G consumer groups) end to end, next to the plain loop.

Why this exists: a deployment mirrors a cluster, not a topic, so every cost a run, the status, the checkpoints or
``verify`` pays per topic or per partition is multiplied by T x P, and the fixed-size benchmarks never show it.
This script builds such a flow and measures, per size:

* three runs of ``mirrorflow replicate --family default``: the first (it creates every remote topic; 2 records of
  100 bytes per partition), one with nothing new, one with 10 new records in every partition. Each on the DAG path
  (``--remote sc://...``: the units are Spark tasks on a Spark Connect server, a local one started before any
  timed step, or ``--spark-remote``), ``--in-process``, and the plain loop (one process, one confluent-kafka
  consumer on every partition, one idempotent producer, positions as group commits; its target topics are made
  beforehand, as a user's loop has them);
* ``mirrorflow status --json`` (a new process); the Replication page's ``/api/status`` (the Airflow plugin's
  FastAPI app called through FastAPI's TestClient in a subprocess, Airflow's authentication replaced by a logged-in
  user, its cache cold, with the API's default paging); the checkpoints DAG's two tasks, ``emit_checkpoints`` then
  ``sync_group_offsets``, each in a process of its own as Airflow runs them, for G groups each committed on 20
  partitions of the flow; one ``mirrorflow verify`` of the whole flow (DAG path, in-process, and a plain
  comparison: one read_committed consumer per side, record by record);
* for every step: the wall clock of its process, its own seconds (a run's report, a call's timer), the peak RSS of
  that process alone (``ru_maxrss`` from ``os.wait4``: for the DAG path the driver, which is the CLI), and for runs
  the driver's Kafka admin calls and clients (the report's ``kafka_calls``); the local Spark Connect server's RSS
  (now and its peak) and its Python workers' after the size's steps.

It prints one table per size with the targets next to the figures (met / NOT met; the targets are set for 1,000 x
10 and 500 groups, at another size the verdict is indicative), one of RSS and Kafka calls, and, when ``--sizes``
gives two sizes (e.g. ``100x10,1000x10``, each measured on fresh topics), how a step's cost per partition grows.
Figures are measured on two embedded noida-db brokers (temp state dir, free ports, stopped however the script
ends) unless ``--source-bootstrap``/``--target-bootstrap`` name other clusters. When the embedded broker gives up
at a size, the script says at which step and size, and goes on with the steps and sizes it can still measure. It
is a benchmark, not a test: it never asserts timings.

    .venv/bin/python benchmarks/wide_flow.py                                   # 1,000 topics x 10, 500 groups
    .venv/bin/python benchmarks/wide_flow.py --sizes 100x10,1000x10 --json wide.json
    .venv/bin/python benchmarks/wide_flow.py --topics 20 --partitions 5 --groups 10 --variants inproc,plain
    .venv/bin/python benchmarks/wide_flow.py --source-bootstrap a:9092 --target-bootstrap b:9092 --keep

``verify --in-process`` compares one partition after the other (about 0.4 s each on the embedded broker, where a
partition's chunk waits out its consumers' poll timeouts), so at 10,000 partitions it runs past ``--step-timeout``;
``--skip verify-inproc`` leaves it out.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from _common import (
    INTERRUPTED,
    TOPIC_CHUNK,
    create_topics,
    produce_everywhere,
    say,
    spread_commit,
    table,
    wait_until_quiet,
)
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from replication_throughput import (
    PLAIN_RECEIVE_MAX,
    TARGET_ALIAS,
    VARIANTS,
    Variant,
    add_cluster_arguments,
    clusters,
    delete_topics,
    spark_connect,
)

REPO = Path(__file__).resolve().parents[1]

#: ``--variants`` keys and the variants of ``replication_throughput`` they stand for (exactly-once, the default).
VARIANT_KEYS = {"connect": "connect-eo", "inproc": "inproc-eo", "plain": "plain"}
COLUMNS = {"connect": "DAG path (Spark Connect)", "inproc": "in-process", "plain": "plain loop"}

#: The targets, at 1,000 topics x 10 partitions and 500 groups (seconds; RSS in MB).
TARGET_FIRST_S = 60.0
TARGET_NOTHING_NEW_S = 3.0
TARGET_NEW_S = 15.0
TARGET_STATUS_S = 2.0
TARGET_CHECKPOINTS_S = 5.0
TARGET_RSS_MB = 500.0
TARGET_SIZE = (1000, 10, 500)
#: "Flat": the larger size's cost per partition at most this many times the smaller size's (this script's reading).
FLAT_RATIO = 1.2

RECORD_BYTES = 100
FIRST_PER_PARTITION = 2
NEW_PER_PARTITION = 10
PARTITIONS_PER_GROUP = 20

#: Steps in the order they run and print; ``RUN_STEPS`` are replication runs (each variant, plain loop included).
STEPS = {
    "first": "first run (creates remote topics)",
    "nothing": "run with nothing new",
    "new": f"run with {NEW_PER_PARTITION} new per partition",
    "status": "status --json",
    "page": "page API (/api/status)",
    "emit": "checkpoints emit",
    "sync": "checkpoints sync",
    "verify": "verify of the whole flow",
}
RUN_STEPS = ("first", "nothing", "new")
SKIPPABLE = ("new", "status", "page", "checkpoints", "verify", "verify-inproc")

#: The longest wait before a step for the embedded brokers to finish persisting earlier writes (``wait_until_quiet``):
#: after creating thousands of topics, and before a steady step (a scheduled run does not wait minutes either).
SETTLE_FIRST_S = 120.0
SETTLE_STEADY_S = 15.0
#: A step's process is killed after this long (the script reports it and goes on).
STEP_TIMEOUT_S = 1800.0


# ----------------------------------------------------------------------------------------------------
# What is measured
# ----------------------------------------------------------------------------------------------------


@dataclass
class Measure:
    """One step of one variant: its process's wall clock, own seconds, peak RSS, and what it did."""

    step: str
    variant: str  # connect, inproc, plain, or "" for a step without engine (status, page, checkpoints)
    wall: float | None = None
    inner: float | None = None  # the run report's seconds, or the timed call's
    rss_mb: float | None = None  # ru_maxrss of the step's process alone, MB (10^6 bytes)
    records: int | None = None
    expected: int | None = None
    kafka_calls: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # a run's phases and engine steps (its report's)
    detail: str = ""
    error: str | None = None


@dataclass
class SizeResult:
    """Everything measured at one size (T topics x P partitions, G groups)."""

    topics: int
    partitions: int
    groups: int
    run_id: str
    setup: dict[str, float] = field(default_factory=dict)
    measures: list[Measure] = field(default_factory=list)
    server_rss: dict[str, float] = field(default_factory=dict)
    stopped: str | None = None  # where the embedded broker gave up, if it did

    @property
    def width(self) -> int:
        return self.topics * self.partitions

    @property
    def label(self) -> str:
        return f"{self.topics:,} x {self.partitions:,}"

    def get(self, step: str, variant: str = "") -> Measure | None:
        return next((m for m in self.measures if m.step == step and m.variant == variant), None)


@dataclass
class Context:
    """What every step of one size needs: clusters, files, names, the engines."""

    source: str
    target: str
    workdir: Path
    run_id: str
    topics: list[str]
    partitions: int
    variants: dict[str, Variant]  # key (connect, inproc, plain) -> the variant under this size's alias
    runs_config: Path
    flow_config: Path | None  # one flow only (the first mirrorflow variant's): status, page, checkpoints, verify
    flow: str | None
    remote: str
    brokers: list[int]
    settle: bool
    step_timeout: float
    count: int = 0

    @property
    def prefix(self) -> str:
        return f"bench.{self.run_id}."

    @property
    def flow_alias(self) -> str:
        """The source alias of the measured flow: its remote topics are ``<alias>.<topic>``."""
        return (self.flow or "").partition("->")[0]

    def log(self, name: str) -> Path:
        self.count += 1
        return self.workdir / f"{self.count:03d}-{self.run_id}-{name.replace(' ', '-')}"


# ----------------------------------------------------------------------------------------------------
# Processes: wall clock and their own peak RSS
# ----------------------------------------------------------------------------------------------------


def run_process(
    cmd: Sequence[str], output: Path, timeout: float, env: dict[str, str] | None = None, errors: Path | None = None
) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak RSS in MB of that process alone); its output goes to ``output`` (its stderr
    to ``errors`` when given, e.g. to keep a JSON answer clean).

    Why ``os.wait4`` and not ``RUSAGE_CHILDREN``: the latter is the maximum over every child reaped so far, so a
    small step after a large one would show the large one's figure. A step past ``timeout`` is killed (-9).
    """
    started = time.perf_counter()
    fired: list[bool] = []
    with output.open("w") as out, (errors or Path(os.devnull)).open("w") as err:
        stderr = err if errors is not None else subprocess.STDOUT
        process = subprocess.Popen(list(cmd), stdout=out, stderr=stderr, cwd=REPO, env=env)

        def kill() -> None:
            fired.append(True)
            process.kill()

        killer = threading.Timer(timeout, kill)
        killer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            killer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
    if fired:
        raise TimeoutError(f"killed after {timeout:.0f} s (--step-timeout)")
    return process.returncode, time.perf_counter() - started, usage.ru_maxrss * 1024 / 1e6


def tail(path: Path, lines: int = 12) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def last_json(path: Path) -> dict[str, Any]:
    """The last line of a helper's output that is a JSON object (libraries may log before it)."""
    for line in reversed(path.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON answer in {path.name}:\n{tail(path)}")


def helper(*args: str) -> list[str]:
    """This script as a subprocess in one of its helper modes (the plain loops, a checkpoint task, the page)."""
    return [sys.executable, str(Path(__file__).resolve()), *args]


def mirrorflow_cli() -> list[str]:
    script = Path(sys.executable).parent / "mirrorflow"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mirrorflow.cli"]


# ----------------------------------------------------------------------------------------------------
# Setup: topics, records, group commits (plain confluent-kafka, not the library under measurement)
# ----------------------------------------------------------------------------------------------------


def drop_topics(bootstrap: str, names: list[str]) -> None:
    """Delete ``names`` in chunks (a topic already gone is fine)."""
    for start in range(0, len(names), TOPIC_CHUNK):
        delete_topics(bootstrap, names[start : start + TOPIC_CHUNK])


def wide_records(first: int) -> Callable[[int, int], tuple[bytes, bytes]]:
    """Records for ``produce_everywhere``: keys numbered from ``first``, values of ``RECORD_BYTES`` cut from one random
    block at a moving offset (incompressible, and no two neighbours alike)."""
    block = os.urandom(65536)
    count = itertools.count()

    def record(_partition: int, i: int) -> tuple[bytes, bytes]:
        start = (next(count) * 7919) % (len(block) - RECORD_BYTES)
        return b"%d" % (first + i), block[start : start + RECORD_BYTES]

    return record


def write_config(
    path: Path, source: str, target: str, run_id: str, variants: Sequence[Variant], rf: int, header: str
) -> None:
    """An mm2.properties with one flow per mirrorflow variant (its alias -> backup), topics ``bench.<run>.*`` and
    groups ``bench-<run>-*``, exactly-once, group offsets synced (so the checkpoints DAG's sync has work)."""
    lines = [
        f"# {header}",
        f"clusters = {', '.join([*(v.alias for v in variants), TARGET_ALIAS])}",
        f"{TARGET_ALIAS}.bootstrap.servers = {target}",
        *(
            f"{name} = {rf}"
            for name in (
                "replication.factor",
                "offset-syncs.topic.replication.factor",
                "checkpoints.topic.replication.factor",
                "heartbeats.topic.replication.factor",
                "offset.storage.replication.factor",
            )
        ),
        "offset-syncs.topic.location = target",
    ]
    for v in variants:
        flow = f"{v.alias}->{TARGET_ALIAS}"
        lines += [
            f"{v.alias}.bootstrap.servers = {source}",
            f"{flow}.enabled = true",
            # A backslash escapes in properties files: \\. is the regex's literal dot.
            rf"{flow}.topics = bench\\.{run_id}\\..*",
            f"{flow}.groups = bench-{run_id}-.*",
            f"{flow}.mirrorflow.delivery = {v.delivery}",
            f"{flow}.sync.group.offsets.enabled = true",
        ]
    path.write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------------------------------
# Helper modes (subprocesses of this script)
# ----------------------------------------------------------------------------------------------------


def _wide_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            # noida-db answers a fetch with every assigned partition's whole backlog, ignoring fetch.max.bytes.
            "receive.message.max.bytes": PLAIN_RECEIVE_MAX,
        }
    )


def _partitions_of(consumer: Consumer, prefix: str) -> list[TopicPartition]:
    """Every partition of the topics named ``prefix...``, from one metadata request (a user's regex subscription)."""
    topics = consumer.list_topics(timeout=60).topics
    return [TopicPartition(t, p) for t in sorted(topics) if t.startswith(prefix) for p in sorted(topics[t].partitions)]


def _drain(consumer: Consumer, assignment: list[TopicPartition], on_message: Callable[[Any], None]) -> None:
    """Read every assigned partition up to its end (partition EOF); raise after 120 s without any event."""
    consumer.assign(assignment)
    open_partitions = {(tp.topic, tp.partition) for tp in assignment}
    quiet_since = time.monotonic()
    while open_partitions:
        messages = consumer.consume(10_000, timeout=0.1)  # consume() waits out its timeout unless the batch fills
        if messages:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 120:
            raise TimeoutError(f"{len(open_partitions)} partition(s) never reached their end")
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard((message.topic(), message.partition()))
                    continue
                raise KafkaException(error)
            on_message(message)


def plain_wide_loop(source: str, target: str, prefix: str, target_prefix: str, group: str) -> dict[str, Any]:
    """Copy what is new in the topics ``prefix...`` to ``target_prefix + topic``, same partition: the loop a user
    would write for a wide flow (one metadata request, one committed-offsets request, all partitions assigned to
    one consumer, one idempotent producer, positions committed after the flush: at-least-once)."""
    started = time.perf_counter()
    consumer = _wide_consumer(source, group)
    errors: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": target,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "on_delivery": on_error,
            "delivery.report.only.error": True,
        }
    )
    committed = consumer.committed(_partitions_of(consumer, prefix), timeout=60)
    start = [
        TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING) for tp in committed
    ]
    positions: dict[tuple[str, int], int] = {}
    copied = [0]

    def copy(message: Any) -> None:
        ts_type, ts = message.timestamp()
        extra = {} if ts_type == TIMESTAMP_NOT_AVAILABLE else {"timestamp": ts}
        while True:
            try:
                producer.produce(
                    target_prefix + message.topic(),
                    key=message.key(),
                    value=message.value(),
                    headers=message.headers(),
                    partition=message.partition(),
                    **extra,
                )
                break
            except BufferError:
                producer.poll(0.1)
        positions[(message.topic(), message.partition())] = message.offset() + 1
        copied[0] += 1
        producer.poll(0)

    _drain(consumer, start, copy)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"plain loop: {remaining} record(s) not delivered, errors: {errors[:3]}")
    if positions:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()], asynchronous=False)
    consumer.close()
    return {"seconds": round(time.perf_counter() - started, 3), "partitions": len(start), "records": copied[0]}


def plain_wide_verify(source: str, target: str, prefix: str, remote_prefix: str) -> dict[str, Any]:
    """Compare every source partition of ``prefix...`` with ``remote_prefix + topic``'s, record by record (key,
    value, headers, timestamp), one read_committed consumer per side reading all partitions: no digests, no offset
    mapping (it assumes the copy's order)."""
    started = time.perf_counter()

    def read(bootstrap: str, topic_prefix: str) -> dict[tuple[str, int], list[Any]]:
        consumer = _wide_consumer(bootstrap, "bench-wide-verify-loop")
        found: dict[tuple[str, int], list[Any]] = {}
        assignment = [
            TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in _partitions_of(consumer, topic_prefix)
        ]
        for tp in assignment:
            found[(tp.topic.removeprefix(topic_prefix), tp.partition)] = []

        def keep(m: Any) -> None:
            found[(m.topic().removeprefix(topic_prefix), m.partition())].append(
                (m.key(), m.value(), m.headers(), m.timestamp()[1])
            )

        _drain(consumer, assignment, keep)
        consumer.close()
        return found

    left, right = read(source, prefix), read(target, remote_prefix + prefix)
    different = sorted(key for key, records in left.items() if right.get(key) != records)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "records": sum(len(r) for r in left.values()),
        "target_records": sum(len(r) for r in right.values()),
        "partitions": len(left),
        "differences": len(different) + len(set(right) - set(left)),
        "first_different": [f"{t}[{p}]: {len(left[(t, p)])} vs {len(right.get((t, p), []))}" for t, p in different[:3]],
    }


def checkpoint_task(config: str, flow_name: str, task: str) -> dict[str, Any]:
    """What the checkpoints DAG's ``emit_checkpoints`` or ``sync_group_offsets`` task calls, timed, with the Kafka
    calls it made (``kafka_calls``)."""
    from mirrorflow.config import load_config
    from mirrorflow.kafka import calls as kafka_calls

    source, _, target = flow_name.partition("->")
    flow = load_config(config).flow(source, target)
    with kafka_calls.counting() as calls:
        started = time.perf_counter()
        if task == "emit":
            from mirrorflow.checkpoints.emit import emit_checkpoints

            emitted = emit_checkpoints(flow)
            seconds = time.perf_counter() - started
            out = {"emitted": emitted.emitted, "groups": len(emitted.groups), "syncs_read": emitted.syncs_read}
            errors = emitted.errors
        else:
            from mirrorflow.checkpoints.groupsync import sync_group_offsets

            synced = sync_group_offsets(flow)
            seconds = time.perf_counter() - started
            written = sum(len(g.written) for g in synced.groups)
            out = {"groups": len(synced.groups), "written": written, "skipped": len(synced.skipped_active)}
            errors = synced.errors
    return {"seconds": round(seconds, 3), "errors": errors[:5], "kafka_calls": kafka_calls.summary(calls), **out}


def page_api() -> dict[str, Any]:
    """One GET of the Replication page's ``/api/status`` (defaults: whatever paging the API has), cache cold, with
    Airflow's authentication dependency replaced by a logged-in user, as the plugin's own test does. The
    environment (``AIRFLOW_HOME``, ``MIRRORFLOW_CONFIG``...) is the caller's."""
    started = time.perf_counter()
    import airflow  # noqa: F401 - puts the plugins folder on sys.path
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from mirrorflow_airflow.plugins import status_app as status_page

    app = status_page.create_app()
    app.dependency_overrides[get_user] = lambda: object()
    client = TestClient(app)
    imported = time.perf_counter() - started
    began = time.perf_counter()
    client.get("/api/status")  # the first request of an API server: the status libraries' imports on top
    first = time.perf_counter() - began
    status_page.CACHE.clear()  # the page's own cache (CACHE_SECONDS): a refresh after it expired recomputes
    began = time.perf_counter()
    answer = client.get("/api/status")
    seconds = time.perf_counter() - began
    body = answer.json() if answer.status_code == 200 else {}
    flows = body.get("flows") or []
    return {
        "seconds": round(seconds, 3),
        "first_seconds": round(first, 3),
        "import_seconds": round(imported, 3),
        "status_code": answer.status_code,
        "bytes": len(answer.content),
        "rows": row_count(flows[0]) if flows else "",
        "errors": [e for f in flows for e in f.get("errors", [])][:3],
    }


def row_count(flow: dict[str, Any]) -> str:
    """The partition rows an answer carries, whether the API returns them all (a list) or a page of them."""
    rows = flow.get("partitions")
    if isinstance(rows, list):
        total = next((flow[k] for k in ("total", "total_partitions", "partitions_total") if k in flow), None)
        return f"{len(rows):,} rows" + (f" of {total:,}" if isinstance(total, int) else "")
    if isinstance(rows, dict):
        items = next((v for v in rows.values() if isinstance(v, list)), [])
        total = next((rows[k] for k in ("total", "count") if isinstance(rows.get(k), int)), None)
        return f"{len(items):,} rows" + (f" of {total:,}" if total is not None else "")
    return ""


# ----------------------------------------------------------------------------------------------------
# The steps
# ----------------------------------------------------------------------------------------------------


def settle(ctx: Context, step: str) -> None:
    """Wait for the embedded brokers to finish persisting earlier writes, so a step is not charged with them."""
    if ctx.settle and ctx.brokers:
        waited = wait_until_quiet(ctx.brokers, SETTLE_FIRST_S if step == "first" else SETTLE_STEADY_S)
        if waited >= 2:
            say(f"    (waited {waited:.0f} s for the embedded brokers to finish persisting earlier writes)")


def run_step(ctx: Context, step: str, key: str, expected: int) -> Measure:
    """One replication run of variant ``key`` as a subprocess; raises unless it copied exactly ``expected``."""
    variant = ctx.variants[key]
    measure = Measure(step, key, expected=expected)
    log = ctx.log(f"{step}-{variant.alias}")
    report = log.with_suffix(".json")
    if variant.plain:
        spec = {
            "source": ctx.source,
            "target": ctx.target,
            "prefix": ctx.prefix,
            "target_prefix": f"{variant.alias}.",
            "group": f"bench-{variant.alias}-{ctx.run_id}",  # not bench-<run>-*: the flow's groups filter skips it
        }
        cmd = helper("--plain-loop", json.dumps(spec))
    else:
        cmd = [
            *mirrorflow_cli(),
            "replicate",
            "--config",
            str(ctx.runs_config),
            "--flow",
            f"{variant.alias}->{TARGET_ALIAS}",
        ]
        cmd += ["--family", "default", "--report", str(report)]
        cmd += ["--remote", ctx.remote] if variant.engine == "connect" else ["--in-process"]
    settle(ctx, step)
    code, measure.wall, measure.rss_mb = run_process(cmd, log.with_suffix(".log"), ctx.step_timeout)
    if code != 0:
        raise RuntimeError(f"exit {code}:\n{tail(log.with_suffix('.log'))}")
    if variant.plain:
        answer = last_json(log.with_suffix(".log"))
        measure.records, measure.inner = answer["records"], answer["seconds"]
    else:
        data = json.loads(report.read_text())
        measure.records, measure.inner = data["records"], data["seconds"]
        measure.kafka_calls = data.get("kafka_calls") or {}
        measure.phases = {**(data.get("phases") or {}), **(data.get("engine_steps") or {})}
        if (data.get("preparation") or {}).get("acls_synced_ms") is not None:
            measure.detail = "synced ACLs"
        if not data["ok"] or data["lag"]:
            raise RuntimeError(f"ok={data['ok']} lag={data['lag']} errors={data.get('errors', [])[:3]}")
    if measure.records != expected:
        raise RuntimeError(f"copied {measure.records} records, expected {expected}")
    return measure


def status_step(ctx: Context) -> Measure:
    """``mirrorflow status --json`` of the flow, a new process (imports and client start-up included)."""
    assert ctx.flow_config is not None and ctx.flow is not None
    measure = Measure("status", "")
    log = ctx.log("status")
    cmd = [*mirrorflow_cli(), "status", "--config", str(ctx.flow_config), "--flow", ctx.flow, "--json"]
    settle(ctx, "status")
    output, errors = log.with_suffix(".json"), log.with_suffix(".err")
    code, measure.wall, measure.rss_mb = run_process(cmd, output, ctx.step_timeout, errors=errors)
    text = output.read_text()
    if code != 0:
        raise RuntimeError(f"exit {code}: {errors.read_text()[-1500:]}")
    flow = json.loads(text)["flows"][0]
    measure.detail = f"{row_count(flow)}, {len(text):,} bytes, lag {flow.get('lag_records')}"
    return measure


def page_step(ctx: Context) -> Measure:
    """The page API in a subprocess with an Airflow environment of its own (throwaway AIRFLOW_HOME)."""
    assert ctx.flow_config is not None
    from mirrorflow_dev.demo.airflow_env import airflow_environment
    from mirrorflow_dev.devcluster import free_port

    measure = Measure("page", "")
    env = airflow_environment(ctx.workdir / "airflow-home", api_port=free_port(), config_path=ctx.flow_config)
    env.pop("MIRRORFLOW_CONFIG_OVERRIDES", None)
    log = ctx.log("page").with_suffix(".log")
    settle(ctx, "page")
    code, measure.wall, measure.rss_mb = run_process(helper("--page-api"), log, ctx.step_timeout, env=dict(env))
    if code != 0:
        raise RuntimeError(f"exit {code}:\n{tail(log)}")
    answer = last_json(log)
    if answer["status_code"] != 200:
        raise RuntimeError(f"HTTP {answer['status_code']}:\n{tail(log)}")
    measure.inner = answer["seconds"]
    errors = f", errors {answer['errors']}" if answer["errors"] else ""
    measure.detail = (
        f"{answer['rows']}, {answer['bytes']:,} bytes; first request {answer['first_seconds']:.2f} s, "
        f"app imports {answer['import_seconds']:.1f} s{errors}"
    )
    return measure


def checkpoint_step(ctx: Context, task: str) -> Measure:
    """One checkpoints DAG task (``emit`` or ``sync``) in a process of its own."""
    assert ctx.flow_config is not None and ctx.flow is not None
    measure = Measure(task, "")
    log = ctx.log(task).with_suffix(".log")
    settle(ctx, task)
    cmd = helper("--checkpoint-task", task, "--task-config", str(ctx.flow_config), "--task-flow", ctx.flow)
    code, measure.wall, measure.rss_mb = run_process(cmd, log, ctx.step_timeout)
    if code != 0:
        raise RuntimeError(f"exit {code}:\n{tail(log)}")
    answer = last_json(log)
    measure.inner, measure.kafka_calls = answer["seconds"], answer["kafka_calls"]
    if task == "emit":
        measure.detail = f"{answer['emitted']:,} checkpoints for {answer['groups']} groups"
    else:
        measure.detail = f"{answer['written']:,} offsets of {answer['groups']} groups written"
    if answer["errors"]:
        raise RuntimeError(f"errors: {answer['errors']}")
    return measure


def verify_step(ctx: Context, key: str, expected: int) -> Measure:
    """``mirrorflow verify`` of the whole flow (DAG path or in-process), or the plain comparison."""
    assert ctx.flow_config is not None and ctx.flow is not None
    measure = Measure("verify", key, expected=expected)
    log = ctx.log(f"verify-{key}")
    if key == "plain":
        spec = {"source": ctx.source, "target": ctx.target, "prefix": ctx.prefix, "remote_prefix": f"{ctx.flow_alias}."}
        cmd = helper("--plain-verify", json.dumps(spec))
    else:
        cmd = [*mirrorflow_cli(), "verify", "--config", str(ctx.flow_config), "--flow", ctx.flow]
        cmd += ["--report", str(log.with_suffix(".json"))]
        cmd += ["--remote", ctx.remote] if key == "connect" else ["--in-process"]
    settle(ctx, "verify")
    code, measure.wall, measure.rss_mb = run_process(cmd, log.with_suffix(".log"), ctx.step_timeout)
    if key == "plain":
        if code != 0:
            raise RuntimeError(f"exit {code}:\n{tail(log.with_suffix('.log'))}")
        answer = last_json(log.with_suffix(".log"))
        measure.inner, measure.records = answer["seconds"], answer["records"]
        measure.detail = f"{answer['differences']} different partition(s), {answer['target_records']:,} on the target"
        if answer["differences"]:
            measure.detail += f" (records source vs target: {', '.join(answer['first_different'])})"
    else:
        if not log.with_suffix(".json").exists():
            raise RuntimeError(f"exit {code}, no report:\n{tail(log.with_suffix('.log'))}")
        data = json.loads(log.with_suffix(".json").read_text())
        measure.inner, measure.records = data["seconds"], data["records"]
        measure.detail = f"{data['status']}, {data.get('chunks', 0):,} chunks"
        if code != 0:
            raise RuntimeError(f"exit {code}: {data['status']}, errors {data.get('errors', [])[:3]}")
    if measure.records != expected:
        raise RuntimeError(f"compared {measure.records} records, expected {expected}")
    return measure


# ----------------------------------------------------------------------------------------------------
# One size
# ----------------------------------------------------------------------------------------------------


class BrokerGone(Exception):
    """An embedded broker's process ended: nothing more can be measured on this pair."""


def attempt(ctx: Context, result: SizeResult, step: str, key: str, fn: Callable[[], Measure]) -> Measure:
    """Run one step; a failure is recorded (and printed) instead of ending the benchmark."""
    try:
        measure = fn()
    except (RuntimeError, OSError, ValueError, KeyError, TimeoutError, KafkaException) as exc:
        measure = Measure(step, key, error=str(exc).strip())
        say(f"    {STEPS[step]} {COLUMNS.get(key, '')}: FAILED: {measure.error.splitlines()[0][:200]}")
    else:
        calls = measure.kafka_calls
        counted = f", kafka admin {calls.get('admin')} clients {calls.get('clients')}" if calls else ""
        inner = f", own {measure.inner:.2f} s" if measure.inner is not None else ""
        rss = f", peak RSS {measure.rss_mb:.0f} MB" if measure.rss_mb is not None else ""
        say(f"    {STEPS[step]:<34} {COLUMNS.get(key, ''):<25} {measure.wall:7.2f} s{inner}{rss}{counted}")
    result.measures.append(measure)
    if ctx.brokers and not all(psutil.pid_exists(pid) for pid in ctx.brokers):
        result.stopped = f"an embedded broker stopped during '{STEPS[step]}' at {result.label}"
        raise BrokerGone(result.stopped)
    return measure


def server_rss(workdir: Path) -> dict[str, float]:
    """The local Spark Connect server's RSS now and its peak (VmHWM), and its Python workers' RSS, in MB."""
    from mirrorflow.replication.local_connect import status

    pid = status(workdir / "spark-connect").pid
    if not pid:
        return {}
    try:
        server = psutil.Process(pid)
        workers = server.children(recursive=True)
        hwm = next(
            (
                int(line.split()[1]) * 1024 / 1e6
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:")
            ),
            float("nan"),
        )
        return {
            "server_mb": server.memory_info().rss / 1e6,
            "server_peak_mb": hwm,
            "workers_mb": sum(w.memory_info().rss for w in workers) / 1e6,
            "workers": float(len(workers)),
        }
    except (psutil.Error, OSError):
        return {}


def measure_size(
    args: argparse.Namespace,
    number: int,
    size: tuple[int, int],
    source: str,
    target: str,
    brokers: list[int],
    remote: str,
    workdir: Path,
    variants: list[Variant],
) -> SizeResult:
    """Every step at one size, on fresh topics (and fresh aliases, so fresh progress and internal topics)."""
    topics, partitions = size
    run_id = "w" + secrets.token_hex(3)
    result = SizeResult(topics, partitions, args.groups, run_id)
    by_key = {
        k: VARIANTS[VARIANT_KEYS[k]].in_round(number) for k in VARIANT_KEYS if VARIANTS[VARIANT_KEYS[k]] in variants
    }
    mirrorflow = [v for v in by_key.values() if not v.plain]
    names = [f"bench.{run_id}.t{i:05d}" for i in range(topics)]
    rf = args.replication_factor if args.replication_factor is not None else (1 if brokers else -1)
    size_dir = workdir / f"size{number}"
    size_dir.mkdir()
    runs_config = size_dir / "runs.properties"
    write_config(runs_config, source, target, run_id, mirrorflow, rf, "benchmarks/wide_flow.py: the runs")
    flow_config = size_dir / "flow.properties" if mirrorflow else None
    if flow_config is not None:
        write_config(flow_config, source, target, run_id, mirrorflow[:1], rf, "benchmarks/wide_flow.py: one flow")
    ctx = Context(
        source,
        target,
        size_dir,
        run_id,
        names,
        partitions,
        by_key,
        runs_config,
        flow_config,
        f"{mirrorflow[0].alias}->{TARGET_ALIAS}" if mirrorflow else None,
        remote,
        brokers,
        not args.no_settle,
        args.step_timeout,
    )
    width = topics * partitions
    say(f"size {result.label}: {width:,} partitions, {args.groups} groups, topics {ctx.prefix}* (run {run_id})")
    created: list[str] = []
    try:
        started = time.perf_counter()
        create_topics(source, names, partitions, rf)
        created += names
        result.setup["create_topics_s"] = round(time.perf_counter() - started, 2)
        say(f"  {topics:,} topics x {partitions} partitions created in {result.setup['create_topics_s']:.1f} s")
        started = time.perf_counter()
        produce_everywhere(source, names, partitions, FIRST_PER_PARTITION, wide_records(0))
        result.setup["produce_first_s"] = round(time.perf_counter() - started, 2)
        say(f"  {width * FIRST_PER_PARTITION:,} records written in {result.setup['produce_first_s']:.1f} s")
        if "plain" in by_key:  # a user's loop has its target topics already; mirrorflow creates its own
            started = time.perf_counter()
            create_topics(target, [f"{by_key['plain'].alias}.{n}" for n in names], partitions, rf)
            result.setup["plain_target_topics_s"] = round(time.perf_counter() - started, 2)
            say(f"  the plain loop's {topics:,} target topics created in {result.setup['plain_target_topics_s']:.1f} s")
    except (RuntimeError, OSError, TimeoutError, KafkaException) as exc:
        result.stopped = f"setup at {result.label} (creating topics or writing records): {str(exc).splitlines()[0]}"
        say(f"  STOPPED: {result.stopped}")
        cleanup(args, ctx, created)
        return result
    try:
        measure_steps(args, ctx, result)
    except BrokerGone as exc:
        say(f"  STOPPED: {exc}")
        return result
    if remote and "connect" in by_key:
        result.server_rss = server_rss(workdir)
    cleanup(args, ctx, names)
    return result


def measure_steps(args: argparse.Namespace, ctx: Context, result: SizeResult) -> None:
    """The runs (step by step, every variant at each step, so all copy the same records), then the flow's
    status, page, checkpoints and verify."""
    width = len(ctx.topics) * ctx.partitions
    skip = set(args.skip)
    copied = FIRST_PER_PARTITION
    for step in RUN_STEPS:
        if step == "new":
            if "new" in skip:
                continue
            started = time.perf_counter()
            try:
                produce_everywhere(
                    ctx.source, ctx.topics, ctx.partitions, NEW_PER_PARTITION, wide_records(FIRST_PER_PARTITION)
                )
            except (RuntimeError, KafkaException) as exc:
                result.stopped = f"writing the new records at {result.label}: {exc}"
                say(f"  STOPPED: {result.stopped}")
                break
            copied += NEW_PER_PARTITION
            result.setup["produce_new_s"] = round(time.perf_counter() - started, 2)
            say(f"  {width * NEW_PER_PARTITION:,} new records written in {result.setup['produce_new_s']:.1f} s")
        expected = {"first": FIRST_PER_PARTITION, "nothing": 0, "new": NEW_PER_PARTITION}[step] * width
        for key in ctx.variants:
            attempt(ctx, result, step, key, lambda k=key, s=step, e=expected: run_step(ctx, s, k, e))
    if ctx.flow_config is None:
        return
    if "status" not in skip:
        attempt(ctx, result, "status", "", lambda: status_step(ctx))
    if "page" not in skip:
        attempt(ctx, result, "page", "", lambda: page_step(ctx))
    if "checkpoints" not in skip and args.groups > 0:
        groups = [f"bench-{ctx.run_id}-g{g:05d}" for g in range(args.groups)]
        started = time.perf_counter()
        try:
            spread_commit(ctx.source, groups, ctx.topics, ctx.partitions, PARTITIONS_PER_GROUP, copied)
            result.setup["commit_groups_s"] = round(time.perf_counter() - started, 2)
            say(
                f"  {args.groups} groups committed on {min(PARTITIONS_PER_GROUP, width)} partitions each in "
                f"{result.setup['commit_groups_s']:.1f} s"
            )
            attempt(ctx, result, "emit", "", lambda: checkpoint_step(ctx, "emit"))
            attempt(ctx, result, "sync", "", lambda: checkpoint_step(ctx, "sync"))
        except (RuntimeError, KafkaException) as exc:
            result.measures.append(Measure("emit", "", error=f"committing the groups: {exc}"))
            say(f"    committing the groups FAILED: {exc}")
    if "verify" not in skip:
        for key in [k for k in ctx.variants if not (k == "inproc" and "verify-inproc" in skip)]:
            attempt(ctx, result, "verify", key, lambda k=key: verify_step(ctx, k, copied * width))


def cleanup(args: argparse.Namespace, ctx: Context, names: list[str]) -> None:
    """Delete the size's topics (source, every variant's target copies), so the next size starts on a broker that
    holds no more than it must; ``--keep`` keeps them."""
    if args.keep or not names:
        return
    started = time.perf_counter()
    try:
        drop_topics(ctx.source, names)
        for variant in ctx.variants.values():
            drop_topics(ctx.target, [f"{variant.alias}.{n}" for n in names])
    except KafkaException as exc:
        say(f"  could not delete every topic: {exc}")
    say(f"  the size's topics deleted in {time.perf_counter() - started:.1f} s")


# ----------------------------------------------------------------------------------------------------
# The tables
# ----------------------------------------------------------------------------------------------------


def verdict(figure: float | None, limit: float) -> str:
    return "-" if figure is None else ("met" if figure <= limit else "NOT met")


def cell(m: Measure | None) -> str:
    """Wall clock [own seconds] of a step, or FAILED / - ."""
    if m is None:
        return "-"
    if m.error is not None:
        return "FAILED"
    if m.step == "page" and m.inner is not None:  # the API server is long-running: the request is the figure
        return f"{m.inner:.2f} s [process {m.wall:.1f}]"
    inner = f" [own {m.inner:.2f}]" if m.inner is not None else ""
    return f"{m.wall:.2f} s{inner}"


def main_rows(r: SizeResult, keys: list[str]) -> list[list[str]]:
    """One row per step: the figure per engine, the target and its verdict (judged on the DAG path's wall clock for
    runs, else in-process's; on the process's wall clock for status; on the two tasks' own seconds for checkpoints)."""
    rows = []
    width = r.width

    def judged(step: str) -> Measure | None:
        """The DAG path's measure, else in-process's when the DAG path was not measured; None if that one failed."""
        for key in ("connect", "inproc"):
            m = r.get(step, key)
            if m is not None:
                return m if m.error is None else None
        return None

    targets = {
        "first": (TARGET_FIRST_S, f"<= {TARGET_FIRST_S:g} s"),
        "nothing": (TARGET_NOTHING_NEW_S, f"<= {TARGET_NOTHING_NEW_S:g} s"),
        "new": (TARGET_NEW_S, f"<= {TARGET_NEW_S:g} s (DAG path)"),
    }
    for step in RUN_STEPS:
        if not any(m.step == step for m in r.measures):
            continue
        m = judged(step)
        limit, text = targets[step]
        records = {"first": FIRST_PER_PARTITION, "nothing": 0, "new": NEW_PER_PARTITION}[step] * width
        rows.append(
            [
                f"{STEPS[step]} ({records:,} records)",
                *(cell(r.get(step, k)) for k in keys),
                text,
                verdict(m.wall if m else None, limit),
            ]
        )
    engine_free = ["n/a" if k == "plain" else "(same)" for k in keys[1:]]
    for step, text, limit, figure in (
        ("status", f"<= {TARGET_STATUS_S:g} s", TARGET_STATUS_S, lambda m: m.wall),
        ("page", "-", None, None),
        ("emit", f"emit + sync <= {TARGET_CHECKPOINTS_S:g} s", None, None),
    ):
        m = r.get(step)
        if m is None:
            continue
        row = [STEPS[step], cell(m), *engine_free]
        rows.append([*row, text, verdict(figure(m) if figure and m.error is None else None, limit or 0)])
        if step == "emit":
            sync = r.get("sync")
            both = (
                m.inner + sync.inner
                if sync is not None and m.error is None and sync.error is None and m.inner and sync.inner
                else None
            )
            row = [STEPS["sync"], cell(sync), *engine_free]
            rows.append(
                [
                    *row,
                    f"(emit + sync own: {both:.2f} s)" if both is not None else "-",
                    verdict(both, TARGET_CHECKPOINTS_S),
                ]
            )
    if any(m.step == "verify" for m in r.measures):
        rows.append([f"{STEPS['verify']} ({width:,} partitions)", *(cell(r.get("verify", k)) for k in keys), "-", "-"])
    peaks = []
    for key in keys:
        values = [m.rss_mb for m in r.measures if m.step in RUN_STEPS and m.variant == key and m.rss_mb is not None]
        peaks.append(f"{max(values):.0f} MB" if values else "-")
    # The driver is the DAG path's CLI process: in-process, the same process also copies (its clients' buffers and
    # metadata are an executor's), so it is shown, not judged.
    driver_peaks = [m.rss_mb for m in r.measures if m.step in RUN_STEPS and m.variant == "connect" and m.rss_mb]
    peak = max(driver_peaks) if driver_peaks else None
    rows.append(
        [
            "peak RSS of a run's driver process (in-process: driver and copy)",
            *peaks,
            f"<= {TARGET_RSS_MB:g} MB (DAG path)",
            verdict(peak, TARGET_RSS_MB),
        ]
    )
    return rows


def detail_rows(r: SizeResult) -> list[list[str]]:
    """Every step's process: wall, own seconds, records, peak RSS, Kafka calls of the driver, and a note."""
    rows = []
    for m in r.measures:
        calls = m.kafka_calls
        top = ", ".join(f"{k.removeprefix('admin ')} {n}" for k, n in list((calls.get("by_kind") or {}).items())[:4])
        rows.append(
            [
                STEPS[m.step],
                COLUMNS.get(m.variant, "-"),
                "FAILED" if m.error else f"{m.wall:.2f}",
                f"{m.inner:.2f}" if m.inner is not None else "-",
                f"{m.records:,}" if m.records is not None else "-",
                f"{m.rss_mb:.0f}" if m.rss_mb is not None else "-",
                str(calls.get("admin", "-")) if calls else "-",
                str(calls.get("clients", "-")) if calls else "-",
                top or "-",
                (m.error.splitlines()[0][:90] if m.error else m.detail) or "",
            ]
        )
    return rows


DETAIL_HEADER = [
    "step",
    "engine",
    "wall s",
    "own s",
    "records",
    "peak RSS MB",
    "admin calls",
    "clients",
    "most frequent calls",
    "note",
]


def growth_rows(small: SizeResult, large: SizeResult) -> list[list[str]]:
    """Per step and engine: the cost per partition at both sizes and its growth (large / small)."""
    rows = []
    for m in small.measures:
        other = large.get(m.step, m.variant)
        if m.error or other is None or other.error or m.wall is None or other.wall is None:
            continue
        per_small, per_large = m.wall / small.width, other.wall / large.width
        ratio = per_large / per_small if per_small else float("nan")
        own = (
            f"{(other.inner / large.width) / (m.inner / small.width):.2f}x"
            if m.inner and other.inner is not None
            else "-"
        )
        flat = ("met" if ratio <= FLAT_RATIO else "NOT met") if m.step in RUN_STEPS else "-"
        admin = (
            f"{m.kafka_calls.get('admin')} -> {other.kafka_calls.get('admin')}"
            if m.kafka_calls and other.kafka_calls
            else "-"
        )
        clients = (
            f"{m.kafka_calls.get('clients')} -> {other.kafka_calls.get('clients')}"
            if m.kafka_calls and other.kafka_calls
            else "-"
        )
        rss = f"{m.rss_mb:.0f} -> {other.rss_mb:.0f}" if m.rss_mb is not None and other.rss_mb is not None else "-"
        rows.append(
            [
                STEPS[m.step],
                COLUMNS.get(m.variant, "-"),
                f"{m.wall:.2f}",
                f"{per_small * 1000:.2f}",
                f"{other.wall:.2f}",
                f"{per_large * 1000:.2f}",
                f"{ratio:.2f}x",
                own,
                admin,
                clients,
                rss,
                flat,
            ]
        )
    return rows


def print_size(r: SizeResult, keys: list[str]) -> None:
    at_target = (r.topics, r.partitions, r.groups) == TARGET_SIZE
    print(f"\n## {r.label} = {r.width:,} partitions, {r.groups} groups (topics bench.{r.run_id}.*)\n")
    if r.setup:
        print("setup (not timed as steps): " + ", ".join(f"{k} {v:.1f}" for k, v in r.setup.items()) + "\n")
    if r.stopped:
        print(f"STOPPED: {r.stopped}\n")
    if r.measures:
        header = ["step", *(COLUMNS[k] for k in keys), "target (1,000 x 10, 500 groups)", "met"]
        print(table(main_rows(r, keys), header))
        print(
            "\nwall clock of the step's process [its own seconds: the run report's, or the timed call's]; the page "
            "API: one request with the cache cleared, after a first one [the process, Airflow's imports included]; "
            "status, page and checkpoints have no engine: their one figure is under the first column."
            + ("" if at_target else " The targets are set for 1,000 x 10 and 500 groups: at this size, indicative.")
        )
        print("\nevery step's process (peak RSS: ru_maxrss of that process alone; Kafka calls: the driver's):\n")
        print(table(detail_rows(r), DETAIL_HEADER))
        failed = [m for m in r.measures if m.error]
        for m in failed:
            print(f"\nFAILED {STEPS[m.step]} {COLUMNS.get(m.variant, '')}:\n{m.error}")
    if r.server_rss:
        s = r.server_rss
        print(
            f"\nlocal Spark Connect server after the size's steps: {s['server_mb']:.0f} MB RSS (peak {s['server_peak_mb']:.0f}"
            f" MB), {s['workers']:.0f} Python worker(s) {s['workers_mb']:.0f} MB"
        )


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``100x10,1000x10`` -> [(100, 10), (1000, 10)]."""
    sizes = []
    for part in text.split(","):
        topics, _, partitions = part.strip().lower().partition("x")
        sizes.append((int(topics), int(partitions)))
    if any(t < 1 or p < 1 for t, p in sizes):
        raise ValueError("sizes must be positive")
    return sizes


# ----------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------


def helper_mode(args: argparse.Namespace) -> int | None:
    """The internal modes, run as subprocesses of this script; None when none is asked for."""
    if args.plain_loop:
        print(json.dumps(plain_wide_loop(**json.loads(args.plain_loop))), flush=True)
    elif args.plain_verify:
        print(json.dumps(plain_wide_verify(**json.loads(args.plain_verify))), flush=True)
    elif args.checkpoint_task:
        print(json.dumps(checkpoint_task(args.task_config, args.task_flow, args.checkpoint_task)), flush=True)
    elif args.page_api:
        print(json.dumps(page_api()), flush=True)
    else:
        return None
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000, help="T: topics of the flow (1,000)")
    parser.add_argument("--partitions", type=int, default=10, help="P: partitions per topic (10)")
    parser.add_argument("--groups", type=int, default=500, help="G: consumer groups, each on 20 partitions (500)")
    parser.add_argument(
        "--sizes", help="TxP[,TxP]: measure each size in turn on fresh topics, e.g. 100x10,1000x10 (overrides T, P)"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANT_KEYS), help=f"comma-separated, from {', '.join(VARIANT_KEYS)} (all)"
    )
    parser.add_argument("--spark-remote", help="sc://HOST:PORT of a Spark Connect server (default: a local one)")
    add_cluster_arguments(parser)
    parser.add_argument("--keep", action="store_true", help="keep the topics made (default: deleted after each size)")
    parser.add_argument("--skip", default="", help=f"comma-separated steps not to measure, from {', '.join(SKIPPABLE)}")
    parser.add_argument("--json", dest="json_file", help="write every figure to this JSON file")
    parser.add_argument("--keep-logs", action="store_true", help="keep every step's output and report")
    parser.add_argument("--no-settle", action="store_true", help="do not wait for the embedded brokers to be idle")
    parser.add_argument(
        "--step-timeout", type=float, default=STEP_TIMEOUT_S, help=f"kill a step after this (s, {STEP_TIMEOUT_S:g})"
    )
    for internal in ("--plain-loop", "--plain-verify", "--checkpoint-task", "--task-config", "--task-flow"):
        parser.add_argument(internal, help=argparse.SUPPRESS)
    parser.add_argument("--page-api", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    answered = helper_mode(args)
    if answered is not None:
        return answered
    if bool(args.source_bootstrap) != bool(args.target_bootstrap):
        parser.error("--source-bootstrap and --target-bootstrap go together")
    keys = [k.strip() for k in args.variants.split(",") if k.strip()]
    unknown = [k for k in keys if k not in VARIANT_KEYS]
    if unknown or not keys:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANT_KEYS)}")
    keys = [k for k in VARIANT_KEYS if k in keys]
    args.skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    if any(s not in SKIPPABLE for s in args.skip):
        parser.error(f"--skip takes {', '.join(SKIPPABLE)}")
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else [(args.topics, args.partitions)]
    except ValueError as exc:
        parser.error(f"--sizes: {exc}")
    variants = [VARIANTS[VARIANT_KEYS[k]] for k in keys]

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="mirrorflow-wide-flow-"))
    results: list[SizeResult] = []
    embedded = not args.source_bootstrap
    try:
        with clusters(args) as (source, target, _embedded, parties), spark_connect(args, variants, workdir) as remote:
            brokers = [pid for name, pid in parties.items() if name.endswith("broker")]
            say(f"source {source}, target {target}; step outputs in {workdir}")
            for number, size in enumerate(sizes, start=1):
                result = measure_size(args, number, size, source, target, brokers, remote, workdir, variants)
                results.append(result)
                if result.stopped and brokers and not all(psutil.pid_exists(pid) for pid in brokers):
                    say("an embedded broker is gone: no further size can be measured")
                    break
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    finally:
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    brokers_text = "embedded noida-db brokers" if embedded else f"{args.source_bootstrap} -> {args.target_bootstrap}"
    print(f"\n# mirrorflow: a wide flow, {started_at}, {os.cpu_count()} CPU(s), {brokers_text}")
    print(f"command: {command}  (whole run {time.perf_counter() - started:.0f} s)")
    print(
        f"records of {RECORD_BYTES} bytes: {FIRST_PER_PARTITION} per partition before the first run, "
        f"{NEW_PER_PARTITION} more before the new-records run; every group committed on "
        f"{PARTITIONS_PER_GROUP} partitions; exactly-once"
    )
    for r in results:
        print_size(r, keys)
    growth: list[list[str]] = []
    if len(results) >= 2:
        small, large = results[0], results[-1]
        growth = growth_rows(small, large)
        print(f"\n## growth from {small.label} ({small.width:,} partitions) to {large.label} ({large.width:,})\n")
        print(
            table(
                growth,
                [
                    "step",
                    "engine",
                    f"{small.label} s",
                    "ms/partition",
                    f"{large.label} s",
                    "ms/partition",
                    "growth per partition",
                    "growth (own s)",
                    "admin calls",
                    "clients",
                    "peak RSS MB",
                    f"flat (<= {FLAT_RATIO:g}x)",
                ],
            )
        )
    if args.json_file:
        Path(args.json_file).write_text(
            json.dumps(
                {
                    "started_at": started_at,
                    "command": command,
                    "cpus": os.cpu_count(),
                    "brokers": brokers_text,
                    "sizes": [{**asdict(r), "width": r.width} for r in results],
                    "growth": growth,
                },
                indent=2,
            )
        )
        print(f"\nfigures written to {args.json_file}")
    return 1 if any(r.stopped or any(m.error for m in r.measures) for r in results) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
