"""The Airflow environment of the demo and the tests, and the demo's list of mirror DAGs.

Why these matter: a wrong folder, port or secret in this environment shows up much later as an
Airflow that lists no DAGs, a log server clashing with another run, tasks that look for the API on
port 8080, a JWT warning, or a password in a log.  All of it is checkable without starting Airflow.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from mirrorflow.config import load_config
from mirrorflow_dev import CHECKOUT as REPO_ROOT
from mirrorflow_dev.demo.airflow_env import admin_login, airflow_environment, jwt_secret, redact_url
from mirrorflow_dev.demo.stack import demo_dags

CONFIG = REPO_ROOT / "include" / "config" / "mm2.properties"
BASE = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/opt/lib", "HOME": "/home/someone", "LANG": "C.UTF-8"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return airflow_environment(tmp_path / "airflow", api_port=18080, config_path=CONFIG, base=BASE)


def test_folders_examples_and_api_binding(env: dict[str, str], tmp_path: Path) -> None:
    assert env["AIRFLOW_HOME"] == str(tmp_path / "airflow")
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO_ROOT / "dags")
    assert "AIRFLOW__CORE__PLUGINS_FOLDER" not in env  # the Replication page comes with the installed provider
    assert env["AIRFLOW__CORE__TEST_CONNECTION"] == "Enabled"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "4"
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert env["AIRFLOW__API__PORT"] == "18080"
    assert env["AIRFLOW__API__BASE_URL"] == "http://127.0.0.1:18080"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    assert int(env["AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL"]) <= 30
    assert int(env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"]) <= 30
    assert env["MIRRORFLOW_CONFIG"] == str(CONFIG)


def test_base_is_copied_not_changed(env: dict[str, str]) -> None:
    assert env["HOME"] == "/home/someone" and env["LANG"] == "C.UTF-8"
    assert BASE == {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/opt/lib", "HOME": "/home/someone", "LANG": "C.UTF-8"}


def test_default_base_is_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRRORFLOW_TEST_MARKER", "yes")
    env = airflow_environment(tmp_path / "a", api_port=18081, config_path=CONFIG)
    assert env["MIRRORFLOW_TEST_MARKER"] == "yes"
    assert os.environ.get("AIRFLOW_HOME") != str(tmp_path / "a")  # os.environ itself is not changed


def test_venv_first_on_path_and_spark_uses_this_python(env: dict[str, str]) -> None:
    venv_bin = str(Path(sys.executable).parent)
    path = env["PATH"].split(os.pathsep)
    assert path[0] == venv_bin and path.count(venv_bin) == 1
    assert path[1:] == ["/usr/bin", "/bin"]
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    # No repository on PYTHONPATH: this machine imports the installed package, executors get it with the job.
    assert env["PYTHONPATH"] == "/opt/lib"


def test_spark_connection(env: dict[str, str]) -> None:
    conn = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert conn == {"conn_type": "spark", "host": "local[*]", "extra": {"deploy-mode": "client"}}


def test_spark_connection_names_the_demos_spark_connect_server(tmp_path: Path) -> None:
    """The demo's replicate tasks submit to its Spark Connect server; the provider's hook reads the address back."""
    env = airflow_environment(
        tmp_path / "home", api_port=18080, config_path=tmp_path / "mm2.properties", spark_url="sc://127.0.0.1:15002"
    )
    conn = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert conn == {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": 15002}


def test_log_server_ports_are_free_distinct_and_not_the_defaults(env: dict[str, str]) -> None:
    ports = [int(env[k]) for k in ("AIRFLOW__API__PORT", "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT")]
    ports.append(int(env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"]))
    assert len(set(ports)) == 3
    assert not {8793, 8794} & set(ports)


def test_jwt_secret_is_long_private_and_stable(env: dict[str, str], tmp_path: Path) -> None:
    secret = env["AIRFLOW__API_AUTH__JWT_SECRET"]
    assert len(bytes.fromhex(secret)) >= 64
    stored = tmp_path / "airflow" / "jwt_secret"
    assert stored.read_text().strip() == secret
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    again = airflow_environment(tmp_path / "airflow", api_port=18090, config_path=CONFIG, base=BASE)
    assert again["AIRFLOW__API_AUTH__JWT_SECRET"] == secret
    assert jwt_secret(tmp_path / "other") != secret


def test_admin_login_from_a_private_passwords_file(env: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    assert passwords.parent == home
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600
    user, password = admin_login(home)
    assert user == "admin" and len(password) >= 12
    assert json.loads(passwords.read_text()) == {"admin": password}
    assert admin_login(home) == (user, password)  # deterministic once created


def test_an_existing_secret_file_is_kept_and_made_private(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "passwords.json").write_text('{"admin": "chosen-by-me"}')
    (home / "passwords.json").chmod(0o644)
    assert admin_login(home) == ("admin", "chosen-by-me")
    assert stat.S_IMODE((home / "passwords.json").stat().st_mode) == 0o600


def test_no_secret_in_repr(env: dict[str, str], tmp_path: Path) -> None:
    _user, password = admin_login(tmp_path / "airflow")
    secret = env["AIRFLOW__API_AUTH__JWT_SECRET"]
    for text in (repr(env), str(env), f"{env}"):
        assert secret not in text and password not in text
        assert "AIRFLOW__API_AUTH__JWT_SECRET" in text  # the key is shown, its value redacted
    assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == secret  # still the real value for the processes


def test_sqlite_in_the_home_is_the_default_database(env: dict[str, str], tmp_path: Path) -> None:
    """Tests' dag.test() uses a throwaway SQLite file; an inherited URL must never point them elsewhere."""
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path / 'airflow' / 'airflow.db'}"
    assert "AIRFLOW__CORE__EXECUTOR" not in env
    inherited = {**BASE, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://someone:pw@prod/airflow"}
    again = airflow_environment(tmp_path / "airflow", api_port=18080, config_path=CONFIG, base=inherited)
    assert again["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("sqlite:///")


def test_a_database_url_runs_the_local_executor_and_its_password_is_redacted(tmp_path: Path) -> None:
    url = "postgresql+psycopg2://mirrorflow:s3cr3t-Pw_x@127.0.0.1:15432/airflow"
    env = airflow_environment(tmp_path / "a", api_port=18080, config_path=CONFIG, base=BASE, database_url=url)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == url
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    for text in (repr(env), str(env)):
        assert "s3cr3t-Pw_x" not in text
        assert "postgresql+psycopg2://mirrorflow:[redacted]@127.0.0.1:15432/airflow" in text


def test_redact_url_keeps_everything_but_the_password() -> None:
    assert redact_url("postgresql://u:p%40ss@h:1/db") == "postgresql://u:[redacted]@h:1/db"
    assert redact_url("sqlite:////tmp/airflow.db") == "sqlite:////tmp/airflow.db"
    assert redact_url("http://127.0.0.1:8080/api") == "http://127.0.0.1:8080/api"


def test_dag_parsing_timeouts_are_set_deliberately(env: dict[str, str]) -> None:
    """A starved machine once took 20-44 s per DAG file (Airflow's default import timeout: 30 s); the processor's
    timeout is longer, so that a slow file fails with the import timeout's message naming it."""
    import_timeout = int(env["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"])
    assert import_timeout >= 120
    assert int(env["AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT"]) > import_timeout


def test_demo_dags_of_the_example_configuration() -> None:
    dags = {d.dag_id: d for d in demo_dags(load_config(CONFIG))}
    assert set(dags) == {
        "mirror__primary__backup__orders",
        "mirror__primary__backup__payments",
        "mirror__primary__backup__default",
    }
    assert dags["mirror__primary__backup__orders"].topics == (
        ("orders.eu", "primary.orders.eu"),
        ("orders.us", "primary.orders.us"),
    )
    assert dags["mirror__primary__backup__payments"].topics == (("payments.card", "primary.payments.card"),)
    assert dags["mirror__primary__backup__default"].topics == (("customers", "primary.customers"),)
    assert dags["mirror__primary__backup__orders"].schedule == "every 2m"


def test_the_demo_configuration_names_the_spark_pool() -> None:
    flows = load_config(CONFIG).enabled_flows()
    assert flows and {f.get("mirrorflow.spark.pool") for f in flows} == {"mirrorflow_spark"}
