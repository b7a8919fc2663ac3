"""The ``mirrorflow`` command as a user runs it: a separate process, real clusters, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import distinct_free_ports
from tests.integration.test_devcluster import processes_mentioning
from tests.kafka_helpers import create_topic, produce, read_all

REPO = Path(__file__).resolve().parents[2]
SEEDS = sorted((REPO / "tests" / "fixtures" / "seeds").glob("*.properties"))


def mirrorflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed console script (falls back to the module when run outside the venv)."""
    exe = Path(sys.executable).parent / "mirrorflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "mirrorflow.cli"]
    return subprocess.run(
        [*cmd, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.integration
def test_dev_up_gives_two_clusters_and_down_leaves_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    primary_port, backup_port = distinct_free_ports(2)
    clusters = f"primary:{primary_port},backup:{backup_port}"
    env = {"MIRRORFLOW_HOME": str(home)}
    try:
        up = mirrorflow("dev", "up", "--clusters", clusters, env=env)
        assert up.returncode == 0, up.stderr
        assert "primary" in up.stdout and "backup" in up.stdout and "answers" in up.stdout
        again = mirrorflow("dev", "up", "--clusters", clusters, env=env)
        assert again.returncode == 0 and "already running" in again.stdout

        primary, backup = f"127.0.0.1:{primary_port}", f"127.0.0.1:{backup_port}"
        # Recent timestamps: retention (7 days by default) may delete older records at any moment.
        base_ts = int(time.time() * 1000) - 60_000
        for bootstrap in (primary, backup):
            topic = create_topic(bootstrap, "cli-roundtrip", partitions=2)
            sent = [
                {
                    "key": b"k%d" % i,
                    "value": b"v%d" % i,
                    "partition": i % 2,
                    "headers": [("h", b"x")],
                    "timestamp": base_ts + i,
                }
                for i in range(10)
            ]
            produce(bootstrap, topic, sent)
            got = sorted(read_all(bootstrap, topic), key=lambda r: (r.partition, r.offset))
            assert sorted((r.key, r.value) for r in got) == sorted((s["key"], s["value"]) for s in sent)
            assert all(r.headers == [("h", b"x")] for r in got)
        status = mirrorflow("dev", "status", "--clusters", clusters, env=env)
        assert status.returncode == 0 and status.stdout.count("running, answers") == 2
    finally:
        down = mirrorflow("dev", "down", "--clusters", clusters, env=env)
    assert down.returncode == 0, down.stderr
    assert processes_mentioning(str(home)) == []
    stopped = mirrorflow("dev", "status", "--clusters", clusters, env=env)
    assert stopped.returncode == 3 and "running" not in stopped.stdout.replace("not running", "")


@pytest.mark.parametrize("seed", SEEDS, ids=[s.stem for s in SEEDS])
def test_seed_configurations_validate(seed: Path) -> None:
    result = mirrorflow("config", "validate", str(seed))
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout


def test_config_show_prints_flows_as_mm2_runs_them() -> None:
    result = mirrorflow("config", "show", str(REPO / "tests/fixtures/seeds/001b_ads_full.properties"), "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    (flow,) = shown["flows"]
    assert flow["flow"] == "source->target"
    assert "becomes 'source_orders'" in flow["policy"]
    assert flow["internal_topics"]["offset syncs"] == "mm2-offset-syncs_target_internal on source"
    assert flow["internal_topics"]["checkpoints"] == "source_checkpoints_internal on target"
    assert flow["settings"]["topics"]["value"] == "test_topic"
    assert flow["settings"]["groups"]["value"] == ".*"
    assert flow["settings"]["sync.topic.acls.enabled"]["value"] == "false"
    assert flow["settings"]["emit.heartbeats.interval.seconds"]["origin"].startswith("001b_ads_full.properties:19")
    assert flow["settings"]["offset.lag.max"] == {"value": "100", "origin": "MM2 default"}
    assert shown["heartbeat_only_pairs"] == ["target->source"]


def test_config_show_redacts_secrets_everywhere(tmp_path: Path) -> None:
    secret = "Sup3rS3cret-value"
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n"
        f'b.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{secret}";\n'
        f"b.ssl.key.password = {secret}\na.producer.ssl.keystore.password = {secret}\n"
        f"b.sasl.mechanism = PLAIN\nb.consumer.client.rack = rack password={secret}\n"
        # inline PEM (KIP-651) and an OIDC client secret by librdkafka's own name
        f"a.ssl.keystore.type = PEM\na.ssl.keystore.key = -----BEGIN ENCRYPTED PRIVATE KEY-----{secret}\n"
        f"a.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE-----{secret}\n"
        f"a.sasl.oauthbearer.client.secret = {secret}\n"
    )
    for args in (
        ["config", "show", str(config)],
        ["config", "show", str(config), "--json"],
        ["config", "show", str(config), "--flow", "a->b"],
        ["config", "validate", str(config)],
    ):
        result = mirrorflow(*args)
        assert result.returncode == 0, result.stderr
        assert secret not in result.stdout + result.stderr
    assert "[redacted]" in mirrorflow("config", "show", str(config)).stdout
    # A JAAS line Java refuses (no ';') is an error at its line that never quotes it.
    config.write_text(config.read_text().replace(f'password="{secret}";', f'password="{secret}"'))
    result = mirrorflow("config", "validate", str(config))
    assert result.returncode == 1 and "not terminated by semi-colon" in result.stderr
    assert secret not in result.stdout + result.stderr


def test_config_validate_reports_every_error_and_exits_1(tmp_path: Path) -> None:
    config = tmp_path / "bad.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = h:1\na->c.enabled = true\na->b.topics = x[\n")
    result = mirrorflow("config", "validate", str(config))
    assert result.returncode == 1
    assert f"{config}:1: error: b.bootstrap.servers" in result.stderr
    assert f"{config}:3: error: a->c.enabled: unknown cluster alias 'c'" in result.stderr
    assert f"{config}:4: error: a->b.topics: bad regex" in result.stderr
    missing = mirrorflow("config", "validate", str(tmp_path / "nope.properties"))
    assert missing.returncode == 1 and "cannot read configuration file" in missing.stderr


def test_config_show_unknown_flow() -> None:
    result = mirrorflow("config", "show", str(REPO / "include/config/mm2.properties"), "--flow", "backup->nowhere")
    assert result.returncode == 1 and "no flow backup->nowhere" in result.stderr


BOOM_POLICY = '''
from mirrorflow.policy import DefaultReplicationPolicy


class BoomPolicy(DefaultReplicationPolicy):
    """A user's policy with a bug that only shows at run time."""

    def format_remote_topic(self, source_alias, topic):
        if topic.startswith("boom"):
            raise RuntimeError("policy bug: cannot name " + topic + "\\nsecond line of the message")
        return super().format_remote_topic(source_alias, topic)
'''


@pytest.mark.integration
def test_an_unexpected_error_is_one_line_exit_2_and_debug_shows_the_traceback(
    kafka_clusters: Any, tmp_path: Path
) -> None:
    prefix = f"boom{uuid.uuid4().hex[:6]}"
    create_topic(kafka_clusters.primary, f"{prefix}.t")
    (tmp_path / "boom_policy.py").write_text(BOOM_POLICY)
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {kafka_clusters.primary}\n"
        f"backup.bootstrap.servers = {kafka_clusters.backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}\\\\..*\nreplication.policy.class = boom_policy.BoomPolicy\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\noffset-syncs.topic.location = target\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    run = ["replicate", "--in-process", "--config", str(config), "--flow", "primary->backup"]

    result = mirrorflow(*run, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"error: RuntimeError: policy bug: cannot name {prefix}.t (--debug shows the traceback)"
    ]

    debug = mirrorflow(*run, "--debug", env=env)
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr and 'boom_policy.py", line' in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == f"error: RuntimeError: policy bug: cannot name {prefix}.t"
