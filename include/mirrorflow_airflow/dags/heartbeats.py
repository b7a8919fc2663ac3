"""The heartbeats DAG factory: ``heartbeats__<src>__<tgt>``, one per enabled flow, every minute by default.

Each run writes the flow's heartbeat (key ``(src, tgt)``) into ``heartbeats`` on the target and, as
MM2's reverse herder does, ``(tgt, src)`` into ``heartbeats`` on the source; the mirror runs carry the
source's ``heartbeats`` to ``<src>.heartbeats`` on the target. Then a sensor watches how old the newest
replicated heartbeat is against ``mirrorflow.heartbeats.max.age`` for most of the schedule interval, and
an alert task turns its verdict into at most one alert per outage and one recovery after it; with
``mirrorflow.heartbeats.policy = auto-failover`` the alert also triggers ``failover__<src>__<tgt>``.
Last, ``verdict`` fails while the flow is STALE, so the run is red for as long as the outage lasts. First,
``still_mirrored`` skips everything while the flow is failed over: its mirroring is off on purpose then.

    still_mirrored → emit_heartbeats → watch_freshness → alert → failover_wanted → trigger_failover
                   ↘ lag_alerts (only with mirrorflow.alerts.lag.max.seconds)  ↘ verdict

Why lag alerts live here and not in the checkpoints DAG: this DAG is the flow's alerting DAG (channels,
state, retries), it runs on its own clock every minute, and the checkpoints DAG also runs right after each
mirror run (its asset trigger), when the lag is at its lowest: measured there, a family that falls further
behind between runs would look better than it is. ``lag_alerts`` is apart from the heartbeat tasks: it
starts right after ``still_mirrored`` (not after the watch), and nothing downstream of it triggers a failover.

Why a separate ``verdict`` leaf instead of failing ``alert``: Airflow derives a run's state from its leaf
tasks only (a failed ``alert`` followed by a skipped ``trigger_failover`` is a green run), and
``failover_wanted`` needs the alert's output from a successful task (its trigger rule stays
``all_success``, so auto-failover still triggers once per outage, from the run that alerted).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, TriggerRule, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowRuntimeError, AirflowSkipException

from mirrorflow.config import FlowConfig, Schedule
from mirrorflow.config.keys import ALERTS_LAG_MAX_SECONDS
from mirrorflow.config.model import parse_schedule
from mirrorflow.lag_alerts import family_key, thresholds
from mirrorflow_airflow.dags.mirror import (
    DEFAULT_ARGS,
    START_DATE,
    airflow_schedule,
    configured_flows,
    failed_over_since,
)
from mirrorflow_airflow.hooks.config import MirrorflowHook
from mirrorflow_airflow.notifications import alerting
from mirrorflow_airflow.sensors.heartbeat_freshness import HeartbeatFreshnessSensor
from mirrorflow_airflow.triggers.heartbeat_freshness import (
    DEFAULT_WATCH,
    FAILURE_XCOM,
    POLL_KEY,
    describe,
    heartbeats_module,
)

log = logging.getLogger(__name__)


def failover_dag_id(flow: FlowConfig) -> str:
    """The DAG an automatic failover triggers (``failover__<src>__<tgt>``)."""
    return flow.dag_id("failover")


def _not_found(exc: Exception) -> bool:
    """A 404 from the execution API: AirflowRuntimeError in a worker, the raw HTTP error under ``dag.test``."""
    if isinstance(exc, AirflowRuntimeError):
        detail = exc.error.detail if isinstance(exc.error.detail, dict) else {}
        return detail.get("status_code") == 404
    return getattr(getattr(exc, "response", None), "status_code", None) == 404


def watch_window(schedule: Schedule) -> timedelta:
    """How long one run's sensor watches: 5/6 of an interval schedule (50 s of a minute), else 50 s.

    Shorter than the interval so that runs (``max_active_runs=1``) do not queue behind each other, long
    enough that a watcher is nearly always running: between two watchers, detection can lag by the gap.
    """
    if schedule.kind == "interval" and schedule.seconds:
        return timedelta(seconds=max(1, schedule.seconds * 5 // 6))
    return DEFAULT_WATCH


def stale_message(result: dict[str, Any]) -> str:
    """What ``verdict`` fails with: the verdict, since when, and what was sent where (never the webhook URL)."""
    text = f"{result.get('summary') or result.get('message') or 'replication is STALE'}; STALE since {result['since']}"
    if result.get("alerted_at"):
        sent_by = f" (run {result['last_sent_by']})" if result.get("last_sent_by") else ""
        text += f"; alert sent at {result['alerted_at']}{sent_by} to {', '.join(result.get('channels') or ['log'])}"
    if result.get("failed_channels"):
        text += f"; NOT delivered by: {'; '.join(result['failed_channels'])}"
    return text


def _docs(flow: FlowConfig, watch: timedelta) -> str:
    return "\n".join(
        [
            f"# Heartbeats `{flow.source}` ⇄ `{flow.target}`",
            "",
            (
                f"Writes MM2-format heartbeats: `({flow.source}, {flow.target})` into `heartbeats` on `{flow.target}`, "
                f"and `({flow.target}, {flow.source})` into `heartbeats` on `{flow.source}` (MM2's reverse herder). "
                f"The mirror DAGs copy `{flow.source}`'s `heartbeats` to "
                f"`{flow.policy.format_remote_topic(flow.source, flow.policy.heartbeats_topic())}` on `{flow.target}`."
            ),
            "",
            (
                f"`watch_freshness` watches the age of the newest replicated heartbeat for {watch.total_seconds():.0f} s, "
                f"every `{POLL_KEY}` = `{flow.get(POLL_KEY)}`, against `mirrorflow.heartbeats.max.age` = "
                f"`{flow.get('mirrorflow.heartbeats.max.age')}`, and ends as soon as it is stale: a stale heartbeat "
                f"means `{flow.source}` is down, unreachable from `{flow.target}`, or replication stopped or lags. "
                "A new flow whose first heartbeat has not crossed yet is WAITING (no alert) for "
                f"`mirrorflow.heartbeats.grace` = `{flow.get('mirrorflow.heartbeats.grace') or 'the max age'}` "
                "after its first heartbeat."
            ),
            "",
            (
                "`alert` sends one alert per outage and one recovery after it (log, `mirrorflow.alerts.webhook.url`, "
                f"`mirrorflow.alerts.notifiers`), remembering the state in the Variable "
                f"`{alerting.alert_state_key(flow.source, flow.target)}`. With `mirrorflow.heartbeats.policy` = "
                f"`auto-failover` (now `{flow.get('mirrorflow.heartbeats.policy')}`) an alert also triggers "
                f"`{failover_dag_id(flow)}` once, in disaster mode. A retried `alert` reports what its earlier "
                "try sent and does not send it again."
            ),
            "",
            "`verdict` fails while the flow is STALE: the run is red for as long as the outage lasts.",
            "",
            _lag_docs(flow),
        ]
    )


def _lag_docs(flow: FlowConfig) -> str:
    """The doc_md paragraph on lag alerts: the thresholds in force, or how to turn them on."""
    limits = thresholds(flow)
    if not limits:
        return (
            f"Lag alerts are off: set `{ALERTS_LAG_MAX_SECONDS}` (seconds; per family "
            f"`{family_key('<name>')}`) and a `lag_alerts` task measures the flow's lag every run."
        )
    shown = ", ".join(f"`{family}` {seconds} s" for family, seconds in limits.items())
    return (
        f"`lag_alerts` measures the lag of every partition (as `mirrorflow status` does) against `{ALERTS_LAG_MAX_SECONDS}` "
        f"(per family: {shown}) and sends one alert per family when one of its partitions is further behind (its "
        "oldest record not copied is older than the threshold) and one recovery when all are back under, through the "
        "same channels, "
        f"remembering the state in the Variable `{alerting.lag_state_key(flow.source, flow.target)}`. A lag alert "
        "never triggers a failover, nor fails the run."
    )


def build_heartbeats_dag(flow: FlowConfig, config_file: Path, *, watch: timedelta | None = None) -> DAG:
    name = flow.name
    schedule = parse_schedule(flow.get("mirrorflow.heartbeats.schedule"))
    watch = watch or watch_window(schedule)
    failover_id = failover_dag_id(flow)
    with DAG(
        dag_id=flow.dag_id("heartbeats"),
        description=f"Heartbeats between {flow.source} and {flow.target}, their freshness and alerts",
        doc_md=_docs(flow, watch),
        schedule=airflow_schedule(schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 1},
        tags=["mirrorflow", name, "heartbeats"],
    ) as dag:

        @task.short_circuit(task_id="still_mirrored")
        def still_mirrored() -> bool:
            """False (every other task skips) while the flow is failed over: its mirroring is off on purpose, so
            its heartbeats going stale is no outage, and an alert (or an automatic failover) would be noise."""
            since = failed_over_since(MirrorflowHook(config_file).flow(name))
            if since:
                log.info("%s was failed over at %s: heartbeats are not watched until a failback", name, since)
            return since is None

        @task(task_id="emit_heartbeats")
        def emit_heartbeats() -> list[dict[str, Any]]:
            """The flow's heartbeat into the target (must work); the reverse one into the source (may not)."""
            config = MirrorflowHook(config_file).load()
            written, reverse_problem = heartbeats_module().emit_flow_heartbeats(config, flow)
            if reverse_problem:
                log.warning("%s", reverse_problem)
            return [asdict(e) for e in written]

        # all_done: heartbeats already on their way tell the truth even when this run's emit failed
        watch_freshness = HeartbeatFreshnessSensor(
            task_id="watch_freshness",
            flow=name,
            config_file=config_file,
            watch=watch,
            poke_interval=flow.get_seconds(POLL_KEY),
            deferrable=True,
            trigger_rule=TriggerRule.ALL_DONE,
        )

        @task(task_id="alert", trigger_rule=TriggerRule.ALL_DONE)
        def alert() -> dict[str, Any]:
            """One alert per outage, one recovery after it, each sent once even if this task is retried."""
            context = get_current_context()
            ti = context["ti"]
            freshness = ti.xcom_pull(task_ids="watch_freshness")
            if not freshness:
                # Not measurable (target unreachable?): no verdict is better than a wrong one, and failing over
                # to a target nobody can reach would be worse. Say what the watch measured last.
                failure = ti.xcom_pull(task_ids="watch_freshness", key=FAILURE_XCOM)
                why = failure or "watch_freshness ended before measuring anything (see its log)"
                raise AirflowFailException(f"no freshness verdict for {name}: {why}")
            result = alerting.evaluate_and_notify(
                MirrorflowHook(config_file).flow(name), freshness, context, run_id=context["run_id"]
            )
            summary = describe(freshness)
            if result["verdict"] == "stale" and freshness.get("verdict") == "waiting":
                summary += "; STALE all the same: heartbeats crossed before, the grace period is for a new flow"
            return {**result, "summary": summary}

        @task(task_id="verdict")
        def verdict(result: dict[str, Any]) -> str:
            """Fails while the flow is STALE (after the alert was sent and recorded): the run turns red.

            AirflowFailException: a verdict is a fact about the flow, retrying the task would not change it.
            """
            if result["verdict"] == "stale":
                raise AirflowFailException(stale_message(result))
            log.info("%s: %s", name, result.get("summary") or result["verdict"])
            return str(result["verdict"])

        @task.short_circuit(task_id="failover_wanted")
        def failover_wanted(result: dict[str, Any]) -> bool:
            """True only for the alert of a new outage, under policy auto-failover, if the failover DAG exists."""
            policy = MirrorflowHook(config_file).flow(name).get("mirrorflow.heartbeats.policy")
            if result["kind"] != "alert" or policy != "auto-failover":
                return False
            freshness = get_current_context()["ti"].xcom_pull(task_ids="watch_freshness") or {}
            if freshness.get("newest_ms") is None:
                log.error("no heartbeat ever crossed %s: replication never ran, so there is nothing to fail over", name)
                return False
            try:
                found = get_current_context()["ti"].get_dag(failover_id)
            except Exception as exc:
                if not _not_found(exc):
                    raise  # the API server hiccuped: fail, so the retry asks again
                log.error(
                    "policy auto-failover, but DAG %s does not exist: NOT failing over; do it by hand", failover_id
                )
                return False
            if found.is_paused:
                log.warning("%s is paused: the failover run waits until it is unpaused", failover_id)
            log.warning("policy auto-failover: triggering %s in disaster mode", failover_id)
            return True

        # One run per outage: the run id is the outage's start, so a retry cannot start a second failover.
        trigger_failover = TriggerDagRunOperator(
            task_id="trigger_failover",
            trigger_dag_id=failover_id,
            trigger_run_id="auto_failover__{{ ti.xcom_pull(task_ids='alert')['since_ms'] }}",
            conf={"mode": "disaster", "dry_run": False},
            skip_when_already_exists=True,
            wait_for_completion=False,
            openlineage_inject_parent_info=False,
        )

        result = alert()
        mirrored = still_mirrored()
        mirrored >> emit_heartbeats() >> watch_freshness >> result
        failover_wanted(result) >> trigger_failover
        verdict(result)
        if thresholds(flow):  # no threshold, no task: lag alerts cost nothing by default
            mirrored >> lag_alerts_task(flow, config_file)
    return dag


def lag_alerts_task(flow: FlowConfig, config_file: Path) -> Any:
    """The ``lag_alerts`` task of the flow's heartbeats DAG (a leaf of its own: no failover, no verdict)."""
    name = flow.name

    @task(task_id="lag_alerts")
    def lag_alerts() -> dict[str, Any]:
        """One alert per family whose lag goes over its threshold, one recovery when it is back under.

        Re-reads the configuration, so a threshold removed since the DAG was parsed skips the measurement.
        Fails only when nothing could be measured (a cluster down): the states are kept, so a recovery is
        never announced for a lag nobody saw end.
        """
        from mirrorflow.status import flow_status  # the Kafka client: at run time, not at parse time

        context = get_current_context()
        current = MirrorflowHook(config_file).flow(name)
        if not thresholds(current):
            raise AirflowSkipException(f"{name}: no lag threshold ({ALERTS_LAG_MAX_SECONDS}) is configured any more")
        status = flow_status(current)
        log.info("%s: lag measured in %.2f s", name, status.seconds)
        result = alerting.evaluate_lag_and_notify(current, status, context, run_id=context["run_id"])
        if not result["measured"]:
            raise AirflowFailException(f"{name}: lag not measured: {'; '.join(result['errors']) or 'see the log'}")
        return result

    return lag_alerts()


def heartbeats_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    """One heartbeats DAG per enabled flow that emits heartbeats (``emit.heartbeats.enabled``)."""
    path, flows = configured_flows(config_file)
    dags = (build_heartbeats_dag(f, path) for f in flows if f.emits_heartbeats)
    return {dag.dag_id: dag for dag in dags}
