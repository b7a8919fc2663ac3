"""Failover DAG on its own pair of clusters: disaster (primary stopped by PID) and a planned dry run."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions

from include.mirrorflow.checkpoints.emit import emit_checkpoints
from include.mirrorflow.config import load_config
from include.mirrorflow.devcluster import ClusterSpec, DevClusters
from include.mirrorflow.failover.report import FAILOVER_LOG, failover_state
from include.mirrorflow.replication.executor import LocalExecutor
from include.mirrorflow.replication.run import replicate
from tests.conftest import distinct_free_ports
from tests.integration.test_checkpoints import commit, resume
from tests.kafka_helpers import admin, create_topic, produce, read_all

pytestmark = pytest.mark.integration


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, webhook: Any) -> Iterator[dict[str, Any]]:
    """Two clusters of this test's own, data replicated, a group half way through, checkpoints written."""
    ports = distinct_free_ports(2)
    specs = (ClusterSpec("primary", ports[0]), ClusterSpec("backup", ports[1]))
    state = tmp_path / "clusters"
    manager = DevClusters(state, specs)
    manager.up(timeout=60)
    primary, backup = (s.bootstrap for s in specs)
    prefix = f"fo{uuid.uuid4().hex[:6]}"
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        f"primary->backup.enabled = true\nprimary->backup.topics = {prefix}\\\\..*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\noffset-syncs.topic.location = target\n"
        "sync.topic.acls.enabled = false\nmirrorflow.unit.max.records = 9\n"
        f"mirrorflow.alerts.webhook.url = {webhook[0]}\n"
    )
    topic = create_topic(primary, f"{prefix}.orders", partitions=2)
    produce(primary, topic, [{"value": b"o%d" % i, "partition": i % 2} for i in range(50)])
    config = load_config(config_file)
    assert replicate(config, "primary->backup", None, LocalExecutor()).ok
    group = f"{prefix}-shipping"
    commit(primary, group, {(topic, 0): 11, (topic, 1): 17})
    emit_checkpoints(config.flow("primary", "backup"))
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    try:
        yield {
            "manager": manager,
            "primary_only": DevClusters(state, specs[:1]),
            "primary": primary,
            "backup": backup,
            "topic": topic,
            "group": group,
            "flow": config.flow("primary", "backup"),
            "expected": [r.value for r in read_all(primary, topic) if r.offset >= {0: 11, 1: 17}[r.partition]],
            "notifications": webhook[1],
        }
    finally:
        manager.down(timeout=30)


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def test_disaster_failover_moves_the_group_exactly(setup: dict[str, Any], airflow_db: None) -> None:
    from mirrorflow_airflow.failover_dag import failover_dags
    from mirrorflow_airflow.mirror_dag import failed_over_since

    setup["primary_only"].down(timeout=30)  # the disaster: the primary's broker is stopped by its PID
    dag = failover_dags()["failover__primary__backup"]
    run = dag.test(run_conf={"mode": "disaster", "dry_run": False})
    assert states(run) == {
        "preflight": "success",
        "final_copy": "skipped",
        "move_groups": "success",
        "stop_mirroring": "success",
        "report": "success",
    }
    out = run.get_task_instance("report").xcom_pull(task_ids="report")
    assert out["state"] == "failed-over" and f"## {setup['group']}" in out["markdown"]
    [note] = setup["notifications"]  # the failover is announced on the alert channels, once
    assert (note["kind"], note["state"], note["groups"], note["refused"]) == (
        "failover",
        "failed-over",
        [setup["group"]],
        {},
    )
    got = resume(setup["backup"], setup["group"], [f"primary.{setup['topic']}"], len(setup["expected"]))
    assert sorted(got) == sorted(setup["expected"])  # no lost record, no duplicate
    assert failed_over_since(setup["flow"]) is not None  # the mirror DAGs now skip
    [entry] = [json.loads(r.value) for r in read_all(setup["backup"], FAILOVER_LOG)]
    assert entry["state"] == "failed-over" and entry["report"]["mode"] == "disaster"


def test_planned_dry_run_lists_the_changes_and_changes_nothing(setup: dict[str, Any], airflow_db: None) -> None:
    from mirrorflow_airflow.failover_dag import failover_dags

    run = failover_dags()["failover__primary__backup"].test(run_conf={"mode": "planned", "dry_run": True})
    assert states(run)["report"] == "success" and states(run)["final_copy"] == "skipped"
    moved = run.get_task_instance("report").xcom_pull(task_ids="report")["report"]
    [group] = moved["groups"]
    remote = f"primary.{setup['topic']}"
    # Where the copies of source offsets 11 (partition 0) and 17 (partition 1) landed on the target.
    source = {(r.partition, r.offset): r.value for r in read_all(setup["primary"], setup["topic"])}
    landed = {(r.partition, r.value): r.offset for r in read_all(setup["backup"], remote)}
    expected = [(remote, p, landed[(p, source[(p, u)])], "exact", "write") for p, u in ((0, 11), (1, 17))]
    got = [(p["remote_topic"], p["partition"], p["target_offset"], p["kind"], p["action"]) for p in group["partitions"]]
    assert got == expected
    target = admin(setup["backup"])
    answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(setup["group"])])[setup["group"]]
    assert [tp.offset for tp in answer.result(10).topic_partitions or []] in ([], [-1001, -1001], [-1001])
    assert failover_state(setup["flow"]) is None  # a dry run is recorded, but the flow is not failed over


def test_failback_copies_the_outage_back_and_the_group_resumes_at_home(setup: dict[str, Any], airflow_db: None) -> None:
    from mirrorflow_airflow.failover_dag import failover_dags
    from mirrorflow_airflow.mirror_dag import failed_over_since

    primary, backup, topic, group = setup["primary"], setup["backup"], setup["topic"], setup["group"]
    remote = f"primary.{topic}"
    source = {(r.partition, r.offset): r.value for r in read_all(primary, topic)}
    setup["primary_only"].down(timeout=30)
    dags = failover_dags()
    assert (
        states(dags["failover__primary__backup"].test(run_conf={"mode": "disaster", "dry_run": False}))["report"]
        == "success"
    )

    # During the outage: the group reads on in the remote topic, producers write to backup's own topic.
    landed = {(r.partition, r.value): r.offset for r in read_all(backup, remote)}
    local = create_topic(backup, topic, partitions=1)  # the same name, on backup: where producers went
    produce(backup, local, [{"value": b"during-%d" % i} for i in range(6)])
    commit(backup, group, {(remote, 0): landed[(0, source[(0, 15)])], (local, 0): 2})

    setup["primary_only"].up(timeout=60)  # the primary is back
    run = dags["failback__primary__backup"].test(run_conf={"dry_run": False})
    assert states(run) == {
        "preflight": "success",
        "copy_back": "success",
        "move_groups": "success",
        "restore_mirroring": "success",
        "report": "success",
    }
    assert [r.value for r in read_all(primary, f"backup.{topic}")] == [b"during-%d" % i for i in range(6)]
    target = admin(primary)
    answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in answer.topic_partitions) == [
        (f"backup.{topic}", 0, 2),
        (topic, 0, 15),
        (topic, 1, 17),
    ]
    expected = [v for (p, o), v in source.items() if o >= {0: 15, 1: 17}[p]] + [b"during-%d" % i for i in range(2, 6)]
    got = resume(primary, group, [topic, f"backup.{topic}"], len(expected))
    assert sorted(got) == sorted(expected)  # at home again: nothing lost, nothing twice
    assert failed_over_since(setup["flow"]) is None  # the mirror DAGs run again
