"""Failover DAG on its own pair of clusters: disaster (primary stopped by PID), a planned dry run, and planned
failovers that verify the copy first (a corrupted copy stops before any group moves).

The flow's aliases are the test's own (``primary<id>``, ``backup<id>``): its failover state lives on the
target, and on the clusters ``MIRRORFLOW_TEST_CLUSTERS`` names a flow ``primary->backup`` failed over by
this test would stop every other test's (and run's) mirror DAGs of that flow. The tests that stop the
primary are ``stops_brokers``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions

from mirrorflow.checkpoints.emit import emit_checkpoints
from mirrorflow.config import load_config
from mirrorflow.failover.report import FAILOVER_LOG, failover_state
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow_dev.devcluster import DevClusters
from tests.conftest import own_clusters
from tests.integration.test_checkpoints import commit, resume
from tests.integration.test_heartbeats import new_pair
from tests.kafka_helpers import admin, create_topic, produce, read_all

pytestmark = pytest.mark.integration


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, webhook: Any) -> Iterator[dict[str, Any]]:
    """Two clusters of this test's own, data replicated, a group half way through, checkpoints written."""
    with own_clusters(tmp_path / "clusters") as clusters:
        yield from _setup(clusters, tmp_path, monkeypatch, webhook)


def _setup(clusters: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, webhook: Any) -> Iterator[dict[str, Any]]:
    pair = new_pair(clusters)
    src, tgt = pair.source, pair.target
    primary, backup = clusters.primary, clusters.backup
    prefix = f"fo{uuid.uuid4().hex[:6]}"
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        f"clusters = {src}, {tgt}\n{src}.bootstrap.servers = {primary}\n{tgt}.bootstrap.servers = {backup}\n"
        f"{src}->{tgt}.enabled = true\n{src}->{tgt}.topics = {prefix}\\\\..*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\noffset-syncs.topic.location = target\n"
        "sync.topic.acls.enabled = false\nmirrorflow.unit.max.records = 9\n"
        f"mirrorflow.alerts.webhook.url = {webhook[0]}\n"
        # The counts below are this test's topic's: the source's `heartbeats` (other flows' on shared clusters,
        # none on a fresh pair) is not copied, so neither the final copy nor the verification sees it.
        "heartbeats.replication.enabled = false\n"
    )
    topic = create_topic(primary, f"{prefix}.orders", partitions=2)
    produce(primary, topic, [{"value": b"o%d" % i, "partition": i % 2} for i in range(50)])
    config = load_config(config_file)
    assert replicate(config, pair.flow, None, LocalExecutor()).ok
    group = f"{prefix}-shipping"
    commit(primary, group, {(topic, 0): 11, (topic, 1): 17})
    emit_checkpoints(config.flow(src, tgt))
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    yield {
        "pair": pair,
        "names": pair.names,  # "failover__primary__backup" -> the DAG id of this test's flow, and so on
        "remote": f"{src}.{topic}",
        "manager": clusters.manager,
        "primary_only": None if clusters.external else DevClusters(clusters.state_dir, clusters.specs[:1]),
        "primary": primary,
        "backup": backup,
        "topic": topic,
        "group": group,
        "config": config,
        "flow": config.flow(src, tgt),
        "expected": [r.value for r in read_all(primary, topic) if r.offset >= {0: 11, 1: 17}[r.partition]],
        "notifications": webhook[1],
    }


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


@pytest.mark.stops_brokers
def test_disaster_failover_moves_the_group_exactly(setup: dict[str, Any], airflow_db: None) -> None:
    from mirrorflow_airflow.dags.failover import failover_dags
    from mirrorflow_airflow.dags.mirror import failed_over_since

    setup["primary_only"].down(timeout=30)  # the disaster: the primary's broker is stopped by its PID
    dag = failover_dags()[setup["names"]("failover__primary__backup")]
    run = dag.test(run_conf={"mode": "disaster", "dry_run": False})
    assert states(run) == {
        "preflight": "success",
        "final_copy": "skipped",
        "verify_copy": "skipped",  # the source is gone: nothing to compare the copy with
        "move_groups": "success",
        "stop_mirroring": "success",
        "report": "success",
    }
    out = run.get_task_instance("report").xcom_pull(task_ids="report")
    assert out["state"] == "failed-over" and f"## {setup['group']} (moved; " in out["markdown"]
    # The checkpoints are re-translated from the syncs on the target: exact, and the copy had reached them.
    [moved] = out["report"]["groups"]
    assert [(p["outcome"], p["copied_position"], p["missing_records"]) for p in moved["partitions"]] == [
        ("exact", 25, 0),
        ("exact", 25, 0),
    ]
    assert out["advice"] == "Every group translates exactly: nothing re-read, nothing missing."
    [note] = setup["notifications"]  # the failover is announced on the alert channels, once
    assert (note["kind"], note["state"], note["groups"], note["refused"]) == (
        "failover",
        "failed-over",
        [setup["group"]],
        {},
    )
    got = resume(setup["backup"], setup["group"], [setup["remote"]], len(setup["expected"]))
    assert sorted(got) == sorted(setup["expected"])  # no lost record, no duplicate
    assert failed_over_since(setup["flow"]) is not None  # the mirror DAGs now skip
    [entry] = [
        e for r in read_all(setup["backup"], FAILOVER_LOG) if (e := json.loads(r.value))["flow"] == setup["pair"].flow
    ]
    assert entry["state"] == "failed-over" and entry["report"]["mode"] == "disaster"


def test_planned_dry_run_lists_the_changes_and_changes_nothing(setup: dict[str, Any], airflow_db: None) -> None:
    from mirrorflow_airflow.dags.failover import failover_dags

    primary, topic, group = setup["primary"], setup["topic"], setup["group"]
    # A second group read on while the copy stood still: 10 more records on partition 0 are not copied
    # (copied position 25), and the group committed 32 there: 7 records it consumed are not on the target.
    produce(primary, topic, [{"value": b"late-%d" % i, "partition": 0} for i in range(10)])
    ahead = f"{group}-ahead"
    commit(primary, ahead, {(topic, 0): 32, (topic, 1): 25})
    emit_checkpoints(setup["flow"])  # planned mode moves the groups that have checkpoints

    run = failover_dags()[setup["names"]("failover__primary__backup")].test(
        run_conf={"mode": "planned", "dry_run": True}
    )
    assert states(run)["report"] == "success" and states(run)["final_copy"] == "skipped"
    out = run.get_task_instance("report").xcom_pull(task_ids="report")
    moved = out["report"]
    groups = {g["group"]: g for g in moved["groups"]}
    assert sorted(groups) == [group, ahead]
    remote = setup["remote"]
    # Where the copies of source offsets 11 (partition 0) and 17 (partition 1) landed on the target.
    source = {(r.partition, r.offset): r.value for r in read_all(primary, topic)}
    copies = read_all(setup["backup"], remote)
    landed = {(r.partition, r.value): r.offset for r in copies}
    ends = {p: max(r.offset for r in copies if r.partition == p) + 1 for p in (0, 1)}  # the copy's end per partition

    def rows(name: str) -> list[tuple[Any, ...]]:
        fields = ("remote_topic", "partition", "copied_position", "target_offset", "kind", "action", "outcome")
        return [
            tuple(p[f] for f in fields) + (p["re_read_records"], p["missing_records"])
            for p in groups[name]["partitions"]
        ]

    # The caught-up group: exact on both partitions, nothing re-read, nothing missing.
    assert rows(group) == [
        (remote, p, 25, landed[(p, source[(p, u)])], "exact", "write", "exact", 0, 0) for p, u in ((0, 11), (1, 17))
    ]
    # The group ahead of the copy: partition 0 is 32 - 25 = 7 records not yet copied (it resumes at the copy's
    # end); partition 1 committed exactly the copy's end (25): exact.
    assert rows(ahead) == [
        (remote, 0, 25, ends[0], "approximate", "write", "not-yet-copied", 0, 7),
        (remote, 1, 25, ends[1], "exact", "write", "exact", 0, 0),
    ]
    age = groups[ahead]["partitions"][0]["missing_age_seconds"]
    assert age is not None and 0 <= age < 120  # the late records were produced moments ago
    assert out["totals"]["missing_records"] == 7 and out["totals"]["missing_partitions"] == 1
    assert out["totals"]["exact"] == 3 and out["totals"]["re_read_records"] == 0
    assert out["advice"].startswith(f"7 records in 1 partition are not copied yet (oldest {age:,.0f} s old): run the")
    markdown = out["markdown"]
    assert markdown.splitlines()[2] == f"**{out['advice']}**"
    for name, heading in (
        (group, "2 exact"),
        (ahead, f"1 exact, 1 not yet copied (7 records, oldest {age:,.0f} s old)"),
    ):
        state = groups[name]["target_state"]
        assert f"## {name} (would move; target state {state}): 2 partitions: {heading}\n" in markdown
    assert (
        f"| {remote} | 0 | 32 | 25 | {ends[0]} | not yet copied: 7 records (oldest {age:,.0f} s old) | - "
        f"| would move to {ends[0]} |"
    ) in markdown
    assert "re-read" not in markdown  # no row re-reads, so neither heading nor top line says so

    target = admin(setup["backup"])
    answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    assert [tp.offset for tp in answer.result(10).topic_partitions or []] in ([], [-1001, -1001], [-1001])
    assert failover_state(setup["flow"]) is None  # a dry run is recorded, but the flow is not failed over


def group_offsets(bootstrap: str, group: str) -> list[tuple[str, int, int]]:
    """The group's committed offsets on a cluster, sorted (an unknown group: none, or -1001 per partition)."""
    client = admin(bootstrap)  # held: a collected client never completes its futures
    answer = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return sorted((tp.topic, tp.partition, tp.offset) for tp in answer.topic_partitions or [] if tp.offset >= 0)


def test_planned_failover_verifies_first_and_stops_on_a_corrupted_copy(setup: dict[str, Any], airflow_db: None) -> None:
    """A record another producer appended to the remote topic: ``verify_copy`` names it and fails, no group moves."""
    from mirrorflow_airflow.dags.failover import failover_dags

    backup, topic, group = setup["backup"], setup["topic"], setup["group"]
    remote = setup["remote"]
    [stray] = produce(backup, remote, [{"value": b"stray", "partition": 0}])
    before = group_offsets(backup, group)

    run = failover_dags()[setup["names"]("failover__primary__backup")].test(
        run_conf={"mode": "planned", "dry_run": False}
    )
    assert states(run) == {
        "preflight": "success",
        "final_copy": "success",
        "verify_copy": "failed",
        "move_groups": "upstream_failed",
        "stop_mirroring": "upstream_failed",
        "report": "upstream_failed",
    }
    ti = run.get_task_instance("verify_copy")
    report = ti.xcom_pull(task_ids="verify_copy", key="report")
    assert (report["status"], report["differences"]) == ("different", 1)
    [part] = [p for p in report["partitions"] if p["partition"] == 0 and p["differences"]]
    [difference] = part["differences"]
    assert (difference["kind"], difference["target_offset"]) == ("extra", stray.offset)
    assert f"{topic}[0] -> {remote}[0]: extra on the target: target offset(s) {stray.offset}" in ti.xcom_pull(
        task_ids="verify_copy", key="differences"
    )
    assert group_offsets(backup, group) == before  # no group offset changed
    assert failover_state(setup["flow"]) is None  # not failed over: the mirror DAGs go on
    [note] = setup["notifications"]  # the stop is announced on the alert channels
    assert (note["kind"], note["state"], note["reason"], note["status"]) == (
        "failover",
        "stopped",
        "verify",
        "different",
    )
    assert f"target offset(s) {stray.offset}" in note["message"]


def test_planned_failover_with_a_clean_copy_verifies_and_moves_the_group(
    setup: dict[str, Any], airflow_db: None
) -> None:
    from mirrorflow_airflow.dags.failover import failover_dags

    primary, backup, topic, group = setup["primary"], setup["backup"], setup["topic"], setup["group"]
    remote = setup["remote"]
    produce(primary, topic, [{"value": b"late-%d" % i, "partition": i % 2} for i in range(6)])  # for the final copy
    run = failover_dags()[setup["names"]("failover__primary__backup")].test(
        run_conf={"mode": "planned", "dry_run": False}
    )
    assert set(states(run).values()) == {"success"} and "verify_copy" in states(run)
    ti = run.get_task_instance("verify_copy")
    assert "56 record(s) in 2 partition(s) compared: identical" in ti.xcom_pull(task_ids="verify_copy")
    assert ti.xcom_pull(task_ids="verify_copy", key="report")["status"] == "identical"
    # As before: the group moved exactly (to the copies of source offsets 11 and 17), the flow is failed over.
    source = {(r.partition, r.offset): r.value for r in read_all(primary, topic)}
    landed = {(r.partition, r.value): r.offset for r in read_all(backup, remote)}
    assert group_offsets(backup, group) == [
        (remote, 0, landed[(0, source[(0, 11)])]),
        (remote, 1, landed[(1, source[(1, 17)])]),
    ]
    assert failover_state(setup["flow"])["state"] == "failed-over"
    expected = setup["expected"] + [b"late-%d" % i for i in range(6)]
    assert sorted(resume(backup, group, [remote], len(expected))) == sorted(expected)


def test_disaster_dry_run_counts_what_the_copy_missed_then_translates_a_stale_checkpoint_exactly(
    setup: dict[str, Any],
) -> None:
    """Disaster mode reads only the target: the progress there gives the copied position, the syncs there
    re-translate each checkpoint (the best valid answer: exact once the copy got there); the source is not
    read, so the age of missing records is unknown."""
    from mirrorflow.failover.plan import plan_failover
    from mirrorflow.failover.report import render_markdown, summary

    primary, topic, flow = setup["primary"], setup["topic"], setup["flow"]
    remote = setup["remote"]
    produce(primary, topic, [{"value": b"late-%d" % i, "partition": 0} for i in range(10)])
    ahead = f"{setup['group']}-ahead"
    commit(primary, ahead, {(topic, 0): 32})
    emit_checkpoints(flow)  # checkpoint 32 -> the copy's end on the target: 7 records beyond the copy

    dry = plan_failover(flow, mode="disaster", groups=ahead, dry_run=True)
    [row] = dry.groups[0].partitions
    end = max(r.offset for r in read_all(setup["backup"], remote) if r.partition == 0) + 1
    # The checkpoint and the translation from the syncs agree: one past the copy's end (the syncs know the re-reads).
    assert (row.kind, row.basis, row.copied_position, row.target_offset, row.outcome) == (
        "approximate",
        "offset syncs",  # MM2's rule on the sync at the copy's last record
        25,
        end,
        "not-yet-copied",
    )
    assert (row.missing_records, row.re_read_records, row.missing_age_seconds) == (7, 0, None)
    assert summary(dry)["advice"] == (
        "7 records in 1 partition were not copied before the source failed (age unknown: the source is not read "
        "in a disaster): if the source can come back, bring it back and run a planned failover; otherwise accept "
        "7 records missing on the target."
    )
    assert (
        f"| {remote} | 0 | 32 | 25 | {end:,} | not yet copied: 7 records (age unknown: the source is not read in a "
        f"disaster) | - | would move to {end:,} |"
    ) in render_markdown(dry)

    # The copy catches up but no checkpoint follows: the checkpoint's target offset is now behind the copy of
    # record 32 (resuming there would read 25..31 again), but the syncs on the target now translate 32 exactly.
    assert replicate(setup["config"], setup["pair"].flow, None, LocalExecutor()).ok
    stale = plan_failover(flow, mode="disaster", groups=ahead, dry_run=True)
    [row] = stale.groups[0].partitions
    landed = {r.value: r.offset for r in read_all(setup["backup"], remote) if r.partition == 0}
    value_32 = {r.offset: r.value for r in read_all(primary, topic) if r.partition == 0}[32]
    assert landed[value_32] > end  # the checkpoint would resume before the copy of record 32...
    assert (row.copied_position, row.target_offset, row.outcome, row.kind, row.basis) == (
        35,
        landed[value_32],
        "exact",
        "exact",
        "copied runs",
    )  # ...the best valid answer resumes right at it
    assert (row.re_read_records, row.missing_records) == (0, 0)
    assert summary(stale)["advice"] == "Every group translates exactly: nothing re-read, nothing missing."


@pytest.mark.stops_brokers
def test_failback_copies_the_outage_back_and_the_group_resumes_at_home(setup: dict[str, Any], airflow_db: None) -> None:
    from mirrorflow_airflow.dags.failover import failover_dags
    from mirrorflow_airflow.dags.mirror import failed_over_since

    primary, backup, topic, group = setup["primary"], setup["backup"], setup["topic"], setup["group"]
    remote = setup["remote"]
    source = {(r.partition, r.offset): r.value for r in read_all(primary, topic)}
    setup["primary_only"].down(timeout=30)
    dags = failover_dags()
    assert (
        states(dags[setup["names"]("failover__primary__backup")].test(run_conf={"mode": "disaster", "dry_run": False}))[
            "report"
        ]
        == "success"
    )

    # During the outage: the group reads on in the remote topic, producers write to backup's own topic.
    landed = {(r.partition, r.value): r.offset for r in read_all(backup, remote)}
    local = create_topic(backup, topic, partitions=1)  # the same name, on backup: where producers went
    produce(backup, local, [{"value": b"during-%d" % i} for i in range(6)])
    commit(backup, group, {(remote, 0): landed[(0, source[(0, 15)])], (local, 0): 2})

    setup["primary_only"].up(timeout=60)  # the primary is back
    # verify is off by default for a failback (tests/dags checks the default); on here, it proves the copy back.
    run = dags[setup["names"]("failback__primary__backup")].test(run_conf={"dry_run": False, "verify": True})
    assert states(run) == {
        "preflight": "success",
        "copy_back": "success",
        "verify_copy": "success",
        "move_groups": "success",
        "restore_mirroring": "success",
        "report": "success",
    }
    assert [r.value for r in read_all(primary, f"{setup['pair'].target}.{topic}")] == [
        b"during-%d" % i for i in range(6)
    ]
    verified = run.get_task_instance("verify_copy").xcom_pull(task_ids="verify_copy", key="report")
    assert (verified["flow"], verified["status"], verified["records"]) == (
        setup["names"]("backup->primary"),
        "identical",
        6,
    )
    target = admin(primary)
    answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in answer.topic_partitions) == [
        (f"{setup['pair'].target}.{topic}", 0, 2),
        (topic, 0, 15),
        (topic, 1, 17),
    ]
    expected = [v for (p, o), v in source.items() if o >= {0: 15, 1: 17}[p]] + [b"during-%d" % i for i in range(2, 6)]
    got = resume(primary, group, [topic, f"{setup['pair'].target}.{topic}"], len(expected))
    assert sorted(got) == sorted(expected)  # at home again: nothing lost, nothing twice
    assert failed_over_since(setup["flow"]) is None  # the mirror DAGs run again
