"""The Replication page's app in process: a dead cluster is named (not hung on), and nothing is served anonymously.

The end-to-end test (Airflow's API server, its login, headless Chromium) is in
``tests/integration/test_demo_postgres.py``; this one checks the routes themselves with Airflow's
authentication dependency replaced, against clusters that refuse connections, and the paging and summary
of a whole-cluster flow on a synthetic status of 10,000 partitions (no broker).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import airflow  # noqa: F401 - puts the plugins folder on sys.path
import pytest
from airflow.api_fastapi.core_api.security import get_user
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from mirrorflow_airflow.plugins import status_app as status_page
from mirrorflow_dev.devcluster import free_port


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


# ------------------------------------------------------------------ a whole-cluster flow: summary and pages

TOPICS, PARTITIONS = 1_000, 10


def synthetic_flow(name: str = "primary->backup") -> tuple[Any, dict[str, Any]]:
    """A status of 1,000 topics x 10 partitions, no broker: every partition of ``orders.0xyz`` lags xyz records,
    ``orders.0042`` partition 3 has an error; and the page extras of such a flow."""
    from mirrorflow.status import FamilyStatus, FlowStatus, partition_status
    from mirrorflow.topics import TopicPlan

    now_ms = int(time.time() * 1000)
    family = FamilyStatus("orders", schedule="@continuous")
    for t in range(TOPICS):
        plan = TopicPlan(f"orders.{t:04d}", f"primary.orders.{t:04d}", PARTITIONS)
        for i in range(PARTITIONS):
            end: int | str = "NOT_LEADER_FOR_PARTITION" if (t, i) == (42, 3) else 1_000 + t
            stamps = (None, now_ms - 1_000 * t) if t else (None, None)
            family.partitions.append(partition_status(plan, i, "orders", end, 0, 999, stamps, now_ms))
    status = FlowStatus(name, now_ms, families=[family], seconds=1.5)
    extras = {"flow": name, "dags": {"mirror": {"orders": "mirror__primary__backup__orders"}}}
    return status, {**extras, "lag_threshold_seconds": {"orders": 60.0}}


@pytest.fixture
def wide_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app over a synthetic status of 10,000 partitions (and a second, small flow), computed once."""
    computed: list[int] = []
    big, big_extras = synthetic_flow()
    small, small_extras = synthetic_flow("primary->dr")
    small.families[0].partitions = small.families[0].partitions[:20]

    def compute() -> tuple[list[Any], list[dict[str, Any]]]:
        computed.append(1)
        return [big, small], [big_extras, small_extras]

    monkeypatch.setattr(status_page, "compute", compute)
    monkeypatch.setattr(status_page, "CACHE", status_page.StatusCache(ttl=3600))  # however slow the machine
    app = status_page.create_app()
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app)
    assert len(computed) <= 1  # every request of the test shared one computation


def test_the_page_asks_for_one_page_of_a_wide_flow_worst_first(wide_app: TestClient) -> None:
    answer = wide_app.get("/api/status", params={"limit": 100, "topics_limit": 50, "flow": "primary->backup"})
    assert answer.status_code == 200
    [flow] = answer.json()["flows"]
    assert (flow["partitions_total"], flow["topics_total"]) == (TOPICS * PARTITIONS, TOPICS)
    assert flow["partitions_page"] == {"offset": 0, "limit": 100, "matched": 10_000, "shown": 100}
    assert flow["topics_page"] == {"offset": 0, "limit": 50, "matched": 1_000, "shown": 50}
    assert (flow["partitions"][0]["topic"], flow["partitions"][0]["status"]) == ("orders.0042", "error")
    assert [p["topic"] for p in flow["partitions"][1:11]] == ["orders.0999"] * 10  # then the oldest lag
    assert [t["topic"] for t in flow["topics"][:3]] == ["orders.0042", "orders.0999", "orders.0998"]
    top = flow["topics"][1]
    assert (top["partitions"], top["partitions_behind"], top["failures"], top["lag_records"]) == (10, 10, 0, 10 * 999)
    assert top["max_lag_seconds"] == pytest.approx(999, abs=1)
    assert flow["topics"][0]["failures"] == 1 and "NOT_LEADER_FOR_PARTITION" in flow["topics"][0]["error"]
    [family] = flow["families"]
    assert (family["topics"], family["partitions"], family["partitions_behind"], family["failures"]) == (
        1_000,
        10_000,
        9_989,  # orders.0000 lags 0, one partition of orders.0042 is an error
        1,
    )
    assert flow["dags"]["mirror"] == {"orders": "mirror__primary__backup__orders"}
    assert len(answer.content) < 200_000  # a page, not 10,000 rows

    following = wide_app.get("/api/status", params={"flow": "primary->backup", "limit": 100, "offset": 100}).json()
    seen = {(p["topic"], p["partition"]) for p in flow["partitions"]}
    rows = following["flows"][0]["partitions"]
    assert len(rows) == 100 and not seen & {(p["topic"], p["partition"]) for p in rows}
    assert rows[0]["lag_seconds"] <= flow["partitions"][-1]["lag_seconds"]  # the order goes on


def test_a_topic_filter_and_a_family_filter_in_the_api(wide_app: TestClient) -> None:
    params = {"flow": "primary->backup", "topic": "ORDERS.004", "limit": 5, "topics_limit": 3}
    [flow] = wide_app.get("/api/status", params=params).json()["flows"]
    assert flow["topics_page"]["matched"] == 10 and flow["partitions_page"]["matched"] == 100
    assert [t["topic"] for t in flow["topics"]] == ["orders.0042", "orders.0049", "orders.0048"]
    assert {p["topic"] for p in flow["partitions"]} <= {f"orders.004{i}" for i in range(10)}
    assert flow["filter"] == {"topic": "ORDERS.004", "family": None}
    none = wide_app.get("/api/status", params={**params, "family": "payments"}).json()["flows"][0]
    assert (none["topics"], none["partitions"], none["topics_page"]["matched"]) == ([], [], 0)


def test_without_parameters_the_answer_is_every_partition_as_before(wide_app: TestClient) -> None:
    body = wide_app.get("/api/status").json()
    assert [f["flow"] for f in body["flows"]] == ["primary->backup", "primary->dr"]
    big, small = body["flows"]
    assert len(big["partitions"]) == 10_000 and len(big["topics"]) == 1_000 and len(small["partitions"]) == 20
    before = {"flow", "checked_at_ms", "seconds", "lag_records", "max_lag_seconds", "families", "partitions"}
    before |= {"heartbeat", "checkpoints", "groups", "failover", "runs", "errors", "unreachable", "dags"}
    assert before | {"lag_threshold_seconds"} <= set(big)
    assert {"topic", "partition", "remote_topic", "family", "lag_records", "lag_seconds", "status"} <= set(
        big["partitions"][0]
    )
    assert {"age_seconds", "refresh_seconds"} <= set(body)
    assert wide_app.get("/api/status", params={"limit": -1}).status_code == 422


def test_metrics_of_ten_thousand_partitions(wide_app: TestClient) -> None:
    text = wide_app.get("/metrics").text
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    lag = [s for s in samples if s.name == "mirrorflow_partition_lag_records" and s.labels["flow"] == "primary->backup"]
    assert len(lag) == 10_000 - 1  # the partition in error is absent, not 0
    assert wide_app.get("/metrics").text == text  # rendered once per computation, then served again


def test_the_page_asks_for_pages_and_filters(wide_app: TestClient) -> None:
    page = wide_app.get("/").text
    for hook in ("limit: ROWS", "topics_limit: TOPIC_ROWS", 'q.set("topic"', "data-filter", "data-pager"):
        assert hook in page


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.timeout(180)
def test_in_a_browser_the_page_shows_a_page_of_topics_and_partitions_and_pages_and_filters(
    wide_app: TestClient,
) -> None:
    """The page's own script in headless Chromium against the app (served by uvicorn on a free port)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium): the in-browser part was not run")
    import threading

    import uvicorn

    from mirrorflow_dev.docs.screenshots import browser_context

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(wide_app.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        with browser_context(str(CHROMIUM)) as context:
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{port}/", wait_until="networkidle")
            page.locator("body[data-loaded]").wait_for()
            big = page.locator("section.flow[data-flow='primary->backup']")
            assert big.locator("table.partitions tbody tr").count() == 100
            assert big.locator("table.topics tbody tr").count() == 50
            first = big.locator("table.topics tbody tr").first
            assert first.get_attribute("data-topic") == "orders.0042" and "lost" in (first.get_attribute("class") or "")
            assert "partitions 1–100 of 10,000" in big.locator("[data-pager=partitions]").inner_text()

            big.locator("[data-pager=partitions] button[data-page=next]").click()
            big.locator("[data-pager=partitions]", has_text="101–200").wait_for()
            big = page.locator("section.flow[data-flow='primary->backup']")
            assert big.locator("table.partitions tbody tr").first.get_attribute("data-topic") == "orders.0990"

            big.locator("input[data-filter]").fill("orders.017")
            big.locator("[data-pager=topics]", has_text="of 10").wait_for()
            big = page.locator("section.flow[data-flow='primary->backup']")
            assert big.locator("table.topics tbody tr").first.get_attribute("data-topic") == "orders.0179"
            assert big.locator("input[data-filter]").input_value() == "orders.017"  # kept while typing
            big.locator("table.topics tbody tr[data-topic='orders.0175'] a").click()
            big.locator("[data-pager=partitions]", has_text="1–10 of 10").wait_for()
            big = page.locator("section.flow[data-flow='primary->backup']")
            rows = big.locator("table.partitions tbody tr")
            assert {rows.nth(i).get_attribute("data-topic") for i in range(rows.count())} == {"orders.0175"}
            small = page.locator("section.flow[data-flow='primary->dr']")  # another flow keeps its own pages
            assert small.locator("table.partitions tbody tr").count() == 20
    finally:
        server.should_exit = True
        thread.join(10)
