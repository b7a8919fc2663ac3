"""The replication step of a mirror DAG: units on a Spark Connect server, or spark-submit of the Spark app.

The connection ``spark_default`` chooses the engine by its type:

* ``spark_connect`` (the demo's, the compose topology's): this task plans the run itself and submits its
  work units to the long-lived Spark Connect server named by the connection (host ``sc://HOST``, port, and
  optionally a token and ``use_ssl``, as the provider's ``SparkConnectHook`` reads them). A run with nothing
  new costs about a second; no Spark application is started per run.
* ``spark`` (local mode, ``spark://``, YARN, Kubernetes): ``spark-submit`` of the package's Spark app (``mirrorflow.spark_app``), for
  clusters where a Spark Connect server is not an option; each run pays a Spark application's start-up.

Either way the ``mirrorflow`` package goes with the job (its zip: ``--py-files``, or a Spark Connect artifact),
so a cluster's workers need only a Python with confluent-kafka, named by ``PYSPARK_PYTHON`` /
``spark.pyspark.python``, which are kept. In client deploy mode the app writes its report to a file this task
reads; in cluster deploy mode (YARN, Kubernetes) the task reads the run's summary from its lock release record
on the target instead (``remote_report``).

Either way the task is an operator that composes the Spark provider's public hooks (``SparkSubmitHook``,
``SparkConnectHook``), built from their documented arguments, so a newer provider's internals cannot break it. It

* builds the app's arguments from the flow, the family and the run's Params at run time,
* hands cluster settings from Airflow connections to the app through the environment (never on the
  command line, which the Spark hook logs), and makes sure ``spark-submit`` and the executors' Python
  are this installation's,
* returns the app's run report (per-partition records, lag in records and in seconds) as the task's output (XCom),
* fails with the app's own words: when the app stops early (a cluster unreachable: one line naming it) or a
  partition fails, the report it leaves says why, and that becomes the task's failure message instead of the
  Spark hook's "Cannot execute: spark-submit ... Error code is: 2",
* ends its log with the run report as a compact table, each statement on its own line (``report_text``), logs
  spark-submit's output with each line's own level (the Spark hook logs every line as INFO, so a WARN or ERROR
  could not be found by level), and says so in the log when Airflow stops it from outside.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from airflow.sdk.log import mask_secret

from mirrorflow.config.model import parse_duration
from mirrorflow.replication.pyfiles import package_zip
from mirrorflow.replication.report_text import report_lines
from mirrorflow.replication.spark_env import SUBMITTED_AT_ENV, spark_environment
from mirrorflow.spark_app import MIRROR_APP
from mirrorflow_airflow.hooks.config import MirrorflowHook


def report_failures(report: dict[str, Any]) -> list[str]:
    """What went wrong in a run, as the report says it: its errors, else its failed partitions."""
    errors = [str(e) for e in report.get("errors", [])]
    return errors or [
        f"{p['topic']}[{p['partition']}]: {p.get('error') or 'failed'}"
        for p in report.get("partitions", [])
        if p.get("status") == "failed"
    ]


def app_arguments(config: Path, flow: str, family: str, params: dict[str, Any], report: Path | None) -> list[str]:
    """Arguments of the Spark app for one run (no ``--report`` without ``report``: a driver on the cluster could not
    write where the task reads); raises ValueError naming a bad Param."""
    args = ["--config", str(config), "--flow", flow, "--family", family]
    if report is not None:
        args += ["--report", str(report)]
    duration = str(params.get("duration") or "").strip()
    if duration:
        parse_duration(duration)  # a clear error before Spark starts
        args += ["--duration", duration]
    topics = params.get("topics") or ""
    names = [t.strip() for t in (topics if isinstance(topics, list) else str(topics).split(",")) if t.strip()]
    if names:
        args += ["--topics", ",".join(names)]
    return args


def with_package_zip(py_files: str | None) -> str:
    """``--py-files``: the ``mirrorflow`` package zip first, then the DAG author's own files (a retry's earlier zip
    is replaced, never repeated)."""
    own = [p for p in (py_files or "").split(",") if p.strip() and not Path(p).name.startswith("mirrorflow-")]
    return ",".join([str(package_zip()), *own])


#: The level of a line of spark-submit's output: log4j's ``26/11/22 12:00:01 WARN SparkContext: ...`` and the
#: app's own Python logging ``2026-11-22 12:00:01,123 WARNING name: ...``.
_LINE_LEVEL = re.compile(
    r"^(?:\d\d/\d\d/\d\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) "
    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL) "
)
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}


def line_level(line: str) -> int:
    """The logging level a line of spark-submit output carries (INFO when it names none)."""
    match = _LINE_LEVEL.match(line)
    return _LEVELS[match.group(1)] if match else logging.INFO


class _LevelledLog:
    """The hook's logger, except that a bare line logged at INFO goes out at the level the line names."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        level = line_level(msg) if isinstance(msg, str) and not args else logging.INFO
        self._log.log(level, msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


class LevelledSparkSubmitHook(SparkSubmitHook):
    """The Spark provider's hook, logging each line of spark-submit's output at its own level."""

    @property
    def log(self) -> Any:  # type: ignore[override]
        return _LevelledLog(super().log)


class MirrorFamilyOperator(BaseOperator):
    """Replicate one topic family of one flow with the Spark app; returns the run report.

    ``conn_id`` names the Spark connection (``spark_connect``: the run's units go to that server; ``spark``:
    spark-submit). ``conf``, ``py_files``, ``files``, ``env_vars``, ``deploy_mode`` and ``spark_options`` (any other
    argument of the provider's ``SparkSubmitHook``, e.g. ``executor_memory``) apply to spark-submit.
    """

    template_fields = ("flow", "family", "conf", "name")
    ui_color = "#e8f4fd"

    def __init__(
        self,
        *,
        flow: str,
        family: str,
        config: str | None = None,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        py_files: str | None = None,
        files: str | None = None,
        env_vars: dict[str, str] | None = None,
        deploy_mode: str | None = None,
        name: str | None = None,
        spark_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.flow, self.family, self.config = flow, family, config
        self.conn_id = conn_id
        self.conf = (
            conf if conf is not None else {"spark.ui.showConsoleProgress": "false", "spark.task.maxFailures": "4"}
        )
        self.py_files, self.files, self.env_vars = py_files, files, env_vars
        self.deploy_mode = deploy_mode
        self.name = name or f"mirrorflow {flow} {family}"
        self.spark_options = dict(spark_options or {})
        self._connect_executor: Any = None  # while a Spark Connect run is in progress (on_kill interrupts it)
        self._submit_hook: SparkSubmitHook | None = None  # while spark-submit runs (on_kill stops it)
        self._spark_conn: Any = None  # the ``conn_id`` connection, read once per task (``_spark_connection``)
        self._spark_conn_read = False

    def execute(self, context: Any) -> dict[str, Any]:
        hook = MirrorflowHook(self.config)
        if self._engine() != "spark_connect" and self._deploy_mode_name() == "cluster":
            return self._run_in_cluster_mode(context, hook)
        with tempfile.TemporaryDirectory(prefix="mirrorflow-report-") as tmp:
            report_path = Path(tmp) / "report.json"
            args = app_arguments(hook.config_file, self.flow, self.family, dict(context["params"]), report_path)
            try:
                if self._engine() == "spark_connect":
                    self._run_on_spark_connect(hook, args)
                else:
                    # Built here, after templating, so connection secrets never land in the rendered-fields view.
                    env = {
                        **(self.env_vars or {}),
                        **spark_environment(os.environ, keep_choices=True, master=self._master()),
                        **hook.spark_environment(),
                        SUBMITTED_AT_ENV: repr(time.time()),  # the app reports spark-submit's own cost as "submit"
                    }
                    # The package travels with the job: the cluster's workers need only confluent-kafka.
                    self._submit(args, env, py_files=with_package_zip(self.py_files), files=self.files)
            except Exception:
                report = self._read_report(report_path)
                failures = report_failures(report) if report else []
                if not failures:
                    raise
                # The app's one line (the hook logged its output above it) rather than "Cannot execute ...".
                raise AirflowException("; ".join(failures)) from None
            report = self._read_report(report_path)
        if report is None:
            raise RuntimeError(f"the Spark app finished without writing its run report ({report_path})")
        return report

    def _submit(self, args: list[str], env: dict[str, str], *, py_files: str, files: str | None) -> None:
        """spark-submit of the app through the provider's hook (its public arguments only)."""
        self._submit_hook = LevelledSparkSubmitHook(
            conf=self.conf,
            conn_id=self.conn_id,
            files=files,
            py_files=py_files,
            name=self.name,
            application_args=args,
            env_vars=env,
            deploy_mode=self.deploy_mode,
            **self.spark_options,
        )
        try:
            self._submit_hook.submit(str(MIRROR_APP))
        finally:
            self._submit_hook = None

    def _deploy_mode_name(self) -> str:
        """``client`` or ``cluster``: the operator's ``deploy_mode``, else the connection's ``deploy-mode`` extra."""
        if self.deploy_mode:
            return str(self.deploy_mode)
        conn = self._spark_connection()
        return str(conn.extra_dejson.get("deploy-mode") or "client") if conn is not None else "client"

    def _run_in_cluster_mode(self, context: Any, hook: MirrorflowHook) -> dict[str, Any]:
        """spark-submit with the driver on the cluster (YARN, Kubernetes; Spark refuses it for Python apps on a
        standalone master): the configuration file goes with ``--files``, and the report comes back from the run's
        release record on the target's lock topic (``remote_report``), since the driver's files stay on the cluster.
        """
        from mirrorflow.kafka import clients
        from mirrorflow.replication.remote_report import released_report

        if (self._master() or "").startswith("spark://"):
            raise AirflowException(
                f"connection {self.conn_id}: Spark does not run Python apps in cluster deploy mode on a standalone "
                "master; use deploy-mode client there (the driver then runs in this task), or a Spark Connect server"
            )
        own_files = [f for f in (self.files or "").split(",") if f.strip() and f != str(hook.config_file)]
        files = ",".join([str(hook.config_file), *own_files])  # in the driver's working directory
        args = app_arguments(Path(hook.config_file.name), self.flow, self.family, dict(context["params"]), None)
        env = {**(self.env_vars or {}), **hook.spark_environment(), SUBMITTED_AT_ENV: repr(time.time())}
        since_ms = int(time.time() * 1000)
        failure: Exception | None = None
        try:
            self._submit(args, env, py_files=with_package_zip(self.py_files), files=files)
        except Exception as exc:  # noqa: BLE001 - the summary may still say why (failed partitions)
            failure = exc
        flow = hook.flow(self.flow)
        report = released_report(flow, self.family, since_ms, clients.client_properties(flow, "target", "consumer"))
        if report is None:
            raise AirflowException(
                f"the run left no summary in mirrorflow-locks.internal on {self.flow.split('->')[-1]} (it did not "
                "take its lock: a cluster unreachable, a bad configuration); the driver's log on the cluster says why"
            ) from failure
        self._log_report(report)
        if failure is not None or not report["ok"]:
            raise AirflowException("; ".join(report_failures(report)) or str(failure)) from None
        return report

    def _spark_connection(self) -> Any:
        """The ``conn_id`` connection (None when it does not exist: the Spark provider's own defaults), read from
        Airflow's connections and secrets backends once per task."""
        if not self._spark_conn_read:
            try:
                self._spark_conn = BaseHook.get_connection(self.conn_id)
            except AirflowNotFoundException:
                self._spark_conn = None
            self._spark_conn_read = True
        return self._spark_conn

    def _engine(self) -> str:
        """The type of the ``conn_id`` connection: ``spark_connect``, else spark-submit's ``spark``."""
        conn = self._spark_connection()
        return str(conn.conn_type or "spark") if conn is not None else "spark"

    def _master(self) -> str | None:
        """The ``spark`` connection's master (``local[*]``, ``spark://host:7077``, ``yarn``...), None if unknown."""
        conn = self._spark_connection()
        if conn is None or conn.conn_type == "spark_connect" or not conn.host:
            return None
        return f"{conn.host}:{conn.port}" if conn.port else str(conn.host)

    def _run_on_spark_connect(self, hook: MirrorflowHook, app_args: list[str]) -> None:
        """The run, driven from this task, its units on the Spark Connect server; raises when it did not copy
        cleanly (the report it wrote says why, as the Spark app's does)."""
        from mirrorflow.replication import entry
        from mirrorflow.replication.connect import SparkConnectExecutor, public_url

        url = SparkConnectHook(self.conn_id).get_connection_url()
        if ";" in url:
            mask_secret(url.split(";", 1)[1])  # a token must never reach the log
        self.log.info("replicating with the Spark Connect server %s (connection %s)", public_url(url), self.conn_id)
        args = entry.add_arguments(argparse.ArgumentParser()).parse_args(app_args)
        self._connect_executor = SparkConnectExecutor(url, f"{self.flow}/{self.family}")
        try:
            code = entry.run(args, self._connect_executor, config=hook.load(), show=False)
        finally:
            self._connect_executor = None
        if code != entry.EXIT_OK:
            raise AirflowException(f"the run ended with exit code {code}")

    def on_kill(self) -> None:
        """Stop this run's Spark jobs on the Spark Connect server, or the spark-submit process; say why in the log."""
        self.log.error(
            "replicate was stopped from outside: Airflow ended this task (it was marked failed or cleared, its "
            "heartbeat was missed, or a timeout passed). This run's Spark jobs are stopped now; what it committed "
            "stays committed, and the next run resumes from the stored progress (exactly-once: nothing is "
            "duplicated)."
        )
        executor = getattr(self, "_connect_executor", None)
        submitted = getattr(self, "_submit_hook", None)
        if executor is not None:
            executor.interrupt()
        elif submitted is not None:
            submitted.on_kill()

    def _read_report(self, path: Path) -> dict[str, Any] | None:
        """The report the app wrote (logged), or None."""
        report = json.loads(path.read_text()) if path.exists() else None
        if report is not None:
            self._log_report(report)
        return report

    def _log_report(self, report: dict[str, Any]) -> None:
        """The report as the task log's last lines: a compact table, one statement per line."""
        if not report.get("partitions") and report.get("errors"):  # stopped before copying: only the why
            for error in report["errors"]:
                self.log.error("%s", error)
            return
        for line in report_lines(report):
            stripped = line.lstrip()
            level = logging.ERROR if stripped.startswith(("ERROR", "LOSS")) else logging.INFO
            level = logging.WARNING if stripped.startswith(("WARNING", "RESET")) else level
            self.log.log(level, "%s", line)
