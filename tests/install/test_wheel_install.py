"""mirrorflow as a user meets it: the wheel, installed into a fresh virtualenv outside the checkout.

The virtualenv first gets the lowest Airflow, PySpark and client library versions ``pyproject.toml`` declares (an
existing deployment), then the wheel: installing must leave that Airflow alone. Then, in a throwaway
``AIRFLOW_HOME`` with a three-line DAG file and an ``mm2.properties``, with no ``PYTHONPATH`` and nothing of the
checkout on the path: ``airflow providers list`` shows mirrorflow, every DAG imports, a mirror DAG run copies
records between the session's two embedded clusters, and the Replication page answers an authenticated request.

pip's cache is used (a second run downloads nothing); the time this adds is in docs/performance.md ("Install check").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from mirrorflow_dev import CHECKOUT
from mirrorflow_dev.devcluster import free_port
from tests.configs import write_family_config
from tests.kafka_helpers import create_topic, produce, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

#: The DAG file a user writes (three lines, every kind of mirrorflow DAG).
USER_DAG_FILE = """from mirrorflow_airflow.dags import checkpoints_dags, failover_dags, heartbeats_dags, mirror_dags, verify_dags
for factory in (mirror_dags, checkpoints_dags, heartbeats_dags, failover_dags, verify_dags):
    globals().update(factory())
"""

#: Packages whose lowest declared version the virtualenv gets before the wheel (the wheel's own dependencies and
#: its ``pyspark`` extra).
LOWEST_OF = (
    "apache-airflow",
    "apache-airflow-providers-apache-spark",
    "pyspark",
    "pyspark-client",
    "confluent-kafka",
    "pandas",
    "interegular",
    "prometheus-client",
)

#: Code the wheel must not hold: the development tooling, the tests, the demo.
NOT_SHIPPED = (
    "mirrorflow_dev/",
    "tests/",
    "mirrorflow/demo/",
    "mirrorflow/devcluster.py",
    "mirrorflow/sparkcluster.py",
)


def lowest_versions() -> dict[str, str]:
    """``name -> lower bound`` from pyproject.toml's dependencies and ``pyspark`` extra (each must have one)."""
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    found: dict[str, str] = {}
    for text in [*project["dependencies"], *project["optional-dependencies"]["pyspark"]]:
        requirement = Requirement(text)
        lower = [s.version for s in requirement.specifier if s.operator == ">="]
        assert lower, f"pyproject.toml: {text!r} has no lower bound"
        found[requirement.name.lower()] = lower[0]
    return {name: found[name] for name in LOWEST_OF}


def _run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path, timeout: float) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{' '.join(cmd[:4])}... exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


@dataclass
class Installed:
    root: Path
    python: Path
    wheel: Path
    before: dict[str, str]
    after: dict[str, str]

    @property
    def bin(self) -> Path:
        return self.python.parent

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment: this virtualenv's bin first, no PYTHONPATH, nothing of the checkout."""
        keep = {k: os.environ[k] for k in ("HOME", "LANG", "JAVA_HOME", "TMPDIR") if k in os.environ}
        return {**keep, "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", **extra}

    def versions(self) -> dict[str, str]:
        return versions(self.python, self.root)


def versions(python: Path, cwd: Path) -> dict[str, str]:
    out = _run([str(python), "-m", "pip", "list", "--format=json"], cwd=cwd, timeout=120)
    return {item["name"].lower(): item["version"] for item in json.loads(out)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # No isolation: the checkout's virtualenv has setuptools; an isolated build would fetch it again.
    _run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(CHECKOUT)],
        cwd=out,
        timeout=300,
    )
    (built,) = out.glob("mirrorflow-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("user")
    assert not root.is_relative_to(CHECKOUT)
    _run([sys.executable, "-m", "venv", str(root / "venv")], cwd=root, timeout=120)
    python = root / "venv" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    lowest = lowest_versions()
    # An existing deployment at the lowest declared versions; pyspark reinstalled last, as `make install` does, so
    # that its own Python files are the ones left where pyspark-client wrote the same paths.
    deployment = Path(__file__).with_name("lowest-deployment.txt")
    _run(
        [*pip, "-c", str(deployment), *(f"{name}=={version}" for name, version in lowest.items())],
        cwd=root,
        timeout=900,
    )
    _run([*pip, "--no-deps", "--force-reinstall", f"pyspark=={lowest['pyspark']}"], cwd=root, timeout=600)
    before = versions(python, root)
    _run([*pip, f"{wheel}[pyspark]"], cwd=root, timeout=900)
    return Installed(root, python, wheel, before, versions(python, root))


def test_the_wheel_holds_the_library_and_the_provider_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert not [n for n in names if n.startswith(NOT_SHIPPED)], "development or test code in the wheel"
    for needed in (
        "mirrorflow/spark_app/mirror_family.py",
        "mirrorflow_airflow/plugins/status_page.html",
        "mirrorflow_airflow/hooks/kafka.py",
        "mirrorflow_airflow/dags/mirror.py",
    ):
        assert needed in names
    assert "provider_info = mirrorflow_airflow:get_provider_info" in entry_points
    assert "mirrorflow = mirrorflow_airflow.plugins.replication_page:MirrorflowStatusPlugin" in entry_points
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert runtime and all(">=" in r for r in runtime), f"exact pins in the wheel's requirements: {runtime}"
    assert not [r for r in runtime if r.split(">")[0].strip() in ("noida-db", "pgserver", "psycopg2-binary", "pytest")]


def test_installing_the_wheel_leaves_the_deployments_airflow_and_pyspark_alone(installed: Installed) -> None:
    lowest = lowest_versions()
    for name in ("apache-airflow", "apache-airflow-core", "pyspark"):
        assert installed.after[name] == installed.before[name], f"pip install of the wheel changed {name}"
    assert installed.after["apache-airflow"] == lowest["apache-airflow"]
    assert installed.after["pyspark"] == lowest["pyspark"]
    assert installed.after["mirrorflow"] == "0.1.0"


@pytest.fixture(scope="module")
def deployment(installed: Installed, kafka_clusters: Any) -> Iterator[tuple[Path, dict[str, str], str]]:
    """A throwaway AIRFLOW_HOME with the user's DAG file and configuration; yields (home, environment, topic)."""
    home = installed.root / "airflow"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "mirrorflow.py").write_text(USER_DAG_FILE)
    prefix = f"whl{uuid.uuid4().hex[:6]}"
    write_family_config(home / "mm2.properties", kafka_clusters, prefix)
    topic = create_topic(kafka_clusters.primary, f"{prefix}.events", partitions=2)
    produce(kafka_clusters.primary, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(30)])
    env = installed.env(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
        # Relative: taken from AIRFLOW_HOME, as documented.
        MIRRORFLOW_CONFIG="mm2.properties",
        MIRRORFLOW_HOME=str(installed.root / "state"),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps(
            {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}
        ),
    )
    _run([str(installed.bin / "airflow"), "db", "migrate"], env=env, cwd=installed.root, timeout=600)
    yield home, env, topic


def test_airflow_lists_the_provider_and_a_mirror_dag_run_copies_records(
    installed: Installed, deployment: tuple[Path, dict[str, str], str], kafka_clusters: Any
) -> None:
    home, env, topic = deployment
    providers = _run(
        [str(installed.bin / "airflow"), "providers", "list", "-o", "json"], env=env, cwd=home, timeout=300
    )
    listed = {p["package_name"]: p for p in json.loads(providers[providers.index("[") :])}
    assert "mirrorflow" in listed and listed["mirrorflow"]["version"] == "0.1.0"

    script = Path(__file__).with_name("user_deployment.py")
    out = _run(
        [str(installed.python), str(script)],
        env={**env, "MIRROR_DAG": "mirror__primary__backup__main"},
        cwd=home,
        timeout=900,
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert not result["import_errors"]
    for kind in ("mirror", "checkpoints", "heartbeats", "failover", "verify"):
        assert any(d.startswith(f"{kind}__primary__backup") for d in result["dag_ids"]), f"no {kind} DAG"
    site = installed.root / "venv"
    for package in ("mirrorflow", "mirrorflow_airflow"):
        assert Path(result[package]).is_relative_to(site), f"{package} imported from {result[package]}"
    assert set(result["states"].values()) == {"success"}, result["states"]
    report = result["report"]
    assert report["ok"] is True and report["records"] == 30 and report["lag"] == 0, json.dumps(report)[:4000]
    assert len(read_all(kafka_clusters.backup, f"primary.{topic}")) == 30


def test_the_replication_page_answers_an_authenticated_request(
    installed: Installed, deployment: tuple[Path, dict[str, str], str]
) -> None:
    home, env, _topic = deployment
    port = free_port()
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"admin": "s3cret-admin"}))
    server_env = {
        **env,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex * 2,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    }
    log = (home / "api-server.log").open("w")
    server = subprocess.Popen(
        [str(installed.bin / "airflow"), "api-server", "--port", str(port)],
        env=server_env,
        cwd=home,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        token = _token(base, server, home / "api-server.log")
        request = urllib.request.Request(f"{base}/mirrorflow/api/status", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
        assert response.status == 200
        assert [f["flow"] for f in body["flows"]] == ["primary->backup"], body
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/mirrorflow/api/status", timeout=60)
        assert refused.value.code in (401, 403)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()


def _token(base: str, server: subprocess.Popen[bytes], log: Path, timeout: float = 240.0) -> str:
    """Log in as the admin (Airflow's simple auth manager) once the API server answers."""
    deadline = time.monotonic() + timeout
    body = json.dumps({"username": "admin", "password": "s3cret-admin"}).encode()
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the API server exited: {log.read_text()[-3000:]}"
        try:
            request = urllib.request.Request(
                f"{base}/auth/token", data=body, headers={"Content-Type": "application/json"}, method="POST"
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return str(json.loads(response.read())["access_token"])
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(1.0)
    raise AssertionError(f"the API server did not answer within {timeout:.0f} s: {log.read_text()[-3000:]}")


def test_shutil_finds_no_checkout_path_in_the_users_environment(installed: Installed) -> None:
    env = installed.env()
    assert "PYTHONPATH" not in env
    assert not [entry for entry in env["PATH"].split(":") if Path(entry).is_relative_to(CHECKOUT)]
    assert shutil.which("airflow", path=env["PATH"]) == str(installed.bin / "airflow")
