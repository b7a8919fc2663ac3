"""Heartbeats in MM2's format and place, carried by a mirror run, and their freshness on the target.

Runs on its own pair of clusters: a ``heartbeats`` topic on the session's primary would be replicated by
every other test's runs (MM2 replicates heartbeats whatever the topic filter says).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.devcluster import ClusterSpec, DevClusters
from mirrorflow.heartbeats import check_freshness, emit_heartbeat, heartbeat_flows
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow.wire import Heartbeat
from tests.conftest import distinct_free_ports
from tests.kafka_helpers import read_all

pytestmark = pytest.mark.integration


def pair_config_text(manager: DevClusters) -> str:
    """A flow primary->backup of the pair that copies no topic but ``heartbeats`` (as MM2 does, whatever the filter)."""
    primary, backup = (s.bootstrap for s in manager.specs)
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\nprimary->backup.topics = none-such\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "sync.topic.acls.enabled = false\n"
    )


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[DevClusters, MirrorConfig]]:
    ports = distinct_free_ports(2)
    manager = DevClusters(tmp_path / "clusters", (ClusterSpec("primary", ports[0]), ClusterSpec("backup", ports[1])))
    manager.up(timeout=60)
    config = parse_config(pair_config_text(manager))
    try:
        yield manager, config
    finally:
        manager.down(timeout=30)


def test_heartbeats_are_mm2s_and_their_freshness_measures_the_whole_path(pair: Any) -> None:
    manager, config = pair
    primary, backup = (s.bootstrap for s in manager.specs)
    flows = heartbeat_flows(config)
    assert [f.name for f in flows] == ["backup->primary", "primary->backup"]  # the reverse pair too, as MM2
    forward = config.flow("primary", "backup")
    assert check_freshness(forward).age_s is None  # nothing crossed yet

    before = int(time.time() * 1000)
    for flow in flows:
        emit_heartbeat(flow)
    [on_backup] = read_all(backup, "heartbeats")
    assert Heartbeat.decode(on_backup.key, on_backup.value).source_alias == "primary"
    assert on_backup.key == b"\x00\x07primary\x00\x06backup" and on_backup.value[:2] == b"\x00\x00"
    [on_primary] = read_all(primary, "heartbeats")
    assert (Heartbeat.decode(on_primary.key, on_primary.value).source_alias, on_primary.partition) == ("backup", 0)

    report = replicate(config, "primary->backup", None, LocalExecutor())  # the topic filter matches nothing...
    assert [p.topic for p in report.partitions] == ["heartbeats"]  # ...but heartbeats cross anyway (MM2)
    fresh = check_freshness(forward)
    assert fresh.fresh and fresh.topic == "primary.heartbeats" and fresh.newest_ms >= before
    assert fresh.age_s is not None and fresh.age_s < 30
    time.sleep(0.05)
    stale = check_freshness(forward, threshold_s=0.001)
    assert not stale.fresh and "STALE" in stale.describe()


def test_the_heartbeats_dag_emits_and_reports_freshness(
    pair: Any,
    webhook: tuple[str, list[dict[str, Any]]],
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new flow waits for its first heartbeat to cross (within the grace period: no alert), then is fresh."""
    from airflow.models.variable import Variable
    from mirrorflow_airflow.heartbeats_dag import heartbeats_dags

    manager, config = pair
    url, posts = webhook
    primary, backup = (s.bootstrap for s in manager.specs)
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\nprimary->backup.topics = none-such\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "sync.topic.acls.enabled = false\nmirrorflow.heartbeats.max.age = 2m\n"
        # the sensor watches 5/6 of the schedule while fresh: 2 s here, not the 50 s of the default 1m
        "mirrorflow.heartbeats.schedule = 3s\nmirrorflow.heartbeats.poll.interval = 1s\n"
        f"mirrorflow.alerts.webhook.url = {url}\n"  # the grace: 2m, the max age
    )
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    Variable.delete("mirrorflow_alert_state__primary__backup")  # the session's DB is shared with other tests
    dag = heartbeats_dags()["heartbeats__primary__backup"]

    first = dag.test()
    assert {ti.task_id: ti.state for ti in first.get_task_instances()} == {
        "emit_heartbeats": "success",
        "watch_freshness": "success",
        "alert": "success",
        "failover_wanted": "success",
        "trigger_failover": "skipped",  # policy alert (the default)
        "verdict": "success",  # waiting is not an outage: a green run
    }
    assert first.state == "success"
    emitted = first.get_task_instance("emit_heartbeats").xcom_pull(task_ids="emit_heartbeats")
    assert [(e["cluster"], e["heartbeat"]["source_alias"]) for e in emitted] == [
        ("backup", "primary"),
        ("primary", "backup"),
    ]
    before = first.get_task_instance("watch_freshness").xcom_pull(task_ids="watch_freshness")
    assert (before["fresh"], before["age_s"], before["threshold_s"]) == (False, None, 120.0)  # not replicated yet
    # WAITING since the flow's first heartbeat, the (primary, backup) one emit_heartbeats just wrote on backup
    assert (before["verdict"], before["grace_s"], before["first_ms"]) == (
        "waiting",
        120.0,
        emitted[0]["heartbeat"]["timestamp_ms"],
    )
    waited = first.get_task_instance("alert").xcom_pull(task_ids="alert")
    assert (waited["verdict"], waited["kind"], posts) == ("waiting", None, [])  # no alert within the grace period

    assert replicate(config, "primary->backup", None, LocalExecutor()).ok
    second = dag.test()
    after = second.get_task_instance("watch_freshness").xcom_pull(task_ids="watch_freshness")
    assert after["fresh"] is True and after["age_s"] < 60
    fresh = second.get_task_instance("alert").xcom_pull(task_ids="alert")
    assert (fresh["verdict"], fresh["kind"], posts) == ("fresh", None, [])  # nothing was alerted: no recovery either


def test_the_heartbeats_command_emits_and_reports_age_outside_airflow(pair: Any, tmp_path: Path) -> None:
    import json

    from tests.integration.test_cli import mirrorflow

    manager, _ = pair
    backup = manager.specs[1].bootstrap
    config = tmp_path / "mm2.properties"
    config.write_text(pair_config_text(manager))
    flow = ("--config", str(config), "--flow", "primary->backup")
    never = mirrorflow("heartbeats", "age", *flow)
    assert never.returncode == 1 and "STALE" in never.stdout, never  # nothing ever emitted: no grace either

    emitted = mirrorflow("heartbeats", "emit", *flow)
    assert emitted.returncode == 0, emitted
    assert "heartbeat (primary, backup)" in emitted.stdout and "to heartbeats on backup" in emitted.stdout
    assert "heartbeat (backup, primary)" in emitted.stdout and "to heartbeats on primary" in emitted.stdout
    waiting = json.loads(mirrorflow("heartbeats", "age", *flow, "--json").stdout)
    assert waiting["verdict"] == "waiting" and waiting["age_s"] is None  # a new flow, within its grace period

    replicate(parse_config(config.read_text()), "primary->backup", None, LocalExecutor())  # carries the heartbeat
    fresh = mirrorflow("heartbeats", "age", *flow)
    assert fresh.returncode == 0 and "fresh" in fresh.stdout, fresh

    dead = config.read_text().replace(backup, "127.0.0.1:1")
    config.write_text(dead)
    down = mirrorflow("heartbeats", "age", *flow)
    assert down.returncode == 2 and "backup" in down.stderr, down  # the target named in one line
