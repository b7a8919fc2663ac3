"""The heartbeats DAG factory: ``heartbeats__<src>__<tgt>``, one per enabled flow, every minute by default.

Each run writes the flow's heartbeat (key ``(src, tgt)``) into ``heartbeats`` on the target and, as
MM2's reverse herder does, ``(tgt, src)`` into ``heartbeats`` on the source; the mirror runs carry the
source's ``heartbeats`` to ``<src>.heartbeats`` on the target. Then it measures how old the newest
replicated heartbeat is against ``mirrorflow.heartbeats.max.age``.

    emit_heartbeats → check_freshness
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from include.mirrorflow import heartbeats
from include.mirrorflow.config import ConfigError, FlowConfig, load_config
from include.mirrorflow.config.location import config_path
from include.mirrorflow.config.model import parse_schedule
from mirrorflow_airflow.hooks import MirrorflowHook
from mirrorflow_airflow.mirror_dag import DEFAULT_ARGS, START_DATE, airflow_schedule

log = logging.getLogger(__name__)


def _docs(flow: FlowConfig) -> str:
    return "\n".join(
        [
            f"# Heartbeats `{flow.source}` ⇄ `{flow.target}`",
            "",
            (
                f"Writes MM2-format heartbeats: `({flow.source}, {flow.target})` into `heartbeats` on `{flow.target}`, "
                f"and `({flow.target}, {flow.source})` into `heartbeats` on `{flow.source}` (MM2's reverse herder). "
                f"The mirror DAGs copy `{flow.source}`'s `heartbeats` to "
                f"`{heartbeats.replicated_heartbeats_topic(flow)}` on `{flow.target}`."
            ),
            "",
            (
                f"`check_freshness` reports the age of the newest replicated heartbeat against "
                f"`mirrorflow.heartbeats.max.age` = `{flow.get('mirrorflow.heartbeats.max.age')}`: a stale heartbeat "
                f"means `{flow.source}` is down, unreachable from `{flow.target}`, or replication stopped or lags."
            ),
        ]
    )


def build_heartbeats_dag(flow: FlowConfig, config_file: Path) -> DAG:
    name = flow.name
    reverse = f"{flow.target}->{flow.source}"
    with DAG(
        dag_id=flow.dag_id("heartbeats"),
        description=f"Heartbeats between {flow.source} and {flow.target}, and their freshness",
        doc_md=_docs(flow),
        schedule=airflow_schedule(parse_schedule(flow.get("mirrorflow.heartbeats.schedule"))),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 1},
        tags=["mirrorflow", name, "heartbeats"],
    ) as dag:

        @task(task_id="emit_heartbeats")
        def emit_heartbeats() -> list[dict[str, Any]]:
            """The flow's heartbeat into the target (must work); the reverse one into the source (may not)."""
            config = MirrorflowHook(config_file).load()
            out = [asdict(heartbeats.emit_heartbeat(config.flow(flow.source, flow.target)))]
            back = config.flows.get((flow.target, flow.source))
            if back is not None and back.emits_heartbeats:
                try:
                    out.append(asdict(heartbeats.emit_heartbeat(back, timeout=10)))
                except Exception as exc:  # noqa: BLE001 - the source being down is what freshness will report
                    log.warning("reverse heartbeat %s not written (is %s down?): %s", reverse, flow.source, exc)
            return out

        @task(task_id="check_freshness")
        def check_freshness() -> dict[str, Any]:
            """Age of the newest heartbeat that crossed the flow, against the flow's threshold."""
            fresh = heartbeats.check_freshness(MirrorflowHook(config_file).flow(name))
            (log.info if fresh.fresh else log.warning)("%s", fresh.describe())
            return {**asdict(fresh), "fresh": fresh.fresh}

        emit_heartbeats() >> check_freshness()
    return dag


def heartbeats_dags(config_file: str | Path | None = None) -> dict[str, DAG]:
    path = Path(config_file) if config_file else config_path()
    try:
        config = load_config(path, partial=True)
    except ConfigError:
        return {}  # dags/mirrorflow_config.py shows the errors
    dags = {}
    for flow in config.enabled_flows():
        if flow.emits_heartbeats:
            dag = build_heartbeats_dag(flow, path)
            dags[dag.dag_id] = dag
    return dags
