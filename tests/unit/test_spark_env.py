"""What spark-submit and the executors get: the user's PYSPARK_PYTHON kept, the package zip, no repository path."""

from __future__ import annotations

import argparse
import sys

import pytest

from mirrorflow.cli import spark_submit_command
from mirrorflow.replication.pyfiles import package_zip
from mirrorflow.replication.spark_env import spark_environment


def test_a_cluster_master_keeps_the_users_python_and_pins_no_loopback() -> None:
    env = spark_environment(
        {"PATH": "/usr/bin", "PYSPARK_PYTHON": "/opt/py/bin/python"}, keep_choices=True, master="spark://master:7077"
    )
    assert env["PYSPARK_PYTHON"] == "/opt/py/bin/python"
    assert env["PYSPARK_DRIVER_PYTHON"] == sys.executable  # the driver runs here, with this installation
    assert "SPARK_LOCAL_IP" not in env  # executors elsewhere must reach the driver
    assert "PYTHONPATH" not in env


def test_a_local_master_pins_loopback_and_defaults_to_this_python() -> None:
    env = spark_environment({"PATH": "/usr/bin"}, keep_choices=True, master="local[*,4]")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and env["PYSPARK_PYTHON"] == sys.executable


def test_the_cli_ships_the_package_and_keeps_pyspark_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/py/bin/python")
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.setenv("SPARK_REMOTE", "sc://somewhere")
    args = argparse.Namespace(
        master="spark://m:7077",
        config="c.properties",
        flow="a->b",
        family="f",
        duration=None,
        topics=None,
        report=None,
        debug=False,
    )
    cmd, env = spark_submit_command(args)
    assert cmd[cmd.index("--py-files") + 1] == str(package_zip())
    assert cmd.index("--py-files") < next(i for i, c in enumerate(cmd) if c.endswith("mirror_family.py"))
    assert env["PYSPARK_PYTHON"] == "/opt/py/bin/python" and "SPARK_REMOTE" not in env
