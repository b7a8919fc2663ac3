"""The failover DAG factory: ``failover__<src>__<tgt>``, triggered by an operator from the UI.

    preflight → final_copy (planned only) → move_groups → stop_mirroring → report

Each step is idempotent and the DAG can be re-run: planning writes nothing, offsets are never moved
backwards, and the failover record on the target says the flow is failed over (its mirror DAGs then
skip). ``dry_run`` (the default) plans and reports without changing anything.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException

from include.mirrorflow.config import ConfigError, FlowConfig, load_config
from include.mirrorflow.config.location import config_path
from include.mirrorflow.failover import drain, plan, report
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.mirror_dag import DEFAULT_ARGS, START_DATE

log = logging.getLogger(__name__)


def failover_params() -> dict[str, Param]:
    return {
        "mode": Param(
            "planned",
            type="string",
            enum=["planned", "disaster"],
            title="Mode",
            description=(
                "planned: the source answers; replication is drained to zero lag and the groups' current offsets "
                "are translated exactly where possible. disaster: the source is gone; the last checkpoints are used."
            ),
        ),
        "groups": Param(
            None,
            type=["null", "string"],
            title="Groups",
            description="A regex the group id must fully match. Empty: every group with checkpoints on the target.",
        ),
        "dry_run": Param(
            True,
            type="boolean",
            title="Dry run",
            description="Only report what would change (offsets per group and partition); change nothing.",
        ),
        "force": Param(
            False,
            type="boolean",
            title="Force",
            description="Also move groups that have active members on the target (refused by default).",
        ),
    }


def _docs(flow: FlowConfig) -> str:
    return "\n".join(
        [
            f"# Failover `{flow.source}` → `{flow.target}`",
            "",
            (
                f"Moves consumer groups from `{flow.source}` to `{flow.target}`: each group's offsets on the remote "
                f"topics (`{flow.policy.format_remote_topic(flow.source, 'orders')}`...) are committed on "
                f"`{flow.target}` so its consumers resume there, exactly where the copy was contiguous."
            ),
            "",
            "**Trigger DAG** shows the form: mode (planned / disaster), groups (regex), dry run (default on), force.",
            "",
            (
                "Steps: `preflight` (target reachable, checkpoints and their age) → `final_copy` (planned only: copy "
                "until lag 0, final checkpoints) → `move_groups` (target offsets per group and partition; written "
                "unless dry run; never backwards; active groups refused unless force) → `stop_mirroring` (records "
                "the failover on `mirrorflow.failover-log`; the flow's mirror DAGs skip from then on) → `report` "
                "(Markdown and JSON)."
            ),
        ]
    )


def build_failover_dag(flow: FlowConfig, config_file: Path) -> DAG:
    name = flow.name
    with DAG(
        dag_id=flow.dag_id("failover"),
        description=f"Move consumer groups from {flow.source} to {flow.target} (operator-triggered)",
        doc_md=_docs(flow),
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 0},  # an operator decides whether to run it again
        tags=["mirrorflow", name, "failover"],
        params=failover_params(),
    ) as dag:

        def params() -> dict[str, Any]:
            return dict(get_current_context()["params"])

        @task(task_id="preflight")
        def preflight() -> dict[str, Any]:
            """Target reachable, checkpoints present (and how old), the groups that would move."""
            p = params()
            dry = plan.plan_failover(
                MirrorflowHook(config_file).flow(name), mode=p["mode"], groups=p["groups"], force=p["force"]
            )
            summary = {
                "source_reachable": dry.source_reachable,
                "checkpoints_age_s": dry.checkpoints_age_s,
                "groups": [g.group for g in dry.groups],
                "refused": {g.group: g.refused for g in dry.groups if g.refused},
                "notes": dry.notes,
            }
            log.info("%s", summary)
            return summary

        @task(task_id="final_copy")
        def final_copy() -> dict[str, Any]:
            """Planned mode: copy until lag 0 and emit final checkpoints (skipped for disaster and dry runs)."""
            p = params()
            if p["mode"] != "planned" or p["dry_run"]:
                raise AirflowSkipException(f"mode {p['mode']}{', dry run' if p['dry_run'] else ''}: no final copy")
            return drain.drain(MirrorflowHook(config_file).load(), name).__dict__

        @task(task_id="move_groups", trigger_rule="none_failed")
        def move_groups() -> dict[str, Any]:
            """Target offsets per group and partition; committed on the target unless dry run."""
            p = params()
            live = MirrorflowHook(config_file).flow(name)
            planned = plan.plan_failover(
                live, mode=p["mode"], groups=p["groups"], force=p["force"], dry_run=p["dry_run"]
            )
            return plan.apply_plan(live, planned).to_dict()

        @task(task_id="stop_mirroring")
        def stop_mirroring(moved: dict[str, Any]) -> str:
            """Record the failover on the target; from then on the flow's mirror DAGs skip (not for dry runs)."""
            state = "dry-run" if moved["dry_run"] else "failed-over"
            report.record(MirrorflowHook(config_file).flow(name), plan.plan_from_dict(moved), state=state)
            return state

        @task(task_id="report")
        def failover_report(moved: dict[str, Any], state: str) -> dict[str, Any]:
            """The failover report as Markdown (in the log) and JSON (the task's output)."""
            markdown = report.render_markdown(plan.plan_from_dict(moved))
            log.info("failover %s (%s):\n%s", name, state, markdown)
            return {"state": state, "markdown": markdown, "report": moved}

        moved = move_groups()
        preflight() >> final_copy() >> moved
        failover_report(moved, stop_mirroring(moved))
    return dag


def failover_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    path = Path(config_file) if config_file else config_path()
    try:
        config = load_config(path, partial=True)
    except ConfigError:
        return {}  # dags/mirrorflow_config.py shows the errors
    dags = {}
    for flow in config.enabled_flows():
        dag = build_failover_dag(flow, path)
        dags[dag.dag_id] = dag
    return dags
