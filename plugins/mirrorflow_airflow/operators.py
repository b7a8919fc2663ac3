"""The replication step of a mirror DAG: spark-submit of ``spark_apps/mirror_family.py``.

A thin subclass of the Spark provider's ``SparkSubmitOperator`` (connection ``spark_default``: local
mode by default, a cluster by changing the connection) that

* builds the app's arguments from the flow, the family and the run's Params at run time,
* hands cluster settings from Airflow connections to the app through the environment (never on the
  command line, which the Spark hook logs), and makes sure ``spark-submit`` and the executors' Python
  are this installation's,
* returns the app's run report (per-partition records and lag) as the task's output (XCom),
* fails with the app's own words: when the app stops early (a cluster unreachable: one line naming it) or a
  partition fails, the report it leaves says why, and that becomes the task's failure message instead of the
  Spark hook's "Cannot execute: spark-submit ... Error code is: 2".
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from include.mirrorflow.config.location import REPO_ROOT
from include.mirrorflow.config.model import parse_duration
from include.mirrorflow.replication.spark_env import SUBMITTED_AT_ENV, spark_environment

from .hooks import MirrorflowHook

MIRROR_APP = REPO_ROOT / "spark_apps" / "mirror_family.py"


def report_failures(report: dict[str, Any]) -> list[str]:
    """What went wrong in a run, as the report says it: its errors, else its failed partitions."""
    errors = [str(e) for e in report.get("errors", [])]
    return errors or [
        f"{p['topic']}[{p['partition']}]: {p.get('error') or 'failed'}"
        for p in report.get("partitions", [])
        if p.get("status") == "failed"
    ]


def app_arguments(config: Path, flow: str, family: str, params: dict[str, Any], report: Path) -> list[str]:
    """Arguments of the Spark app for one run; raises ValueError naming a bad Param."""
    args = ["--config", str(config), "--flow", flow, "--family", family, "--report", str(report)]
    duration = str(params.get("duration") or "").strip()
    if duration:
        parse_duration(duration)  # a clear error before Spark starts
        args += ["--duration", duration]
    topics = params.get("topics") or ""
    names = [t.strip() for t in (topics if isinstance(topics, list) else str(topics).split(",")) if t.strip()]
    if names:
        args += ["--topics", ",".join(names)]
    return args


class MirrorFamilyOperator(SparkSubmitOperator):
    """Replicate one topic family of one flow with the Spark app; returns the run report."""

    ui_color = "#e8f4fd"

    def __init__(self, *, flow: str, family: str, config: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("conn_id", "spark_default")
        kwargs.setdefault("name", f"mirrorflow {flow} {family}")
        kwargs.setdefault("conf", {"spark.ui.showConsoleProgress": "false", "spark.task.maxFailures": "4"})
        super().__init__(application=str(MIRROR_APP), **kwargs)
        self.flow, self.family, self.config = flow, family, config

    def execute(self, context: Any) -> dict[str, Any]:
        hook = MirrorflowHook(self.config)
        with tempfile.TemporaryDirectory(prefix="mirrorflow-report-") as tmp:
            report_path = Path(tmp) / "report.json"
            self.application_args = app_arguments(
                hook.config_file, self.flow, self.family, dict(context["params"]), report_path
            )
            # Set after templating, so connection secrets never land in the rendered-fields view.
            self.env_vars = {
                **(self.env_vars or {}),
                **spark_environment(os.environ, keep_choices=True),
                **hook.spark_environment(),
                SUBMITTED_AT_ENV: repr(time.time()),  # the app reports spark-submit's own cost as "submit"
            }
            self._hook = None  # a retry builds a new hook with these arguments
            try:
                super().execute(context)
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

    def _read_report(self, path: Path) -> dict[str, Any] | None:
        """The report the app wrote (logged), or None."""
        report = json.loads(path.read_text()) if path.exists() else None
        if report is not None:
            self._log_report(report)
        return report

    def _log_report(self, report: dict[str, Any]) -> None:
        if not report.get("partitions") and report.get("errors"):  # stopped before copying: only the why
            for error in report["errors"]:
                self.log.error("%s", error)
            return
        self.log.info(
            "%s family %s: %d record(s) copied in %.1f s, lag %d, %d partition(s)",
            report["flow"],
            report["family"],
            report["records"],
            report["seconds"],
            report["lag"],
            len(report["partitions"]),
        )
        if report.get("phases"):
            self.log.info("phases: %s", ", ".join(f"{k} {v:.3g} s" for k, v in report["phases"].items()))
        for error in report.get("errors", []):
            self.log.error("%s", error)
