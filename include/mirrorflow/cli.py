"""The ``mirrorflow`` command: configuration checks, replication, checkpoints and local development clusters.

Operators without Airflow (and CI) need the same checks the DAGs run, so the CLI is a thin layer
over the library. Exit codes: 0 success; 1 a problem the user must fix (reported on stderr: every
configuration error, one per line, as ``config validate`` prints them; or a run whose report lists
failures); 2 a command that could not run: a cluster unreachable (one line naming its alias, role and
bootstrap servers, within ``mirrorflow.cluster.timeout``) or an unexpected error (one line; ``--debug``
shows the traceback and librdkafka's log); 3 ``dev status``/``demo status``: not everything runs.
Commands that talk to clusters check them first, so a dead cluster is named in seconds instead of
surfacing as a librdkafka traceback minutes later. Each command imports what it runs inside its function, so
``mirrorflow config validate`` and ``--help`` do not load the Kafka client or Spark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .config import ConfigError, FlowConfig, load_config
from .config.describe import describe_config, render_text
from .replication.entry import check_flow_clusters, debug_requested, enable_debug_logging, guarded


def _config_validate(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    for warning in config.warnings:
        print(warning, file=sys.stderr)
    flows = config.enabled_flows()
    families = sum(len(f.families) for f in flows)
    print(f"{args.file}: OK: {len(config.clusters)} cluster(s), {len(flows)} enabled flow(s), {families} family DAG(s)")
    return 0


def _config_show(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
        if args.flow and "->" not in args.flow:
            print(f"--flow must look like SOURCE->TARGET, not '{args.flow}'", file=sys.stderr)
            return 1
        description = describe_config(config, args.flow)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return 1
    print(json.dumps(description, indent=2) if args.json else render_text(description))
    return 0


def _flow_of(args: argparse.Namespace) -> FlowConfig | None:
    """The enabled flow named by ``--flow`` (settings from Airflow connections applied), or None after an error."""
    from .config import overrides

    source, arrow, target = args.flow.partition("->")
    if not arrow:
        print(f"--flow must look like SOURCE->TARGET, not '{args.flow}'", file=sys.stderr)
        return None
    try:
        return load_config(args.config, overrides=overrides.from_environment()).flow(source, target)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
    return None


def _status(args: argparse.Namespace) -> int:
    """How far behind each flow is, in records and seconds, worst first (``--json``: the status model's data).

    Exit 2 when a cluster did not answer: what could be measured is still printed, the line naming the
    cluster goes to stderr as the other commands print it.
    """
    from .config import overrides
    from .status import flow_status, render_json, render_text

    if args.flow:
        flow = _flow_of(args)
        if flow is None:
            return 1
        flows = [flow]
    else:
        flows = load_config(args.config, overrides=overrides.from_environment()).enabled_flows()
        flows = [f for f in flows if not args.family or any(fam.name == args.family for fam in f.families)]
    try:
        statuses = [flow_status(flow, args.family) for flow in flows]
    except KeyError as exc:  # an unknown family
        print(exc.args[0], file=sys.stderr)
        return 1
    if args.prometheus:
        from .metrics import render

        print(render(statuses), end="")
    elif args.json:
        print(render_json(statuses))
    else:
        print(render_text(statuses))
    for line in (e for st in statuses for e in st.errors if e.startswith("error: cluster")):
        print(line, file=sys.stderr)
    return 2 if any(st.unreachable for st in statuses) else 0


def _checkpoints(args: argparse.Namespace) -> int:
    from .checkpoints.emit import emit_checkpoints, render_report
    from .checkpoints.groupsync import sync_group_offsets

    flow = _flow_of(args)
    if flow is None:
        return 1
    check_flow_clusters(flow)  # both are read (and the target written): name a dead one now, in one line
    report = emit_checkpoints(flow, groups=args.groups, dry_run=args.dry_run)
    output: dict[str, object] = {"checkpoints": report.to_dict()}
    text = [render_report(report)]
    if args.dry_run:
        text.append("dry run: no checkpoint and no group offset changed")
    elif flow.get_bool("sync.group.offsets.enabled"):
        synced = sync_group_offsets(flow, groups=args.groups)
        output["group_offsets"] = synced.to_dict()
        text.append(
            f"group offsets on {flow.target}: {synced.to_dict()['written']} partition offset(s) written"
            + "".join(f"\n  skipped {g.group}: {g.skipped}" for g in synced.groups if g.skipped)
        )
        report.errors += synced.errors
    else:
        text.append("group offsets not synced (sync.group.offsets.enabled=false, MM2's default)")
    print(json.dumps(output, indent=2) if args.json else "\n".join(text))
    return 1 if report.errors else 0


def _translate(args: argparse.Namespace) -> int:
    from .checkpoints.failover_offsets import render_resume_points, translate_group

    flow = _flow_of(args)
    if flow is None:
        return 1
    # Only the target must answer: without the source, the answer comes from the checkpoints on the target, at
    # once (a refused source is given up in milliseconds); the line naming the source says why, on stderr.
    check_flow_clusters(flow, sides=("target",))
    source, points = translate_group(
        flow, args.group, on_unreachable=lambda line: print(f"warning: {line}", file=sys.stderr, flush=True)
    )
    if args.json:
        print(json.dumps({"group": args.group, "source": source, "offsets": [p.__dict__ for p in points]}, indent=2))
    else:
        print(render_resume_points(flow, args.group, source, points))
    return 0 if points else 1


def _heartbeats(args: argparse.Namespace) -> int:
    """``heartbeats emit``: what one run of the heartbeats DAG writes; ``heartbeats age``: how old the newest
    heartbeat that crossed the flow is (exit 0 fresh or within the grace period of a new flow, 1 stale), for a user
    or a monitoring check outside Airflow."""
    from dataclasses import asdict

    from . import heartbeats
    from .config import overrides

    flow = _flow_of(args)
    if flow is None:
        return 1
    check_flow_clusters(flow, sides=("target",))  # both commands need the target; the source may be down
    if args.action == "emit":
        config = load_config(args.config, overrides=overrides.from_environment())  # resolved once: cached
        written, problem = heartbeats.emit_flow_heartbeats(config, flow)
        lines = [
            f"heartbeat ({e.heartbeat.source_alias}, {e.heartbeat.target_alias}) at {e.heartbeat.timestamp_ms} "
            f"written to {e.topic} on {e.cluster}"
            for e in written
        ]
        if args.json:
            payload = {"written": [{"cluster": e.cluster, "topic": e.topic, **asdict(e.heartbeat)} for e in written]}
            print(json.dumps({**payload, "reverse_problem": problem}, indent=2))
        else:
            print("\n".join(lines + ([f"warning: {problem}"] if problem else [])))
        return 0
    fresh = heartbeats.check_freshness(flow)
    if args.json:
        print(json.dumps({**asdict(fresh), "verdict": fresh.verdict}, indent=2))
    else:
        print(fresh.describe())
    return 1 if fresh.verdict == "stale" else 0


def _verify(args: argparse.Namespace) -> int:
    """Compare the source's committed records with their copies on the target (``verify``): exit 0 identical, 1 any
    difference (listed), 2 could not verify: a cluster or the Spark Connect server unreachable, a chunk that failed,
    and also a configuration error or an unknown flow, family or topic. Unlike the other commands' 1 for those, a
    script testing ``verify``'s exit code for 1 must mean "the copy differs", never "a typo in the command".

    Chunks run as Spark tasks on a Spark Connect server (as ``replicate``), or here with ``--in-process``.
    """
    from datetime import UTC, datetime

    from .config import overrides
    from .replication.connect import ConnectServerUnreachable, SparkConnectExecutor
    from .replication.entry import EXIT_CANNOT_RUN, RunError, check_flow_clusters, flow_of
    from .replication.executor import LocalExecutor, UnitExecutor
    from .verify import VerifyReport, render_text, verify_flow

    def failed(message: str, code: int) -> int:
        print(message, file=sys.stderr, flush=True)
        if args.report:
            empty = VerifyReport(args.flow, args.family, datetime.now(UTC).isoformat(timespec="seconds"))
            empty.errors.append(message.removeprefix("error: "))
            empty.write_json(args.report)
        return code

    try:
        from_offsets = _parse_from_offsets(args.from_offsets)
        config = load_config(args.config, overrides=overrides.from_environment())
        flow = flow_of(config, args.flow, args.family)
        check_flow_clusters(flow)  # both are read: name a dead one now, in one line
    except (ConfigError, overrides.OverrideError) as exc:
        return failed(str(exc), EXIT_CANNOT_RUN)
    except ValueError as exc:
        return failed(f"error: {exc}", EXIT_CANNOT_RUN)
    except RunError as exc:
        return failed(exc.message, EXIT_CANNOT_RUN)
    executor: UnitExecutor = (
        LocalExecutor() if args.in_process else SparkConnectExecutor(lambda: connect_url(args), f"{args.flow}/verify")
    )
    try:
        report = verify_flow(
            config,
            args.flow,
            args.family,
            set(args.topics.split(",")) if args.topics else None,
            args.since,
            executor,
            from_offsets=from_offsets,
            chunk_records=args.chunk_records,
        )
    except (KeyError, ValueError) as exc:
        return failed(f"error: {exc.args[0] if exc.args else exc}", EXIT_CANNOT_RUN)
    except ConnectServerUnreachable as exc:
        return failed(f"error: {exc}", EXIT_CANNOT_RUN)
    finally:
        executor.close()
    if args.report:
        report.write_json(args.report)
    print(json.dumps(report.to_dict(), indent=2) if args.json else render_text(report), flush=True)
    return report.exit_code


def _parse_from_offsets(text: str | None) -> dict[tuple[str, int], int] | None:
    """``TOPIC:PARTITION=OFFSET[,...]`` as {(topic, partition): offset}; ValueError naming a malformed item."""
    if not text:
        return None
    found: dict[tuple[str, int], int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        where, equals, offset = item.rpartition("=")
        topic, colon, partition = where.rpartition(":")
        if not (equals and colon and topic and partition.isdigit() and offset.isdigit()):
            raise ValueError(f"--from-offsets items look like TOPIC:PARTITION=OFFSET, not '{item}'")
        found[(topic, int(partition))] = int(offset)
    return found


def spark_submit_command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The spark-submit call (and environment) that runs the mirror Spark app, as Airflow does.

    The ``mirrorflow`` package goes with the job (``--py-files``, a zip cached by content hash), so a cluster's
    workers need only a Python with confluent-kafka: ``PYSPARK_PYTHON`` names it when it is not this one."""
    from .replication.pyfiles import package_zip
    from .replication.spark_env import spark_environment
    from .spark_app import MIRROR_APP

    venv_bin = Path(sys.executable).parent
    spark_submit = venv_bin / "spark-submit"
    cmd = [
        str(spark_submit) if spark_submit.exists() else "spark-submit",
        "--master",
        args.master,
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--py-files",
        str(package_zip()),
        str(MIRROR_APP),
        "--config",
        args.config,
        "--flow",
        args.flow,
    ]
    for option in ("family", "duration", "topics", "report"):
        if getattr(args, option):
            cmd += [f"--{option}", getattr(args, option)]
    if debug_requested(args):
        cmd.append("--debug")
    env = {**os.environ, **spark_environment(os.environ, keep_choices=True, master=args.master)}
    env.pop("SPARK_REMOTE", None)  # pyspark would make the app a Spark Connect client instead of a Spark driver
    return cmd, env


def connect_url(args: argparse.Namespace) -> str:
    """Where the Spark Connect server is: ``--remote``, else ``SPARK_REMOTE``, else this machine's (started now
    if it does not run yet)."""
    from .replication.local_connect import ensure_local_server

    return args.remote or os.environ.get("SPARK_REMOTE") or ensure_local_server()


def _replicate(args: argparse.Namespace) -> int:
    from .replication.connect import SparkConnectExecutor
    from .replication.entry import prepare, run
    from .replication.executor import LocalExecutor
    from .replication.spark_env import SUBMITTED_AT_ENV
    from .replication.stop_signal import stop_between_batches

    if args.in_process or args.master is None:  # the default: units on a Spark Connect server, found or started
        executor = (
            LocalExecutor()
            if args.in_process
            else SparkConnectExecutor(lambda: connect_url(args), f"{args.flow}/{args.family or '*'}")
        )
        with stop_between_batches(bool(args.duration)):
            return run(args, executor)

    def submit() -> int:
        # Configuration and clusters checked here first: a dead cluster is one line within seconds, without
        # a JVM start (the Spark app checks again, in case its driver runs elsewhere).
        prepare(args)
        cmd, env = spark_submit_command(args)
        return subprocess.call(cmd, env={**env, SUBMITTED_AT_ENV: repr(time.time())})

    return guarded(args, submit)


def local_spark_connect(action: str) -> None:
    """The local Spark Connect server (started by the first ``replicate``): stopped by ``stop``, shown by ``status``."""
    from .replication import local_connect

    if action in ("down", "stop"):
        print(f"{'spark':<10} {'connect':<22} {local_connect.stop_local_server()}")
    elif action == "status":
        server = local_connect.status()
        state = f"running pid {server.pid}" if server.running else "stopped (starts on the first replicate)"
        print(f"{'spark':<10} {server.url or 'connect':<22} {state}  log {server.log_file}")


def _local_spark(args: argparse.Namespace) -> int:
    local_spark_connect(args.action)
    return 0


#: Entry point group of commands other distributions add to this CLI (a checkout's ``mirrorflow-dev`` adds ``dev``
#: and ``demo``): each names a function that takes the subparsers and adds its own.
COMMANDS_GROUP = "mirrorflow.commands"


def _add_plugin_commands(sub: argparse._SubParsersAction) -> None:
    from importlib.metadata import entry_points

    for entry in entry_points(group=COMMANDS_GROUP):
        entry.load()(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirrorflow",
        description="Kafka replication between clusters, MirrorMaker 2 compatible, orchestrated by Airflow.",
    )
    parser.add_argument("--debug", action="store_true", help="on errors, show the traceback and librdkafka's log")
    sub = parser.add_subparsers(dest="command", required=True)

    config = sub.add_parser("config", help="check and explain an mm2.properties file")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    validate = config_sub.add_parser("validate", help="exit 0 if the file is usable, else 1 with every error")
    validate.add_argument("file")
    validate.set_defaults(func=_config_validate)
    show = config_sub.add_parser("show", help="print the effective settings of each flow and their origin")
    show.add_argument("file")
    show.add_argument("--flow", help="only this flow, e.g. primary->backup")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_config_show)

    from .replication.entry import add_arguments

    replicate = add_arguments(
        sub.add_parser(
            "replicate",
            help="copy what is new in one family of a flow (Spark tasks on a Spark Connect server by default)",
        )
    )
    engine = replicate.add_mutually_exclusive_group()
    engine.add_argument(
        "--remote",
        default=None,
        help="Spark Connect server sc://HOST:PORT (default: $SPARK_REMOTE, else a local one started on first use)",
    )
    engine.add_argument(
        "--master",
        default=None,
        help="run the Spark app with spark-submit on this master instead (local[*,4], spark://..., yarn, k8s://...)",
    )
    engine.add_argument("--in-process", action="store_true", help="copy in this process, without Spark")
    replicate.set_defaults(func=_replicate)

    status = sub.add_parser("status", help="lag in records and seconds per partition, heartbeat and checkpoint ages")
    status.add_argument("--config", required=True, help="mm2.properties file")
    status.add_argument("--flow", help="SOURCE->TARGET (default: every enabled flow)")
    status.add_argument("--family", help="only this family's partitions")
    shape = status.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="machine-readable output")
    shape.add_argument(
        "--prometheus",
        action="store_true",
        help="Prometheus text format (the page's /metrics figures; e.g. for node_exporter's textfile collector)",
    )
    _add_debug(status)
    status.set_defaults(func=_status)

    checkpoints = sub.add_parser("checkpoints", help="emit checkpoints and sync group offsets once (the DAG's work)")
    checkpoints.add_argument("--config", required=True, help="mm2.properties file")
    checkpoints.add_argument("--flow", required=True, help="SOURCE->TARGET")
    checkpoints.add_argument("--groups", help="only groups fully matching this regex (after the group filter)")
    checkpoints.add_argument("--dry-run", action="store_true", help="translate and report; write nothing")
    checkpoints.add_argument("--json", action="store_true", help="machine-readable output")
    _add_debug(checkpoints)
    checkpoints.set_defaults(func=_checkpoints)

    translate = sub.add_parser("translate", help="the target offsets a failed-over consumer group would use")
    translate.add_argument("--config", required=True, help="mm2.properties file")
    translate.add_argument("--flow", required=True, help="SOURCE->TARGET")
    translate.add_argument("--group", required=True, help="consumer group id")
    translate.add_argument("--json", action="store_true", help="machine-readable output")
    _add_debug(translate)
    translate.set_defaults(func=_translate)

    beats = sub.add_parser("heartbeats", help="write a flow's heartbeats, or report how old the newest that crossed is")
    beats.add_argument("action", choices=["emit", "age"], help="emit: write them now; age: exit 1 when stale")
    beats.add_argument("--config", required=True, help="mm2.properties file")
    beats.add_argument("--flow", required=True, help="SOURCE->TARGET")
    beats.add_argument("--json", action="store_true", help="machine-readable output")
    _add_debug(beats)
    beats.set_defaults(func=_heartbeats)

    _add_verify_parser(sub)
    local = sub.add_parser("local-spark", help="the local Spark Connect server that replicate starts on first use")
    local.add_argument("action", choices=["status", "stop"])
    local.set_defaults(func=_local_spark)
    _add_plugin_commands(sub)
    return parser


def _add_verify_parser(sub: argparse._SubParsersAction) -> None:
    verify = sub.add_parser(
        "verify", help="compare the source's records with their copies on the target (exit 0 identical, 1 different)"
    )
    verify.add_argument("--config", required=True, help="mm2.properties file")
    verify.add_argument("--flow", required=True, help="SOURCE->TARGET")
    verify.add_argument("--family", default=None, help="topic family (default: every topic of the flow)")
    verify.add_argument("--topics", default=None, help="comma-separated source topics (default: all of the family)")
    start = verify.add_mutually_exclusive_group()
    start.add_argument("--since", default=None, help="only records at most this old (e.g. 1h, 2d)")
    start.add_argument(
        "--from-offsets", default=None, help="start at these source offsets: TOPIC:PARTITION=OFFSET[,...]"
    )
    verify.add_argument(
        "--chunk-records", type=int, default=250_000, help="source offsets per Spark task (default 250000)"
    )
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    verify.add_argument("--report", default=None, help="write the report as JSON to this path")
    engine = verify.add_mutually_exclusive_group()
    engine.add_argument(
        "--remote",
        default=None,
        help="Spark Connect server sc://HOST:PORT (default: $SPARK_REMOTE, else a local one started on first use)",
    )
    engine.add_argument("--in-process", action="store_true", help="verify in this process, without Spark")
    _add_debug(verify)
    verify.set_defaults(func=_verify)


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the command too; SUPPRESS keeps a ``mirrorflow --debug <command>`` from being reset."""
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="on errors, show the traceback and log"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if debug_requested(args):
        enable_debug_logging()
    # Any error a command does not handle itself: one line and exit 2, not a traceback (unless --debug).
    return int(guarded(args, lambda: int(args.func(args))))


if __name__ == "__main__":
    sys.exit(main())
