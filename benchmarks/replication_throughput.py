"""Benchmark: replication speed, mirrorflow's paths side by side with the plain loop a user would write.

Why this exists: on Apache Kafka, ``mirrorflow replicate`` cost ~21 s before it copied
anything (a plain consume-and-produce loop ~1 s), and its steady rate was 0.80x that loop's. Every change
meant to fix that has to be measured the same way, so this script measures, in one run and side by side:

* mirrorflow exactly-once and at-least-once through the path the DAGs use: ``mirrorflow replicate --remote
  sc://...``, whose work units run as Spark tasks on a Spark Connect server (the demo's and compose's engine;
  the benchmark starts its own local server first, or uses ``--spark-remote``), with ``--family default
  --report R``;
* the same two through spark-submit (``--master``: ``spark_apps/mirror_family.py``, a Spark application per run,
  what a ``spark`` connection does) and through ``mirrorflow replicate --in-process`` (no Spark);
* the baseline: one single-process confluent-kafka loop (one Consumer, read_committed, all partitions
  assigned; one idempotent Producer, acks=all; positions kept as group commits), run by this script.

Every variant is a subprocess timed by its wall clock (so Python, JVM and Spark start-up count, as they do
for an Airflow task), and the mirrorflow runs also give their own ``seconds`` from the run report, which
starts after the configuration is loaded and the clusters answered. Per variant:

* **fixed cost**: a run over a tiny load (steady state: the target topics and progress exist) and a run with
  nothing new, each ``--repeats`` times; also the very first run (it creates the internal topics);
* **a run copying 10,000 records** (one of the targets). These fixed costs are measured first, before the
  large loads are written: a noida-db broker holding gigabytes persists all it holds for seconds on both cores
  after writes, which would be measured as the run's own cost (Apache Kafka appends to its log instead);
* **marginal rate** from two load sizes N1 = N/4 and N2 = N (separate topics, each copied by its own run):
  (N2 - N1) / (t2 - t1), so start-up is not mixed into the rate; measured in ``--rate-rounds`` rounds (default
  3), each round copying N1 and N2 afresh under new aliases (``cceo2``, ``plain2``, ...) with the variants in a
  rotated order, so no variant always runs on the brokers' freshest or most loaded state. The rate is the
  median of the rounds, and the ratio to the baseline the median of the rounds' own ratios;
* the ratios to the baseline, and the targets (met or not) next to the figures.

Each mirrorflow variant has its own source alias (``cceo``, ``ccalo``, ``sseo``, ``ssalo``, ``ipeo``, ``ipalo``),
all pointing at the same source cluster: the alias names the remote topics (``cceo.bench...``) and the progress
topic (``mm2-offsets.cceo.internal``), so every variant copies into fresh topics with fresh progress. Runs are
sequential, so the run locks never meet.

On noida-db, a fetch returns a partition's whole backlog; when that is above the copier's 200 MiB receive limit
(the default load is), the script raises the limit in the benchmark's configuration and says so (embedded only).

It is a benchmark, not a test: it never asserts timings. By default it starts two embedded noida-db clusters
(temp state dir, free ports) and always stops them; with ``--source-bootstrap``/``--target-bootstrap`` it
runs against any two (PLAINTEXT) clusters, e.g. Apache Kafka, using topic names unique to the run, and
deletes the topics it created when it ends (``--keep-topics`` keeps them; the small internal topics stay).

    .venv/bin/python benchmarks/replication_throughput.py                 # 1,000,000 x 1 KB in 4 partitions
    .venv/bin/python benchmarks/replication_throughput.py --quick         # 100,000 records
    .venv/bin/python benchmarks/replication_throughput.py --source-bootstrap a:9092 --target-bootstrap b:9092
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import INTERRUPTED, create_topic, embedded_clusters, say, table, tree_cpu_seconds, wait_until_quiet
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[1]
TARGET_ALIAS = "backup"

#: The targets, printed next to the figures so a reader sees met / not met.
TARGET_NOTHING_NEW_S = 3.0
TARGET_SMALL_S = 5.0
TARGET_SMALL_RECORDS = 10_000
TARGET_EO_RATE_RATIO = 1.2

#: noida-db answers a fetch with the whole backlog of every partition asked for, ignoring fetch.max.bytes
#: (Apache Kafka honours it); librdkafka drops a response above receive.message.max.bytes and the consumer
#: then sees nothing at all. librdkafka's maximum, so the plain loop (one fetch for all partitions) copes.
PLAIN_RECEIVE_MAX = 2**31 - 1
#: mirrorflow's copier raises receive.message.max.bytes to 200 MiB (kafka.clients.RECEIVE_MAX), per partition.
MIRRORFLOW_RECEIVE_MAX = 200 * 2**20
#: Bytes a record costs on the wire besides key and value (batch framing, header, varints): an estimate.
RECORD_OVERHEAD = 80


@dataclass(frozen=True)
class Variant:
    """One way of copying: a mirrorflow path and guarantee, or the plain loop (``alias`` "plain")."""

    key: str
    alias: str
    label: str
    delivery: str = ""
    in_process: bool = False
    spark_submit: bool = False

    @property
    def engine(self) -> str:
        """connect (units on a Spark Connect server, the default), submit (spark-submit) or in-process."""
        return "in-process" if self.in_process else "submit" if self.spark_submit else "connect"

    @property
    def plain(self) -> bool:
        return self.key == "plain"

    def in_round(self, number: int) -> Variant:
        """The variant under the alias of rate round ``number`` (round 1: its own): fresh progress, fresh topics."""
        return self if number == 1 else replace(self, alias=f"{self.alias}{number}")


VARIANTS = {
    v.key: v
    for v in (
        Variant("connect-eo", "cceo", "mirrorflow exactly-once, DAG path (Spark Connect)", "exactly-once"),
        Variant("connect-alo", "ccalo", "mirrorflow at-least-once, DAG path (Spark Connect)", "at-least-once"),
        Variant("submit-eo", "sseo", "mirrorflow exactly-once, spark-submit", "exactly-once", spark_submit=True),
        Variant("submit-alo", "ssalo", "mirrorflow at-least-once, spark-submit", "at-least-once", spark_submit=True),
        Variant("inproc-eo", "ipeo", "mirrorflow exactly-once, --in-process", "exactly-once", in_process=True),
        Variant("inproc-alo", "ipalo", "mirrorflow at-least-once, --in-process", "at-least-once", in_process=True),
        Variant("plain", "plain", "plain loop (confluent-kafka, 1 process): baseline"),
    )
}


@dataclass
class Timing:
    """One run of one variant: subprocess wall clock, and the run's own seconds (report, or the loop's)."""

    step: str
    wall: float
    inner: float
    records: int
    expected: int
    phases: dict[str, float] = field(default_factory=dict)  # the report's phases, when the library writes them
    round: int = 1  # the rate round of an N1 or N2 run
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds of each party during the run (see Runner)
    settled: float = 0.0  # seconds waited before the run for the embedded brokers to finish persisting
    # The run asked the source for its ACLs (due once per sync.topic.acls.interval.seconds): on noida-db that sets
    # the source broker persisting everything it holds for seconds, during the run (docs/performance.md).
    acl_sync: bool = False
    engine_steps: dict[str, float] = field(default_factory=dict)  # where the engine phase went (Spark Connect)


@dataclass
class Result:
    variant: Variant
    runs: list[Timing] = field(default_factory=list)
    error: str | None = None
    appended: int = 0  # records appended to the live topic after its tiny load (the steady-state runs)

    def of(self, step: str) -> list[Timing]:
        return [t for t in self.runs if t.step == step]


@dataclass(frozen=True)
class Load:
    """The names and sizes of one benchmark run (topic names carry a run id, for shared clusters)."""

    run_id: str
    records: int
    size: int
    partitions: int
    tiny: int
    small: int
    rounds: int = 1

    @property
    def n1(self) -> int:
        return max(1, self.records // 4)

    def data_topic(self, name: str) -> str:
        return f"bench.{self.run_id}.data.{name}"

    def live_topic(self, variant: Variant) -> str:
        """The variant's own topic for the tiny and 10,000-record runs (appending to it is its steady state)."""
        return f"bench.{self.run_id}.{variant.alias}.live"

    def source_topics(self, variant: Variant) -> list[str]:
        return [self.live_topic(variant), self.data_topic("n1"), self.data_topic("n2")]

    def target_topics(self, variant: Variant) -> list[str]:
        """Where the variant writes: mirrorflow's remote topics (``<alias>.<topic>``), the loop's ``plain.<topic>``."""
        return [f"{variant.alias}.{t}" for t in self.source_topics(variant)]

    def in_rounds(self, variants: Sequence[Variant]) -> list[Variant]:
        """Every variant under every round's alias."""
        return [v.in_round(n) for n in range(1, self.rounds + 1) for v in variants]


# ----------------------------------------------------------------------------------------------------
# Loading the source
# ----------------------------------------------------------------------------------------------------


def load_records(bootstrap: str, topic: str, partitions: int, count: int, size: int, first: int = 0) -> None:
    """``count`` records of ``size`` value bytes, round robin over the partitions, each with a key and a header.

    Values are slices of a random block at varying positions: incompressible, and cheap to make in Python.
    """
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20, "compression.type": "none"}
    )
    block = os.urandom(max(65536, 2 * size))
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    step = max(1, count // 5)
    for i in range(first, first + count):
        start = (i * 7919) % (len(block) - size)
        while True:
            try:
                producer.produce(
                    topic,
                    key=b"%d" % i,
                    value=block[start : start + size],
                    partition=i % partitions,
                    headers=[("bench", b"1")],
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: let deliveries drain it
        producer.poll(0)
        if count >= 100_000 and (i - first + 1) % step == 0:
            say(f"    {topic}: {i - first + 1:,} of {count:,} sent")
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"{topic}: {remaining} record(s) not delivered, errors: {errors[:3]}")


def load_live(source: str, target: str, load: Load, variants: Sequence[Variant]) -> None:
    """One live topic per variant (and rate round) with the tiny load, and the loop's target topics."""
    for variant in load.in_rounds(variants):
        create_topic(source, load.live_topic(variant), load.partitions)
        load_records(source, load.live_topic(variant), load.partitions, load.tiny, load.size)
        if variant.plain:  # mirrorflow creates its remote topics inside its runs; a user's loop has them already
            for topic in load.target_topics(variant):
                create_topic(target, topic, load.partitions)
    say(f"  live topics: {load.tiny} records each, for {', '.join(v.alias for v in load.in_rounds(variants))}")


def load_data(source: str, load: Load) -> None:
    """The two data loads of the marginal rate (N1, N2)."""
    for name, count in (("n1", load.n1), ("n2", load.records)):
        topic = load.data_topic(name)
        say(f"  loading {count:,} records of {load.size} bytes into {topic} ({load.partitions} partitions)")
        started = time.perf_counter()
        create_topic(source, topic, load.partitions)
        load_records(source, topic, load.partitions, count, load.size)
        seconds = time.perf_counter() - started
        say(f"    loaded in {seconds:.1f} s ({count / seconds:,.0f} records/s)")


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete what this run created (frees the broker's disk and memory); a topic already gone is fine."""
    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic, future in admin.delete_topics(topics, operation_timeout=60).items():
        try:
            future.result(90)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                say(f"    could not delete {topic}: {exc.args[0].str()}")


# ----------------------------------------------------------------------------------------------------
# The plain loop (the baseline), run as a subprocess of this script
# ----------------------------------------------------------------------------------------------------


def plain_loop(source: str, target: str, topics: list[str], prefix: str, group: str) -> dict[str, Any]:
    """Copy what is new in ``topics`` to ``<prefix><topic>``, same partition, like a user's first loop would.

    Positions are the group's committed offsets (from the beginning when there are none), committed after
    the producer flushed: at-least-once, like mirrorflow's at-least-once mode, without its offset syncs,
    locks, topic preparation or reports.
    """
    started = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            # noida-db answers a fetch with every assigned partition's whole backlog, ignoring fetch.max.bytes;
            # librdkafka drops a larger response and the loop would see nothing (mirrorflow's copier raises
            # the same limit). No effect on Apache Kafka, which honours the fetch sizes.
            "receive.message.max.bytes": PLAIN_RECEIVE_MAX,
        }
    )
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
    tps = []
    for topic in topics:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        tps += [TopicPartition(topic, p) for p in sorted(meta.partitions)]
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(tps, timeout=30)}
    todo = []
    for tp in tps:
        _, high = consumer.get_watermark_offsets(tp, timeout=30)
        start = committed[(tp.topic, tp.partition)]
        if start < 0 or start < high:
            todo.append(TopicPartition(tp.topic, tp.partition, start if start >= 0 else -2))  # -2: beginning
    next_offsets: dict[tuple[str, int], int] = {}
    records = 0
    if todo:
        consumer.assign(todo)
        open_partitions = {(tp.topic, tp.partition) for tp in todo}
        while open_partitions:
            for message in consumer.consume(10_000, timeout=1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        open_partitions.discard((message.topic(), message.partition()))
                        continue
                    raise KafkaException(error)
                ts_type, ts = message.timestamp()
                extra = {} if ts_type == TIMESTAMP_NOT_AVAILABLE else {"timestamp": ts}
                while True:
                    try:
                        producer.produce(
                            prefix + message.topic(),
                            key=message.key(),
                            value=message.value(),
                            headers=message.headers(),
                            partition=message.partition(),
                            **extra,
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                next_offsets[(message.topic(), message.partition())] = message.offset() + 1
                records += 1
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"plain loop: {remaining} record(s) not delivered, errors: {errors[:3]}")
    if next_offsets:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in next_offsets.items()], asynchronous=False)
    consumer.close()
    return {"records": records, "seconds": round(time.perf_counter() - started, 3)}


# ----------------------------------------------------------------------------------------------------
# Running the variants
# ----------------------------------------------------------------------------------------------------


def mirrorflow_config(
    path: Path, source: str, target: str, load: Load, variants: Sequence[Variant], rf: int, embedded: bool
) -> None:
    """One mm2.properties with a flow per mirrorflow variant: alias -> backup, its own delivery and topic filter.

    On the embedded broker, a partition's backlog above the copier's 200 MiB receive limit would be dropped
    (see ``PLAIN_RECEIVE_MAX``); only then is the source consumer's limit raised, and the run says so.
    """
    mirrorflow = [v for v in load.in_rounds(variants) if not v.plain]
    lines = [
        "# written by benchmarks/replication_throughput.py",
        f"clusters = {', '.join([*(v.alias for v in mirrorflow), TARGET_ALIAS])}",
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
    backlog = load.records // load.partitions * (load.size + RECORD_OVERHEAD)
    raise_limit = embedded and backlog > MIRRORFLOW_RECEIVE_MAX * 0.95
    if raise_limit:
        say(
            f"  noida-db: a partition's backlog (~{backlog / 2**20:.0f} MiB) is above mirrorflow's 200 MiB receive "
            f"limit; setting <alias>.consumer.receive.message.max.bytes = {PLAIN_RECEIVE_MAX} (noida-db only)"
        )
    run = load.run_id
    for v in mirrorflow:
        flow = f"{v.alias}->{TARGET_ALIAS}"
        lines += [
            f"{v.alias}.bootstrap.servers = {source}",
            f"{flow}.enabled = true",
            # A backslash escapes in properties files: \\. is the regex's literal dot.
            rf"{flow}.topics = bench\\.{run}\\.data\\..*, bench\\.{run}\\.{v.alias}\\..*",
            f"{flow}.groups = bench-none",
            f"{flow}.mirrorflow.delivery = {v.delivery}",
        ]
        if raise_limit:
            lines.append(f"{v.alias}.consumer.receive.message.max.bytes = {PLAIN_RECEIVE_MAX}")
    path.write_text("\n".join(lines) + "\n")


class Runner:
    """Runs one step of one variant as a subprocess and times it; keeps each run's output in a log file."""

    def __init__(
        self,
        workdir: Path,
        config: Path,
        source: str,
        target: str,
        load: Load,
        master: str,
        remote: str,
        parties: dict[str, int] | None = None,
        settle: bool = True,
    ) -> None:
        self.workdir, self.config, self.source, self.target = workdir, config, source, target
        self.load, self.master, self.remote = load, master, remote
        #: Long-lived processes whose CPU each run is charged with (embedded brokers, the local Spark Connect
        #: server), by name; the run's own process tree is "run process".
        self.parties = parties or {}
        #: Wait before each run until the embedded brokers are idle (``wait_until_quiet``): each run is then
        #: charged with what it makes the brokers do, not with the persistence of the previous step's writes.
        self.settle = settle
        self.count = 0
        script = Path(sys.executable).parent / "mirrorflow"
        self.mirrorflow = [str(script)] if script.exists() else [sys.executable, "-m", "mirrorflow.cli"]

    def command(self, variant: Variant, topics: list[str] | None, report: Path) -> list[str]:
        if variant.plain:
            spec = {
                "source": self.source,
                "target": self.target,
                "topics": topics or self.load.source_topics(variant),
                "prefix": f"{variant.alias}.",
                "group": f"bench-{variant.alias}-{self.load.run_id}",
            }
            return [sys.executable, str(Path(__file__).resolve()), "--plain-loop", json.dumps(spec)]
        cmd = [*self.mirrorflow, "replicate", "--config", str(self.config)]
        cmd += ["--flow", f"{variant.alias}->{TARGET_ALIAS}", "--family", "default", "--report", str(report)]
        cmd += {
            "connect": ["--remote", self.remote],
            "submit": ["--master", self.master],
            "in-process": ["--in-process"],
        }[variant.engine]
        return cmd + (["--topics", ",".join(topics)] if topics else [])

    def run(
        self, variant: Variant, step: str, expected: int, topics: list[str] | None = None, number: int = 1
    ) -> Timing:
        """One timed run; raises with the tail of its output unless it copied exactly ``expected`` records."""
        self.count += 1
        report = self.workdir / f"{self.count:03d}-{variant.alias}-{step}.json"
        output = report.with_suffix(".log")
        cmd = self.command(variant, topics, report)
        brokers = [pid for name, pid in self.parties.items() if name.endswith("broker")]
        limit = STEADY_SETTLE_S if step in STEADY_STEPS else SETTLE_S
        settled = wait_until_quiet(brokers, limit) if self.settle and brokers else 0.0
        if settled >= 2:
            say(f"    (waited {settled:.0f} s for the embedded brokers to finish persisting earlier writes)")
        before = {name: tree_cpu_seconds(pid) for name, pid in self.parties.items()}
        own = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with output.open("w") as out:
            code = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = {"run process": after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime}
        for name, pid in self.parties.items():
            # Negative when a process of that tree ended during the run (Spark retires idle Python workers): its CPU
            # left the sum. Unknown, then, rather than a wrong figure.
            used = tree_cpu_seconds(pid) - before[name]
            cpu[name] = used if used >= 0 else math.nan
        tail = "\n".join(output.read_text(errors="replace").splitlines()[-15:])
        if code != 0:
            raise RuntimeError(f"{variant.key} {step}: exit {code}:\n{tail}")
        phases: dict[str, float] = {}
        engine_steps: dict[str, float] = {}
        acl_sync = False
        if variant.plain:
            answer = json.loads(output.read_text().strip().splitlines()[-1])
            records, inner = answer["records"], answer["seconds"]
        else:
            data = json.loads(report.read_text())
            records, inner, phases = data["records"], data["seconds"], data.get("phases") or {}
            engine_steps = data.get("engine_steps") or {}
            acl_sync = (data.get("preparation") or {}).get("acls_synced_ms") is not None
            if not data["ok"] or data["lag"]:
                raise RuntimeError(f"{variant.key} {step}: ok={data['ok']} lag={data['lag']}:\n{tail}")
        if records != expected:
            raise RuntimeError(f"{variant.key} {step}: copied {records} records, expected {expected}:\n{tail}")
        rate = f", {records / wall:,.0f} records/s" if records >= 10_000 else ""
        acls = " (synced ACLs)" if acl_sync else ""
        say(f"    {step:<13} wall {wall:7.2f} s, run {inner:7.2f} s, {records:>9,} records{rate}{acls}")
        return Timing(step, wall, inner, records, expected, phases, number, cpu, settled, acl_sync, engine_steps)


#: The longest wait for the brokers before a run (``Runner.settle``).
SETTLE_S = 300.0
#: ... and before a steady-state run, which stands for a scheduled run on a schedule of well under a minute: it
#: must not find Spark's Python workers gone (Spark stops one idle for 60 s), nor wait out the persistence of a
#: gigabyte its schedule would not have given it time for.
STEADY_SETTLE_S = 15.0
STEADY_STEPS = ("nothing new", "tiny", "small")


def append_live(runner: Runner, result: Result, load: Load, count: int) -> None:
    """``count`` more records on the variant's own live topic (round 1's), after those appended so far."""
    live = load.live_topic(result.variant)
    load_records(runner.source, live, load.partitions, count, load.size, first=result.appended)
    result.appended += count


def measure_fixed(runner: Runner, variant: Variant, load: Load, repeats: int) -> Result:
    """The variant's fixed costs: first run, then steady state: tiny, 10,000 records, nothing new.

    Measured before the large loads are on the brokers: a noida-db broker holding gigabytes persists all of it for
    seconds on both cores after a write, which says nothing about a scheduled run's own cost (Apache Kafka appends).
    """
    result = Result(variant)
    live = load.live_topic(variant)
    say(f"  {variant.key}: {variant.label}")
    try:
        result.runs.append(runner.run(variant, "first run", load.tiny, [live]))
        # Steady state, as a frequent schedule sees it: an unmeasured run first, then runs at most STEADY_SETTLE_S
        # apart, those that use Spark first (a run with nothing new never reaches it, so the workers' idle clock
        # would run on through them).
        for count, step in (
            (load.tiny, "warm-up"),
            *[(load.tiny, "tiny")] * repeats,
            *[(load.small, "small")] * repeats,
        ):
            append_live(runner, result, load, count)
            timing = runner.run(variant, step, count)
            if step != "warm-up":
                result.runs.append(timing)
        for _ in range(repeats):  # the whole family, as the DAG runs it: every topic copied already
            result.runs.append(runner.run(variant, "nothing new", 0))
    except (RuntimeError, OSError, ValueError, KafkaException) as exc:
        result.error = str(exc)
        say(f"    FAILED: {exc}")
    return result


def measure_rate(runner: Runner, result: Result, load: Load, number: int) -> None:
    """Rate round ``number`` of a variant: a warm-up run on the round's own live topic (in round 1 on records
    appended to the topic its fixed costs used; later rounds create their progress and internal topics there, as a
    variant's first run does), then N1 and N2 afresh."""
    variant = result.variant.in_round(number)
    say(f"  {result.variant.key}, rate round {number} (alias {variant.alias})")
    live = load.live_topic(variant)
    try:
        if number == 1:
            append_live(runner, result, load, load.tiny)
        runner.run(variant, "warm-up", load.tiny, [live])
        result.runs.append(runner.run(variant, "N1", load.n1, [load.data_topic("n1")], number))
        result.runs.append(runner.run(variant, "N2", load.records, [load.data_topic("n2")], number))
    except (RuntimeError, OSError, ValueError, KafkaException) as exc:
        result.error = str(exc)
        say(f"    FAILED: {exc}")


# ----------------------------------------------------------------------------------------------------
# The tables
# ----------------------------------------------------------------------------------------------------


def median(runs: list[Timing], inner: bool = False) -> float | None:
    return statistics.median(t.inner if inner else t.wall for t in runs) if runs else None


def fixed(runs: list[Timing]) -> str:
    """Median wall (min-max) and the run's own seconds: what start-up adds is the difference."""
    if not runs:
        return "-"
    walls = [t.wall for t in runs]
    spread = f" ({min(walls):.2f}-{max(walls):.2f})" if len(runs) > 1 else ""
    return f"{statistics.median(walls):.2f} s{spread} [run {median(runs, inner=True):.2f} s]"


def round_rates(result: Result, inner: bool = False) -> dict[int, float]:
    """Per rate round, (N2 - N1) / (t2 - t1) on wall clocks: the rate once started, whatever start-up costs.

    ``inner``: on the runs' own seconds instead, which leaves out the start-up's run-to-run spread. A round whose
    N2 run was not slower than its N1 run has no rate (the loads are too small for this machine's noise).
    """
    rates = {}
    for n1 in result.of("N1"):
        n2 = next((t for t in result.of("N2") if t.round == n1.round), None)
        if n2 is None:
            continue
        t1, t2 = (n1.inner, n2.inner) if inner else (n1.wall, n2.wall)
        if t2 > t1:
            rates[n1.round] = (n2.records - n1.records) / (t2 - t1)
    return rates


def marginal(result: Result, inner: bool = False) -> float | None:
    """The median of the rounds' marginal rates."""
    rates = round_rates(result, inner)
    return statistics.median(rates.values()) if rates else None


def rate_ratio(result: Result, baseline: Result | None) -> float | None:
    """The median over rounds of the variant's rate divided by the baseline's in the same round."""
    if baseline is None:
        return None
    mine, base = round_rates(result), round_rates(baseline)
    ratios = [mine[n] / base[n] for n in mine if n in base]
    return statistics.median(ratios) if ratios else None


def rate_cell(r: Result, rate: float | None, size: int) -> str:
    """The wall-clock marginal rate, and the one on the runs' own seconds (free of start-up noise)."""
    inner = marginal(r, inner=True)
    on_run = f"; run {inner:,.0f}" if inner else ""
    if rate:
        return f"{rate:,.0f} rec/s ({rate * size / 2**20:.0f} MiB/s){on_run}"
    return f"- (N2 runs not slower: noise){on_run}" if r.of("N1") and r.of("N2") else "-"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main_rows(results: list[Result], load: Load) -> list[list[str]]:
    baseline = next((r for r in results if r.variant.plain and not r.error), None)
    base_wall = median(baseline.of("N2")) if baseline else None
    rows = []
    for r in results:
        rate = marginal(r)
        n2 = median(r.of("N2"))
        ratios = []
        ratio = rate_ratio(r, baseline)
        if ratio and not r.variant.plain:
            ratios.append(f"rate {ratio:.2f}x")
        if n2 and base_wall and not r.variant.plain:
            ratios.append(f"wall {n2 / base_wall:.2f}x")
        rows.append(
            [
                r.variant.key + (" (FAILED)" if r.error else ""),
                f"{n2:.1f} s" if n2 else "-",
                fixed(r.of("first run")),
                fixed(r.of("tiny")),
                fixed(r.of("nothing new")),
                fixed(r.of("small")),
                rate_cell(r, rate, load.size),
                ", ".join(ratios) or ("1.00x" if r is baseline else "-"),
                targets_met(r, baseline),
            ]
        )
    return rows


def targets_met(r: Result, baseline: Result | None) -> str:
    """The targets for this variant, in a few words."""
    if r.variant.plain:
        return "(reference)"
    parts = []
    nothing, small = median(r.of("nothing new")), median(r.of("small"))
    if nothing is not None:
        parts.append(f"nothing new {verdict(nothing <= TARGET_NOTHING_NEW_S)}")
    if small is not None:
        parts.append(f"10k {verdict(small <= TARGET_SMALL_S)}")
    ratio = rate_ratio(r, baseline)
    if r.variant.delivery == "exactly-once" and ratio:
        parts.append(f"rate {verdict(ratio >= TARGET_EO_RATE_RATIO)}")
    return "; ".join(parts) or "-"


def target_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    """One row per target, one column per variant: the figure and met / NOT met."""
    baseline = next((r for r in results if r.variant.plain and not r.error), None)
    header = ["target", *(r.variant.key for r in results)]

    def cell(r: Result, figure: float | None, limit: float, unit: str, applies: bool = True) -> str:
        if not applies:
            return "n/a"
        if figure is None:
            return "-"
        return f"{figure:.2f}{unit}: {verdict(figure <= limit)}"

    nothing = [cell(r, median(r.of("nothing new")), TARGET_NOTHING_NEW_S, " s", not r.variant.plain) for r in results]
    small = [cell(r, median(r.of("small")), TARGET_SMALL_S, " s", not r.variant.plain) for r in results]
    rates = []
    for r in results:
        ratio = rate_ratio(r, baseline)
        if r.variant.delivery != "exactly-once" or not ratio:
            rates.append("n/a" if r.variant.delivery != "exactly-once" else "-")
        else:
            rates.append(f"{ratio:.2f}x: {verdict(ratio >= TARGET_EO_RATE_RATIO)}")
    return header, [
        [f"a run with nothing new <= {TARGET_NOTHING_NEW_S:g} s (wall)", *nothing],
        [f"a run copying {TARGET_SMALL_RECORDS:,} records <= {TARGET_SMALL_S:g} s (wall)", *small],
        [f"marginal exactly-once rate >= {TARGET_EO_RATE_RATIO:g}x the plain loop", *rates],
    ]


def round_rows(results: list[Result], rounds: int) -> list[list[str]]:
    """Each round's marginal rate and its ratio to the baseline's rate in the same round."""
    baseline = next((r for r in results if r.variant.plain and not r.error), None)
    base = round_rates(baseline) if baseline else {}
    rows = []
    for r in results:
        rates = round_rates(r)
        cells = []
        for n in range(1, rounds + 1):
            if n not in rates:
                cells.append("-")
            elif n in base and not r.variant.plain:
                acls = " ACLs" if any(t.acl_sync for t in r.runs if t.round == n and t.step in ("N1", "N2")) else ""
                cells.append(f"{rates[n]:,.0f} ({rates[n] / base[n]:.2f}x){acls}")
            else:
                cells.append(f"{rates[n]:,.0f}")
        ratio = rate_ratio(r, baseline)
        rows.append([r.variant.key, *cells, f"{ratio:.2f}x" if ratio and not r.variant.plain else "-"])
    return rows


def detail_rows(results: list[Result]) -> list[list[str]]:
    """Every step's median: wall, the run's own seconds, and the difference (process and Spark start-up)."""
    rows = []
    for r in results:
        for step in ("first run", "N1", "N2", "nothing new", "tiny", "small"):
            runs = r.of(step)
            if not runs:
                continue
            wall, inner = median(runs), median(runs, inner=True)
            assert wall is not None and inner is not None
            rows.append(
                [
                    r.variant.key,
                    step,
                    f"{runs[0].expected:,}",
                    str(len(runs)),
                    f"{wall:.2f} s",
                    f"{inner:.2f} s",
                    f"{wall - inner:.2f} s",
                ]
            )
    return rows


def phase_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    """Where the time of a steady-state run goes, from the reports' phases (median per phase).

    "outside" is the wall clock no phase covers: for spark-submit the ``mirrorflow replicate`` process itself
    (Python, imports, its own preflight) before it launches spark-submit, and the exits after the run.
    ``commit`` is part of ``copy``, so it is not added again.
    """
    names: list[str] = []
    for r in results:
        for t in r.runs:
            names += [n for n in t.phases if n not in names]
    if not names:
        return [], []
    rows = []
    for r in results:
        for step in ("nothing new", "tiny", "small", "N2"):
            runs = [t for t in r.of(step) if t.phases]
            if not runs:
                continue
            medians = {n: statistics.median(t.phases.get(n, 0.0) for t in runs) for n in names}
            wall = statistics.median(t.wall for t in runs)
            outside = wall - sum(v for n, v in medians.items() if n != "commit")
            cells = [f"{medians[n]:.2f}" for n in names]
            rows.append([r.variant.key, step, f"{wall:.2f}", *cells, f"{outside:.2f}"])
    return ["variant", "step", "wall s", *(f"{n} s" for n in names), "outside s"], rows


def engine_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    """The engine phase of the Spark Connect runs by step (client import, session, leftover jobs, package):
    median (max) seconds of each, so a slow start shows whether the client or the server was slow."""
    names: list[str] = []
    for r in results:
        for t in r.runs:
            names += [n for n in t.engine_steps if n not in names]
    rows = []
    for r in results:
        for step in ("tiny", "small", "N2"):
            runs = [t for t in r.of(step) if t.engine_steps]
            if runs:
                values = {n: [t.engine_steps.get(n, 0.0) for t in runs] for n in names}
                cells = [f"{statistics.median(v):.2f} ({max(v):.2f})" for v in values.values()]
                rows.append([r.variant.key, step, *cells])
    return ["variant", "step", *(f"{n} s" for n in names)], rows


# ----------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def clusters(args: argparse.Namespace) -> Iterator[tuple[str, str, bool, dict[str, int]]]:
    """The two clusters: the ones given, or a fresh embedded pair (stopped however the run ends), and the PIDs of
    the embedded brokers (whose CPU each run is charged with)."""
    if args.source_bootstrap:
        yield args.source_bootstrap, args.target_bootstrap, False, {}
        return
    with embedded_clusters() as pair:
        pids = {f"{side} broker": pair.pid(alias) for side, alias in (("source", "primary"), ("target", "backup"))}
        yield pair.primary, pair.backup, True, {name: pid for name, pid in pids.items() if pid is not None}


@contextlib.contextmanager
def spark_connect(args: argparse.Namespace, variants: Sequence[Variant], workdir: Path) -> Iterator[str]:
    """The Spark Connect server of the connect variants: ``--spark-remote``, else a local one for this run.

    Started before any timed run, as the demo and a deployment have it running already; its first session
    (new Python workers) is paid by each variant's "first run".
    """
    if args.spark_remote or not any(v.engine == "connect" for v in variants):
        yield args.spark_remote or ""
        return
    from mirrorflow.replication.local_connect import ensure_local_server, stop_local_server

    directory = workdir / "spark-connect"
    started = time.perf_counter()
    url = ensure_local_server(directory=directory, progress=False)
    say(f"  a local Spark Connect server at {url} (started in {time.perf_counter() - started:.0f} s, not timed)")
    try:
        yield url
    finally:
        stop_local_server(directory=directory)


def local_server_party(workdir: Path) -> dict[str, int]:
    """The local Spark Connect server this run started (``spark_connect``), as a party charged with CPU."""
    from mirrorflow.replication.local_connect import status

    pid = status(workdir / "spark-connect").pid
    return {"Spark server": pid} if pid else {}


def cpu_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    """CPU microseconds per record copied in the N2 runs (median over the rounds), per party and in all.

    On 2 cores the parties share, a path can only beat the plain loop's rate by spending less CPU per record in
    all, brokers included: this is the table that says whether a ratio is reachable on the machine at hand.
    """
    names: list[str] = []
    for r in results:
        for t in r.of("N2"):
            names += [n for n in t.cpu if n not in names]
    rows = []
    for r in results:
        runs = [t for t in r.of("N2") if t.cpu and t.records]
        if not runs:
            continue
        per = {n: statistics.median(t.cpu.get(n, 0.0) / t.records * 1e6 for t in runs) for n in names}
        total = statistics.median(sum(t.cpu.values()) / t.records * 1e6 for t in runs)
        cells = ["n/a" if math.isnan(per[n]) else f"{per[n]:.1f}" for n in names]
        rows.append([r.variant.key, *cells, "n/a" if math.isnan(total) else f"{total:.1f}"])
    return ["variant", *(f"{n} us" for n in names), "all us"], rows


def run_benchmark(args: argparse.Namespace, variants: list[Variant]) -> tuple[list[Result], Load, bool]:
    workdir = Path(tempfile.mkdtemp(prefix="mirrorflow-throughput-"))
    try:
        with clusters(args) as (source, target, embedded, parties), spark_connect(args, variants, workdir) as remote:
            parties.update(local_server_party(workdir))
            run_id = "r" + secrets.token_hex(3)  # topic names unique to the run, for shared clusters
            load = Load(
                run_id, args.records, args.size, args.partitions, args.tiny, TARGET_SMALL_RECORDS, args.rate_rounds
            )
            rf = args.replication_factor if args.replication_factor is not None else (1 if embedded else -1)
            say(f"1. the live topics on the source ({source}); target {target}; run id {run_id}")
            load_live(source, target, load, variants)
            config = workdir / "mm2.properties"
            mirrorflow_config(config, source, target, load, variants, rf, embedded)
            runner = Runner(workdir, config, source, target, load, args.master, remote, parties, not args.no_settle)
            say(f"2. fixed costs, the variants one after the other (run outputs in {workdir})")
            try:
                results = [measure_fixed(runner, variant, load, args.repeats) for variant in variants]
                say(f"3. the large loads (N1, N2), then the marginal rate in {load.rounds} round(s)")
                load_data(source, load)
                for number in range(1, load.rounds + 1):
                    shift = (number - 1) % len(results)
                    for result in results[shift:] + results[:shift]:  # rotated: no variant always goes last
                        if result.error is None:
                            measure_rate(runner, result, load, number)
                        if embedded or not args.keep_topics:
                            delete_topics(target, load.target_topics(result.variant.in_round(number)))
            finally:
                if not embedded and not args.keep_topics:
                    say("deleting the topics this run created")
                    everything = load.in_rounds(variants)
                    delete_topics(source, sorted({t for v in everything for t in load.source_topics(v)}))
                    for v in everything:
                        delete_topics(target, load.target_topics(v))
            return results, load, embedded
    finally:
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The options choosing the two clusters (embedded by default), shared by the replication benchmarks."""
    parser.add_argument("--source-bootstrap", help="HOST:PORT of a source cluster instead of the embedded one")
    parser.add_argument("--target-bootstrap", help="HOST:PORT of a target cluster instead of the embedded one")
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        help="of the topics mirrorflow creates (default 1 on the embedded clusters, else -1: the broker default)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="N: records of the large load (1,000,000)")
    parser.add_argument("--size", type=int, default=1024, help="S: value bytes per record (default 1024)")
    parser.add_argument("--partitions", type=int, default=4, help="P: partitions of every topic (default 4)")
    parser.add_argument("--tiny", type=int, default=100, help="records of a tiny load (fixed cost; default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per fixed-cost measurement (default 3)")
    parser.add_argument("--quick", action="store_true", help="a fast check: 100,000 records")
    parser.add_argument(
        "--rate-rounds",
        type=int,
        default=3,
        help="rounds of N1 and N2 runs per variant for the marginal rate (default 3; the median is reported)",
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated, from {', '.join(VARIANTS)} (default: all; the baseline is kept for the ratios)",
    )
    add_cluster_arguments(parser)
    parser.add_argument("--master", default="local[*,4]", help="Spark master of the spark-submit variants")
    parser.add_argument(
        "--spark-remote", help="sc://HOST:PORT of a Spark Connect server for the connect variants (default: local)"
    )
    parser.add_argument("--keep-topics", action="store_true", help="on given clusters, keep the topics made")
    parser.add_argument("--keep-logs", action="store_true", help="keep every run's output and report")
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="do not wait for the embedded brokers to finish persisting the previous step's writes before a run",
    )
    parser.add_argument("--plain-loop", help=argparse.SUPPRESS)  # internal: the baseline's subprocess
    args = parser.parse_args(argv)
    if args.plain_loop:
        spec = json.loads(args.plain_loop)
        print(json.dumps(plain_loop(**spec)), flush=True)
        return 0
    if bool(args.source_bootstrap) != bool(args.target_bootstrap):
        parser.error("--source-bootstrap and --target-bootstrap go together")
    if args.quick:
        args.records = 100_000
    if args.rate_rounds < 1:
        parser.error("--rate-rounds must be at least 1")
    keys = [k.strip() for k in args.variants.split(",") if k.strip()]
    unknown = [k for k in keys if k not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    variants = [VARIANTS[k] for k in VARIANTS if k in keys or k == "plain"]
    if not args.source_bootstrap:
        needed = 1.25 * args.records * (args.size + RECORD_OVERHEAD) * 2.2  # source, one variant's copy, logs
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if needed > free * 0.8:
            parser.error(
                f"~{needed / 2**30:.1f} GiB of disk needed in {tempfile.gettempdir()}, {free / 2**30:.1f} free"
            )

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.perf_counter()
    try:
        results, load, embedded = run_benchmark(args, variants)
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    brokers = "embedded noida-db brokers" if embedded else f"{args.source_bootstrap} -> {args.target_bootstrap}"
    print(f"\nmirrorflow replication throughput, {started_at}, {os.cpu_count()} CPU(s), {brokers}")
    print(f"command: {command}  (whole run {time.perf_counter() - started:.0f} s)")
    if embedded:
        waited = sum(t.settled for r in results for t in r.runs)
        print(
            "before each run: "
            + (
                f"waited for the brokers to finish persisting earlier writes ({waited:.0f} s in all)"
                if not args.no_settle
                else "no wait for the brokers' background persistence (--no-settle)"
            )
        )
    print(
        f"load: N2 = {load.records:,} and N1 = {load.n1:,} records of {load.size} bytes in {load.partitions} "
        f"partitions; tiny = {load.tiny}, small = {load.small:,}; fixed costs: median of {args.repeats} "
        f"(min-max) [the run's own seconds]; marginal rates: median of {load.rounds} round(s)\n"
    )
    header = [
        "variant",
        f"total wall ({load.records:,})",
        f"first run ({load.tiny}, creates topics)",
        f"fixed cost: tiny ({load.tiny})",
        "fixed cost: nothing new",
        f"{load.small:,} records",
        "marginal rate",
        "vs baseline",
        "targets",
    ]
    print(table(main_rows(results, load), header))
    print()
    target_header, rows = target_rows(results)
    print(table(rows, target_header))
    print()
    rounds = [f"round {n} rec/s (vs baseline)" for n in range(1, load.rounds + 1)]
    print(table(round_rows(results, load.rounds), ["marginal rate", *rounds, "median ratio"]))
    print("(ACLs: that round's N1 or N2 run synced ACLs, due once per sync.topic.acls.interval.seconds.)")
    print()
    print(table(detail_rows(results), ["variant", "step", "records", "runs", "wall", "run", "wall - run"]))
    cpu_header, rows = cpu_rows(results)
    if rows:
        print("\nCPU per record copied in the N2 runs (microseconds, median of the rounds; the brokers and the local")
        print("Spark Connect server are charged for the run's duration):\n")
        print(table(rows, cpu_header))
    phase_header, rows = phase_rows(results)
    if rows:
        print("\nwhere the time goes (median of each phase, so a row need not add up; commit is within copy):\n")
        print(table(rows, phase_header))
    engine_header, rows = engine_rows(results)
    if rows:
        print("\nthe engine phase on Spark Connect, by step (median (max) seconds):\n")
        print(table(rows, engine_header))
    failed = [r for r in results if r.error]
    for r in failed:
        print(f"\n{r.variant.key} FAILED: {r.error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
