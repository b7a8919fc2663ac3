"""Command-line front of a replication run, shared by the Spark app and ``mirrorflow replicate``.

The Spark app and the CLI must accept the same options and write the same report; this is that one
implementation (the Spark app only adds a SparkSession).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ..config import ConfigError, load_config, overrides
from ..config.model import parse_duration
from .executor import LocalExecutor, SparkExecutor, UnitExecutor
from .run import RunReport, replicate, replicate_continuously

log = logging.getLogger("mirrorflow.replicate")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--config", required=True, help="mm2.properties file")
    parser.add_argument("--flow", required=True, help="SOURCE->TARGET")
    parser.add_argument("--family", default=None, help="topic family (default: every topic of the flow)")
    parser.add_argument("--duration", default=None, help="keep running micro-batches for this long (e.g. 10m)")
    parser.add_argument("--topics", default=None, help="comma-separated source topics (default: all of the family)")
    parser.add_argument("--report", default=None, help="write the run report as JSON to this path")
    return parser


def summary(report: RunReport) -> str:
    lines = [
        (
            f"{report.flow} family {report.family or '(all)'}: {report.records} record(s) in "
            f"{len(report.partitions)} partition(s), {report.seconds:.1f} s, lag {report.lag}"
        )
    ]
    for p in report.partitions:
        if p.records or p.status not in ("up to date", "noop"):
            lines.append(
                f"  {p.topic}[{p.partition}] -> {p.remote_topic}: {p.records} record(s) "
                f"{p.first_offset}..{p.last_offset}, next {p.position}, lag {p.lag}, {p.status}"
            )
    lines += [
        f"  LOSS {e['topic']}[{e['partition']}] {e['first_missing']}..{e['last_missing']}: {e['action']}"
        for e in report.loss_events
    ]
    lines += [f"  ERROR {e}" for e in report.errors]
    return "\n".join(lines)


def run(args: argparse.Namespace, executor: UnitExecutor) -> int:
    try:
        # Settings from Airflow connections arrive in the environment, never on the command line.
        config = load_config(args.config, overrides=overrides.from_environment())
    except (ConfigError, overrides.OverrideError) as exc:
        print(exc, file=sys.stderr)
        return 1
    only = set(args.topics.split(",")) if args.topics else None
    try:
        if args.duration:
            report = replicate_continuously(
                config, args.flow, args.family, executor, parse_duration(args.duration), only_topics=only
            )
        else:
            report = replicate(config, args.flow, args.family, executor, only_topics=only)
    except (KeyError, ValueError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    if args.report:
        report.write_json(args.report)
    print(summary(report))
    return 0 if report.ok else 1


def main(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, *, spark: bool = False) -> int:
    args = add_arguments(parser).parse_args(argv)
    if not spark:
        return run(args, LocalExecutor())
    from pyspark.sql import SparkSession

    session = SparkSession.builder.appName(f"mirrorflow {args.flow} {args.family or ''}").getOrCreate()
    try:
        return run(args, SparkExecutor(session))
    finally:
        session.stop()


__all__ = ["add_arguments", "main", "run", "summary"]
