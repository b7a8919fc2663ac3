"""A mirror DAG run with ``dag.test()``: real Airflow tasks, real spark-submit, real clusters."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorflow_dev.devcluster import free_port
from tests.configs import write_family_config
from tests.kafka_helpers import admin, create_topic, produce, read_all

pytestmark = pytest.mark.integration


def recreate_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = admin(bootstrap)
    client.delete_topics([topic], operation_timeout=30)[topic].result(30)
    while topic in client.list_topics(timeout=10).topics:
        time.sleep(0.2)
    create_topic(bootstrap, topic, partitions=partitions)


def asset_event_extra(dag_id: str) -> dict[str, Any]:
    """The extra of the newest asset event a task of ``dag_id`` emitted."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        event = (
            session.query(AssetEvent)
            .filter(AssetEvent.source_dag_id == dag_id)
            .order_by(AssetEvent.timestamp.desc())
            .first()
        )
        assert event is not None, f"no asset event from {dag_id}"
        return dict(event.extra)


@pytest.mark.parametrize("engine", ["spark-submit", "spark-connect"])
def test_dag_test_replicates_a_family_end_to_end_with_cluster_settings_from_a_connection(
    kafka_clusters: Any,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    engine: str,
) -> None:
    """The ``spark_default`` connection's type chooses the engine: ``spark`` (spark-submit) or ``spark_connect``."""
    from mirrorflow_airflow.dags.mirror import mirror_dags

    if engine == "spark-connect":
        url = request.getfixturevalue("spark_connect")
        host, port = url.rsplit(":", 1)
        connection = {"conn_type": "spark_connect", "host": host, "port": int(port)}
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(connection))

    prefix = f"dagt{uuid.uuid4().hex[:6]}"
    # The file names a dead primary; the Airflow connection kafka_primary has the real one. Every task,
    # and the Spark app in its own process, must use the connection's.
    dead = f"127.0.0.1:{free_port()}"
    config_file = write_family_config(tmp_path / "mm2.properties", kafka_clusters, prefix, primary=dead)
    host, port = kafka_clusters.primary.rsplit(":", 1)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_PRIMARY", json.dumps({"conn_type": "generic", "host": host, "port": int(port)})
    )
    topic = create_topic(kafka_clusters.primary, f"{prefix}.events", partitions=2)
    sent = [
        {"key": b"k%d" % i, "value": b"v%d" % i, "headers": [("trace", b"t%d" % i)], "partition": i % 2}
        for i in range(40)
    ]
    produce(kafka_clusters.primary, topic, sent)

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))  # dag.test() parses dags/ with this config
    dag = mirror_dags()["mirror__primary__backup__main"]
    run = dag.test()

    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {t: "success" for t in ("check_clusters", "prepare_target", "replicate", "publish_report")}
    copied = read_all(kafka_clusters.backup, f"primary.{topic}")
    assert sorted((r.partition, r.key, r.value, tuple(r.headers)) for r in copied) == sorted(
        (s["partition"], s["key"], s["value"], tuple(s["headers"])) for s in sent
    )
    ti = run.get_task_instance("publish_report")
    report = ti.xcom_pull(task_ids="publish_report", key="report")
    assert report["records"] == 40 and report["lag"] == 0 and report["ok"] is True
    assert {(p["topic"], p["partition"]): p["records"] for p in report["partitions"]} == {
        (topic, 0): 20,
        (topic, 1): 20,
    }
    json.dumps(report)  # plain data: XCom and the asset event carry it
    # The task's output and flat entries beside it: text and numbers the UI's XCom view shows as they are (it
    # shows an object or a list as an empty cell).
    assert ti.xcom_pull(task_ids="publish_report").startswith("primary->backup family main: 40 record(s) in 2")
    flat = {key: ti.xcom_pull(task_ids="publish_report", key=key) for key in ("records", "lag", "ok")}
    assert flat == {"records": 40, "lag": 0, "ok": True}
    rows = ti.xcom_pull(task_ids="publish_report", key="partitions")
    assert f"{topic}[0] -> primary.{topic}: 20 record(s)" in rows and f"{topic}[1]" in rows
    assert ti.xcom_pull(task_ids="publish_report", key="loss_events") == "none"
    assert {"submit", "engine", "lock", "copy", "shutdown"} <= set(report["phases"])  # where the time went
    assert report["phases"]["engine"] > 0
    # Lag in seconds: 0 when caught up, per partition in the report, the maximum beside it and in the asset event,
    # whose extra stays the run's totals (no partition list: it is stored with every event).
    assert report["max_lag_seconds"] == 0.0 and {p["lag_seconds"] for p in report["partitions"]} == {0.0}
    assert ti.xcom_pull(task_ids="publish_report", key="max_lag_seconds") == 0.0
    assert "lag 0 (0 s)" in rows
    extra = asset_event_extra(dag.dag_id)
    assert extra["records"] == 40 and extra["max_lag_seconds"] == 0.0 and "partitions" not in extra

    # The topic is deleted and recreated with fewer records: the next run reports a reset, copies the new
    # incarnation, and the Airflow notifiers hear of it (the run itself POSTs the webhook).
    from tests.dags.test_alerting import RECEIVED

    recreate_topic(kafka_clusters.primary, topic, partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"new-%d" % i, "partition": 0} for i in range(3)])
    with config_file.open("a") as extra:
        extra.write("mirrorflow.alerts.notifiers = tests.dags.test_alerting.record_payload\n")
    RECEIVED.clear()
    again = mirror_dags()["mirror__primary__backup__main"].test()
    second = again.get_task_instance("publish_report").xcom_pull(task_ids="publish_report", key="report")
    assert second["records"] == 3 and second["ok"] is True
    assert {(e["partition"], e["side"]) for e in second["reset_events"]} == {(0, "source"), (1, "source")}
    kinds = sorted(payload["kind"] for how, payload in RECEIVED if how == "callable")
    assert kinds == ["reset", "reset"]
