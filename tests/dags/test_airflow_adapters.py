"""The Airflow adapters: connections as cluster settings (masked), the Spark app's arguments and environment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import airflow.settings  # noqa: F401 - Airflow puts plugins/ (mirrorflow_airflow) on sys.path
import pytest

from mirrorflow.config import overrides as ov
from mirrorflow.replication.spark_env import spark_environment


@pytest.fixture
def kafka_connection(monkeypatch: pytest.MonkeyPatch) -> str:
    secret = "s3cr3t-connection-password"
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_PRIMARY",
        json.dumps(
            {
                "conn_type": "generic",
                "host": "10.0.0.1,10.0.0.2",
                "port": 9093,
                "login": "mirror",
                "password": secret,
                "extra": {"sasl.mechanism": "SCRAM-SHA-256", "client.rack": "eu-1a"},
            }
        ),
    )
    return secret


def test_a_kafka_alias_connection_overrides_the_file_and_its_secrets_are_masked(kafka_connection: str) -> None:
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    from mirrorflow_airflow.hooks.config import MirrorflowHook

    hook = MirrorflowHook()
    config = hook.load()
    primary = config.clusters["primary"].properties
    assert primary["bootstrap.servers"].value == "10.0.0.1:9093,10.0.0.2:9093"
    assert primary["client.rack"].value == "eu-1a"
    assert config.clusters["backup"].properties["bootstrap.servers"].value == "127.0.0.1:29092"  # no connection
    assert kafka_connection not in redact(f"password={kafka_connection}")
    jaas = primary["sasl.jaas.config"].value
    assert redact(jaas) != jaas
    env = hook.spark_environment()
    assert ov.from_environment(env) == hook.overrides


def test_settings_from_the_environment_apply_in_tasks_and_a_webhook_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    from mirrorflow.config.properties import Entry
    from mirrorflow_airflow.hooks.config import MirrorflowHook
    from mirrorflow_dev.demo.alert_sink import SinkEndpoint
    from mirrorflow_dev.demo.stack import alert_settings

    url = "http://127.0.0.1:9/alerts-7f3a9c2e1b"
    monkeypatch.setenv(ov.ENV_VAR, alert_settings(SinkEndpoint(url, Path("/tmp/alerts.jsonl"))))
    hook = MirrorflowHook()
    assert hook.flow("primary->backup").get("mirrorflow.alerts.webhook.url") == url
    assert url not in redact(f"posting to {url}")
    assert ov.from_environment(hook.spark_environment())[0] == Entry(
        "mirrorflow.alerts.webhook.url", url, "the demo's alert receiver", 0
    )


def test_the_spark_app_gets_its_arguments_from_the_params(tmp_path: Path) -> None:
    from mirrorflow_airflow.operators.mirror_family import app_arguments

    report = tmp_path / "r.json"
    base = ["--config", "c.properties", "--flow", "a->b", "--family", "orders", "--report", str(report)]
    assert app_arguments(Path("c.properties"), "a->b", "orders", {}, report) == base
    assert app_arguments(
        Path("c.properties"), "a->b", "orders", {"duration": "10m", "topics": " orders.eu, ,orders.us "}, report
    ) == [*base, "--duration", "10m", "--topics", "orders.eu,orders.us"]
    with pytest.raises(ValueError, match="not a duration"):
        app_arguments(Path("c.properties"), "a->b", "orders", {"duration": "10"}, report)


def test_spark_submit_and_the_executors_use_this_installation() -> None:
    env = spark_environment({"PATH": "/usr/bin", "PYSPARK_PYTHON": "/opt/py"}, keep_choices=True)
    venv_bin = str(Path(sys.executable).parent)
    assert env["PATH"] == os.pathsep.join([venv_bin, "/usr/bin"])
    assert env["PYSPARK_PYTHON"] == "/opt/py"  # an operator's choice is kept (cluster masters)
    assert env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert spark_environment({"PATH": env["PATH"]}, keep_choices=True)["PATH"] == env["PATH"]  # never added twice


def test_spark_submit_lines_keep_their_level() -> None:
    import logging

    from mirrorflow_airflow.operators.mirror_family import line_level

    assert line_level("26/11/22 12:00:01 WARN SparkContext: Using an existing SparkContext") == logging.WARNING
    assert line_level("26/11/22 12:00:01 ERROR Executor: Exception in task 0.0") == logging.ERROR
    assert line_level("2026-11-22 12:00:01,123 WARNING mirrorflow.replication.run: retrying") == logging.WARNING
    assert line_level("26/11/22 12:00:01 INFO SparkContext: Running Spark version 4.3.0") == logging.INFO
    assert line_level("  orders[0]  primary.orders  20  0..19  20  0  copied") == logging.INFO
    assert line_level("Traceback (most recent call last):") == logging.INFO


def test_a_replicate_task_stopped_from_outside_says_so_and_interrupts_its_jobs(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from mirrorflow_airflow.operators.mirror_family import MirrorFamilyOperator

    class Jobs:
        interrupted = False

        def interrupt(self) -> None:
            self.interrupted = True

    operator = MirrorFamilyOperator(task_id="replicate", flow="primary->backup", family="orders")
    jobs = Jobs()
    operator._connect_executor = jobs
    operator.on_kill()
    assert jobs.interrupted
    logged = "".join(capfd.readouterr())
    assert "error" in logged and "replicate was stopped from outside" in logged, logged
