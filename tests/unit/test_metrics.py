"""The status as Prometheus metrics, read back with the Prometheus client's own text parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mirrorflow.metrics import render
from mirrorflow.status import ERROR, FamilyStatus, FlowStatus, PartitionStatus

NOW_MS = 1_700_000_000_000


def partition(
    topic: str, number: int, lag: int, seconds: float, copied: int | None, status: str = "behind", lost: int = 0
) -> PartitionStatus:
    end = None if copied is None else copied + lag
    return PartitionStatus(
        topic, number, f"primary.{topic}", "orders", end, copied, lag, seconds, None, status, lost_records=lost
    )


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_every_figure_has_its_metric_with_flow_family_topic_partition_labels() -> None:
    st = FlowStatus("primary->backup", NOW_MS, seconds=0.25)
    st.families = [
        FamilyStatus(
            "orders",
            [
                partition('orders "eu"', 0, 12, 3.5, 100, lost=4),  # a quote: escaped by the library
                partition("orders", 1, 0, 0.0, 40),
                partition("orders", 2, 0, 0.0, None, status=ERROR),  # not measured: absent
            ],
        )
    ]
    st.heartbeat = {"age_seconds": 2.5, "threshold_seconds": 300.0}
    st.checkpoints = {"age_seconds": 61.0}
    st.groups = {"groups": 3, "groups_exact": 2}
    st.failover = {"state": "normal"}
    got = samples(render([st]))

    p0 = (("family", "orders"), ("flow", "primary->backup"), ("partition", "0"), ("topic", 'orders "eu"'))
    assert got[("mirrorflow_partition_lag_records", p0)] == 12
    assert got[("mirrorflow_partition_lag_seconds", p0)] == 3.5
    assert got[("mirrorflow_partition_lost_records", p0)] == 4
    assert got[("mirrorflow_records_copied_total", p0)] == 100
    p1 = p0[:2] + (("partition", "1"), ("topic", "orders"))
    assert got[("mirrorflow_partition_lag_seconds", p1)] == 0.0
    assert not any(dict(labels).get("partition") == "2" for _, labels in got)
    flow = (("flow", "primary->backup"),)
    assert got[("mirrorflow_heartbeat_age_seconds", flow)] == 2.5
    assert got[("mirrorflow_heartbeat_max_age_seconds", flow)] == 300.0
    assert got[("mirrorflow_checkpoint_age_seconds", flow)] == 61.0
    assert (got[("mirrorflow_checkpoint_groups", flow)], got[("mirrorflow_checkpoint_groups_exact", flow)]) == (3, 2)
    assert got[("mirrorflow_failed_over", flow)] == 0 and got[("mirrorflow_status_seconds", flow)] == 0.25
    assert got[("mirrorflow_cluster_up", (("cluster", "backup"), ("flow", "primary->backup")))] == 1


def test_what_was_not_measured_is_absent_not_zero() -> None:
    st = FlowStatus("primary->backup", NOW_MS, unreachable=["backup"])
    st.heartbeat = st.checkpoints = st.groups = st.failover = {"error": "cluster 'backup' did not answer"}
    got = samples(render([st]))
    names = {name for name, _ in got}
    assert not names & {
        "mirrorflow_heartbeat_age_seconds",
        "mirrorflow_checkpoint_age_seconds",
        "mirrorflow_failed_over",
    }
    assert got[("mirrorflow_cluster_up", (("cluster", "backup"), ("flow", "primary->backup")))] == 0
    assert got[("mirrorflow_cluster_up", (("cluster", "primary"), ("flow", "primary->backup")))] == 1
