"""The failover DAG factory: ``failover__<src>__<tgt>``, triggered by an operator from the UI.

    preflight → final_copy (planned) → verify_copy (planned, Param verify) → move_groups → stop_mirroring → report

Each step is idempotent and the DAG can be re-run: planning writes nothing, offsets are never moved
backwards, and the failover record on the target says the flow is failed over (its mirror DAGs then
skip). ``dry_run`` (the default) plans and reports without changing anything.

``verify_copy`` compares the copy with the source record by record after the final copy (``verify_dag``'s
helpers, ``include/mirrorflow/verify``) and fails when it differs or cannot be verified: ``move_groups`` then
never runs, so no group offset changes before someone has looked at the first differing offsets. The failback
DAG has the same step after ``copy_back`` (off by default).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.config import FlowConfig
from mirrorflow_airflow.dags.mirror import DEFAULT_ARGS, START_DATE, configured_flows
from mirrorflow_airflow.dags.verify import difference_lines, error_lines, log_report, publish, run_verification
from mirrorflow_airflow.hooks.config import MirrorflowHook
from mirrorflow_airflow.notifications.alerting import notify

log = logging.getLogger(__name__)


def announce(
    config_file: Path, name: str, kind: str, moved: dict[str, Any], state: str, verdict: dict[str, Any]
) -> list[str]:
    """The failover/failback notification on the alert channels (log, webhook, notifiers); failed channels.

    ``verdict`` is ``report.summary``: its one-line advice ends the message, so whoever reads only the
    notification still learns what to do (drain first, or how many records are missing).
    """
    groups = moved["groups"]
    done = [g["group"] for g in groups if not g["refused"]]
    refused = {g["group"]: g["refused"] for g in groups if g["refused"]}
    message = (
        f"{kind} of {name} ({moved['mode']}{', dry run' if moved['dry_run'] else ''}): {state}; "
        f"{len(done)} group(s) {'would move' if moved['dry_run'] else 'moved'}, {len(refused)} refused. "
        f"{verdict['advice']}"
    )
    payload = {
        "kind": kind,
        "flow": name,
        "state": state,
        "mode": moved["mode"],
        "dry_run": moved["dry_run"],
        "groups": done,
        "refused": refused,
        "totals": verdict["totals"],
        "message": message,
    }
    return notify(MirrorflowHook(config_file).flow(name), kind, payload, get_current_context())  # type: ignore[arg-type]


def _params() -> dict[str, Any]:
    return dict(get_current_context()["params"])


def record_and_report(config_file: Path, name: str, kind: str, record_task: str, done: str, moved: Any) -> None:
    """The last two steps of a failover or failback: the audit record, then the report and the notification.

    ``record_task`` is the step's name in the DAG (``stop_mirroring``, ``restore_mirroring``); ``done`` is the
    state it records unless the run is dry (``failed-over``, ``failed-back``): the mirror DAGs read it.
    """

    @task(task_id=record_task)
    def record(moved: dict[str, Any]) -> str:
        """Record the run on the target's failover log (dry runs too; only real runs change the flow's state)."""
        from mirrorflow.failover import plan, report

        state = "dry-run" if moved["dry_run"] else done
        report.record(MirrorflowHook(config_file).flow(name), plan.plan_from_dict(moved), state=state)
        return state

    # The output (the whole report) is read from XCom, not the log: the log keeps the advice and the tables.
    @task(task_id="report", show_return_value_in_logs=False)
    def publish(moved: dict[str, Any], state: str) -> dict[str, Any]:
        """The report as Markdown (in the log) and JSON (the task's output), announced on the alert channels.

        The advice comes first in the log, on its own line, so it is read before the tables.
        """
        from mirrorflow.failover import plan, report

        loaded = plan.plan_from_dict(moved)
        verdict, markdown = report.summary(loaded), report.render_markdown(loaded)
        log.info("%s %s (%s): %s", kind, name, state, verdict["advice"])
        log.info("report:\n%s", markdown)
        failed = announce(config_file, name, kind, moved, state, verdict)
        return {
            "state": state,
            "advice": verdict["advice"],
            "totals": verdict["totals"],
            "markdown": markdown,
            "report": moved,
            "notification_failures": failed,
        }

    publish(moved, record(moved))


def verify_param(default: bool, *, failback: bool = False) -> Param:
    """The ``verify`` Param: on by default for a planned failover, off for a failback (its copy is the outage's)."""
    when = (
        "After the copy back, compare every record copied to the original source with its original on the target"
        if failback
        else "After the final copy, compare every copied record with the source"
    )
    scope = "" if failback else " Planned mode only (in disaster mode the source is gone: skipped);"
    return Param(
        default,
        type="boolean",
        title="Verify the copy first",
        description=(
            f"{when} (key, value, headers, timestamp, as the verify DAG does) and stop before moving any group when "
            "the copy differs or cannot be verified; the report names the first differing source and target offsets. "
            f"Reads every retained record of the copied topics on both clusters.{scope} Skipped in a dry run."
        ),
    )


def verify_copy_task(config_file: Path, name: str, kind: str, flow_name: str, copied_by: str) -> Any:
    """The ``verify_copy`` step of a failover (``flow_name`` the flow) or failback (the reverse pair).

    Runs after ``copied_by`` whatever that did (``none_failed``: it is skipped in disaster mode and dry runs) and
    decides for itself whether to verify, saying why not. A copy that differs, or that could not be verified,
    fails the step: ``move_groups`` (``none_failed``) is then ``upstream_failed`` and no offset moves; the table
    is in the log, the report in XCom ``report``, and the stop is announced on the alert channels.
    """

    @task(task_id="verify_copy", trigger_rule="none_failed", show_return_value_in_logs=False)
    def verify_copy() -> str:
        p = _params()
        if not p["verify"]:
            raise AirflowSkipException(f"verify is off: the copy of {flow_name} is not compared with its source")
        if p.get("mode", "planned") != "planned":
            raise AirflowSkipException(
                f"mode {p['mode']}: the source is gone, so the copy cannot be compared with it (not verified)"
            )
        if p["dry_run"]:
            raise AirflowSkipException(
                f"dry run: no {copied_by}, nothing verified (the verify DAG checks the copy without failing over)"
            )
        data = run_verification(config_file, flow_name, session_key=f"{flow_name}/{kind}-verify")
        summary = log_report(data)
        publish(data, summary)
        if data["status"] == "identical":
            log.info("%s: the copy is identical to the source: moving the groups", summary)
            return summary
        if data["status"] == "different":
            why = f"the copy differs from the source: first {difference_lines(data)[0]}"
        else:
            why = f"the copy could not be verified: {'; '.join(error_lines(data))}"
        message = (
            f"{kind} of {name} STOPPED before moving any group: {why} ({summary}). Repair the copy, or run again "
            "with verify off to move the groups all the same."
        )
        payload = {
            "kind": kind,
            "flow": name,
            "state": "stopped",
            "reason": "verify",
            "verified": flow_name,
            "status": data["status"],
            "differences": data["differences"],
            "message": message,
        }
        notify(MirrorflowHook(config_file).flow(name), kind, payload, get_current_context())  # type: ignore[arg-type]
        raise AirflowFailException(message)

    return verify_copy()


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
        "verify": verify_param(True),
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
            (
                "**Trigger DAG** shows the form: mode (planned / disaster), groups (regex), dry run (default on), "
                "force, verify (default on)."
            ),
            "",
            (
                "Steps: `preflight` (target reachable, checkpoints and their age) → `final_copy` (planned only: copy "
                "until lag 0, final checkpoints) → `verify_copy` (planned, with verify on: every copied record "
                "compared with the source; a copy that differs or cannot be verified stops the failover here, before "
                "any group moves, naming the first differing source and target offsets in the log and in XCom "
                "`report`; skipped in disaster mode, where the source is gone, and in dry runs) → `move_groups` "
                "(target offsets per group and partition; written "
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

        @task(task_id="preflight")
        def preflight() -> dict[str, Any]:
            """Target reachable, checkpoints present (and how old), the groups that would move."""
            from mirrorflow.failover import plan

            p = _params()
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
            from mirrorflow.failover import drain

            p = _params()
            if p["mode"] != "planned" or p["dry_run"]:
                raise AirflowSkipException(f"mode {p['mode']}{', dry run' if p['dry_run'] else ''}: no final copy")
            return drain.drain(MirrorflowHook(config_file).load(), name).__dict__

        @task(task_id="move_groups", trigger_rule="none_failed", show_return_value_in_logs=False)
        def move_groups() -> dict[str, Any]:
            """Target offsets per group and partition; committed on the target unless dry run.

            The log says what happens in one line (the report's advice); the plan itself is the output.
            """
            from mirrorflow.failover import plan, report

            p = _params()
            live = MirrorflowHook(config_file).flow(name)
            planned = plan.plan_failover(
                live, mode=p["mode"], groups=p["groups"], force=p["force"], dry_run=p["dry_run"]
            )
            applied = plan.apply_plan(live, planned)
            log.info(
                "%d offset(s) %s: %s",
                len(applied.changes()),
                "to write (dry run)" if applied.dry_run else "written",
                report.summary(applied)["advice"],
            )
            return applied.to_dict()

        moved = move_groups()
        preflight() >> final_copy() >> verify_copy_task(config_file, name, "failover", name, "final copy") >> moved
        record_and_report(config_file, name, "failover", "stop_mirroring", "failed-over", moved)
    return dag


def _failback_docs(flow: FlowConfig) -> str:
    return "\n".join(
        [
            f"# Failback `{flow.target}` → `{flow.source}`",
            "",
            (
                f"After a failover of `{flow.name}`, once `{flow.source}` is back: copies what producers wrote to "
                f"`{flow.target}` during the outage to `{flow.source}` (pair `{flow.target}->{flow.source}`, "
                f"`orders` → `{flow.policy.format_remote_topic(flow.target, 'orders')}`), moves every group's offsets "
                f"back (`{flow.policy.format_remote_topic(flow.source, 'orders')}` → `orders`, exact from the copied "
                f"runs), and restores the original direction: the mirror DAGs of `{flow.name}` run again."
            ),
            "",
            (
                "Steps: `preflight` → `copy_back` (until lag 0; skipped in a dry run) → `verify_copy` (with verify "
                f"on: what was copied to `{flow.source}` compared record by record with `{flow.target}`; a difference "
                "stops the failback before any group moves) → `move_groups` → `restore_mirroring` → `report`. Same "
                "form as the failover: groups, dry run (default on), force, verify (default off here)."
            ),
        ]
    )


def build_failback_dag(flow: FlowConfig, config_file: Path) -> DAG:
    name = flow.name
    params = {k: v for k, v in failover_params().items() if k != "mode"}
    # The copy back is of the outage's writes only: verified on request.
    params["verify"] = verify_param(False, failback=True)
    with DAG(
        dag_id=flow.dag_id("failback"),
        description=f"Move consumer groups back from {flow.target} to {flow.source} (operator-triggered)",
        doc_md=_failback_docs(flow),
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 0},
        tags=["mirrorflow", name, "failover"],
        params=params,
    ) as dag:

        @task(task_id="preflight")
        def preflight() -> dict[str, Any]:
            """Both clusters answer and the flow is failed over (unless force)."""
            from mirrorflow.failover import report

            live = MirrorflowHook(config_file).flow(name)
            state = report.failover_state(live)
            if (state is None or state["state"] != "failed-over") and not _params()["force"]:
                raise RuntimeError(f"{name} is not failed over (last record: {state and state['state']}); set force")
            return {"failed_over_at": state and state["report"]["started_at"]}

        @task(task_id="copy_back")
        def copy_back() -> int:
            """What producers wrote to the target during the outage, copied to the source (not in a dry run)."""
            from mirrorflow.failover import failback

            if _params()["dry_run"]:
                raise AirflowSkipException("dry run: nothing copied")
            hook = MirrorflowHook(config_file)
            config = hook.load()
            return failback.copy_back(config, config.flow(flow.source, flow.target))

        @task(task_id="move_groups", trigger_rule="none_failed")
        def move_groups() -> dict[str, Any]:
            """Each group's offsets translated back and committed on the source (unless dry run)."""
            from mirrorflow.failover import failback, plan

            p = _params()
            config = MirrorflowHook(config_file).load()
            live = config.flow(flow.source, flow.target)
            planned = failback.plan_failback(config, live, groups=p["groups"], force=p["force"], dry_run=p["dry_run"])
            return plan.apply_plan(failback.reverse_flow(config, live), planned).to_dict()

        moved = move_groups()
        back = f"{flow.target}->{flow.source}"
        preflight() >> copy_back() >> verify_copy_task(config_file, name, "failback", back, "copy back") >> moved
        record_and_report(config_file, name, "failback", "restore_mirroring", "failed-back", moved)
    return dag


def failover_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    """A failover and a failback DAG per enabled flow."""
    path, flows = configured_flows(config_file)
    dags = (build(f, path) for f in flows for build in (build_failover_dag, build_failback_dag))
    return {dag.dag_id: dag for dag in dags}
