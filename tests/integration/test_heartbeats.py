"""Heartbeats in MM2's format and place, carried by a mirror run, and their freshness on the target.

Runs on its own pair of clusters: a ``heartbeats`` topic on the session's primary would be replicated by
every other test's runs (MM2 replicates heartbeats whatever the topic filter says). On the clusters
``MIRRORFLOW_TEST_CLUSTERS`` names, shared with everything else, the flows' aliases are the test's own
and only heartbeats between them are looked at.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.config import MirrorConfig, parse_config
from mirrorflow.heartbeats import check_freshness, emit_heartbeat, heartbeat_flows
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow.wire import Heartbeat, WireFormatError
from tests.conftest import KafkaClusters, own_clusters
from tests.kafka_helpers import Record, read_all, unique_alias

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Pair:
    """The test's clusters and its flow's aliases (``primary``/``backup`` plus a suffix of the test's own)."""

    clusters: KafkaClusters
    source: str
    target: str

    @property
    def primary(self) -> str:
        return self.clusters.primary

    @property
    def backup(self) -> str:
        return self.clusters.backup

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    def names(self, template: str) -> str:
        """``template`` with the pair's aliases for ``primary``/``backup`` (``heartbeats__primary__backup``, say)."""
        return re.sub("primary|backup", lambda m: self.source if m.group() == "primary" else self.target, template)


def new_pair(clusters: KafkaClusters) -> Pair:
    suffix = unique_alias("")
    return Pair(clusters, f"primary{suffix}", f"backup{suffix}")


def pair_config_text(pair: Pair) -> str:
    """A flow primary->backup of the pair that copies no topic but ``heartbeats`` (as MM2 does, whatever the filter)."""
    source, target = pair.source, pair.target
    return (
        f"clusters = {source}, {target}\n{source}.bootstrap.servers = {pair.primary}\n"
        f"{target}.bootstrap.servers = {pair.backup}\n{source}->{target}.enabled = true\n"
        f"{source}->{target}.topics = none-such\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "sync.topic.acls.enabled = false\n"
    )


def own_heartbeats(bootstrap: str, pair: Pair) -> list[Record]:
    """The records of ``heartbeats`` between the pair's aliases (on shared clusters, other flows write there too)."""
    aliases = {pair.source, pair.target}
    found = []
    for record in read_all(bootstrap, "heartbeats"):
        try:
            beat = Heartbeat.decode(record.key, record.value)
        except WireFormatError:  # not everyone writes heartbeats in MM2's format
            continue
        if {beat.source_alias, beat.target_alias} == aliases:
            found.append(record)
    return found


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Pair, MirrorConfig]]:
    with own_clusters(tmp_path / "clusters") as clusters:
        flows = new_pair(clusters)
        yield flows, parse_config(pair_config_text(flows))


def test_heartbeats_are_mm2s_and_their_freshness_measures_the_whole_path(pair: Any) -> None:
    aliases, config = pair
    primary, backup = aliases.primary, aliases.backup
    flows = heartbeat_flows(config)
    assert [f.name for f in flows] == [aliases.names("backup->primary"), aliases.flow]  # the reverse pair too, as MM2
    forward = config.flow(aliases.source, aliases.target)
    assert check_freshness(forward).age_s is None  # nothing crossed yet

    before = int(time.time() * 1000)
    for flow in flows:
        emit_heartbeat(flow)
    [on_backup] = own_heartbeats(backup, aliases)
    assert Heartbeat.decode(on_backup.key, on_backup.value).source_alias == aliases.source
    key = bytes([0, len(aliases.source)]) + aliases.source.encode() + bytes([0, len(aliases.target)])
    assert on_backup.key == key + aliases.target.encode() and on_backup.value[:2] == b"\x00\x00"
    [on_primary] = own_heartbeats(primary, aliases)
    beat = Heartbeat.decode(on_primary.key, on_primary.value)
    assert (beat.source_alias, on_primary.partition) == (aliases.target, 0)

    report = replicate(config, aliases.flow, None, LocalExecutor())  # the topic filter matches nothing...
    assert [p.topic for p in report.partitions] == ["heartbeats"]  # ...but heartbeats cross anyway (MM2)
    fresh = check_freshness(forward)
    assert fresh.fresh and fresh.topic == f"{aliases.source}.heartbeats" and fresh.newest_ms >= before
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

    from mirrorflow_airflow.dags.heartbeats import heartbeats_dags

    aliases, config = pair
    url, posts = webhook
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        pair_config_text(aliases) + "mirrorflow.heartbeats.max.age = 2m\n"
        # the sensor watches 5/6 of the schedule while fresh: 2 s here, not the 50 s of the default 1m
        "mirrorflow.heartbeats.schedule = 3s\nmirrorflow.heartbeats.poll.interval = 1s\n"
        f"mirrorflow.alerts.webhook.url = {url}\n"  # the grace: 2m, the max age
    )
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    Variable.delete(aliases.names("mirrorflow_alert_state__primary__backup"))  # the session's DB is shared
    dag = heartbeats_dags()[aliases.names("heartbeats__primary__backup")]

    first = dag.test()
    assert {ti.task_id: ti.state for ti in first.get_task_instances()} == {
        "still_mirrored": "success",  # not failed over
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
        (aliases.target, aliases.source),
        (aliases.source, aliases.target),
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

    assert replicate(config, aliases.flow, None, LocalExecutor()).ok
    second = dag.test()
    after = second.get_task_instance("watch_freshness").xcom_pull(task_ids="watch_freshness")
    assert after["fresh"] is True and after["age_s"] < 60
    fresh = second.get_task_instance("alert").xcom_pull(task_ids="alert")
    assert (fresh["verdict"], fresh["kind"], posts) == ("fresh", None, [])  # nothing was alerted: no recovery either


def test_the_heartbeats_dag_skips_while_the_flow_is_failed_over(
    pair: Any,
    webhook: tuple[str, list[dict[str, Any]]],
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a failover mirroring is off on purpose: stale heartbeats are then no outage, so nothing is emitted,
    watched or alerted (and no automatic failover is triggered again), and the run stays green."""
    from mirrorflow_airflow.dags import heartbeats as heartbeats_dag

    aliases, _config = pair
    url, posts = webhook
    config_file = tmp_path / "mm2.properties"
    config_file.write_text(
        pair_config_text(aliases) + "mirrorflow.heartbeats.max.age = 1s\nmirrorflow.heartbeats.policy = auto-failover\n"
        f"mirrorflow.alerts.webhook.url = {url}\n"
    )
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config_file))
    asked: list[str] = []

    def failed_over(flow: Any) -> str:  # the failover record a real failover writes on the target
        asked.append(flow.name)
        return "2026-01-01T00:00:00+00:00"

    monkeypatch.setattr(heartbeats_dag, "failed_over_since", failed_over)
    run = heartbeats_dag.heartbeats_dags()[aliases.names("heartbeats__primary__backup")].test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states.pop("still_mirrored") == "success" and set(states.values()) == {"skipped"}, states
    assert run.state == "success" and posts == [] and asked == [aliases.flow]


def test_the_heartbeats_command_emits_and_reports_age_outside_airflow(pair: Any, tmp_path: Path) -> None:
    import json

    from tests.integration.test_cli import mirrorflow

    aliases, _ = pair
    backup = aliases.backup
    config = tmp_path / "mm2.properties"
    config.write_text(pair_config_text(aliases))
    flow = ("--config", str(config), "--flow", aliases.flow)
    never = mirrorflow("heartbeats", "age", *flow)
    assert never.returncode == 1 and "STALE" in never.stdout, never  # nothing ever emitted: no grace either

    emitted = mirrorflow("heartbeats", "emit", *flow)
    assert emitted.returncode == 0, emitted
    assert aliases.names("heartbeat (primary, backup)") in emitted.stdout
    assert aliases.names("to heartbeats on backup") in emitted.stdout
    assert aliases.names("heartbeat (backup, primary)") in emitted.stdout
    assert aliases.names("to heartbeats on primary") in emitted.stdout
    waiting = json.loads(mirrorflow("heartbeats", "age", *flow, "--json").stdout)
    assert waiting["verdict"] == "waiting" and waiting["age_s"] is None  # a new flow, within its grace period

    replicate(parse_config(config.read_text()), aliases.flow, None, LocalExecutor())  # carries the heartbeat
    fresh = mirrorflow("heartbeats", "age", *flow)
    assert fresh.returncode == 0 and "fresh" in fresh.stdout, fresh

    dead = config.read_text().replace(backup, "127.0.0.1:1")
    config.write_text(dead)
    down = mirrorflow("heartbeats", "age", *flow)
    assert down.returncode == 2 and aliases.target in down.stderr, down  # the target named in one line
