"""Benchmark: what the demo's traffic generator costs in CPU at its default rate, now and before the generator was made cheap.

Why this exists: on a 2-core machine the demo's traffic generator and its broker used about 65% of a
core for 20 records/s. Its three consumer groups were idle or throttling themselves most of the time, and the
embedded broker answers an empty fetch at once (it has no long poll), so each consumer that was not paused fetched
thousands of times a second. The generator's consumers now take a batch per cycle and pause their partitions in
between (``IDLE_PAUSE_S``). This script runs the generator for ``--seconds`` against a fresh embedded cluster,
once as it is in this checkout and once as it was at ``--baseline`` (a commit before the fix, read with
``git show``; the module needs nothing but confluent-kafka), each in a process of its own, and prints the CPU each
used (the generator's process, and the broker over the same window) as a share of one core, side by side, with
the target (a few percent of a core) and the records delivered and consumed.

    .venv/bin/python benchmarks/demo_traffic.py [--seconds 40] [--rate 20] [--baseline 7ef8c07]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _common import embedded_clusters, say, table

REPO = Path(__file__).resolve().parents[1]
TARGET_SHARE = 0.05  # "a few percent of a core"

TRAFFIC = REPO / "dev" / "mirrorflow_dev" / "demo" / "traffic.py"
#: Where the generator was at the default baseline, before the development tooling moved out of the library.
BASELINE_PATH = "include/mirrorflow/demo/traffic.py"

_RUN = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("demo_traffic_under_test", sys.argv[3])
traffic = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(traffic)
print(json.dumps(traffic.run_traffic(sys.argv[1], rate=float(sys.argv[2]), duration=float(sys.argv[4]))))
"""


def tree_cpu(pid: int) -> float:
    """User plus system CPU seconds of a process and its children (a broker runs under a launcher)."""
    total = 0.0
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def measure(bootstrap: str, broker_pid: int, rate: float, module: Path, seconds: float) -> dict[str, float]:
    """One run of the generator in its own process: its CPU, the broker's CPU meanwhile, records delivered."""
    broker_before = tree_cpu(broker_pid)
    started = time.monotonic()
    proc = psutil.Popen(
        [sys.executable, "-c", _RUN, bootstrap, str(rate), str(module), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        text=True,
    )
    own = 0.0
    while proc.poll() is None:
        try:
            times = proc.cpu_times()
            own = times.user + times.system
        except psutil.NoSuchProcess:
            break
        time.sleep(0.5)
    out, _ = proc.communicate()
    wall = time.monotonic() - started
    counts = json.loads(out.strip().splitlines()[-1])
    return {
        "wall": wall,
        "traffic": own / wall,
        "broker": (tree_cpu(broker_pid) - broker_before) / wall,
        "delivered": float(counts["delivered"]),
        "consumed": float(sum(counts["consumed"].values())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0, help="how long each variant runs (default 40)")
    parser.add_argument("--rate", type=float, default=20.0, help="records/s (default 20: the demo's)")
    parser.add_argument("--baseline", default="7ef8c07", help="the commit to compare with (default: before the fix)")
    args = parser.parse_args(argv)
    old = None
    for path in (TRAFFIC.relative_to(REPO).as_posix(), BASELINE_PATH):
        old = subprocess.run(
            ["git", "show", f"{args.baseline}:{path}"], check=False, cwd=REPO, capture_output=True, text=True
        )
        if old.returncode == 0:
            break
    assert old is not None
    if old.returncode != 0:
        parser.error(f"cannot read the generator at {args.baseline}: {old.stderr.strip()}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp, embedded_clusters() as pair:
        before = Path(tmp) / "traffic_before.py"
        before.write_text(old.stdout)
        (status,) = pair.only("primary").status()
        assert status.pid is not None
        for label, module in (("now", TRAFFIC), (f"before ({args.baseline})", before)):
            say(f"{label}: {args.seconds:g} s at {args.rate:g} records/s")
            results[label] = measure(pair.primary, status.pid, args.rate, module, args.seconds)
    rows = [
        [
            label,
            f"{r['traffic']:.1%}",
            f"{r['broker']:.1%}",
            f"{r['traffic'] + r['broker']:.1%}",
            f"{r['delivered']:,.0f} / {r['consumed']:,.0f}",
            "met" if r["traffic"] <= TARGET_SHARE else "NOT met",
        ]
        for label, r in results.items()
    ]
    print(
        f"\ndemo traffic at {args.rate:g} records/s for {args.seconds:g} s, share of one core (target: generator "
        f"<= {TARGET_SHARE:.0%})\n"
    )
    header = ["variant", "generator", "broker", "together", "delivered / consumed", "target"]
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
