"""Benchmark: the fixed cost of a run over a family of many partitions, next to the plain loop.

Why this exists: the throughput benchmark copies 4 partitions, so a cost paid per *partition* never
shows there. A unit copies one partition with its own transactional producer (``init_transactions``: ~55 ms on a
quiet broker, 0.5 s when librdkafka's retry timer fires), its own progress read and its own commit; copied one
after the other, 1,000 partitions with 3 new records each took 401 s in one process. A scheduled run of a wide
family pays that every tick. This script measures it: one topic per variant with ``--partitions`` partitions
(default 1,000), and per variant

* the first run (it creates the remote topic and the progress),
* ``--repeats`` runs copying ``--per-partition`` new records in every partition (default 10: 10,000 records, the
  size of the "a run copying 10,000 records <= 5 s" target, spread over 1,000 partitions),
* ``--repeats`` runs with nothing new,

for mirrorflow exactly-once on the DAG path (Spark Connect: a local server started before the timed runs, or
``--spark-remote``) and in-process, and the plain single-process confluent-kafka loop of
``replication_throughput.py`` (the baseline). Each run is a subprocess timed by its wall clock; mirrorflow runs
also give their own seconds and phases from the run report. It never asserts timings.

    .venv/bin/python benchmarks/many_partitions.py                      # 1,000 partitions x 10 records
    .venv/bin/python benchmarks/many_partitions.py --partitions 200 --variants inproc-eo
    .venv/bin/python benchmarks/many_partitions.py --source-bootstrap a:9092 --target-bootstrap b:9092
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from _common import INTERRUPTED, create_topic, say, table
from replication_throughput import (
    TARGET_ALIAS,
    TARGET_SMALL_S,
    VARIANTS,
    Load,
    Result,
    Runner,
    Timing,
    Variant,
    add_cluster_arguments,
    clusters,
    delete_topics,
    load_records,
    mirrorflow_config,
    spark_connect,
)

DEFAULT_VARIANTS = ("connect-eo", "inproc-eo", "plain")


def measure(runner: Runner, variant: Variant, load: Load, per_partition: int, repeats: int) -> Result:
    """First run, then ``repeats`` runs with new records in every partition and ``repeats`` with nothing new."""
    outcome = Result(variant)
    topic = load.live_topic(variant)
    say(f"  {variant.key}: {variant.label}")
    try:
        outcome.runs.append(runner.run(variant, "first run", load.tiny, [topic]))
        appended = load.tiny
        new = per_partition * load.partitions
        for _ in range(repeats):
            load_records(runner.source, topic, load.partitions, new, load.size, first=appended)
            appended += new
            outcome.runs.append(runner.run(variant, "new records", new, [topic]))
        for _ in range(repeats):
            outcome.runs.append(runner.run(variant, "nothing new", 0, [topic]))
    except (RuntimeError, OSError, ValueError) as exc:
        outcome.error = str(exc)
        say(f"    FAILED: {exc}")
    return outcome


def cell(runs: list[Timing]) -> str:
    """Median wall (min-max) [median of the run's own seconds]."""
    if not runs:
        return "-"
    walls = [t.wall for t in runs]
    inner = statistics.median(t.inner for t in runs)
    spread = f" ({min(walls):.2f}-{max(walls):.2f})" if len(walls) > 1 else ""
    return f"{statistics.median(walls):.2f} s{spread} [run {inner:.2f} s]"


def rows(outcomes: list[Result], per_partition: int, partitions: int) -> list[list[str]]:
    baseline = next((o for o in outcomes if o.variant.plain and o.of("new records")), None)
    base = statistics.median(t.wall for t in baseline.of("new records")) if baseline else None
    out = []
    for o in outcomes:
        new = o.of("new records")
        wall = statistics.median(t.wall for t in new) if new else None
        ratio = f"{wall / base:.2f}x" if wall and base and not o.variant.plain else ("1.00x" if o is baseline else "-")
        if o.variant.plain or wall is None:
            verdict = "(reference)" if o.variant.plain else "-"
        else:
            verdict = f"<= {TARGET_SMALL_S:.0f} s: {'met' if wall <= TARGET_SMALL_S else 'NOT met'}"
        out.append(
            [o.variant.key, cell(o.of("first run")), cell(new), cell(o.of("nothing new")), ratio, verdict]
            if o.error is None
            else [o.variant.key, "FAILED", o.error.splitlines()[0][:80], "", "", ""]
        )
    return out


def phase_rows(outcomes: list[Result]) -> tuple[list[str], list[list[str]]]:
    """Median of each phase of the runs with new records (where a wide family's run spends its time)."""
    names: list[str] = []
    for o in outcomes:
        for t in o.of("new records"):
            names += [n for n in t.phases if n not in names]
    body = []
    for o in outcomes:
        runs = o.of("new records")
        if not runs or not runs[0].phases:
            continue
        body.append([o.variant.key, *(f"{statistics.median(t.phases.get(n, 0.0) for t in runs):.2f}" for n in names)])
    return ["variant", *names], body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the family's topic (1,000)")
    parser.add_argument("--per-partition", type=int, default=10, help="new records per partition and run (10)")
    parser.add_argument("--size", type=int, default=1024, help="value bytes per record (1 KB)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (3)")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"from {', '.join(VARIANTS)}")
    add_cluster_arguments(parser)
    parser.add_argument("--master", default="local[*,4]", help="Spark master of the spark-submit variants")
    parser.add_argument("--spark-remote", help="sc://HOST:PORT of a Spark Connect server (default: a local one)")
    parser.add_argument("--keep-topics", action="store_true", help="on given clusters, keep the topics made")
    parser.add_argument("--keep-logs", action="store_true", help="keep every run's output and report")
    args = parser.parse_args(argv)
    if bool(args.source_bootstrap) != bool(args.target_bootstrap):
        parser.error("--source-bootstrap and --target-bootstrap go together")
    keys = [k.strip() for k in args.variants.split(",") if k.strip()]
    unknown = [k for k in keys if k not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    variants = [VARIANTS[k] for k in VARIANTS if k in keys]

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="mirrorflow-wide-"))
    outcomes: list[Result] = []
    try:
        with clusters(args) as (source, target, embedded, _brokers), spark_connect(args, variants, workdir) as remote:
            load = Load("w" + secrets.token_hex(3), 0, args.size, args.partitions, args.partitions, 0)
            say(f"1. one topic of {args.partitions:,} partitions per variant on {source} (run id {load.run_id})")
            for variant in variants:
                create_topic(source, load.live_topic(variant), args.partitions, timeout=120)
                load_records(source, load.live_topic(variant), args.partitions, load.tiny, args.size)
                if variant.plain:  # a user's loop has its target topic already; mirrorflow creates its own
                    create_topic(target, f"{variant.alias}.{load.live_topic(variant)}", args.partitions, timeout=120)
            config = workdir / "mm2.properties"
            rf = args.replication_factor if args.replication_factor is not None else (1 if embedded else -1)
            mirrorflow_config(config, source, target, load, variants, rf, embedded)
            runner = Runner(workdir, config, source, target, load, args.master, remote)
            say(f"2. the variants, one after the other (run outputs in {workdir})")
            for variant in variants:
                outcomes.append(measure(runner, variant, load, args.per_partition, args.repeats))
                if embedded or not args.keep_topics:
                    delete_topics(target, [f"{variant.alias}.{load.live_topic(variant)}"])
                    if not embedded:
                        delete_topics(source, [load.live_topic(variant)])
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    finally:
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    brokers = "embedded noida-db brokers" if embedded else f"{args.source_bootstrap} -> {args.target_bootstrap}"
    new = args.per_partition * args.partitions
    print(f"\nmirrorflow: a run over {args.partitions:,} partitions, {started_at}, {os.cpu_count()} CPU(s), {brokers}")
    print(f"command: {command}  (whole run {time.perf_counter() - started:.0f} s)")
    print(f"median wall of {args.repeats} runs (min-max) [the run's own seconds]; target alias {TARGET_ALIAS}\n")
    header = [
        "variant",
        f"first run ({args.partitions:,} records, creates topics)",
        f"{new:,} new records ({args.per_partition} per partition)",
        "nothing new",
        "vs baseline (new records)",
        "target",
    ]
    print(table(rows(outcomes, args.per_partition, args.partitions), header))
    phase_header, body = phase_rows(outcomes)
    if body:
        print("\nwhere a run with new records spends its time (median seconds per phase; commit is within copy):\n")
        print(table(body, phase_header))
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
