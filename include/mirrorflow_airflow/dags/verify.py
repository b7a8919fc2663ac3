"""The verify DAG factory: ``verify__<src>__<tgt>``, one per enabled flow: prove the copy equals the source.

Triggered by hand (Params: family, topics, since) or on ``mirrorflow.verify.schedule`` (default ``none``: by hand
only). Before anyone fails over or cuts over, an operator wants "identical" to mean every record of the copied
range, and a difference to come with the offsets to look at; this DAG is ``mirrorflow verify`` with Airflow's
alerting, history and UI around it.

    check_clusters → verify → report

``verify`` runs :func:`mirrorflow.verify.flow.verify_flow` on the engine the mirror DAG's ``replicate``
uses: the Spark Connect server of the ``spark_default`` connection when that connection is of type
``spark_connect`` (each chunk a Spark task there), otherwise the task's own process. ``report`` logs the report as a
table, publishes it as XCom and, when the copy differs, alerts through the flow's channels and fails (a red run
naming the first difference). A verification that could not finish (a cluster or the Spark Connect server
unreachable, a chunk that failed) fails ``verify`` itself, so Airflow's retries run it again.

The helpers here (engine choice, running, logging and failing) are shared with the failover and failback DAGs,
which can verify after their final copy. Parsing stays cheap: the verification library, the Kafka client and
Spark are imported inside the tasks only.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from mirrorflow.config import FlowConfig
from mirrorflow.config.model import parse_schedule
from mirrorflow_airflow.dags.mirror import (
    DEFAULT_ARGS,
    REPORT_XCOM,
    START_DATE,
    airflow_schedule,
    configured_flows,
    failed_over_since,
)
from mirrorflow_airflow.hooks.config import MirrorflowHook
from mirrorflow_airflow.notifications.alerting import channels, notify

if TYPE_CHECKING:  # the verification library imports the Kafka client: not at DAG parse time
    from mirrorflow.verify.report import VerifyReport

log = logging.getLogger(__name__)

SCHEDULE_KEY = "mirrorflow.verify.schedule"
#: The connection whose type chooses the engine, as for the mirror DAG's ``replicate``.
SPARK_CONN_ID = "spark_default"
#: What ``since`` accepts: the durations of ``parse_duration`` (30s, 2m, 1h, 1d), or empty.
SINCE_PATTERN = r"^$|^\s*\d+\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)\s*$"


# ------------------------------------------------------------------------------ shared with the failover DAG


def verify_executor(session_key: str) -> tuple[Any, str]:
    """Where chunk tasks run, and how to say it in the log.

    The ``spark_default`` connection decides, as it does for ``replicate``: of type ``spark_connect``, its server
    (one Spark task per chunk, the copy's warm Python workers); of any other type or absent, this task's process
    (``LocalExecutor``): a spark-submit application per verification would cost more than most verifications.
    """
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException
    from airflow.sdk.log import mask_secret

    try:
        conn_type = BaseHook.get_connection(SPARK_CONN_ID).conn_type
    except AirflowNotFoundException:
        conn_type = None
    if conn_type == "spark_connect":
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from mirrorflow.replication.connect import SparkConnectExecutor, public_url

        url = SparkConnectHook(SPARK_CONN_ID).get_connection_url()
        if ";" in url:
            mask_secret(url.split(";", 1)[1])  # a token must never reach the log
        where = f"the Spark Connect server {public_url(url)} (connection {SPARK_CONN_ID})"
        return SparkConnectExecutor(url, session_key), where
    from mirrorflow.replication.executor import LocalExecutor

    return LocalExecutor(), f"this task's process (connection {SPARK_CONN_ID} is not of type spark_connect)"


def run_verification(
    config_file: Path,
    flow_name: str,
    *,
    family: str | None = None,
    topics: set[str] | None = None,
    since: str | None = None,
    session_key: str | None = None,
) -> dict[str, Any]:
    """``verify_flow`` on the chosen engine; the report as a dict (``VerifyReport.to_dict``).

    A request that cannot be right (an unknown family or topic, a bad duration) fails without retry
    (``AirflowFailException``); a Spark Connect server that does not answer fails with retries (it may come back).
    """
    from mirrorflow.replication.connect import ConnectServerUnreachable
    from mirrorflow.verify.flow import verify_flow

    config = MirrorflowHook(config_file).load()
    executor, where = verify_executor(session_key or f"{flow_name}/verify")
    log.info("verifying %s%s on %s", flow_name, f" family {family}" if family else "", where)
    try:
        report = verify_flow(config, flow_name, family, topics, since, executor)
    except (KeyError, ValueError) as exc:
        raise AirflowFailException(str(exc.args[0] if exc.args else exc)) from None
    except ConnectServerUnreachable as exc:
        raise AirflowException(str(exc)) from None
    finally:
        executor.close()
    return report.to_dict()


def report_from_dict(data: dict[str, Any]) -> VerifyReport:
    """The report again from its dict (XCom carries the dict), to render it with the library's own table."""
    from mirrorflow.verify.report import PartitionVerdict, VerifyReport

    known = PartitionVerdict.__dataclass_fields__
    partitions = [PartitionVerdict(**{k: v for k, v in p.items() if k in known}) for p in data.get("partitions") or []]
    return VerifyReport(
        data["flow"],
        data.get("family"),
        data["started_at"],
        float(data.get("seconds") or 0.0),
        partitions,
        list(data.get("errors") or []),
        dict(data.get("phases") or {}),
    )


def difference_lines(data: dict[str, Any]) -> list[str]:
    """Each difference in one line (``orders[0] -> primary.orders[0]: extra on the target: ...``), in report order."""
    from mirrorflow.verify.report import describe_difference

    report = report_from_dict(data)
    return [describe_difference(p, d) for p in report.partitions for d in p.differences]


def error_lines(data: dict[str, Any]) -> list[str]:
    """Why the verification could not finish: the report's errors, then each partition's."""
    return [str(e) for e in data.get("errors") or []] + [
        f"{p['topic']}[{p['partition']}]: {e}" for p in data.get("partitions") or [] for e in p.get("errors") or []
    ]


def log_report(data: dict[str, Any]) -> str:
    """The report as a table in the task log, each line at its level (DIFFERENT and ERROR lines, and the summary of a
    copy that is not identical, as errors; NOT VERIFIABLE as warnings: found by level); returns the summary line."""
    from mirrorflow.verify.report import render_text, summary_line

    report = report_from_dict(data)
    summary = summary_line(report)
    for line in render_text(report).splitlines():
        level = logging.ERROR if line.startswith(("DIFFERENT", "ERROR")) else logging.INFO
        level = logging.WARNING if line.startswith("NOT VERIFIABLE") else level
        level = logging.ERROR if line == summary and report.status != "identical" else level
        log.log(level, "%s", line)
    return summary


def publish(data: dict[str, Any], summary: str) -> None:
    """XCom beside the task's output: the whole report (``report``, for API clients), and flat entries the UI's
    XCom view shows as they are (it shows an object or a list as an empty cell)."""
    ti = get_current_context()["ti"]
    ti.xcom_push(key=REPORT_XCOM, value=data)
    ti.xcom_push(key="status", value=str(data.get("status")))
    ti.xcom_push(key="differences", value="; ".join(difference_lines(data)) or "none")
    ti.xcom_push(key="summary", value=summary)


# ------------------------------------------------------------------------------------------- the DAG


def verify_params(flow: FlowConfig) -> dict[str, Param]:
    families = [f.name for f in flow.families]
    return {
        # ["null", "string"] with a None default: optional in the trigger form (a plain string is required).
        "family": Param(
            None,
            type=["null", "string"],
            title="Only this family",
            description=(
                f"A topic family of {flow.name} ({', '.join(families)}). Empty: every topic of the flow. "
                "A name that is not a family fails the run."
            ),
            examples=families,
        ),
        "topics": Param(
            None,
            type=["null", "string"],
            title="Only these topics",
            description=(
                "Comma-separated source topic names (e.g. orders.eu, orders.us). Empty: every topic of the family "
                "(or of the flow). A topic that is not replicated fails the run."
            ),
        ),
        "since": Param(
            None,
            type=["null", "string"],
            pattern=SINCE_PATTERN,
            title="Only records newer than",
            description=(
                "A duration such as 30m, 6h or 2d: compare from the first source record that recent. Empty: from the "
                "source's log start (every retained record; records retention already deleted are reported as not "
                "verifiable, never as different)."
            ),
        ),
    }


def _docs(flow: FlowConfig) -> str:
    schedule = flow.get(SCHEDULE_KEY)
    return "\n".join(
        [
            f"# Verify `{flow.source}` → `{flow.target}`",
            "",
            (
                f"Proves the copy is complete and identical: for every partition of the selected topics, the committed "
                f"records of `{flow.source}` are compared with their copies on `{flow.target}` "
                f"(`{flow.policy.format_remote_topic(flow.source, 'orders')}`...), record by record and in order (key, "
                "value, headers, timestamp), over the range both hold: from the source's log start (or **since**) up "
                "to the copied position. The copied runs of the offset syncs say which source offset became which "
                "target offset, so a difference is named by its **first differing source and target offsets** and "
                "what differs: missing on the target, extra on the target (another producer, a duplicate), or a "
                "record whose key, value, headers or timestamp differ. Records retention deleted on the source are "
                "*not verifiable*, never counted as different."
            ),
            "",
            "**Trigger DAG** shows the form: family, topics (comma-separated), since (e.g. `6h`). All optional.",
            "",
            (
                "Steps: `check_clusters` (both clusters answer; one line naming a dead one) → `verify` (the "
                "comparison, chunks of a partition in parallel) → `report` (the table in the log; XCom: the summary "
                "as the output, the whole report as `report`, `differences` one per line). A difference sends an "
                "alert (log, `mirrorflow.alerts.webhook.url`, `mirrorflow.alerts.notifiers`) and fails `report`, "
                "naming the first difference: the run is red. A verification that could not finish fails `verify` "
                "(retried)."
            ),
            "",
            (
                f"Engine: when the Airflow connection `{SPARK_CONN_ID}` is of type `spark_connect`, every chunk is a "
                "Spark task on that Spark Connect server (as the mirror DAG's `replicate`); otherwise the chunks run "
                "one after the other in the `verify` task's own process. Either way records never pass through "
                "Airflow: only counts, digests and the first difference of each chunk."
            ),
            "",
            (
                f"Schedule: `{SCHEDULE_KEY}` = `{schedule}`"
                + (" (triggered by hand only)." if parse_schedule(schedule).kind == "none" else ".")
                + " A verification reads every record in its range on both clusters: schedule it with `since` "
                "in mind, or keep it manual for large topics."
            ),
        ]
    )


def _topics(params: dict[str, Any]) -> set[str] | None:
    names = {t.strip() for t in str(params.get("topics") or "").split(",") if t.strip()}
    return names or None


def checked_clusters_for_verify(flow: FlowConfig) -> list[dict[str, Any]]:
    """Both clusters answer (else fail, one line naming them), as the mirror DAG's ``check_clusters``.

    Unlike mirroring, a failed-over flow is still verified when its source answers (after a planned failover the
    copy can be proved against the source it left); when its source is gone there is nothing to compare with, so
    the run skips, saying so, instead of turning red on every scheduled run after a disaster.
    """
    from mirrorflow import preflight

    try:
        health = preflight.check_clusters(flow)
    except preflight.ClusterUnreachableError as exc:
        if "target" not in exc.sides and (since := failed_over_since(flow)):
            raise AirflowSkipException(
                f"{flow.name} was failed over at {since} and {flow.source} does not answer: nothing to verify against"
            ) from None
        log.error("%s", exc)
        raise AirflowException(str(exc)) from None
    log.info("clusters answered: %s", ", ".join(f"'{h.alias}' ({h.side}) in {h.seconds:.3f} s" for h in health))
    return [asdict(h) for h in health]


def verify_alert(flow: FlowConfig, data: dict[str, Any], first: str, run_id: str) -> dict[str, Any]:
    """The JSON document the channels receive for a copy that differs: the heartbeat and lag alerts' keys
    (``kind`` alert, ``reason`` verify), the counts, the first difference and the run that found it."""
    count = int(data.get("differences") or 0)
    return {
        "source": "mirrorflow",
        "kind": "alert",
        "reason": "verify",
        "flow": flow.name,
        "family": data.get("family"),
        "status": data.get("status"),
        "differences": count,
        "records": data.get("records"),
        "first_difference": first,
        "started_at": data.get("started_at"),
        "run_id": run_id,
        "message": f"{flow.name}: the copy DIFFERS from the source ({count} difference(s)); first: {first}",
    }


def build_verify_dag(flow: FlowConfig, config_file: Path) -> DAG:
    """The verify DAG of one flow (see the module docstring)."""
    name = flow.name
    with DAG(
        dag_id=flow.dag_id("verify"),
        description=f"Prove the copy on {flow.target} equals {flow.source}, record by record",
        doc_md=_docs(flow),
        schedule=airflow_schedule(parse_schedule(flow.get(SCHEDULE_KEY))),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["mirrorflow", name, "verify"],
        params=verify_params(flow),
    ) as dag:

        @task(task_id="check_clusters")
        def check_clusters() -> list[dict[str, Any]]:
            """Both clusters answer (else fail, one line naming the unreachable one)."""
            return checked_clusters_for_verify(MirrorflowHook(config_file).flow(name))

        # The output (the whole report) is read from XCom by ``report``, which logs it as a table.
        @task(task_id="verify", show_return_value_in_logs=False)
        def verify() -> dict[str, Any]:
            """The comparison; fails (retried) when it could not finish, with the report's table in the log."""
            params = get_current_context()["params"]
            data = run_verification(
                config_file,
                name,
                family=params.get("family") or None,
                topics=_topics(params),
                since=str(params.get("since") or "").strip() or None,
            )
            if data["status"] == "error":
                summary = log_report(data)
                publish(data, summary)
                raise AirflowException(f"{summary}: {'; '.join(error_lines(data))}")
            return data

        @task(task_id="report")
        def report(data: dict[str, Any]) -> str:
            """The table in the log, the report in XCom; a difference alerts and fails the run, naming the first.

            ``AirflowFailException``: a difference is a fact about the copy, retrying would not change it (and
            would alert again).
            """
            summary = log_report(data)
            publish(data, summary)
            if data["status"] != "identical":
                context = get_current_context()
                live = MirrorflowHook(config_file).flow(name)
                first = (difference_lines(data) or ["see the report"])[0]
                failed = notify(live, "alert", verify_alert(live, data, first, context["run_id"]), context)
                sent = f"alert sent to {', '.join(channels(live))}"
                if failed:
                    sent += f"; NOT delivered by: {'; '.join(failed)}"
                raise AirflowFailException(f"{summary}; first: {first}; {sent}")
            return summary

        verified = verify()
        check_clusters() >> verified
        report(verified)
    return dag


def verify_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    """One verify DAG per enabled flow."""
    path, flows = configured_flows(config_file)
    dags = (build_verify_dag(f, path) for f in flows)
    return {dag.dag_id: dag for dag in dags}
