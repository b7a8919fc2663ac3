"""The verify DAG with ``dag.test()``: real Airflow tasks, real clusters, chunks in the task or on Spark Connect.

A clean copy makes a green run whose report is in XCom; a record another producer appended to the remote topic
makes a red run whose report names it by its target offset, and an alert reaches the flow's webhook.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.config import load_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from tests.configs import write_family_config
from tests.kafka_helpers import create_topic, produce

pytestmark = pytest.mark.integration


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


@pytest.mark.parametrize("engine", ["in-process", "spark-connect"])
def test_verify_dag_passes_a_clean_copy_and_fails_and_alerts_on_a_stray_record(
    kafka_clusters: Any,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    webhook: tuple[str, list[dict[str, Any]]],
    engine: str,
) -> None:
    """The ``spark_default`` connection's type chooses where chunks run, as for the mirror DAG's ``replicate``."""
    from mirrorflow_airflow.dags.verify import verify_dags

    if engine == "spark-connect":
        url = request.getfixturevalue("spark_connect")
        host, port = url.rsplit(":", 1)
        connection = {"conn_type": "spark_connect", "host": host, "port": int(port)}
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(connection))

    url, received = webhook
    prefix = f"vdag{uuid.uuid4().hex[:6]}"
    config_file = write_family_config(
        tmp_path / "mm2.properties",
        kafka_clusters,
        prefix,
        f"mirrorflow.unit.max.records = 7\nmirrorflow.alerts.webhook.url = {url}\n",
    )
    topic = create_topic(kafka_clusters.primary, f"{prefix}.events", partitions=2)
    produce(
        kafka_clusters.primary,
        topic,
        [
            {
                "key": None if i % 5 == 0 else b"k%d" % i,
                "value": None if i % 9 == 0 else b"v%d" % i,
                "headers": [("trace", b"t%d" % i)],
                "partition": i % 2,
            }
            for i in range(30)
        ],
    )
    assert replicate(load_config(config_file), "primary->backup", None, LocalExecutor()).ok

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    run = verify_dags()["verify__primary__backup"].test()
    assert states(run) == {"check_clusters": "success", "verify": "success", "report": "success"}
    ti = run.get_task_instance("report")
    summary = ti.xcom_pull(task_ids="report")
    assert summary.startswith("verify primary->backup: ") and "compared: identical" in summary, summary
    report = ti.xcom_pull(task_ids="report", key="report")
    assert (report["status"], report["differences"]) == ("identical", 0)
    # Every topic of the flow, with no Params: the source's `heartbeats` too when other tests wrote some.
    mine = [p for p in report["partitions"] if p["topic"] == topic]
    assert {(p["partition"], p["status"]) for p in mine} == {(0, "identical"), (1, "identical")}
    assert sum(p["source_records"] for p in mine) == 30 and sum(p["target_records"] for p in mine) == 30
    assert ti.xcom_pull(task_ids="report", key="differences") == "none"
    json.dumps(report)  # plain data
    assert received == []  # nothing to alert about

    # Another producer appends a record to the remote topic: the copy is no longer the source's.
    [stray] = produce(kafka_clusters.backup, f"primary.{topic}", [{"value": b"stray", "partition": 1}])
    run = verify_dags()["verify__primary__backup"].test(run_conf={"family": "main", "topics": topic})
    assert states(run) == {"check_clusters": "success", "verify": "success", "report": "failed"}
    ti = run.get_task_instance("report")
    report = ti.xcom_pull(task_ids="report", key="report")
    assert (report["status"], report["family"], report["differences"]) == ("different", "main", 1)
    [part] = [p for p in report["partitions"] if p["partition"] == 1]
    [difference] = part["differences"]
    assert (difference["kind"], difference["target_offset"], difference["source_offset"]) == (
        "extra",
        stray.offset,
        None,
    )
    first = (
        f"{topic}[1] -> primary.{topic}[1]: extra on the target: target offset(s) {stray.offset} (1 record(s)) "
        "with no source record, after the last source record"
    )
    assert ti.xcom_pull(task_ids="report", key="differences") == first
    assert ti.xcom_pull(task_ids="report", key="status") == "different"
    [alert] = received  # one alert, on the flow's webhook
    assert (alert["kind"], alert["reason"], alert["flow"], alert["differences"]) == (
        "alert",
        "verify",
        "primary->backup",
        1,
    )
    assert alert["first_difference"] == first and first in alert["message"]
