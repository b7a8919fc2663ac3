"""``mirrorflow checkpoints`` and ``mirrorflow translate`` on real clusters."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.checkpoints.emit import read_checkpoints
from mirrorflow.cli import main
from mirrorflow.config import load_config
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow_dev.devcluster import free_port
from tests.integration.test_checkpoints import commit
from tests.kafka_helpers import create_topic, produce

pytestmark = pytest.mark.integration


def write(path: Path, primary: str, backup: str, prefix: str) -> Path:
    path.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        f"primary->backup.enabled = true\nprimary->backup.topics = {prefix}\\\\..*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
    )
    return path


def test_checkpoints_and_translate_commands(
    kafka_clusters: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"cli{uuid.uuid4().hex[:6]}"
    config = write(tmp_path / "mm2.properties", kafka_clusters.primary, kafka_clusters.backup, prefix)
    topic = create_topic(kafka_clusters.primary, f"{prefix}.t", partitions=1)
    produce(kafka_clusters.primary, topic, [{"value": b"%d" % i} for i in range(25)])
    assert replicate(load_config(config), "primary->backup", None, LocalExecutor()).ok
    group = f"{prefix}-app"
    commit(kafka_clusters.primary, group, {(topic, 0): 12})
    flow = ["--config", str(config), "--flow", "primary->backup"]

    assert main(["checkpoints", *flow, "--groups", f"{prefix}-.*", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{group}: 1 exact, 0 approximate, 0 refused" in out and "would write 1 checkpoint(s)" in out
    assert "written" not in out  # a dry run never says it wrote anything
    assert not any(g == group for g, _t, _p in read_checkpoints(load_config(config).flow("primary", "backup")))

    assert main(["checkpoints", *flow, "--groups", f"{prefix}-.*", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checkpoints"]["emitted"] == 1 and "group_offsets" not in data  # sync is off (MM2's default)

    assert main(["translate", *flow, "--group", group]) == 0
    out = capsys.readouterr().out
    assert "live translation" in out and f"primary.{topic}" in out and "offset         12  exact" in out

    # Disaster: the source is gone; the answer comes from the checkpoints on the target.
    dead = write(tmp_path / "dead.properties", f"127.0.0.1:{free_port()}", kafka_clusters.backup, prefix)
    assert main(["translate", "--config", str(dead), "--flow", "primary->backup", "--group", group, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "last checkpoints" in data["source"]
    assert [(o["remote_topic"], o["downstream"]) for o in data["offsets"]] == [(f"primary.{topic}", 12)]
