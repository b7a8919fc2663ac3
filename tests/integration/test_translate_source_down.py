"""``mirrorflow translate`` and a disaster failover with the source down answer in about a second.

A disaster is exactly when the source does not answer, and ``translate`` is what an operator runs then, probably
more than once. It used to wait 10 s for the dead source on every call and print librdkafka's reconnect log
(about 20 ``Connection refused`` lines) around the answer. The source here is a free port nobody listens on
(connection refused), the target a real cluster holding checkpoints for the group. The time bound asserted is
only a hang guard; each test prints its measured time.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.checkpoints.failover_offsets import SOURCE_PROBE_S, translate_group
from mirrorflow.config import load_config
from mirrorflow.failover.plan import FailoverError, plan_failover
from mirrorflow.preflight import REFUSED_GRACE_S, refused_everywhere
from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from mirrorflow_dev.devcluster import free_port
from tests.integration.test_checkpoints import commit
from tests.integration.test_checkpoints_cli import write
from tests.kafka_helpers import create_topic, produce

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 5.0  # the answer takes about a second; this only catches a wait for the dead source
# What librdkafka's own log looks like on stderr ("%3|1700000000.123|FAIL|rdkafka#producer-1| ...").
LIBRDKAFKA_MARKS = ("|FAIL|", "rdkafka#", "|ERROR|", "Connect to ipv4#")


@pytest.fixture(scope="module")
def checkpointed(kafka_clusters: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """(config with the source dead, the dead bootstrap, group, remote topic): the target holds the group's checkpoint."""
    tmp = tmp_path_factory.mktemp("translate-source-down")
    prefix = f"tsd{uuid.uuid4().hex[:6]}"
    live = write(tmp / "live.properties", kafka_clusters.primary, kafka_clusters.backup, prefix)
    topic = create_topic(kafka_clusters.primary, f"{prefix}.t", partitions=1)
    produce(kafka_clusters.primary, topic, [{"value": b"%d" % i} for i in range(25)])
    assert replicate(load_config(live), "primary->backup", None, LocalExecutor()).ok
    group = f"{prefix}-app"
    commit(kafka_clusters.primary, group, {(topic, 0): 12})
    emitted = mirrorflow("checkpoints", "--config", str(live), "--flow", "primary->backup", "--groups", f"{prefix}-.*")[
        0
    ]
    assert emitted.returncode == 0, emitted.stdout + emitted.stderr
    dead = f"127.0.0.1:{free_port()}"
    return write(tmp / "dead.properties", dead, kafka_clusters.backup, prefix), dead, group, f"primary.{topic}"


def mirrorflow(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command as a user runs it (a fresh process: librdkafka's log goes where it would go for them)."""
    exe = Path(sys.executable).parent / "mirrorflow"
    started = time.monotonic()
    result = subprocess.run(
        [str(exe), *args], check=False, capture_output=True, text=True, timeout=120, cwd=REPO, env=dict(os.environ)
    )
    return result, time.monotonic() - started


def assert_no_librdkafka_log(text: str) -> None:
    """Nothing from librdkafka's own log; the one line naming the dead cluster (quoting its reason) is ours."""
    ours = "warning: cluster 'primary' (source of primary->backup"
    lines = [line for line in text.splitlines() if not line.startswith(ours)]
    noise = [line for line in lines if any(mark in line for mark in LIBRDKAFKA_MARKS)]
    assert not noise, text


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_translate_answers_from_checkpoints_at_once(checkpointed: tuple[Path, str, str, str], as_json: bool) -> None:
    config, dead, group, remote = checkpointed
    args = ["translate", "--config", str(config), "--flow", "primary->backup", "--group", group]
    result, seconds = mirrorflow(*args, *(["--json"] if as_json else []))
    print(f"mirrorflow translate{' --json' if as_json else ''}, source refused: {seconds:.2f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_librdkafka_log(result.stdout + result.stderr)
    # The one line naming the dead cluster, as the other commands name it.
    warning = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(warning) == 1, result.stderr
    assert warning[0].startswith(
        f"warning: cluster 'primary' (source of primary->backup, bootstrap.servers {dead}) did not answer"
    ), warning
    assert "Connection refused" in warning[0]
    # The answer (its label is the translation's business, not this test's): the checkpoint's offset.
    if as_json:
        data = json.loads(result.stdout)
        assert data["source"].startswith("last checkpoints on backup (primary did not answer")
        assert [(o["remote_topic"], o["downstream"]) for o in data["offsets"]] == [(remote, 12)]
    else:
        assert "last checkpoints on backup (primary did not answer" in result.stdout
        assert f"{remote} [0]  offset         12  " in result.stdout
    assert seconds < HANG_GUARD_S


def test_translate_library_call_gives_up_on_a_refused_source_at_once(checkpointed: tuple[Path, str, str, str]) -> None:
    config, _dead, group, remote = checkpointed
    flow = load_config(config).flow("primary", "backup")
    started = time.monotonic()
    lines: list[str] = []
    source, points = translate_group(flow, group, on_unreachable=lines.append)
    seconds = time.monotonic() - started
    print(f"translate_group, source refused: {seconds:.2f} s")
    assert "last checkpoints" in source and [(p.remote_topic, p.downstream) for p in points] == [(remote, 12)]
    assert (
        len(lines) == 1
        and lines[0].startswith("cluster 'primary' (source of primary->backup")
        and "refused" in lines[0]
    )
    assert seconds < HANG_GUARD_S


def test_disaster_failover_dry_run_does_not_wait_for_the_source(checkpointed: tuple[Path, str, str, str]) -> None:
    config, _dead, group, remote = checkpointed
    flow = load_config(config).flow("primary", "backup")
    started = time.monotonic()
    plan = plan_failover(flow, mode="disaster", groups=group, dry_run=True)
    seconds = time.monotonic() - started
    print(f"plan_failover(disaster, dry run), source refused: {seconds:.2f} s")
    assert plan.source_reachable is None  # not contacted
    assert [(p.remote_topic, p.target_offset) for g in plan.groups for p in g.partitions] == [(remote, 12)]
    assert seconds < HANG_GUARD_S
    # A planned failover still requires the source; it gives a refusing source the usual grace (a broker
    # restarting must not send the operator to disaster mode), then says so.
    started = time.monotonic()
    with pytest.raises(FailoverError, match="planned failover needs primary to answer"):
        plan_failover(flow, mode="planned", groups=group, dry_run=True)
    seconds = time.monotonic() - started
    print(f"plan_failover(planned), source refused: {seconds:.2f} s")
    assert seconds < REFUSED_GRACE_S + HANG_GUARD_S


@pytest.fixture
def silent_source() -> Iterator[str]:
    """A port that accepts TCP connections (the kernel's backlog) and never says a word: a hung broker."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_a_silent_source_costs_the_short_probe_not_the_cluster_timeout(
    kafka_clusters: Any, checkpointed: tuple[Path, str, str, str], silent_source: str, tmp_path: Path
) -> None:
    config, _dead, group, remote = checkpointed
    silent = tmp_path / "silent.properties"
    silent.write_text(config.read_text().replace(_dead, silent_source))
    args = ["translate", "--config", str(silent), "--flow", "primary->backup", "--group", group, "--json"]
    result, seconds = mirrorflow(*args)
    print(f"mirrorflow translate --json, source silent: {seconds:.2f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_librdkafka_log(result.stdout + result.stderr)
    assert result.stderr.strip().startswith(
        f"warning: cluster 'primary' (source of primary->backup, bootstrap.servers {silent_source}) did not answer "
        f"within {SOURCE_PROBE_S:.0f} s: no answer to a metadata request"
    ), result.stderr
    assert [(o["remote_topic"], o["downstream"]) for o in json.loads(result.stdout)["offsets"]] == [(remote, 12)]
    assert seconds < SOURCE_PROBE_S + HANG_GUARD_S


def test_refused_everywhere_is_sure_only_when_every_server_refuses(kafka_clusters: Any, silent_source: str) -> None:
    refused = f"127.0.0.1:{free_port()}"
    assert refused_everywhere(refused) == f"Connect to ipv4#{refused} failed: Connection refused"
    assert refused_everywhere("no-such-host.invalid:9092").startswith("Failed to resolve 'no-such-host.invalid:9092'")
    assert refused_everywhere(f"PLAINTEXT://{refused}, no-such-host.invalid:9092") is not None
    # Anything that may answer is left to the real check: a live broker, a silent one, a list with one of them.
    assert refused_everywhere(kafka_clusters.backup) is None
    assert refused_everywhere(silent_source, connect_timeout=0.2) is None
    assert refused_everywhere(f"{refused},{kafka_clusters.backup}") is None
    assert refused_everywhere("not a server list") is None
