"""End to end, as the demo runs it: ``airflow standalone`` with this checkout's DAGs, driven over REST API v2,
its replicate tasks submitting their units to a Spark Connect server.

Starts a real Airflow (scheduler, DAG processor, API server) on a free loopback port with its own home,
triggers a mirror DAG with Params the way the UI's form does, waits for the run, checks the copy on the
target and the run report in XCom, and stops everything by process group.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorflow_dev.demo.airflow_server import AirflowServer
from mirrorflow_dev.devcluster import free_port
from tests.configs import write_family_config
from tests.kafka_helpers import create_topic, produce, read_all, topic_exists

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def write_config(path: Path, clusters: Any, prefix: str, family: str = "e2e", extra: str = "") -> Path:
    """One flow primary->backup with one family of the prefix's topics, run only when triggered over REST."""
    schedule = f"primary->backup.mirrorflow.family.{family}.schedule = none\n"  # only the REST trigger runs it
    return write_family_config(path, clusters, prefix, schedule + extra, family=family)


@pytest.mark.timeout(600)
def test_a_mirror_dag_triggered_over_the_rest_api_replicates(
    kafka_clusters: Any, spark_connect: str, tmp_path: Path
) -> None:
    prefix = f"e2e{uuid.uuid4().hex[:6]}"
    config = write_config(tmp_path / "mm2.properties", kafka_clusters, prefix)
    wanted = create_topic(kafka_clusters.primary, f"{prefix}.wanted", partitions=2)
    other = create_topic(kafka_clusters.primary, f"{prefix}.other", partitions=1)
    sent = [
        {"key": b"k%d" % i, "value": b"v%d" % i, "headers": [("h", b"%d" % i)], "partition": i % 2} for i in range(30)
    ]
    produce(kafka_clusters.primary, wanted, sent)
    produce(kafka_clusters.primary, other, [{"key": b"x", "value": b"not asked for"}])

    server = AirflowServer(tmp_path / "airflow", free_port(), config, spark_connect)  # the demo's engine
    dag_id = "mirror__primary__backup__e2e"
    try:
        server.start(timeout=240)
        server.wait_for_dags([dag_id], timeout=180)
        server.unpause(dag_id)
        run_id = server.trigger(dag_id, {"topics": wanted, "duration": ""})
        state = server.wait_for_run(dag_id, run_id, timeout=400)
        assert state == "success", f"run {run_id} ended {state}; see {server.log_file} and {server.home}/logs"

        copied = read_all(kafka_clusters.backup, f"primary.{wanted}")
        assert sorted((r.partition, r.key, r.value, tuple(r.headers)) for r in copied) == sorted(
            (s["partition"], s["key"], s["value"], tuple(s["headers"])) for s in sent
        )
        assert not topic_exists(kafka_clusters.backup, f"primary.{other}", timeout=2)  # the Param limited it

        xcom = server.request(
            "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/publish_report/xcomEntries/report"
        )
        report = xcom["value"]
        assert report["records"] == 30 and report["lag"] == 0 and report["ok"] is True
        assert report["phases"]["engine"] > 0  # the units ran on the Spark Connect server
        assert sorted(p["topic"] for p in report["partitions"]) == [wanted, wanted]
        events = server.request("GET", "/api/v2/assets/events?source_dag_id=" + dag_id)
        assert [e["extra"]["records"] for e in events["asset_events"]] == [30]
    finally:
        server.stop()
    assert not server.running()
