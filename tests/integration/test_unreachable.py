"""An unreachable or unresolvable cluster: one line naming it, fast, on every entry point.

Each entry point is run as a user or Airflow runs it: ``mirrorflow`` as a separate process (through Spark,
whose launcher the CLI does not even start, and ``--in-process``), the Spark app through the venv's
``spark-submit``, and the mirror DAG's tasks with ``dag.test()``. The other cluster of the flow is a real one,
so the error must name exactly the dead cluster: alias, role and bootstrap servers. The requirement is 30 s;
the assertions allow 60 s so a loaded CI machine does not make them flaky, and each test prints its time.

The flows set ``mirrorflow.cluster.timeout`` to ``SHORT_TIMEOUT_S``: a dead cluster is named when the timeout (or
the grace after every broker refused, whichever is shorter) ends, so each entry point is checked to honour the
configured timeout without waiting out the default. One case keeps the default, end to end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorflow.cli import spark_submit_command
from mirrorflow_dev.devcluster import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 60.0  # the requirement is 30 s (default mirrorflow.cluster.timeout); headroom for a loaded machine
UNRESOLVABLE = "no-such-host.invalid:9092"  # .invalid never resolves (RFC 6761)
# (dead side, how it is dead): a free port nobody listens on (connection refused), or a name that never resolves.
CASES = [("source", "refused"), ("target", "refused"), ("source", "unresolvable")]
SHORT_TIMEOUT_S = 2
IDS = [f"{side}-{how}" for side, how in CASES]


def dead_bootstrap(how: str) -> str:
    return UNRESOLVABLE if how == "unresolvable" else f"127.0.0.1:{free_port()}"


def write_config(path: Path, primary: str, backup: str, prefix: str, timeout: int | None = SHORT_TIMEOUT_S) -> Path:
    path.write_text(
        (f"mirrorflow.cluster.timeout = {timeout}s\n" if timeout is not None else "") + "clusters = primary, backup\n"
        f"primary.bootstrap.servers = {primary}\n"
        f"backup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\n"
        f"primary->backup.topics = {prefix}\\\\..*\n"
        "primary->backup.mirrorflow.families = main\n"
        f"primary->backup.mirrorflow.family.main.topics = {prefix}\\\\..*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
    )
    return path


def config_with_dead(
    tmp_path: Path, clusters: Any, side: str, how: str, timeout: int | None = SHORT_TIMEOUT_S
) -> tuple[Path, str, str]:
    """(config file, the expected one-line error's start, the dead bootstrap) with one cluster dead; ``timeout``
    None leaves ``mirrorflow.cluster.timeout`` at its default."""
    dead = dead_bootstrap(how)
    primary, backup = (dead, clusters.backup) if side == "source" else (clusters.primary, dead)
    alias = "primary" if side == "source" else "backup"
    prefix = f"unr{uuid.uuid4().hex[:6]}"
    config = write_config(tmp_path / "mm2.properties", primary, backup, prefix, timeout)
    return (
        config,
        f"error: cluster '{alias}' ({side} of primary->backup, bootstrap.servers {dead}) did not answer",
        dead,
    )


def mirrorflow(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    exe = Path(sys.executable).parent / "mirrorflow"
    started = time.monotonic()
    result = subprocess.run(
        [str(exe), *args], check=False, capture_output=True, text=True, timeout=180, cwd=REPO, env=dict(os.environ)
    )
    return result, time.monotonic() - started


def assert_one_line(text: str, expected_start: str, how: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    line = lines[0]
    assert line.startswith(expected_start), line
    assert ("Failed to resolve" if how == "unresolvable" else "Connection refused") in line, line
    assert "Traceback" not in line and "KafkaException" not in line
    return line


@pytest.mark.parametrize("in_process", [False, True], ids=["spark", "in-process"])
@pytest.mark.parametrize(("side", "how"), CASES, ids=IDS)
def test_replicate_cli_names_the_dead_cluster_in_one_line(
    kafka_clusters: Any, tmp_path: Path, side: str, how: str, in_process: bool
) -> None:
    default_timeout = (side, how, in_process) == ("source", "refused", False)  # one case end to end as shipped
    config, expected, _dead = config_with_dead(
        tmp_path, kafka_clusters, side, how, None if default_timeout else SHORT_TIMEOUT_S
    )
    report = tmp_path / "report.json"
    args = ["replicate", "--config", str(config), "--flow", "primary->backup", "--family", "main"]
    result, seconds = mirrorflow(*args, "--report", str(report), *(["--in-process"] if in_process else []))
    print(f"mirrorflow replicate{' --in-process' if in_process else ''}, {side} {how}: {seconds:.1f} s")
    assert result.returncode == 2, result.stderr
    line = assert_one_line(result.stderr, expected, how)
    assert seconds < LIMIT_S
    assert "'primary'" not in line if side == "target" else "'backup'" not in line
    # The report says it too (the Airflow operator shows it as the task's failure).
    assert json.loads(report.read_text())["errors"] == [line.removeprefix("error: ")]


def test_debug_shows_librdkafka_log_and_still_exits_2(kafka_clusters: Any, tmp_path: Path) -> None:
    config, expected, dead = config_with_dead(tmp_path, kafka_clusters, "target", "refused")
    result, _ = mirrorflow("--debug", "replicate", "--in-process", "--config", str(config), "--flow", "primary->backup")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(expected)
    assert f"Connect to ipv4#{dead} failed" in result.stderr and "DEBUG" in result.stderr


@pytest.mark.parametrize(("side", "how"), CASES, ids=IDS)
def test_spark_app_fails_before_spark_starts(kafka_clusters: Any, tmp_path: Path, side: str, how: str) -> None:
    config, expected, _dead = config_with_dead(tmp_path, kafka_clusters, side, how)
    args = argparse.Namespace(
        master="local[2]", config=str(config), flow="primary->backup", family="main", duration=None, topics=None
    )
    args.report = str(tmp_path / "report.json")
    cmd, env = spark_submit_command(args)  # the venv's spark-submit, as `mirrorflow replicate` calls it
    started = time.monotonic()
    result = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True, timeout=300, cwd=REPO)
    seconds = time.monotonic() - started
    print(f"spark-submit mirror_family.py, {side} {how}: {seconds:.1f} s")
    assert result.returncode == 2, result.stdout + result.stderr
    # Spark's launcher merges the app's stderr into its stdout; its own stderr holds only the JVM's notice.
    assert_one_line(result.stdout, expected, how)
    jvm = [line for line in result.stderr.splitlines() if line.strip()]
    # The launcher's own notices only: the JVM's, and Hadoop's from resolving --py-files (the package zip).
    notices = ("WARNING: Using incubator modules", "WARN NativeCodeLoader: Unable to load native-hadoop library")
    assert all(any(notice in line for notice in notices) for line in jvm), result.stderr
    assert seconds < LIMIT_S
    assert "SparkContext" not in result.stdout + result.stderr  # no Spark start-up was paid


def test_checkpoints_and_translate_cli_name_a_dead_target(kafka_clusters: Any, tmp_path: Path) -> None:
    config, expected, _dead = config_with_dead(tmp_path, kafka_clusters, "target", "unresolvable")
    flow = ["--config", str(config), "--flow", "primary->backup"]
    for args in (["checkpoints", *flow], ["translate", *flow, "--group", "g"]):
        result, seconds = mirrorflow(*args)
        print(f"mirrorflow {args[0]}, target unresolvable: {seconds:.1f} s")
        assert result.returncode == 2, result.stderr
        assert_one_line(result.stderr, expected, "unresolvable")
        assert seconds < LIMIT_S


def _mirror_dag(config: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from mirrorflow_airflow.dags.mirror import mirror_dags

    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config))  # dag.test() parses dags/ with this config
    dag = mirror_dags(config)["mirror__primary__backup__main"]
    for task in dag.tasks:
        task.retries = 0  # the DAG retries (a cluster may come back); one attempt is what is tested here
    return dag


def assert_task_failed_with(output: str, expected: str, how: str, records: list[logging.LogRecord]) -> None:
    """The task log: the line alone at ERROR, then the failure whose message is that line (no chained traceback).

    The ERROR line is looked for in the task's output (the operator's own task logger) and in the stdlib log
    records: after an earlier dag.test() in the same session, the root handlers Airflow installed still
    write to that test's captured stream (a real task is a fresh process).
    """
    message = expected.removeprefix("error: ")
    logged = [line for line in output.splitlines() if "[error    ] " + message in line] + [
        r for r in records if r.levelno == logging.ERROR and r.getMessage().startswith(message)
    ]
    assert logged, output[-5000:]
    failure = [line for line in output.splitlines() if line.startswith("airflow.sdk.exceptions.AirflowException: ")]
    assert len(failure) == 1, output[-5000:]
    assert_one_line("error: " + failure[0].split(": ", 1)[1], expected, how)
    assert "During handling of the above exception" not in output
    assert "KafkaException" not in output


@pytest.mark.parametrize(("side", "how"), CASES, ids=IDS)
def test_mirror_dag_check_clusters_fails_with_the_line(
    kafka_clusters: Any,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    side: str,
    how: str,
) -> None:
    config, expected, _dead = config_with_dead(tmp_path, kafka_clusters, side, how)
    dag = _mirror_dag(config, monkeypatch)
    capfd.readouterr()
    started = time.monotonic()
    run = dag.test()
    seconds = time.monotonic() - started
    output = capfd.readouterr().out
    print(f"dag.test() check_clusters, {side} {how}: {seconds:.1f} s")
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["check_clusters"] == "failed"
    assert {states[t] for t in ("prepare_target", "replicate", "publish_report")} == {"upstream_failed"}
    assert_task_failed_with(output, expected, how, caplog.records)
    assert seconds < LIMIT_S


def test_mirror_dag_replicate_task_fails_with_the_spark_apps_line(
    kafka_clusters: Any,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Spark app's own line becomes the replicate task's failure, not "Cannot execute: spark-submit ..."."""
    config, expected, _dead = config_with_dead(tmp_path, kafka_clusters, "source", "unresolvable")
    dag = _mirror_dag(config, monkeypatch)
    capfd.readouterr()
    started = time.monotonic()
    # As if the cluster went away after check_clusters and prepare_target passed: only replicate meets it.
    run = dag.test(mark_success_pattern="check_clusters|prepare_target")
    seconds = time.monotonic() - started
    output = capfd.readouterr().out
    print(f"dag.test() replicate (spark-submit), source unresolvable: {seconds:.1f} s")
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert (states["replicate"], states["publish_report"]) == ("failed", "upstream_failed")
    assert_task_failed_with(output, expected, "unresolvable", caplog.records)
    assert "Cannot execute" not in output
    assert seconds < LIMIT_S


def test_a_failed_over_flow_skips_with_its_source_gone_but_not_with_its_target_gone(
    kafka_clusters: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a disaster failover the source is down for good: check_clusters skips instead of failing."""
    from airflow.sdk.exceptions import AirflowException, AirflowSkipException

    from mirrorflow.config import load_config
    from mirrorflow_airflow.dags import mirror as mirror_dag

    asked: list[str] = []

    def failed_over(flow: Any) -> str:
        asked.append(flow.name)
        return "2026-01-01T00:00:00+00:00"

    monkeypatch.setattr(mirror_dag, "failed_over_since", failed_over)
    config, _expected, _dead = config_with_dead(tmp_path, kafka_clusters, "source", "refused")
    with pytest.raises(AirflowSkipException, match="was failed over at 2026-01-01"):
        mirror_dag.checked_clusters(load_config(config).flow("primary", "backup"))
    assert asked == ["primary->backup"]

    asked.clear()
    config, expected, _dead = config_with_dead(tmp_path, kafka_clusters, "target", "refused")
    with pytest.raises(AirflowException) as info:
        mirror_dag.checked_clusters(load_config(config).flow("primary", "backup"))
    assert str(info.value).startswith(expected.removeprefix("error: "))
    assert asked == []  # the failover record lives on the dead target: not even asked
