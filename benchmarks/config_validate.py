"""Benchmark: how long ``mirrorflow config validate`` takes as the file grows.

Why this exists: Airflow re-parses the configuration at every DAG parse (30 s timeout), and validation
once grew faster than linearly with clusters (100 clusters 11 s, 200 clusters 35 s). This script writes
generated ``mm2.properties`` files of increasing size to a temporary directory and times exactly what
the CLI does (``load_config`` on the file, in a fresh process), so a regression shows as a number, not
as a DAG timeout.

It is a benchmark, not a test: it never asserts timings and needs no Kafka.

    .venv/bin/python benchmarks/config_validate.py                  # 100, 200, 1000 clusters; 10,000 keys
    .venv/bin/python benchmarks/config_validate.py --sizes 100 200   # only these cluster counts
    .venv/bin/python benchmarks/config_validate.py --profile         # + cProfile of the largest file
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from mirrorflow.config import load_config

#: Keys of a flow that are realistic to override per flow (and valid), cycled through by the key-heavy file.
_FLOW_KEYS = (
    ("offset.lag.max", "50"),
    ("replication.factor", "3"),
    ("sync.group.offsets.enabled", "true"),
    ("emit.checkpoints.interval.seconds", "30"),
    ("mirrorflow.unit.max.records", "50000"),
    ("consumer.fetch.max.bytes", "1048576"),
    ("producer.linger.ms", "5"),
    ("source.admin.request.timeout.ms", "30000"),
)


def _cluster_lines(alias: str) -> list[str]:
    return [
        f"{alias}.bootstrap.servers = {alias}-1:9092,{alias}-2:9092",
        f"{alias}.security.protocol = PLAINTEXT",
        f"{alias}.consumer.fetch.min.bytes = 1",
    ]


def _flow_lines(source: str, target: str) -> list[str]:
    flow = f"{source}->{target}"
    return [
        f"{flow}.enabled = true",
        f"{flow}.topics = orders\\\\..*, payments\\\\..*, customers",
        f"{flow}.mirrorflow.families = orders, payments",
        f"{flow}.mirrorflow.family.orders.topics = orders\\\\..*",
        f"{flow}.mirrorflow.family.orders.schedule = 2m",
        f"{flow}.mirrorflow.family.payments.topics = payments\\\\..*",
    ]


def clusters_file(count: int) -> str:
    """``count`` clusters in a ring (each replicates to the next): N enabled flows of N*(N-1) possible."""
    aliases = [f"dc{i:04d}" for i in range(count)]
    lines = [f"clusters = {', '.join(aliases)}", "replication.factor = 3", "mirrorflow.delivery = exactly-once"]
    for alias in aliases:
        lines += _cluster_lines(alias)
    for i, alias in enumerate(aliases):
        lines += _flow_lines(alias, aliases[(i + 1) % count])
    return "\n".join(lines) + "\n"


def keys_file(count: int, clusters: int = 10) -> str:
    """About ``count`` keys over ``clusters`` clusters (all pairs enabled): flow overrides, client settings, typos."""
    aliases = [f"dc{i:02d}" for i in range(clusters)]
    lines = [f"clusters = {', '.join(aliases)}"]
    for alias in aliases:
        lines += _cluster_lines(alias)
    pairs = [(s, t) for s in aliases for t in aliases if s != t]
    for source, target in pairs:
        lines += _flow_lines(source, target)
    overrides = [(f"{s}->{t}", key, value) for s, t in pairs for key, value in _FLOW_KEYS]
    i = 0
    while len(lines) < count:
        if i < len(overrides):
            flow, key, value = overrides[i]
        else:  # every flow override is set: distinct client settings from here on
            flow, key, value = f"{pairs[i % len(pairs)][0]}->{pairs[i % len(pairs)][1]}", f"consumer.x{i}.setting", "1"
        if i % 50 == 0:
            key = f"sync.group.offset.enabled{i}"  # unknown: a warning with a "did you mean"
        lines.append(f"{flow}.{key} = {value}")
        i += 1
    return "\n".join(lines) + "\n"


# What the child process runs: exactly ``mirrorflow config validate``'s call, timed without the imports, in a
# fresh interpreter (the caches of one run must not make the next look fast).
_CHILD = """
import sys, time
from mirrorflow.config import load_config
started = time.perf_counter()
load_config(sys.argv[1])
print(time.perf_counter() - started)
"""


def measure(path: Path, repeat: int, timeout: float) -> list[float] | None:
    """Wall times of ``load_config(path)`` in fresh processes; None when one run exceeded ``timeout``."""
    times = []
    for _ in range(repeat):
        try:
            child = subprocess.run(
                [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=timeout, check=True
            )
        except subprocess.TimeoutExpired:
            return None
        times.append(float(child.stdout.strip().splitlines()[-1]))
    return times


#: The baseline measured before validation was made linear (same generator shape), and its target for every size.
BEFORE_S = {100: "11 s", 200: "35 s"}
TARGET = "about 1 s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 200, 1000], help="cluster counts")
    parser.add_argument("--keys", type=int, default=10_000, help="keys of the key-heavy file (0: skip)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is given up")
    parser.add_argument("--profile", action="store_true", help="cProfile (in this process) the largest file once")
    args = parser.parse_args(argv)
    cases = [(f"{n} clusters, {n} enabled flows", clusters_file(n), BEFORE_S.get(n, "-")) for n in args.sizes]
    if args.keys:
        cases.append((f"{args.keys:,} keys, 10 clusters, 90 flows", keys_file(args.keys), "-"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="mirrorflow-config-bench-") as tmp:
        path = Path(tmp) / "mm2.properties"
        for label, text, before in cases:
            path.write_text(text)
            times = measure(path, args.repeat, args.timeout)
            lines = f"{text.count(chr(10)):,}"
            if times is None:
                rows.append((label, lines, f"> {args.timeout:.0f} s", "(given up)", before, TARGET))
            else:
                median, worst = f"{statistics.median(times):.3f} s", f"{max(times):.3f} s"
                rows.append((label, lines, median, worst, before, TARGET))
            print(f"{label}: {lines} lines, median {rows[-1][2]}", flush=True)
        if args.profile and cases:
            path.write_text(max(cases, key=lambda c: len(c[1]))[1])
            profiler = cProfile.Profile()
            profiler.runcall(load_config, path)
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
            print(out.getvalue())
    header = ("file", "lines", "median", "max", "before", "target")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
