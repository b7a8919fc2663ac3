"""Command-line front of a replication run, shared by the Spark app and ``mirrorflow replicate``.

The Spark app and the CLI must accept the same options, check the same things and write the same report;
this is that one implementation (the Spark app only adds a SparkSession, after the clusters answered, so a
dead cluster costs no Spark start-up).

Exit codes (docs/runbooks/failure-modes.md documents them):

* 0: every partition copied cleanly;
* 1: a problem the user must fix (configuration, unknown flow or family, a bad option), or a run that
  finished with failed partitions (the report and the summary say which and why);
* 2: the run could not run: a cluster is unreachable, or something unexpected broke. One line on stderr
  (naming the cluster, its role and bootstrap servers when one is unreachable), also written to the
  ``--report`` file so the Airflow operator can show it; ``--debug`` adds the traceback and librdkafka's log.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import psutil

from .. import preflight
from ..config import ConfigError, MirrorConfig, load_config, overrides
from ..config.model import FlowConfig, Side, parse_duration
from .connect import ConnectServerUnreachable
from .continuous import replicate_continuously
from .executor import LocalExecutor, SparkExecutor, UnitExecutor
from .report import RunReport
from .report_text import report_lines
from .run import replicate
from .spark_env import SUBMITTED_AT_ENV
from .stop_signal import stop_between_batches

log = logging.getLogger("mirrorflow.replicate")
T = TypeVar("T")

EXIT_OK, EXIT_PROBLEM, EXIT_CANNOT_RUN = 0, 1, 2


class RunError(Exception):
    """Why a run could not start or finish, as the user should read it, and the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--config", required=True, help="mm2.properties file")
    parser.add_argument("--flow", required=True, help="SOURCE->TARGET")
    parser.add_argument("--family", default=None, help="topic family (default: every topic of the flow)")
    parser.add_argument("--duration", default=None, help="keep running micro-batches for this long (e.g. 10m)")
    parser.add_argument("--topics", default=None, help="comma-separated source topics (default: all of the family)")
    parser.add_argument("--report", default=None, help="write the run report as JSON to this path")
    # SUPPRESS: `mirrorflow --debug replicate` and `mirrorflow replicate --debug` both work (one does not reset
    # the other); read it with debug_requested().
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="on errors, show the traceback and log"
    )
    return parser


def debug_requested(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False))


def enable_debug_logging() -> None:
    """DEBUG on stderr (librdkafka's reconnect log included), for ``--debug``."""
    logging.basicConfig(
        level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger().setLevel(logging.DEBUG)
    logging.getLogger("py4j").setLevel(logging.INFO)  # one line per Java call otherwise


def summary(report: RunReport) -> str:
    """The run report as the compact table every output shows (``report_text``)."""
    report.order_phases()
    return "\n".join(report_lines(report.to_dict()))


def _first_line(exc: BaseException) -> str:
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def flow_of(config: MirrorConfig, name: str, family: str | None = None, *, require_enabled: bool = False) -> FlowConfig:
    """The flow named ``SOURCE->TARGET`` (and its family, if given), or ``RunError`` (exit 1) naming the problem."""
    source, arrow, target = name.partition("->")
    try:
        if not arrow:
            raise ValueError(f"--flow must look like SOURCE->TARGET, not '{name}'")
        flow = config.flow(source, target)
        if require_enabled and not flow.enabled:
            raise ValueError(f"flow {name} is not enabled in {config.path}")
        if family is not None:
            flow.family(family)
    except (KeyError, ValueError) as exc:
        raise RunError(f"error: {_first_line(exc)}", EXIT_PROBLEM) from None
    return flow


def check_flow_clusters(flow: FlowConfig, sides: tuple[Side, ...] = ("source", "target")) -> None:
    """Both clusters answer within ``mirrorflow.cluster.timeout``, else ``RunError`` (exit 2), one line naming them."""
    try:
        preflight.check_clusters(flow, sides=sides)
    except preflight.ClusterUnreachableError as exc:
        raise RunError(f"error: {exc}", EXIT_CANNOT_RUN) from None


def prepare(args: argparse.Namespace, config: MirrorConfig | None = None) -> MirrorConfig:
    """The configuration (``config`` if the caller loaded it), with the flow's clusters answering; ``RunError``
    otherwise. Nothing started yet."""
    try:
        # Settings from Airflow connections arrive in the environment, never on the command line.
        config = config or load_config(args.config, overrides=overrides.from_environment())
    except (ConfigError, overrides.OverrideError) as exc:
        raise RunError(str(exc), EXIT_PROBLEM) from None  # every problem, one per line, as `config validate`
    check_flow_clusters(flow_of(config, args.flow, args.family, require_enabled=True))
    return config


def copy(args: argparse.Namespace, executor: UnitExecutor, config: MirrorConfig) -> RunReport:
    """The run (or the micro-batches of ``--duration``) and its report."""
    only = set(args.topics.split(",")) if args.topics else None
    try:
        if args.duration:
            return replicate_continuously(
                config, args.flow, args.family, executor, parse_duration(args.duration), only_topics=only
            )
        return replicate(config, args.flow, args.family, executor, only_topics=only)
    except (KeyError, ValueError) as exc:
        raise RunError(f"error: {_first_line(exc)}", EXIT_PROBLEM) from None
    except ConnectServerUnreachable as exc:
        raise RunError(f"error: {exc}", EXIT_CANNOT_RUN) from None


def publish(
    args: argparse.Namespace,
    report: RunReport,
    before: dict[str, float],
    after: dict[str, float],
    *,
    show: bool = True,
) -> int:
    """Add the phases around the run, write the report, print the summary (unless ``show`` is off: the Airflow
    task logs it itself, at the end of its log); exit code 0 when all copied cleanly."""
    report.phases = {**before, **report.phases, **after}
    report.order_phases()
    if args.report:
        report.write_json(args.report)
    if show:
        print(summary(report), flush=True)
    return EXIT_OK if report.ok else EXIT_PROBLEM


def submitted_seconds() -> float:
    """From whoever launched this run (``MIRRORFLOW_SUBMITTED_AT``, set by the CLI and the Airflow operator
    before spark-submit) or else from this process's start, to now: the launch cost a run pays every tick."""
    try:
        started = float(os.environ.get(SUBMITTED_AT_ENV, ""))
    except ValueError:
        return round(_process_age(), 3)
    return round(max(0.0, time.time() - started), 3)


def _process_age() -> float:
    """Seconds since this process started, to the clock tick (psutil's create_time rounds boot time to whole
    seconds, which made a 0.9 s run report a 1.4 s launch)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return max(0.0, time.time() - psutil.Process().create_time())


def _timed(call: Callable[[], T]) -> tuple[T, float]:
    started = time.monotonic()
    value = call()
    return value, round(time.monotonic() - started, 3)


def fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Say why on stderr and in the report file (where the Airflow operator reads it); return the exit code."""
    print(message, file=sys.stderr, flush=True)
    if getattr(args, "report", None):
        report = RunReport(args.flow, args.family, "", datetime.now(UTC).isoformat(timespec="seconds"))
        report.errors.append(message.removeprefix("error: "))
        try:
            report.write_json(args.report)
        except OSError as exc:
            print(f"error: cannot write the report {args.report}: {exc}", file=sys.stderr)
    return code


def guarded(args: argparse.Namespace, body: Callable[[], int]) -> int:
    """``body()``'s exit code; a ``RunError`` or any unexpected exception becomes its one line (exit 2)."""
    try:
        return body()
    except RunError as exc:
        return fail(args, exc.message, exc.code)
    except Exception as exc:  # noqa: BLE001 - the user gets one line; --debug shows the traceback
        if debug_requested(args):
            traceback.print_exc()
            hint = ""
        else:
            hint = " (--debug shows the traceback)"
        return fail(args, f"error: {type(exc).__name__}: {_first_line(exc)}{hint}", EXIT_CANNOT_RUN)


def run(
    args: argparse.Namespace, executor: UnitExecutor, *, config: MirrorConfig | None = None, show: bool = True
) -> int:
    """One run driven from this process: check, copy (units on ``executor``: this process or a Spark Connect
    server), report. ``config``: already loaded (the Airflow task applies its connections); else ``--config``.
    ``show``: print the summary (the Airflow task logs the report itself)."""
    if debug_requested(args):
        enable_debug_logging()

    def driven_here() -> int:
        submit = submitted_seconds()
        loaded, preflight_s = _timed(lambda: prepare(args, config))
        try:
            report = copy(args, executor, loaded)
        finally:
            _, shutdown_s = _timed(executor.close)
        if executor.engine_seconds:  # connected during the first wave: engine start, not copying
            report.phases["copy"] = round(max(0.0, report.phases.get("copy", 0.0) - executor.engine_seconds), 3)
        before = {"submit": submit, "preflight": preflight_s, "engine": round(executor.engine_seconds, 3)}
        report.engine_steps = dict(getattr(executor, "engine_steps", None) or {})
        return publish(args, report, before, {"shutdown": shutdown_s}, show=show)

    return guarded(args, driven_here)


def main(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, *, spark: bool = False) -> int:
    """The spark-submit app's run (``spark``), or one in this process; SIGTERM stops ``--duration`` between
    batches (``stop_signal``)."""
    args = add_arguments(parser).parse_args(argv)
    with stop_between_batches(bool(args.duration)):
        return _main(args, spark)


def _main(args: argparse.Namespace, spark: bool) -> int:
    if not spark:
        return run(args, LocalExecutor())
    if debug_requested(args):
        enable_debug_logging()

    def with_spark() -> int:
        submit = submitted_seconds()
        config, preflight_s = _timed(lambda: prepare(args))  # before Spark: a dead cluster costs no Spark start-up
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(f"mirrorflow {args.flow} {args.family or ''}")
        session, engine_s = _timed(builder.getOrCreate)
        try:
            report = copy(args, SparkExecutor(session), config)
        finally:
            _, shutdown_s = _timed(session.stop)
        before = {"submit": submit, "preflight": preflight_s, "engine": engine_s}
        return publish(args, report, before, {"shutdown": shutdown_s})

    return guarded(args, with_spark)


__all__ = [
    "EXIT_CANNOT_RUN",
    "EXIT_OK",
    "EXIT_PROBLEM",
    "RunError",
    "add_arguments",
    "check_flow_clusters",
    "copy",
    "debug_requested",
    "enable_debug_logging",
    "fail",
    "flow_of",
    "guarded",
    "main",
    "prepare",
    "publish",
    "run",
    "summary",
]
