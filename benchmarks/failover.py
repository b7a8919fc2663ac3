"""Benchmark: the failover DAG from trigger to done, side by side with a naive per-group failover loop.

Why this exists: MM2 has no failover automation. Its documented procedure (KIP-382, ``RemoteClusterUtils.translateOffsets``) is manual and
per group: stop the group's consumers, call ``RemoteClusterUtils.translateOffsets`` (which reads the whole
checkpoints topic on every call) and commit the result, e.g. with ``kafka-consumer-groups --reset-offsets``.
mirrorflow replaces that with one operator-triggered DAG (preflight -> final_copy -> move_groups ->
stop_mirroring -> report) that plans all groups from one read of the checkpoints, never moves an offset
backwards, refuses active groups and leaves an audit record. This script measures what that costs on real
(embedded) brokers, in one run: a planned dry run with both clusters up, then a disaster failover with the
primary's broker stopped. The measured baseline is the manual procedure done as a naive loop with this
library: per group, one ``read_checkpoints`` (the whole topic, as translateOffsets does) and one
``alter_consumer_group_offsets``.

It is a benchmark, not a test: it never asserts timings. It starts its own two noida-db clusters (temp state
dir, free ports) and a throwaway Airflow home (SQLite, ``resetdb``), and always stops and removes them, also
on Ctrl-C, SIGTERM or an exception. Airflow runs in-process, through ``dag.test()`` as the tests do.

    .venv/bin/python benchmarks/failover.py                  # 50 groups x 12 partitions, 300 records each
    .venv/bin/python benchmarks/failover.py --quick          # smoke run: 10 groups x 4 partitions
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import (
    FLOW,
    INTERRUPTED,
    PREFIX,
    Clusters,
    commit_many,
    create_topic,
    embedded_clusters,
    mm2_properties,
    produce,
    say,
    table,
    timed,
)
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.checkpoints.emit import CheckpointReport, emit_checkpoints, read_checkpoints
from mirrorflow.config import load_config
from mirrorflow.config.model import FlowConfig
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow_dev.demo.airflow_env import airflow_environment
from mirrorflow_dev.devcluster import free_port

TASKS = ("preflight", "final_copy", "move_groups", "stop_mirroring", "report")
DAG_ID = "failover__primary__backup"
HEADER = (
    "measure",
    "mirrorflow failover DAG",
    "baseline: naive per-group loop (measured)",
    "MM2: manual, per group (not measured)",
)


# ----------------------------------------------------------------------------------------------------
# Setup: data, groups and checkpoints on the clusters; Airflow in this process
# ----------------------------------------------------------------------------------------------------


@dataclass
class Setup:
    groups: list[str]
    partitions: int
    records: int
    topic: str
    flow: FlowConfig
    checkpoints: CheckpointReport
    kinds: Counter[str] = field(default_factory=Counter)
    max_rereads: int = 0
    seconds: float = 0.0
    airflow_seconds: float = 0.0


def prepare_clusters(clusters: Clusters, config_file: Path, groups: int, partitions: int, records: int) -> Setup:
    """One topic replicated, every group committed on every partition on the source, checkpoints emitted.

    The offsets are spread over the whole topic (different per group and partition), so the checkpoints
    are not all the same offset and the failover has real per-partition work to do.
    """
    started = time.perf_counter()
    config_file.write_text(mm2_properties(clusters.primary, clusters.backup))
    config = load_config(config_file)
    flow = config.flow("primary", "backup")
    topic = f"{PREFIX}.orders"
    create_topic(clusters.primary, topic, partitions)
    produce(clusters.primary, topic, partitions, records, "o")
    report = replicate(config, FLOW, None, LocalExecutor())
    if not report.ok or report.lag:
        raise RuntimeError(f"replication failed: errors={report.errors[:3]} lag={report.lag}")
    say(f"  topic {topic}: {partitions} partitions x {records} records replicated in {report.seconds:.2f} s")

    names = [f"{PREFIX}-g{g:03d}" for g in range(groups)]

    def offset_of(g: int, p: int) -> int:
        return (g * 7 + p * 13) % (records + 1)

    say(f"committing {groups} groups x {partitions} partitions on the source (AdminClient, one request per group)")
    commit_many(clusters.primary, topic, names, offset_of, partitions)
    say("emitting checkpoints")
    cps = emit_checkpoints(flow, timeout=120)
    if cps.errors or cps.emitted != groups * partitions:
        raise RuntimeError(f"checkpoints: {cps.emitted} of {groups * partitions} written, errors {cps.errors[:3]}")
    setup = Setup(names, partitions, records, topic, flow, cps)
    for g in cps.groups:
        setup.kinds.update(p.kind for p in g.partitions)
        setup.max_rereads = max(setup.max_rereads, g.max_rereads)
    setup.seconds = time.perf_counter() - started
    say(f"  {cps.emitted} checkpoint(s) written ({dict(setup.kinds)}); setup took {setup.seconds:.1f} s")
    return setup


@contextlib.contextmanager
def airflow_home(config_file: Path) -> Iterator[Path]:
    """A throwaway AIRFLOW_HOME, applied to os.environ before airflow is imported; removed at the end.

    Airflow reads its configuration once, at import, so this must run before anything imports it (as the
    tests' ``_configure_airflow`` does). The environment also names the config file (MIRRORFLOW_CONFIG) that
    the DAG factory and the repo's dags/ folder read.
    """
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-airflow-"))
    try:
        if "airflow" in sys.modules:
            raise RuntimeError("airflow was imported before its environment was set")
        os.environ.update(airflow_environment(home, api_port=free_port(), config_path=config_file))
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def reset_airflow_db() -> None:
    """A fresh metadata database (SQLite under the temp home), as the tests' ``airflow_db`` fixture makes."""
    from airflow.utils.db import resetdb

    resetdb()


# ----------------------------------------------------------------------------------------------------
# The DAG runs
# ----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def recording(
    module: ModuleType, name: str, calls: list[tuple[str, float]], label: Callable[..., str] = lambda *a, **k: ""
) -> Iterator[None]:
    """Record ``(label, seconds)`` of every call of ``module.name``: where the time inside the tasks goes.

    Possible because ``dag.test()`` runs the tasks in this process, and the DAG looks these functions up on
    their modules at call time. The wrapper adds a ``perf_counter`` pair per call, nothing measurable.
    """
    original: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            calls.append((label(*args, **kwargs), time.perf_counter() - started))

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, original)


def _side(_flow: Any, side: str = "", *_args: Any, **_kwargs: Any) -> str:
    return side


@dataclass
class DagResult:
    label: str
    wall: float
    state: str
    states: dict[str, str]
    durations: dict[str, float | None]
    span: float  # first task start -> last task end
    moved: dict[str, Any]
    plans: list[tuple[str, float]]  # plan_failover calls (preflight's, then move_groups')
    checkpoint_reads: list[tuple[str, float]]  # read_checkpoints calls inside plan_failover
    probes: list[tuple[str, float]]  # check_cluster calls, labelled source / target

    @property
    def groups_moved(self) -> int:
        """Groups moved (or, in a dry run, that would move): not refused, and applied unless dry."""
        dry = self.moved.get("dry_run", True)
        return sum(1 for g in self.moved.get("groups", []) if g["refused"] is None and (dry or g["applied"]))

    def written(self) -> list[dict[str, Any]]:
        return [
            p
            for g in self.moved.get("groups", [])
            if g["refused"] is None
            for p in g["partitions"]
            if p["action"] == "write" and p["target_offset"] is not None
        ]

    @property
    def kinds(self) -> Counter[str]:
        return Counter(p["kind"] for g in self.moved.get("groups", []) for p in g["partitions"])

    @property
    def max_rereads(self) -> int:
        return max((p["rereads"] for p in self.written()), default=0)

    @property
    def refused(self) -> int:
        return sum(1 for g in self.moved.get("groups", []) if g["refused"] is not None)


def run_dag(dag: Any, label: str, run_conf: dict[str, Any]) -> DagResult:
    """``dag.test(run_conf=...)`` timed from the call to its return: trigger to done, as an operator waits."""
    from mirrorflow import preflight
    from mirrorflow.failover import plan as plan_module

    plans: list[tuple[str, float]] = []
    reads: list[tuple[str, float]] = []
    probes: list[tuple[str, float]] = []
    say(f"{label}: dag.test(run_conf={run_conf})")
    with (
        recording(plan_module, "plan_failover", plans),
        recording(plan_module, "read_checkpoints", reads),
        recording(preflight, "check_cluster", probes, _side),
    ):
        run, wall = timed(lambda: dag.test(run_conf=run_conf))
    if INTERRUPTED:  # dag.test turns an interrupt inside a task into a failed task and carries on: stop here
        raise KeyboardInterrupt(f"received signal {INTERRUPTED[-1]} during {label}")
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    durations: dict[str, float | None] = {}
    for task_id in TASKS:
        ti = tis.get(task_id)
        start, end = (ti.start_date, ti.end_date) if ti is not None else (None, None)
        durations[task_id] = (end - start).total_seconds() if start and end else None
    starts = [ti.start_date for ti in tis.values() if ti.start_date]
    ends = [ti.end_date for ti in tis.values() if ti.end_date]
    span = (max(ends) - min(starts)).total_seconds() if starts and ends else float("nan")
    states = {task_id: str(tis[task_id].state) if task_id in tis else "absent" for task_id in TASKS}
    moved: dict[str, Any] = {}
    if "report" in tis and states["report"] == "success":
        moved = tis["report"].xcom_pull(task_ids="report")["report"]
    result = DagResult(label, wall, str(run.state), states, durations, span, moved, plans, reads, probes)
    say(
        f"  {result.state} in {wall:.2f} s (tasks {span:.2f} s): "
        + ", ".join(f"{t} {states[t]} {fmt(durations[t])}" for t in TASKS)
    )
    if result.state != "success":
        say(f"  the run did not succeed: {states}")
    return result


def verify_target(backup: str, setup: Setup) -> tuple[int, int]:
    """How many (group, partition) offsets on the target equal the checkpoint's downstream offset."""
    checkpoints = read_checkpoints(setup.flow, 120)
    admin = AdminClient({"bootstrap.servers": backup})  # referenced until every future resolved
    futures = {}
    for group in setup.groups:
        futures.update(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]))
    same = 0
    for group, future in futures.items():
        for tp in future.result(60).topic_partitions or []:
            cp = checkpoints.get((group, tp.topic, tp.partition))
            same += cp is not None and tp.error is None and tp.offset == cp.downstream_offset
    del admin
    return same, sum(1 for (g, _, _) in checkpoints if g in set(setup.groups))


# ----------------------------------------------------------------------------------------------------
# The baseline: the manual procedure as a naive loop with this library
# ----------------------------------------------------------------------------------------------------


@dataclass
class BaselineResult:
    wall: float = 0.0
    read: list[float] = field(default_factory=list)  # read_checkpoints per group (the whole topic each time)
    commit: list[float] = field(default_factory=list)  # one alter_consumer_group_offsets per group
    groups: int = 0
    partitions: int = 0
    checkpoints_per_read: int = 0


def naive_per_group(backup: str, setup: Setup) -> BaselineResult:
    """Per group, what the MM2 procedure does: translateOffsets (read the whole checkpoints topic), commit.

    Naive on purpose: no plan, no check of the group's state or of the target's current offsets (it writes
    them unconditionally, as ``--reset-offsets --execute`` does), no report. Run after the DAG, so it rewrites
    the offsets the DAG wrote; a commit costs the same whether the offset changes or not.
    """
    result = BaselineResult()
    admin = AdminClient({"bootstrap.servers": backup})  # referenced until every future resolved
    started = time.perf_counter()
    for group in setup.groups:
        checkpoints, seconds = timed(lambda: read_checkpoints(setup.flow, 120))
        result.read.append(seconds)
        result.checkpoints_per_read = len(checkpoints)
        offsets = [
            TopicPartition(cp.topic, cp.partition, cp.downstream_offset)
            for (g, _, _), cp in sorted(checkpoints.items())
            if g == group
        ]
        if not offsets:
            continue
        t0 = time.perf_counter()
        future = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])[group]
        answer = future.result(60)
        result.commit.append(time.perf_counter() - t0)
        failed = [tp for tp in answer.topic_partitions or [] if tp.error]
        if failed:
            raise RuntimeError(f"baseline: group {group}: {len(failed)} partition(s) refused")
        result.groups += 1
        result.partitions += len(offsets)
    result.wall = time.perf_counter() - started
    del admin
    say(
        f"  {result.groups} groups / {result.partitions} partitions in {result.wall:.2f} s "
        f"(per group: read {statistics.median(result.read):.3f} s, commit {statistics.median(result.commit):.3f} s)"
    )
    return result


# ----------------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------------


def fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def median_ms(values: list[float]) -> str:
    """Median with min-max in milliseconds: one call of the baseline takes a few ms or less."""
    if not values:
        return "-"
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):.1f} ms (min {min(ms):.1f}, max {max(ms):.1f})"


def kinds_text(kinds: Counter[str]) -> str:
    order = ["exact", "approximate", "checkpoint", "refused", "unavailable"]
    return ", ".join(f"{k} {kinds[k]}" for k in order + sorted(set(kinds) - set(order)) if kinds.get(k))


Row = tuple[str, str, str, str]


def seconds_list(calls: list[tuple[str, float]], only: str | None = None) -> str:
    """``n: a, b s`` for the calls (of one label), in call order: the DAG plans twice, so there are two."""
    values = [s for label, s in calls if only is None or label == only]
    return f"{len(values)}: " + ", ".join(f"{s:.2f}" for s in values) + " s" if values else "0"


def dag_rows(r: DagResult) -> list[Row]:
    """Per-task durations (task instance start -> end), what Airflow adds around them, and the time inside."""
    out: list[Row] = []
    for task_id in TASKS:
        state = r.states[task_id]
        out.append((f"  {task_id}", fmt(r.durations[task_id]) + ("" if state == "success" else f" ({state})"), "", ""))
    out += [
        ("  Airflow around the tasks (wall - first start..last end)", f"{r.wall - r.span:.2f} s", "", ""),
        ("  inside: plan_failover calls (preflight, move_groups)", seconds_list(r.plans), "", ""),
        ("  inside: source probe (check_cluster source)", seconds_list(r.probes, "source"), "", ""),
        ("  inside: read_checkpoints, the whole topic", seconds_list(r.checkpoint_reads), "", ""),
    ]
    return out


def rows(
    setup: Setup, dry: DagResult, disaster: DagResult, base: BaselineResult, verified: tuple[int, int]
) -> list[Row]:
    g, p = len(setup.groups), setup.partitions
    return [
        (
            f"setup: {g} groups x {p} partitions, {setup.records} records each",
            f"{setup.checkpoints.emitted} checkpoints ({kinds_text(setup.kinds)}; max re-read {setup.max_rereads})",
            "same checkpoints",
            "same topic and format (primary.checkpoints.internal)",
        ),
        (
            "planned dry run, both up: trigger -> done (dag.test wall)",
            f"{dry.wall:.2f} s ({dry.state})",
            "-",
            "no dry run: read translateOffsets' output per group",
        ),
        *dag_rows(dry),
        (
            "  groups / partitions it would write",
            f"{dry.groups_moved} / {len(dry.written())} (refused {dry.refused})",
            "-",
            "-",
        ),
        (
            "  translation kinds (live: source up); largest re-read",
            f"{kinds_text(dry.kinds)}; {dry.max_rereads} record(s)",
            "-",
            "checkpoints only, also when the source is up",
        ),
        (
            "disaster, primary stopped: trigger -> done",
            f"{disaster.wall:.2f} s ({disaster.state})",
            f"{base.wall:.2f} s for {base.groups} groups",
            f"{g} x (stop consumers, translateOffsets, reset-offsets)",
        ),
        *dag_rows(disaster),
        (
            "  wall without the source probes (wall - their time)",
            f"{disaster.wall - sum(t for side, t in disaster.probes if side == 'source'):.2f} s",
            "no probe",
            "-",
        ),
        (
            "  per group",
            f"{disaster.wall / g:.3f} s (wall / groups; mostly fixed cost)",
            (
                f"{(base.wall / max(base.groups, 1)):.3f} s: read_checkpoints {median_ms(base.read)}"
                f" + commit {median_ms(base.commit)}"
            ),
            "translateOffsets (Java API) + one kafka-consumer-groups run (a JVM start)",
        ),
        (
            "  groups moved / partitions written",
            f"{disaster.groups_moved} / {len(disaster.written())} of {g * p} (refused {disaster.refused})",
            f"{base.groups} / {base.partitions} (unconditional)",
            f"as scripted; --from-file CSV of {p} rows per group",
        ),
        (
            "  target offsets = checkpoints after the run",
            f"{verified[0]} of {verified[1]}",
            "same offsets rewritten",
            "-",
        ),
        (
            "  translation kinds; largest re-read",
            (
                f"{kinds_text(disaster.kinds)} (as emitted: {kinds_text(setup.kinds)}); "
                f"{max(disaster.max_rereads, setup.max_rereads)} record(s)"
            ),
            "same checkpoints; not reported",
            "same checkpoints; not reported",
        ),
        (
            "  whole checkpoints topic reads",
            f"{len(disaster.checkpoint_reads)}",
            f"{len(base.read)} ({base.checkpoints_per_read} checkpoints each)",
            f"{g} (one per translateOffsets call)",
        ),
        (
            "  never backwards / active groups / audit record",
            "yes / refused unless force / mirrorflow.failover-log",
            "no / not checked / none",
            "can move backwards / reset refused while active / none",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=50, help="consumer groups to fail over (default 50)")
    parser.add_argument("--partitions", type=int, default=12, help="partitions of the topic (default 12)")
    parser.add_argument("--records", type=int, default=300, help="records per partition (default 300)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 groups x 4 partitions, 50 records")
    parser.add_argument("--verbose", action="store_true", help="the library's INFO logs")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.partitions, args.records = 10, 4, 50
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    work = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-failover-"))
    config_file = work / "mm2.properties"
    try:
        with embedded_clusters() as clusters, airflow_home(config_file):
            say(f"1. setup: {args.groups} groups x {args.partitions} partitions, {args.records} records each")
            setup = prepare_clusters(clusters, config_file, args.groups, args.partitions, args.records)

            say("2. Airflow in this process: import, resetdb, build the DAG")
            started = time.perf_counter()
            reset_airflow_db()
            from mirrorflow_airflow.dags.failover import failover_dags

            dag = failover_dags()[DAG_ID]  # reads MIRRORFLOW_CONFIG, as the scheduler does
            setup.airflow_seconds = time.perf_counter() - started
            say(f"  Airflow ready in {setup.airflow_seconds:.1f} s")

            say("3. planned dry run, both clusters up")
            dry = run_dag(dag, "planned dry run", {"mode": "planned", "dry_run": True})

            say("4. disaster: the primary's broker stopped by its PID")
            for status in clusters.only("primary").down(timeout=30):
                say(f"  {status.alias}: {status.detail}")
            disaster = run_dag(dag, "disaster failover", {"mode": "disaster", "dry_run": False})
            verified = verify_target(clusters.backup, setup)
            say(f"  target offsets equal to the checkpoints: {verified[0]} of {verified[1]}")

            say("5. baseline: per group, read_checkpoints + one alter_consumer_group_offsets (primary still down)")
            base = naive_per_group(clusters.backup, setup)
    except (KeyboardInterrupt, SystemError):
        if not INTERRUPTED:
            raise
        print("\ninterrupted: the clusters were stopped", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(work, ignore_errors=True)
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    print(f"\nmirrorflow failover benchmark, {started_at}, {os.cpu_count()} CPU(s), noida-db embedded brokers")
    print(f"command: {command}")
    print(
        f"setup {setup.seconds:.1f} s (not timed below); Airflow import + resetdb + DAG {setup.airflow_seconds:.1f} s\n"
    )
    print(table(rows(setup, dry, disaster, base, verified), HEADER))
    return 0 if dry.state == "success" and disaster.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
