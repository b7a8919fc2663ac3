"""The production-like topology (docker-compose.yaml) agrees with the repository.

There is no Docker engine on the machines this project is developed and tested on, so the compose file
can never be started here. What can go stale silently is checked instead: service references, the two
Kafka clusters' listeners and ports, the folders Airflow mounts, the versions the images install
(against pyproject.toml), and the mirrorflow configuration the DAGs read inside the containers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from mirrorflow.config import load_config
from mirrorflow_dev import CHECKOUT as REPO_ROOT
from mirrorflow_dev.devcluster import DEFAULT_CLUSTERS

COMPOSE_FILE = REPO_ROOT / "docker-compose.yaml"
KAFKA_SERVICES = {"primary": "kafka-primary", "backup": "kafka-backup"}
AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)
AIRFLOW_MOUNTS = ("dags", "include/config")
INTERNAL_PORT = 9092


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    """``name -> version`` of every pin in constraints.txt (the exact versions CI tests)."""
    found = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            found[name.strip().lower()] = version.strip()
    return found


# --------------------------------------------------------------------------
# Helpers: compose's short syntaxes
# --------------------------------------------------------------------------


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {key: str(value) for key, value in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """``dependency -> condition`` (the list syntax means ``service_started``)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def host_ports(service: dict[str, Any]) -> dict[int, int]:
    """``host port -> container port`` of the published ports (short and long syntax)."""
    published = {}
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            published[int(port["published"])] = int(port["target"])
            continue
        parts = str(port).split("/")[0].split(":")
        if len(parts) >= 2:
            published[int(parts[-2])] = int(parts[-1])
    return published


def mounts(service: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """``(source, target, read_only)`` of every volume entry (short and long syntax)."""
    found = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            found.append((volume["source"], volume["target"], bool(volume.get("read_only"))))
            continue
        source, target, *mode = str(volume).split(":")
        found.append((source, target, "ro" in (mode[0].split(",") if mode else [])))
    return found


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> repository path, for the bind mounts of repository folders."""
    return {
        target: (REPO_ROOT / source).resolve() for source, target, _ in mounts(service) if source.startswith((".", "/"))
    }


def to_repo_path(service: dict[str, Any], container_path: str) -> Path:
    """The repository file a path inside ``service``'s container shows (through its bind mounts)."""
    path = PurePosixPath(container_path)
    for target, source in sorted(bind_mounts(service).items(), key=lambda item: -len(item[0])):
        if path == PurePosixPath(target) or PurePosixPath(target) in path.parents:
            return source / path.relative_to(target)
    raise AssertionError(f"{container_path} is not inside a bind mount of the repository")


def dockerfile(service: dict[str, Any]) -> Path:
    build = service["build"]
    if isinstance(build, str):
        build = {"context": build}
    return REPO_ROOT / build.get("context", ".") / build.get("dockerfile", "Dockerfile")


def from_image(text: str) -> str:
    images = re.findall(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", text, flags=re.MULTILINE)
    assert images, "no FROM line"
    return images[-1]


def pinned_in(text: str) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` a Dockerfile installs."""
    return {name.lower(): version for name, version in re.findall(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.\-]+)", text)}


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """``NAME://host:port,...`` -> ``{NAME: (host, port)}``."""
    found = {}
    for item in value.split(","):
        name, _, address = item.strip().partition("://")
        host, _, port = address.rpartition(":")
        found[name] = (host, int(port))
    return found


# --------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------


def test_depends_on_names_services_that_exist(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for dependency, condition in depends_on(service).items():
            assert dependency in services, f"{name} depends on unknown service {dependency}"
            assert dependency != name
            assert condition in ("service_started", "service_healthy", "service_completed_successfully")
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency} to be healthy"


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for source, target, _ in mounts(service):
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}: volume {source} (at {target}) is not declared"


def test_header_says_what_it_is_and_how_to_start() -> None:
    header = COMPOSE_FILE.read_text().split("\n---", 1)[0]
    for words in ("production-like", "Apache Kafka", "docker compose up -d", "http://localhost:8080", "make demo"):
        assert words in header


# --------------------------------------------------------------------------
# Kafka: two independent clusters, ports matching the dev clusters
# --------------------------------------------------------------------------


def test_two_independent_kraft_clusters_on_the_dev_clusters_ports(services: dict[str, dict[str, Any]]) -> None:
    dev_ports = {spec.alias: spec.port for spec in DEFAULT_CLUSTERS}
    assert set(dev_ports) == set(KAFKA_SERVICES)
    cluster_ids, volumes = set(), set()
    for alias, name in KAFKA_SERVICES.items():
        service = services[name]
        env = environment(service)
        image, _, tag = service["image"].partition(":")
        assert image == "apache/kafka" and int(tag.split(".")[0]) >= 4, service["image"]
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@{name}:9093"

        advertised = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
        bound = listeners(env["KAFKA_LISTENERS"])
        internal = env["KAFKA_INTER_BROKER_LISTENER_NAME"]
        assert advertised[internal] == (name, INTERNAL_PORT), "containers reach the cluster at <service>:9092"
        (external,) = set(advertised) - {internal}
        assert advertised[external] == ("localhost", dev_ports[alias])
        assert bound[internal][1] == INTERNAL_PORT and bound[external][1] == dev_ports[alias]
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in bound
        protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        assert set(bound) <= set(protocols)

        assert host_ports(service) == {dev_ports[alias]: dev_ports[alias]}, f"{name}: {service.get('ports')}"
        assert (service.get("healthcheck") or {}).get("test"), f"{name} has no healthcheck"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1", "exactly-once needs transactions"
        cluster_ids.add(env["CLUSTER_ID"])
        (volume,) = [source for source, target, _ in mounts(service) if target == env["KAFKA_LOG_DIRS"]]
        volumes.add(volume)
    assert len(cluster_ids) == 2 and len(volumes) == 2, "two clusters, not two brokers of one"


# --------------------------------------------------------------------------
# Airflow
# --------------------------------------------------------------------------


def test_airflow_services_mount_the_repository_folders(services: dict[str, dict[str, Any]]) -> None:
    for name in AIRFLOW_SERVICES:
        binds = bind_mounts(services[name])
        for folder in AIRFLOW_MOUNTS:
            target = f"/opt/airflow/{folder}"
            assert target in binds, f"{name} does not mount {folder}/ at {target}"
            assert binds[target] == REPO_ROOT / folder and binds[target].is_dir()
        read_only = {target for _, target, ro in mounts(services[name]) if ro}
        assert {f"/opt/airflow/{folder}" for folder in AIRFLOW_MOUNTS} <= read_only


def test_airflow_settings(services: dict[str, dict[str, Any]]) -> None:
    for name in AIRFLOW_SERVICES:
        env = environment(services[name])
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"].lower() == "false"
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"].startswith("${AIRFLOW_JWT_SECRET:-"), "secret from the env"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-apiserver:")
        # mirrorflow is installed in the image (the provider), not put on the Python path from the repository.
        assert "PYTHONPATH" not in env
        assert env["AIRFLOW__CORE__TEST_CONNECTION"] == "Enabled"
        config = env["MIRRORFLOW_CONFIG"]
        assert to_repo_path(services[name], config).is_file()
    assert host_ports(services["airflow-apiserver"]) == {8080: 8080}
    assert depends_on(services["airflow-apiserver"])["airflow-init"] == "service_completed_successfully"
    init_env = environment(services["airflow-init"])
    assert init_env["_AIRFLOW_DB_MIGRATE"] == "true"
    user = init_env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[0]
    assert user in " ".join(services["airflow-init"]["command"]), "airflow-init writes the admin's password"


def test_spark_connection_is_the_spark_connect_server_on_the_standalone_master(
    services: dict[str, dict[str, Any]],
) -> None:
    connection = json.loads(environment(services["airflow-scheduler"])["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert connection == {"conn_type": "spark_connect", "host": "sc://spark-connect", "port": 15002}
    server = services["spark-connect"]
    command = server["command"]
    assert command[0] == "/opt/spark/sbin/start-connect-server.sh"
    assert command[command.index("--master") + 1] == "spark://spark-master:7077"
    assert "spark.connect.grpc.binding.port=15002" in command and host_ports(server)[15002] == 15002
    assert environment(server)["SPARK_NO_DAEMONIZE"] == "1"
    assert environment(server)["PYTHONPATH"].split(":")[0] == "/opt/mirrorflow/include"  # executors: import mirrorflow
    master = services["spark-master"]
    assert "7077" in master["command"] and 7077 in host_ports(master).values()
    assert host_ports(master)[8081] == 8080, "Spark master UI on the host's 8081 (Airflow has 8080)"
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]


def test_spark_connection_resolves_in_the_provider(services: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """The JSON connection gives the Spark Connect address we expect (checked by the installed hook)."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW_CONN_SPARK_DEFAULT": environment(services["airflow-scheduler"])["AIRFLOW_CONN_SPARK_DEFAULT"],
    }
    code = (
        "import json\n"
        "from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook\n"
        "print('RESULT ' + json.dumps(SparkConnectHook(conn_id='spark_default').get_connection_url()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("RESULT "))
    assert json.loads(line.removeprefix("RESULT ")) == "sc://spark-connect:15002/"


def test_spark_driver_is_reachable_from_the_executors(services: dict[str, dict[str, Any]]) -> None:
    """Tasks (and so the Spark driver, deploy-mode client) run in the scheduler: executors connect back."""
    env = environment(services["airflow-scheduler"])
    assert env["SPARK_LOCAL_IP"] == "airflow-scheduler" == env["SPARK_LOCAL_HOSTNAME"]
    assert env["PYSPARK_PYTHON"] == "python3", "resolved on the workers, whose python3 has confluent-kafka"


def test_spark_services_see_the_repository(services: dict[str, dict[str, Any]]) -> None:
    for name in ("spark-master", "spark-worker", "spark-connect"):
        service = services[name]
        assert bind_mounts(service)["/opt/mirrorflow"] == REPO_ROOT
        assert ("/opt/mirrorflow", True) in {(target, ro) for _, target, ro in mounts(service)}
        assert environment(service)["PYTHONPATH"].split(":")[0] == "/opt/mirrorflow/include"
        assert to_repo_path(service, "/opt/mirrorflow/include/mirrorflow/replication/copy.py").is_file()


# --------------------------------------------------------------------------
# Images: the same versions as pyproject.toml
# --------------------------------------------------------------------------


def test_dockerfiles_exist_and_pin_the_project_versions(
    services: dict[str, dict[str, Any]], pins: dict[str, str]
) -> None:
    built = {name: dockerfile(service) for name, service in services.items() if "build" in service}
    assert set(built) >= {*AIRFLOW_SERVICES, "spark-master", "spark-worker"}
    for name, path in built.items():
        assert path.is_file(), f"{name}: {path} does not exist"

    airflow_text = built["airflow-scheduler"].read_text()
    image, _, tag = from_image(airflow_text).partition(":")
    assert image == "apache/airflow" and tag.startswith(f"{pins['apache-airflow']}-python")
    assert pinned_in(airflow_text)["apache-airflow"] == pins["apache-airflow"], "pip must keep the image's Airflow"
    assert '-c constraints.txt "apache-airflow==' in airflow_text and '".[pyspark]"' in airflow_text, (
        "the image installs mirrorflow as a user does, at the versions CI tests"
    )
    context = REPO_ROOT / services["airflow-scheduler"]["build"]["context"]
    for source in re.findall(r"^COPY (?:--\S+ )*(.+) \S+$", airflow_text, flags=re.MULTILINE):
        for item in source.split():
            assert (context / item).exists(), f"airflow image: COPY {item} is not in the build context"
    assert "openjdk-17-jre-headless" in airflow_text, "spark-submit needs a Java runtime"

    spark_text = built["spark-worker"].read_text()
    assert pinned_in(spark_text)["confluent-kafka"] == pins["confluent-kafka"]
    spark_image, _, spark_tag = from_image(spark_text).partition(":")
    assert spark_image in ("apache/spark", "spark") and "python3" in spark_tag
    assert spark_tag.split("-")[0] == pins["pyspark"], "the cluster runs the driver's Spark version"
    # PySpark refuses tasks whose Python minor version differs from the driver's.
    airflow_python = tag.partition("-python")[2]
    assert re.search(rf"^ARG PYTHON_VERSION={re.escape(airflow_python)}$", spark_text, flags=re.MULTILINE)


# --------------------------------------------------------------------------
# The mirrorflow configuration inside the containers
# --------------------------------------------------------------------------


def test_mirrorflow_config_is_in_the_repository_and_names_the_kafka_services(
    services: dict[str, dict[str, Any]],
) -> None:
    paths = set()
    for name in AIRFLOW_SERVICES:
        container_path = environment(services[name])["MIRRORFLOW_CONFIG"]
        paths.add(to_repo_path(services[name], container_path))
    assert len(paths) == 1, f"the Airflow services read different files: {sorted(map(str, paths))}"
    (path,) = paths
    assert path.is_file(), f"MIRRORFLOW_CONFIG: {path} is not in the repository"

    config = load_config(path)
    assert set(config.clusters) == set(KAFKA_SERVICES)
    for alias, cluster in config.clusters.items():
        hosts = {server.strip() for server in cluster.bootstrap_servers.split(",")}
        assert hosts == {f"{KAFKA_SERVICES[alias]}:{INTERNAL_PORT}"}, f"{alias}: {hosts}"
        assert KAFKA_SERVICES[alias] in services
    # What the clients of the flow really use (MM2's precedence applied).
    (flow,) = config.enabled_flows()
    for (side, _role), settings in flow.clients.items():
        alias = flow.source if side == "source" else flow.target
        assert settings["bootstrap.servers"].value == f"{KAFKA_SERVICES[alias]}:{INTERNAL_PORT}"


def test_docker_config_has_the_example_flows_and_families() -> None:
    """docker.properties differs from the annotated example only in addresses and replication factors."""
    example = load_config(REPO_ROOT / "include" / "config" / "mm2.properties")
    docker = load_config(REPO_ROOT / "include" / "config" / "docker.properties")

    def shape(config: Any) -> list[tuple[str, list[tuple[str, str, str]]]]:
        return [
            (flow.name, [(f.name, str(f.topics), str(f.schedule)) for f in flow.families])
            for flow in config.enabled_flows()
        ]

    assert shape(docker) == shape(example)
    (flow,) = docker.enabled_flows()
    assert flow.get("topics") == example.enabled_flows()[0].get("topics")
    for key in ("replication.factor", "offset-syncs.topic.replication.factor", "checkpoints.topic.replication.factor"):
        assert flow.get(key) == "1", key
