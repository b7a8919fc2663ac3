"""The checkpoints DAG factory: ``checkpoints__<src>__<tgt>``, one per enabled flow.

Scheduled every ``emit.checkpoints.interval.seconds`` (MM2's knob, default 60 s) **or** when any mirror
DAG of the flow publishes its asset, so checkpoints follow fresh data instead of waiting for a clock.
Airflow's practical minimum interval is about 30 s: a run costs a few seconds of scheduling and task
start-up, so shorter intervals only queue runs (``max_active_runs=1``). The asset trigger is the fast
path: checkpoints land seconds after each mirror run.

    check_clusters → emit_checkpoints → sync_group_offsets
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, AssetAny, AssetOrTimeSchedule, DeltaTriggerTimetable, Param, get_current_context, task

from mirrorflow.config import FlowConfig
from mirrorflow_airflow.dags.mirror import DEFAULT_ARGS, START_DATE, checked_clusters, configured_flows, mirror_asset
from mirrorflow_airflow.hooks.config import MirrorflowHook

if TYPE_CHECKING:
    from mirrorflow.checkpoints.emit import CheckpointReport  # the Kafka client: not at parse

log = logging.getLogger(__name__)

#: Below this, a checkpoint run's own overhead (scheduling, task start-up) dominates.
PRACTICAL_MINIMUM_SECONDS = 30


def checkpoints_schedule(flow: FlowConfig) -> AssetOrTimeSchedule:
    seconds = max(flow.get_int("emit.checkpoints.interval.seconds"), PRACTICAL_MINIMUM_SECONDS)
    assets = [mirror_asset(flow, fam.name) for fam in flow.families]
    return AssetOrTimeSchedule(timetable=DeltaTriggerTimetable(timedelta(seconds=seconds)), assets=AssetAny(*assets))


def _docs(flow: FlowConfig) -> str:
    sync_on = flow.get_bool("sync.group.offsets.enabled")
    seconds = flow.get_int("emit.checkpoints.interval.seconds")
    return "\n".join(
        [
            f"# Checkpoints `{flow.source}` → `{flow.target}`",
            "",
            (
                f"Translates the committed offsets of `{flow.source}`'s consumer groups (filter `groups` = "
                f"`{flow.get('groups')}`, excluded `{flow.get('groups.exclude')}`) to `{flow.target}` offsets and "
                f"writes them, in MM2's format, to `{flow.policy.checkpoints_topic(flow.source)}` on `{flow.target}`, "
                "so MM2's `RemoteClusterUtils.translateOffsets` and mirrorflow's failover read them."
            ),
            "",
            (
                "Translation is **exact** wherever the copy was contiguous (mirrorflow's offset syncs describe the copied "
                "runs), MM2's +1 rule elsewhere; the report of `emit_checkpoints` lists per group the partitions "
                "translated exactly, approximately or refused, and the largest possible re-read."
            ),
            "",
            (
                f"Group offsets: {'written' if sync_on else 'not written'} to `{flow.target}`'s groups "
                f"(`sync.group.offsets.enabled={str(sync_on).lower()}`): only groups that are empty or absent there, "
                "never moving an offset backwards; a group active on the target is skipped and named."
            ),
            "",
            (
                f"Schedule: every {max(seconds, PRACTICAL_MINIMUM_SECONDS)} s (`emit.checkpoints.interval.seconds` = "
                f"{seconds}; Airflow's practical minimum is {PRACTICAL_MINIMUM_SECONDS} s) and after every run of the "
                "flow's mirror DAGs (their assets)."
            ),
        ]
    )


def _compact(report: CheckpointReport) -> dict[str, Any]:
    """The report for XCom: per-group figures, and only the partitions that are not exact (20,000 rows otherwise)."""
    return report.to_dict(
        lambda g: {**g.summary(), "not_exact": [p.to_dict() for p in g.partitions if p.kind != "exact"]}
    )


def build_checkpoints_dag(flow: FlowConfig, config_file: Path) -> DAG:
    name = flow.name
    with DAG(
        dag_id=flow.dag_id("checkpoints"),
        description=f"Checkpoints and group offsets from {flow.source} to {flow.target}",
        doc_md=_docs(flow),
        schedule=checkpoints_schedule(flow),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=["mirrorflow", name, "checkpoints"],
        params={
            "groups": Param(
                None,
                type=["null", "string"],
                title="Only these groups",
                description="A regex the group id must fully match (after the flow's group filter). Empty: all.",
            ),
        },
    ) as dag:

        @task(task_id="check_clusters")
        def check_clusters() -> list[dict[str, Any]]:
            """Both clusters answer (else fail naming the unreachable one)."""
            return checked_clusters(MirrorflowHook(config_file).flow(name))

        @task(task_id="emit_checkpoints")
        def emit_checkpoints() -> dict[str, Any]:
            """Translate every group's offsets; write the checkpoints MM2 would write (monotonic)."""
            from mirrorflow.checkpoints.emit import emit_checkpoints as emit  # the Kafka client: not at parse

            groups = get_current_context()["params"].get("groups") or None
            report = emit(MirrorflowHook(config_file).flow(name), groups=groups)
            for g in report.groups:
                log.info("%s", g.summary())
            return _compact(report)

        @task(task_id="sync_group_offsets")
        def sync_group_offsets() -> dict[str, Any]:
            """Commit the latest checkpoints into the target's idle groups (never backwards)."""
            from mirrorflow.checkpoints.groupsync import sync_group_offsets as sync

            live = MirrorflowHook(config_file).flow(name)
            if not live.get_bool("sync.group.offsets.enabled"):
                log.info("sync.group.offsets.enabled=false (MM2's default): target group offsets are not written")
                return {"flow": name, "enabled": False}
            groups = get_current_context()["params"].get("groups") or None
            report = sync(live, groups=groups)
            for skipped in report.skipped_active:
                log.warning("group %s is active on %s: skipped", skipped, live.target)
            if report.errors:
                raise RuntimeError("; ".join(report.errors))
            return {"enabled": True, **report.to_dict()}

        check_clusters() >> emit_checkpoints() >> sync_group_offsets()
    return dag


def checkpoints_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    """One checkpoints DAG per enabled flow that emits checkpoints (``emit.checkpoints.enabled``)."""
    path, flows = configured_flows(config_file)
    dags = (build_checkpoints_dag(f, path) for f in flows if f.get_bool("emit.checkpoints.enabled"))
    return {dag.dag_id: dag for dag in dags}
