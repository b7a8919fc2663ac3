"""Benchmark: continuous mode latency, from a record's produce on the source to its copy being visible on the target.

Why this exists: ``mirrorflow replicate --duration D`` runs micro-batches, back to back while
records arrive (``mirrorflow.poll.interval`` is the pause after a batch that found nothing new), so that the
target is seconds behind rather than a schedule interval. This script measures how many seconds, at a steady
load: by default 2,000 records/s of 1 KB in 4 partitions for 120 s, exactly-once. The target:
**p99 < 5 s**.

How:

1. one marker record per partition is written to a fresh source topic, then the replication starts as a
   subprocess with ``--duration`` (by default ``python -m mirrorflow.cli replicate --in-process``;
   ``--replicate-command`` replaces that, ``--engine-args`` adds flags, e.g. ``--engine-args="--remote sc://h"``);
2. a read_committed consumer on the target (``--isolation read_uncommitted`` to compare) waits until every
   marker is visible: the first batch ran, so the process, engine and first batch's start-up are not counted;
3. then records are produced at a steady rate, each with its wall-clock produce time in a header
   (``produced_at``, seconds since the epoch); the consumer notes when each is first visible on the target.
   Latency = first visible - produced (both clocks are this process's). The first ``--warmup`` seconds of the
   load (default 10) must arrive too but are reported apart: the batch after the markers found an idle source
   and paused ``mirrorflow.poll.interval`` (1 s by default), which the load's first records wait out once;
4. after the load, it waits up to ``--tail`` seconds for the rest, then stops the subprocess with SIGTERM (its
   ``--duration`` covers any start-up; it ends after its batch in progress), and reads its run report (batches,
   and seconds per phase summed over batches) to say where the time goes.

Printed: p50, p90, p99, max of the steady load (and p99/max of the warm-up, and of all records); records
produced, seen, missing (every record must arrive) and duplicates; the achieved produce rate; the source's
acknowledgement time (the produce side's batching); p99 per window of the load (a latency that grows means the
copy falls behind); the batches (count, mean duration, pause, phases) and the target, met or not. ``--json``
prints the same as one JSON document (progress lines go to stderr).

Each delivery has its own source alias (``lateo``, ``latalo``: remote topics ``lateo.bench.<run>...``, progress
in ``mm2-offsets.lateo.internal``) and topic names carry a run id, so it does not collide with other runs. It is
a benchmark, not a test: it never asserts timings. Embedded noida-db clusters by default (always stopped);
with ``--source-bootstrap``/``--target-bootstrap`` any two PLAINTEXT clusters (the topics it made are deleted
at the end unless ``--keep-topics``). The machine's cores are shared with the brokers: repeat when noisy.

    .venv/bin/python benchmarks/continuous_latency.py                          # 2,000 rec/s, 120 s, exactly-once
    .venv/bin/python benchmarks/continuous_latency.py --delivery both          # exactly-once, then at-least-once
    .venv/bin/python benchmarks/continuous_latency.py --set mirrorflow.poll.interval=1s --seconds 60
    .venv/bin/python benchmarks/continuous_latency.py --replicate-command ".venv/bin/mirrorflow replicate" \\
        --engine-args="--master local[*,4]"                                     # the spark-submit path
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import INTERRUPTED, create_topic, say, table
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from replication_throughput import (
    PLAIN_RECEIVE_MAX,
    REPO,
    TARGET_ALIAS,
    Load,
    Variant,
    add_cluster_arguments,
    clusters,
    delete_topics,
    mirrorflow_config,
)

#: The target.
TARGET_P99_S = 5.0
#: The header carrying a record's wall-clock produce time (seconds since the epoch, as text).
HEADER = "produced_at"
MARKER = b"marker-"
DEFAULT_COMMAND = [sys.executable, "-m", "mirrorflow.cli", "replicate", "--in-process"]

VARIANTS = {
    "exactly-once": Variant("eo", "lateo", "mirrorflow exactly-once, continuous", "exactly-once", in_process=True),
    "at-least-once": Variant("alo", "latalo", "mirrorflow at-least-once, continuous", "at-least-once", in_process=True),
}


def percentile(ordered: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (``q`` in 0..100)."""
    if not ordered:
        return None
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


# ----------------------------------------------------------------------------------------------------
# The target side: a read_committed consumer noting when each copy is first visible
# ----------------------------------------------------------------------------------------------------


class Watcher(threading.Thread):
    """Reads the remote topic from its beginning (once it exists) and notes each record's first sighting."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> None:
        super().__init__(name="target-watcher", daemon=True)
        self.bootstrap, self.topic, self.partitions, self.isolation = bootstrap, topic, partitions, isolation
        self.lock = threading.Lock()
        self.seen: dict[int, tuple[float, float]] = {}  # sequence -> (visible at, produced at)
        self.markers: set[int] = set()
        self.duplicates = 0
        self.out_of_order = 0
        self.error: str | None = None
        self.stop = threading.Event()

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.error = f"{type(exc).__name__}: {exc}"

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-latency-{secrets.token_hex(4)}",  # never committed: offsets are assigned
                "enable.auto.commit": False,
                "isolation.level": self.isolation,
                "fetch.wait.max.ms": 50,  # a fetch returns at once when data is there; this bounds an empty one
                # noida-db answers a fetch with the whole backlog, ignoring fetch sizes (see replication_throughput)
                "receive.message.max.bytes": PLAIN_RECEIVE_MAX,
            }
        )
        try:
            while not self.stop.is_set():  # the remote topic appears with the first batch
                entry = consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
                if entry is not None and entry.error is None and len(entry.partitions) == self.partitions:
                    break
                time.sleep(0.1)
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            last: dict[int, int] = {}
            while not self.stop.is_set():
                messages = consumer.consume(2000, timeout=0.1)
                now = time.time()
                with self.lock:
                    for message in messages:
                        if message.error() is not None:
                            if message.error().code() == KafkaError._PARTITION_EOF:
                                continue
                            raise KafkaException(message.error())
                        key = message.key() or b""
                        if key.startswith(MARKER):
                            self.markers.add(int(key[len(MARKER) :]))
                            continue
                        sequence = int(key)
                        if sequence in self.seen:
                            self.duplicates += 1
                            continue
                        produced = float(dict(message.headers() or [])[HEADER])
                        self.seen[sequence] = (now, produced)
                        partition = message.partition()
                        if sequence < last.get(partition, -1):
                            self.out_of_order += 1
                        last[partition] = sequence
        finally:
            consumer.close()


# ----------------------------------------------------------------------------------------------------
# The source side: a steady producer
# ----------------------------------------------------------------------------------------------------


@dataclass
class Produced:
    records: int = 0
    first_at: float = 0.0  # wall clock of the first and last produce call
    last_at: float = 0.0
    acks: list[float] = field(default_factory=list)  # seconds from produce() to the source's acknowledgement
    errors: list[str] = field(default_factory=list)
    behind_max: float = 0.0  # how far the producer ever fell behind its schedule (seconds)

    @property
    def rate(self) -> float:
        span = self.last_at - self.first_at
        return (self.records - 1) / span if self.records > 1 and span > 0 else 0.0


def source_producer(bootstrap: str, linger_ms: int, errors: list[str]) -> Producer:
    def on_error(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": linger_ms,
            "compression.type": "none",
            "on_delivery": on_error,
        }
    )


def produce_markers(bootstrap: str, topic: str, partitions: int) -> None:
    errors: list[str] = []
    producer = source_producer(bootstrap, 0, errors)
    for p in range(partitions):
        producer.produce(topic, key=MARKER + b"%d" % p, value=b"", partition=p, headers=[(HEADER, b"0")])
    remaining = producer.flush(30)
    if remaining or errors:
        raise RuntimeError(f"{topic}: markers not delivered ({remaining} left, errors {errors[:3]})")


def produce_steady(
    bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, size: int, linger_ms: int
) -> Produced:
    """``rate`` records/s for ``seconds``, round robin over the partitions; every ~5 ms what is due is sent.

    Each record's key is its sequence number and its ``produced_at`` header the wall clock at its produce call.
    """
    out = Produced()
    producer = source_producer(bootstrap, linger_ms, out.errors)
    block = os.urandom(max(65536, 2 * size))
    total = int(rate * seconds)

    produced_at_of: list[float] = []  # by sequence: delivery reports carry the key, not the headers

    def on_delivery(err: Any, message: Any) -> None:
        if err is None:
            out.acks.append(time.time() - produced_at_of[int(message.key())])
        else:
            out.errors.append(str(err))

    started = time.monotonic()
    next_line = started + 20.0
    sent = 0
    while sent < total:
        now = time.monotonic()
        due = min(total, int((now - started) * rate) + 1)
        out.behind_max = max(out.behind_max, now - (started + sent / rate))
        while sent < due:
            offset = (sent * 7919) % (len(block) - size)
            produced_at = time.time()
            produced_at_of.append(produced_at)
            while True:
                try:
                    producer.produce(
                        topic,
                        key=b"%d" % sent,
                        value=block[offset : offset + size],
                        partition=sent % partitions,
                        headers=[(HEADER, repr(produced_at).encode())],
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.01)
            if sent == 0:
                out.first_at = produced_at
            out.last_at = produced_at
            sent += 1
        producer.poll(0)
        if now >= next_line:
            say(f"    {sent:,} of {total:,} produced")
            next_line += 20.0
        time.sleep(max(0.0, min(0.005, started + sent / rate - time.monotonic())))
    remaining = producer.flush(60)
    out.records = sent
    if remaining:
        out.errors.append(f"{remaining} record(s) not acknowledged by the source")
    return out


# ----------------------------------------------------------------------------------------------------
# One measurement: the replicate subprocess, the producer and the watcher
# ----------------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    delivery: str
    command: list[str]
    poll_interval: str
    warmup_records: int = 0  # the first records of the load, reported apart
    produced: Produced = field(default_factory=Produced)
    latencies: list[float] = field(default_factory=list)  # of the steady load (after the warm-up), ascending
    warmup_latencies: list[float] = field(default_factory=list)  # ascending
    all_latencies: list[float] = field(default_factory=list)  # ascending
    seen: int = 0
    missing: list[int] = field(default_factory=list)
    duplicates: int = 0
    out_of_order: int = 0
    windows: list[tuple[float, float | None, int]] = field(default_factory=list)  # (start s, p99, records)
    startup_s: float | None = None  # process start to the first batch visible on the target
    report: dict[str, Any] | None = None
    exit_code: int | None = None
    error: str | None = None
    log_tail: str = ""

    def p(self, q: float) -> float | None:
        return percentile(self.latencies, q)

    @property
    def met(self) -> bool:
        p99 = self.p(99)
        return p99 is not None and p99 < TARGET_P99_S and not self.missing and not self.error

    def where(self) -> dict[str, Any]:
        """The run report's view: batches, their mean duration, and the phases per batch (means over the whole
        run, so the idle batches after the load, one per pause, pull them down a little)."""
        data = self.report or {}
        batches = int(data.get("batches") or 0)
        if not batches:
            return {}
        once = ("submit", "preflight", "engine", "shutdown")  # paid once per process, not per batch
        phases = {k: round(v / batches, 3) for k, v in (data.get("phases") or {}).items() if k not in once}
        return {
            "batches": batches,
            "batch_mean_s": round(float(data.get("seconds", 0.0)) / batches, 3),
            "phases_per_batch_s": phases,
            "records": data.get("records"),
        }

    def to_dict(self) -> dict[str, Any]:
        acks = sorted(self.produced.acks)
        return {
            "delivery": self.delivery,
            "command": self.command,
            "poll_interval": self.poll_interval,
            "produced": self.produced.records,
            "produce_rate": round(self.produced.rate, 1),
            "producer_behind_max_s": round(self.produced.behind_max, 3),
            "source_ack_p50_s": _round(percentile(acks, 50)),
            "source_ack_p99_s": _round(percentile(acks, 99)),
            "seen": self.seen,
            "missing": len(self.missing),
            "missing_first": self.missing[:10],
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "latency_s": {
                "p50": _round(self.p(50)),
                "p90": _round(self.p(90)),
                "p99": _round(self.p(99)),
                "max": _round(self.latencies[-1] if self.latencies else None),
                "mean": _round(statistics.fmean(self.latencies) if self.latencies else None),
            },
            "warmup_records": self.warmup_records,
            "warmup_latency_s": {
                "p99": _round(percentile(self.warmup_latencies, 99)),
                "max": _round(self.warmup_latencies[-1] if self.warmup_latencies else None),
            },
            "all_records_latency_s": {
                "p99": _round(percentile(self.all_latencies, 99)),
                "max": _round(self.all_latencies[-1] if self.all_latencies else None),
            },
            "p99_per_window": [{"from_s": w[0], "p99_s": _round(w[1]), "records": w[2]} for w in self.windows],
            "startup_s": _round(self.startup_s),
            "run": self.where(),
            "exit_code": self.exit_code,
            "target": f"p99 < {TARGET_P99_S:g} s",
            "target_met": self.met,
            "error": self.error,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


#: How long a replication asked to stop (SIGTERM) may take to finish its batch and write its report.
STOP_WAIT_S = 120.0


def stop_process(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """End the replicate subprocess and its children (its own session: spark-submit starts a JVM)."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def measure(
    args: argparse.Namespace, source: str, target: str, load: Load, variant: Variant, config: Path
) -> Measurement:
    topic = load.live_topic(variant)
    remote = f"{variant.alias}.{topic}"
    report_path = config.parent / f"{variant.alias}-report.json"
    log_path = config.parent / f"{variant.alias}.log"
    # Long enough that the replication outlives the load whatever its start-up took (a Spark Connect server started
    # on first use: 30 s and more); it is stopped with SIGTERM once the load's records arrived or the tail ran out, and
    # ends after its batch in progress (``stop_signal``), releasing its lock and writing its report.
    duration = int(args.startup_timeout + args.warmup + args.seconds + args.tail)
    base = shlex.split(args.replicate_command) if args.replicate_command else DEFAULT_COMMAND
    command = [*base, "--config", str(config), "--flow", f"{variant.alias}->{TARGET_ALIAS}", "--family", "default"]
    command += ["--duration", f"{duration}s", "--report", str(report_path), *shlex.split(args.engine_args or "")]
    result = Measurement(variant.delivery, command, poll_interval(config, variant), int(args.rate * args.warmup))
    say(f"  {variant.label}: {remote}, poll interval {result.poll_interval}")
    say(f"    $ {shlex.join(command)}")
    create_topic(source, topic, load.partitions)
    produce_markers(source, topic, load.partitions)
    watcher = Watcher(target, remote, load.partitions, args.isolation)
    watcher.start()
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    try:
        while len(watcher.markers) < load.partitions:  # the first batch copied and committed the markers
            if process.poll() is not None or watcher.error or time.monotonic() - started > args.startup_timeout:
                why = watcher.error or (
                    f"exit {process.returncode}" if process.poll() is not None else f"{args.startup_timeout:g} s"
                )
                raise RuntimeError(f"the first batch never became visible on the target ({why})")
            time.sleep(0.05)
        result.startup_s = time.monotonic() - started
        say(
            f"    first batch visible after {result.startup_s:.1f} s; producing {args.rate:g} records/s for "
            f"{args.warmup:g} + {args.seconds:g} s (warm-up + measured)"
        )
        result.produced = produce_steady(
            source, topic, load.partitions, args.rate, args.warmup + args.seconds, load.size, args.linger_ms
        )
        say(
            f"    produced {result.produced.records:,} at {result.produced.rate:,.0f} records/s; "
            f"waiting up to {args.tail:g} s for the rest"
        )
        deadline = time.monotonic() + args.tail
        while watcher.count() < result.produced.records and time.monotonic() < deadline and not watcher.error:
            if process.poll() is not None:  # the run ended: give the consumer a moment for what it committed
                deadline = min(deadline, time.monotonic() + 3)
            time.sleep(0.1)
        say(f"    {watcher.count():,} seen; stopping the replication (SIGTERM: it ends after its batch)")
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            result.error = f"the replication did not end within {STOP_WAIT_S:g} s of SIGTERM: killed"
    finally:
        stop_process(process)
        watcher.stop.set()
        watcher.join(30)
    result.exit_code = process.returncode
    result.log_tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    if report_path.exists():
        with contextlib.suppress(ValueError):
            result.report = json.loads(report_path.read_text())
    if result.exit_code not in (0, None) and not result.error:
        result.error = f"the replication exited with {result.exit_code}"
    if watcher.error:
        result.error = f"target consumer: {watcher.error}"
    if result.produced.errors:
        result.error = f"source producer: {result.produced.errors[:3]}"
    summarise(result, watcher, args.window)
    return result


def summarise(result: Measurement, watcher: Watcher, window: float) -> None:
    """Latencies of the steady load, of the warm-up and of all records; what is missing; p99 per window."""
    with watcher.lock:
        seen = dict(watcher.seen)
        result.duplicates, result.out_of_order = watcher.duplicates, watcher.out_of_order
    produced = result.produced.records
    result.seen = sum(1 for s in seen if s < produced)
    result.missing = [s for s in range(produced) if s not in seen]
    warm = result.warmup_records
    result.latencies = sorted(v - at for s, (v, at) in seen.items() if s >= warm)
    result.warmup_latencies = sorted(v - at for s, (v, at) in seen.items() if s < warm)
    result.all_latencies = sorted([*result.latencies, *result.warmup_latencies])
    first = result.produced.first_at
    by_window: dict[int, list[float]] = {}
    for visible, at in seen.values():
        by_window.setdefault(int((at - first) // window), []).append(visible - at)
    result.windows = [
        (i * window, percentile(sorted(values), 99), len(values)) for i, values in sorted(by_window.items())
    ]


def poll_interval(config: Path, variant: Variant) -> str:
    """The flow's effective ``mirrorflow.poll.interval`` (the file's, else the library's default)."""
    try:
        from mirrorflow.config import load_config

        return load_config(config).flow(variant.alias, TARGET_ALIAS).get("mirrorflow.poll.interval")
    except Exception as exc:  # noqa: BLE001 - only for the printout
        return f"? ({exc})"


# ----------------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------------


def seconds_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def render(results: list[Measurement], args: argparse.Namespace, header: str) -> str:
    lines = [header, ""]
    rows = []
    for r in results:
        count = f"{r.seen:,} of {r.produced.records:,}"
        if r.missing:
            count += f" ({len(r.missing):,} MISSING)"
        if r.duplicates:
            count += f", {r.duplicates:,} dup"
        verdict = "met" if r.met else "NOT met"
        if r.missing:
            verdict += " (records missing)"
        warm = r.warmup_latencies
        rows.append(
            [
                r.delivery + (" (FAILED)" if r.error else ""),
                seconds_cell(r.p(50)),
                seconds_cell(r.p(90)),
                seconds_cell(r.p(99)),
                seconds_cell(r.latencies[-1] if r.latencies else None),
                f"{seconds_cell(percentile(warm, 99))} / {seconds_cell(warm[-1] if warm else None)}",
                seconds_cell(percentile(r.all_latencies, 99)),
                count,
                f"{r.produced.rate:,.0f} rec/s",
                f"p99 < {TARGET_P99_S:g} s: {verdict}",
            ]
        )
    steady = f"steady load ({args.seconds:g} s)"
    lines.append(
        table(
            rows,
            [
                "delivery",
                f"p50, {steady}",
                "p90",
                "p99",
                "max",
                f"warm-up ({args.warmup:g} s) p99 / max",
                "p99, all records",
                "seen of produced (all)",
                "produce rate",
                "target (steady p99)",
            ],
        )
    )
    lines += ["", "where the time goes:", ""]
    rows = []
    for r in results:
        where = r.where()
        acks = sorted(r.produced.acks)
        phases = where.get("phases_per_batch_s", {})
        named = ("lock", "prepare", "plan", "copy", "commit", "finish", "release")
        phase_text = ", ".join(f"{n} {phases[n]:.2f}" for n in named if n in phases)
        rows.append(
            [
                r.delivery,
                f"{seconds_cell(percentile(acks, 50))} / {seconds_cell(percentile(acks, 99))}",
                seconds_cell(r.startup_s),
                str(where.get("batches", "-")),
                seconds_cell(where.get("batch_mean_s")),
                r.poll_interval,
                phase_text or "-",
            ]
        )
    header_cells = ["delivery", "source ack p50 / p99", "start-up", "batches", "batch mean", "pause when idle"]
    lines.append(table(rows, [*header_cells, "per batch, mean (s; commit is within copy)"]))
    lines += [
        "",
        "source ack: produce() to the source's acknowledgement (the producer's batching). start-up: process start to",
        "the first batch visible on the target (not counted). batch mean and per batch: the run report's seconds over",
        "its batches (the idle batches after the load included). A record waits for the batch that plans it (at most",
        "one batch while records flow; the pause after an idle batch), then for that batch's copy and commit: its",
        "latency is about one to two batches.",
        "",
        f"p99 per {args.window:g} s of the load, warm-up first (a rising p99 means the copy falls behind):",
    ]
    for r in results:
        cells = " ".join(f"{w[1]:.1f}" if w[1] is not None else "-" for w in r.windows)
        lines.append(f"  {r.delivery}: {cells}")
    for r in results:
        if r.produced.behind_max > 1.0:
            lines.append(
                f"\n{r.delivery}: the producer fell up to {r.produced.behind_max:.1f} s behind its schedule (an "
                "overloaded machine): repeat the run"
            )
        if r.missing:
            lines.append(
                f"\n{r.delivery}: {len(r.missing):,} record(s) not seen within {args.tail:g} s after the load "
                f"(lost, or later than that), first {r.missing[:10]}"
            )
        if r.out_of_order:
            lines.append(f"\n{r.delivery}: {r.out_of_order} record(s) seen out of order within a partition")
        if r.error:
            lines.append(f"\n{r.delivery} FAILED: {r.error}\n{r.log_tail}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------


def run_benchmark(args: argparse.Namespace, variants: list[Variant]) -> tuple[list[Measurement], bool]:
    workdir = Path(tempfile.mkdtemp(prefix="mirrorflow-latency-"))
    results: list[Measurement] = []
    try:
        with clusters(args) as (source, target, embedded, _brokers):
            run_id = "r" + secrets.token_hex(3)
            records = int(args.rate * (args.warmup + args.seconds))
            load = Load(run_id, records, args.size, args.partitions, 0, 0)
            rf = args.replication_factor if args.replication_factor is not None else (1 if embedded else -1)
            config = workdir / "mm2.properties"
            mirrorflow_config(config, source, target, load, variants, rf, embedded)
            extra = [f"{v.alias}->{TARGET_ALIAS}.{key} = {value}" for v in variants for key, value in args.set]
            if extra:
                with config.open("a") as out:
                    out.write("".join(f"{line}\n" for line in extra))
            say(f"source {source}, target {target}, run id {run_id}, work dir {workdir}")
            try:
                for variant in variants:
                    try:
                        results.append(measure(args, source, target, load, variant, config))
                    except (RuntimeError, OSError, KafkaException) as exc:
                        log = (
                            (workdir / f"{variant.alias}.log").read_text(errors="replace")
                            if (workdir / f"{variant.alias}.log").exists()
                            else ""
                        )
                        failed = Measurement(variant.delivery, [], "?", error=str(exc))
                        failed.log_tail = "\n".join(log.splitlines()[-15:])
                        results.append(failed)
                        say(f"    FAILED: {exc}")
            finally:
                if not args.keep_topics:
                    for v in variants:
                        delete_topics(target, [f"{v.alias}.{load.live_topic(v)}"])
                    delete_topics(source, [load.live_topic(v) for v in variants])
            return results, embedded
    finally:
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)


def key_value(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not KEY=VALUE")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=2000, help="records/s produced (default 2,000)")
    parser.add_argument("--seconds", type=float, default=120, help="how long the measured load lasts (default 120)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=10,
        help="seconds of load before the measured part, reported apart (default 10; 0: none)",
    )
    parser.add_argument("--size", type=int, default=1024, help="value bytes per record (default 1024)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (default 4)")
    parser.add_argument(
        "--delivery",
        choices=["exactly-once", "at-least-once", "both"],
        default="exactly-once",
        help="mirrorflow.delivery of the run (default exactly-once; both: one after the other)",
    )
    parser.add_argument(
        "--set",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a flow setting for the run, e.g. mirrorflow.poll.interval=1s (repeatable)",
    )
    parser.add_argument(
        "--replicate-command",
        help=f"the replicate command line, before its options (default: {shlex.join(DEFAULT_COMMAND)})",
    )
    parser.add_argument(
        "--engine-args",
        default="",
        help='extra flags for the replicate command, e.g. --engine-args="--remote sc://host:15002"',
    )
    parser.add_argument(
        "--isolation",
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
        help="of the target consumer (default read_committed: what a consumer of the backup sees)",
    )
    parser.add_argument("--linger-ms", type=int, default=5, help="the source producer's linger.ms (default 5)")
    parser.add_argument("--tail", type=float, default=30, help="seconds to wait for copies after the load (30)")
    parser.add_argument("--startup-timeout", type=float, default=300, help="for the first batch (default 300 s)")
    parser.add_argument("--window", type=float, default=10, help="seconds per window of the p99 timeline (10)")
    add_cluster_arguments(parser)
    parser.add_argument("--keep-topics", action="store_true", help="keep the topics made (given clusters)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the replication's output and report")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (progress on stderr)")
    args = parser.parse_args(argv)
    if bool(args.source_bootstrap) != bool(args.target_bootstrap):
        parser.error("--source-bootstrap and --target-bootstrap go together")
    if args.rate <= 0 or args.seconds <= 0 or args.partitions <= 0 or args.size <= 0 or args.warmup < 0:
        parser.error("--rate, --seconds, --partitions and --size must be positive, --warmup not negative")
    deliveries = ["exactly-once", "at-least-once"] if args.delivery == "both" else [args.delivery]
    variants = [VARIANTS[d] for d in deliveries]

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            results, embedded = run_benchmark(args, variants)
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    brokers = "embedded noida-db brokers" if embedded else f"{args.source_bootstrap} -> {args.target_bootstrap}"
    failed = any(r.error for r in results)
    if args.json:
        doc = {
            "started_at": started_at,
            "cpus": os.cpu_count(),
            "brokers": brokers,
            "command": command,
            "load": {
                "rate": args.rate,
                "seconds": args.seconds,
                "warmup_s": args.warmup,
                "size": args.size,
                "partitions": args.partitions,
                "isolation": args.isolation,
            },
            "results": [r.to_dict() for r in results],
        }
        print(json.dumps(doc, indent=2))
        return 1 if failed else 0
    header = (
        f"\nmirrorflow continuous-mode latency, {started_at}, {os.cpu_count()} CPU(s), {brokers}\n"
        f"command: {command}  (whole run {time.perf_counter() - started:.0f} s)\n"
        f"load: {args.rate:,.0f} records/s of {args.size} bytes in {args.partitions} partitions, {args.warmup:g} s "
        f"warm-up + {args.seconds:g} s measured; latency = first visible to a {args.isolation} consumer on the "
        "target - produce call on the source"
    )
    print(render(results, args, header))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
