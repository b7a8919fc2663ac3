"""The checkpoints DAG with ``dag.test()``: checkpoints and target group offsets after a mirror run."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions

from mirrorflow.config import load_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from tests.integration.test_checkpoints import commit, resume
from tests.integration.test_replication import transactional_writes
from tests.kafka_helpers import admin, create_topic, produce

pytestmark = pytest.mark.integration


def test_the_checkpoints_dag_translates_and_syncs_group_offsets(
    kafka_clusters: Any, airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mirrorflow_airflow.dags.checkpoints import checkpoints_dags

    prefix = f"cpd{uuid.uuid4().hex[:6]}"
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {kafka_clusters.primary}\n"
        f"backup.bootstrap.servers = {kafka_clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}\\\\..*\nprimary->backup.groups = {prefix}-.*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\nsync.group.offsets.enabled = true\n"
    )
    topic = create_topic(kafka_clusters.primary, f"{prefix}.events", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"e%d" % i, "partition": i % 2} for i in range(40)])
    txn = create_topic(kafka_clusters.primary, f"{prefix}.txn", partitions=1)
    transactional_writes(
        kafka_clusters.primary,
        txn,
        [([{"value": b"ok-%d" % i} for i in range(4)], True), ([{"value": b"no"}] * 3, False)],
    )
    config = load_config(config_file)
    assert replicate(config, "primary->backup", None, LocalExecutor()).ok
    transactional_writes(kafka_clusters.primary, txn, [([{"value": b"later-%d" % i} for i in range(3)], True)])
    assert replicate(config, "primary->backup", None, LocalExecutor()).ok  # a second run: a gap, then a new run
    group, reader = f"{prefix}-billing", f"{prefix}-reader"
    commit(kafka_clusters.primary, group, {(topic, 0): 7, (topic, 1): 20})
    commit(kafka_clusters.primary, reader, {(txn, 0): 6})  # inside the aborted transaction

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    dag = checkpoints_dags()["checkpoints__primary__backup"]
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {t: "success" for t in ("check_clusters", "emit_checkpoints", "sync_group_offsets")}
    report = run.get_task_instance("emit_checkpoints").xcom_pull(task_ids="emit_checkpoints")
    summaries = {g["group"]: g for g in report["groups"]}
    assert (summaries[group]["exact"], summaries[group]["not_exact"]) == (2, [])
    # The aborted transaction ended the first run's copy; the second run's syncs cannot vouch for offsets
    # between the last copied record (3) and the stored progress (8), so the reader's offset 6 is translated
    # by the +1 rule from upstream 3 and the report says up to 2 records may be read again.
    [inexact] = summaries[reader]["not_exact"]
    assert (inexact["kind"], inexact["downstream"], inexact["rereads"]) == ("approximate", 4, 2)

    target = admin(kafka_clusters.backup)
    answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in answer.topic_partitions) == [
        (f"primary.{topic}", 0, 7),
        (f"primary.{topic}", 1, 20),
    ]

    # Failing over, the reader gets no record twice and misses none (within what the report allowed).
    assert resume(kafka_clusters.backup, reader, [f"primary.{txn}"], 3) == [b"later-0", b"later-1", b"later-2"]
