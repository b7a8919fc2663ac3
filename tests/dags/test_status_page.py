"""The Replication page's app in process: a dead cluster is named (not hung on), and nothing is served anonymously.

The end-to-end test (Airflow's API server, its login, headless Chromium) is in
``tests/integration/test_demo_postgres.py``; this one checks the routes themselves with Airflow's
authentication dependency replaced, against clusters that refuse connections.
"""

from __future__ import annotations

import time
from pathlib import Path

import airflow  # noqa: F401 - puts the plugins folder on sys.path
import pytest
from airflow.api_fastapi.core_api.security import get_user
from fastapi.testclient import TestClient
from mirrorflow_airflow import status_page
from prometheus_client.parser import text_string_to_metric_families

from mirrorflow.devcluster import free_port


@pytest.fixture
def dead_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    primary, backup = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\nprimary->backup.topics = orders.*\n"
        "mirrorflow.cluster.timeout = 2s\nmirrorflow.family.orders.alerts.lag.max.seconds = 45\n"
        "primary->backup.mirrorflow.families = orders\nprimary->backup.mirrorflow.family.orders.topics = orders.*\n"
    )
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(path))
    monkeypatch.delenv("MIRRORFLOW_CONFIG_OVERRIDES", raising=False)
    status_page.CACHE.clear()
    yield path
    status_page.CACHE.clear()


def test_dead_clusters_are_named_on_the_page_and_in_the_metrics(dead_config: Path) -> None:
    app = status_page.create_app()
    app.dependency_overrides[get_user] = lambda: object()  # a logged-in user
    client = TestClient(app)

    started = time.monotonic()
    answer = client.get("/api/status")
    assert answer.status_code == 200 and time.monotonic() - started < 30  # the cluster check's bound, no hang
    [flow] = answer.json()["flows"]
    assert flow["flow"] == "primary->backup" and set(flow["unreachable"]) == {"primary", "backup"}
    assert any("cluster 'backup'" in e for e in flow["errors"]) and flow["partitions"] == []
    assert flow["dags"]["mirror"] == {
        "orders": "mirror__primary__backup__orders",
        "default": "mirror__primary__backup__default",
    }
    assert flow["dags"]["failover"] == "failover__primary__backup"
    assert flow["lag_threshold_seconds"]["orders"] == 45.0  # the family's lag alert threshold colours its rows

    samples = {
        (s.name, s.labels.get("cluster")): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
    }
    assert samples[("mirrorflow_cluster_up", "primary")] == 0 and samples[("mirrorflow_cluster_up", "backup")] == 0
    assert ("mirrorflow_heartbeat_age_seconds", None) not in samples  # not measured: absent, not 0

    page = client.get("/")
    assert page.status_code == 200 and "<h1>Replication</h1>" in page.text and "api/status" in page.text


def test_nothing_is_served_without_airflow_credentials(dead_config: Path) -> None:
    client = TestClient(status_page.create_app())
    for path in ("/api/status", "/metrics"):
        assert client.get(path).status_code == 401
    page = client.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
    assert page.status_code in (303, 401)  # 303 to the login page where an auth manager is configured
