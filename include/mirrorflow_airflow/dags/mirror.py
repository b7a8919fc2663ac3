"""The mirror DAG factory: one DAG per enabled flow and topic family of the configuration.

``mirror__<src>__<tgt>__<family>`` runs on the family's schedule, one run at a time, without
catch-up (a run copies everything new, so a missed interval is never lost, only merged into the next
run). The tasks are thin: each calls one function of the core library.

    check_clusters → prepare_target → replicate (Spark) → publish_report (XCom + asset event)

The asset event of ``publish_report`` (one asset per flow family) is what the checkpoints DAG is
scheduled on, so checkpoints follow fresh data instead of a clock.

Parsing builds the DAGs' shape only: the Kafka client, the copy engine and everything that talks to a cluster
are imported inside the tasks, so a parse costs the configuration and Airflow's own objects (under
load, parsing hit Airflow's import timeout; ``benchmarks/dag_parse.py`` measures it).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from mirrorflow.config import ConfigError, FlowConfig, Schedule, load_config
from mirrorflow.config.describe import render_family_markdown
from mirrorflow.config.location import config_path
from mirrorflow.replication.report_text import headline, report_lines, seconds_text
from mirrorflow_airflow.hooks.config import MirrorflowHook
from mirrorflow_airflow.notifications.alerting import notify
from mirrorflow_airflow.operators.mirror_family import MirrorFamilyOperator

log = logging.getLogger(__name__)

#: Why the prepare_target task leaves topic ACLs and existing topics' configs alone (its report's ``acl_sync`` and
#: ``config_sync`` say it).
SYNCS_DEFERRED = "the replicate task syncs them when due (sync.topic.acls/configs.interval.seconds)"

#: A fixed date in the past: with catchup off, only the schedule's next interval matters.
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)

DEFAULT_ARGS: dict[str, Any] = {
    "owner": "mirrorflow",
    "retries": 2,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": True,
}

#: The XCom key of ``publish_report``'s whole report (per-partition figures, events, phases) for API clients.
REPORT_XCOM = "report"

DURATION_PATTERN = r"^$|^\s*\d+\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\s*$"


def mirror_asset(flow: FlowConfig, family: str) -> Asset:
    """The asset a mirror run updates; the checkpoints DAG of the flow is scheduled on it.

    Its name is its URI, ``mirrorflow://<src>/<tgt>/<family>``: what the UI shows is what the documentation names.
    """
    uri = f"mirrorflow://{flow.source}/{flow.target}/{family}"
    return Asset(name=uri, uri=uri, group="mirrorflow")


def airflow_schedule(schedule: Schedule) -> str | timedelta | None:
    if schedule.kind == "interval":
        return timedelta(seconds=schedule.seconds or 0)
    return schedule.airflow()


def mirror_params() -> dict[str, Param]:
    return {
        # ["null", "string"] with a None default: optional in the trigger form (a plain string is required).
        "duration": Param(
            None,
            type=["null", "string"],
            pattern=DURATION_PATTERN,
            title="Keep mirroring for",
            description=(
                "Empty: one micro-batch, i.e. copy everything new and stop (what scheduled runs do). "
                "A duration such as 10m or 1h keeps running micro-batches for that long, so lag stays "
                "at seconds (continuous mode); the next scheduled run waits until this one ends."
            ),
        ),
        "topics": Param(
            None,
            type=["null", "string"],
            title="Only these topics",
            description=(
                "Comma-separated source topic names of this family (e.g. orders.eu, orders.us). "
                "Empty: every topic of the family. A name outside the family fails the run."
            ),
        ),
    }


def _only_topics(params: dict[str, Any]) -> set[str] | None:
    names = {t.strip() for t in str(params.get("topics") or "").split(",") if t.strip()}
    return names or None


def failed_over_since(flow: FlowConfig) -> str | None:
    """When the flow was failed over (its last failover record), or None; an unreadable target counts as no."""
    from mirrorflow.failover.report import failover_state

    try:
        state = failover_state(flow, timeout=10)
    except Exception:  # noqa: BLE001 - check_clusters then names the unreachable cluster
        return None
    if state and state["state"] == "failed-over":
        return str(state["report"]["started_at"])
    return None


def checked_clusters(flow: FlowConfig) -> list[dict[str, Any]]:
    """Both clusters answer (``mirrorflow.cluster.timeout``), else a failure whose message is one line naming them.

    A failed-over flow skips instead, whether or not its source answers (after a disaster it does not). Its
    failover record lives on the target, so it is read only once the target is known to answer: an unreachable
    target then costs the check's time alone, not an extra read timeout first.
    """
    from mirrorflow import preflight

    try:
        health = preflight.check_clusters(flow)
    except preflight.ClusterUnreachableError as exc:
        if "target" in exc.sides or not (since := failed_over_since(flow)):
            # The message first and alone at ERROR; the exception (no chained librdkafka traceback) repeats it
            # as the task's failure. Retries stay on: an unreachable cluster may come back.
            log.error("%s", exc)
            raise AirflowException(str(exc)) from None
        health, failed_over = [], since
    else:
        failed_over = failed_over_since(flow)
    if failed_over:
        raise AirflowSkipException(
            f"{flow.name} was failed over at {failed_over}: consumers use {flow.target} now; mirroring stays off "
            "until a failback"
        )
    log.info("clusters answered: %s", ", ".join(f"'{h.alias}' ({h.side}) in {h.seconds:.3f} s" for h in health))
    return [asdict(h) for h in health]


def readable_xcoms(report: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """Flat XCom entries a person reads in the UI, beside ``report`` (the whole report, for API clients).

    Airflow's XCom view shows a string or a number as it is, but an object or a list collapsed, as an empty
    cell (seen in the demo), and it folds line breaks: so the summary, the counts, and the partitions and loss
    events as one line each, separated by semicolons.
    """
    rows = [
        f"{p['topic']}[{p['partition']}] -> {p['remote_topic']}: {p['records']} record(s), next {p['position']}, "
        f"lag {p['lag']} ({seconds_text(p.get('lag_seconds'))} s), {p['status']}"
        for p in report.get("partitions") or []
        if p.get("records") or p.get("lag") or p.get("status") not in ("up to date", "noop")
    ]
    losses = [line.strip() for line in report_lines(report) if line.lstrip().startswith("LOSS")]
    return {
        "records": int(report.get("records") or 0),
        "lag": int(report.get("lag") or 0),
        "max_lag_seconds": float(report.get("max_lag_seconds") or 0.0),
        "ok": bool(report.get("ok")),
        "partitions": "; ".join(rows) or "no partition copied anything",
        "loss_events": "; ".join(losses) or "none",
    }


#: The run's figures an asset event carries: totals only. The event's extra is stored with every event in Airflow's
#: database and handed to every run it triggers (the checkpoints DAG), so it must not grow with a family's partition
#: count; per-partition figures are in XCom ``report``, and the cluster keeps per-family totals (history.py).
EVENT_KEYS = ("flow", "family", "started_at", "seconds", "records", "lag", "max_lag_seconds", "ok")

#: The figures of each partition in XCom ``report``.
PARTITION_KEYS = ("topic", "partition", "remote_topic", "records", "position", "lag", "lag_seconds", "status")


def event_extra(report: dict[str, Any]) -> dict[str, Any]:
    """The run's totals (``EVENT_KEYS``); a figure an older report lacks is None."""
    return {k: report.get(k) for k in EVENT_KEYS}


def build_mirror_dag(flow: FlowConfig, family: str, config_file: Path) -> DAG:
    """The mirror DAG of one flow family (see the module docstring)."""
    fam = flow.family(family)
    name = flow.name
    asset = mirror_asset(flow, family)
    with DAG(
        dag_id=flow.dag_id("mirror", family),
        description=f"Mirror the {family} topics from {flow.source} to {flow.target}",
        doc_md=render_family_markdown(flow, family),
        schedule=airflow_schedule(fam.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["mirrorflow", name, family],
        params=mirror_params(),
    ) as dag:

        @task(task_id="check_clusters")
        def check_clusters() -> list[dict[str, Any]]:
            """Both clusters answer (else fail, one line naming the unreachable one); a failed-over flow skips."""
            return checked_clusters(MirrorflowHook(config_file).flow(name))

        @task(task_id="prepare_target")
        def prepare_target() -> dict[str, Any]:
            """Remote topics exist with enough partitions and configs synced.

            ACLs and the configs of existing remote topics are left to ``replicate``: its run holds the family's lock,
            whose log records when they were last synced, so they are synced once per interval
            (``sync.topic.acls.interval.seconds``, ``sync.topic.configs.interval.seconds``) and not twice a run."""
            from mirrorflow import topics
            from mirrorflow.kafka import clients

            params = get_current_context()["params"]
            live = MirrorflowHook(config_file).flow(name)
            source_admin, target_admin = clients.admin(live, "source"), clients.admin(live, "target")
            plans, report = topics.prepare_family(
                live, family, source_admin, target_admin, _only_topics(params), syncs_deferred=SYNCS_DEFERRED
            )
            for topic, error in report.errors.items():
                log.error("%s: %s", topic, error)
            return {"topics": {p.source_topic: p.remote_topic for p in plans}, **report.to_dict()}

        replicate = MirrorFamilyOperator(
            task_id="replicate",
            flow=name,
            family=family,
            config=str(config_file),
            pool=flow.get("mirrorflow.spark.pool") or None,  # None: Airflow's default_pool
        )

        @task(task_id="publish_report", outlets=[asset], multiple_outputs=False)
        def publish_report(report: dict[str, Any]) -> str:
            """The run in one line as the task's output, the whole report as XCom ``report``, readable entries
            beside it, and an asset event for checkpoints."""
            from mirrorflow.alerts import run_event_payloads

            summary = event_extra(report)
            partitions = [{k: p.get(k) for k in PARTITION_KEYS} for p in report["partitions"]]
            context = get_current_context()
            context["outlet_events"][asset].extra = summary
            log.info("%s", summary)
            events = run_event_payloads(report)
            if events:  # the configuration is read again only when there is something to notify
                live = MirrorflowHook(config_file).flow(name)
                for kind, payload in events:
                    # The run already POSTed it to the webhook; Airflow's notifiers are reached from here.
                    notify(live, kind, payload, context, webhook=False)
            published = {
                **summary,
                "partitions": partitions,
                "loss_events": report["loss_events"],
                "reset_events": report.get("reset_events", []),
                "warnings": report.get("warnings", []),
                "phases": report.get("phases", {}),
            }
            context["ti"].xcom_push(key=REPORT_XCOM, value=published)
            for key, value in readable_xcoms(report).items():
                context["ti"].xcom_push(key=key, value=value)
            return headline(report)  # return_value: what the XCom view shows first, as text

        check_clusters() >> prepare_target() >> replicate
        publish_report(replicate.output)
    return dag


def configured_flows(config_file: str | Path | None = None) -> tuple[Path, list[FlowConfig]]:
    """The configuration file and its enabled flows, for every DAG factory; flows with broken settings left out.

    Errors are surfaced as an import error by ``dags/mirrorflow_config.py``, naming file and line; here a
    broken flow only costs its own DAGs, and a file no flow can be built from gives no DAG at all.
    """
    path = Path(config_file) if config_file else config_path()
    try:
        config = load_config(path, partial=True)
    except ConfigError as exc:
        log.error("no DAGs from %s: %s", path, exc)
        return path, []
    for flow_name, errors in config.broken_flows.items():
        log.error("flow %s has no DAGs until its configuration is fixed: %s", flow_name, "; ".join(errors))
    return path, config.enabled_flows()


def mirror_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    """Every mirror DAG of the configuration, by id (one per enabled flow and family)."""
    path, flows = configured_flows(config_file)
    dags = (build_mirror_dag(flow, fam.name, path) for flow in flows for fam in flow.families)
    return {dag.dag_id: dag for dag in dags}
