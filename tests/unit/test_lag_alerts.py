"""Lag alerting without Airflow: thresholds per flow and family, one alert per family breach, one recovery, retries."""

from __future__ import annotations

import json

import pytest

from mirrorflow import lag_alerts, status
from mirrorflow.alerts import AlertState
from mirrorflow.config import ConfigError, parse_config
from mirrorflow.lag_alerts import (
    alert_text,
    decide,
    lag_payload,
    measure,
    states_from_dict,
    states_to_dict,
    thresholds,
)
from mirrorflow.status import FamilyStatus, FlowStatus, PartitionStatus

BASE = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
FAMILIES = "a->b.mirrorflow.families = orders, bulk\nmirrorflow.family.orders.topics = orders.*\n"
FAMILIES += "mirrorflow.family.bulk.topics = bulk.*\n"
FLOW = "a->b"


def part(topic: str, partition: int, seconds: float, records: int, state: str = status.BEHIND) -> PartitionStatus:
    return PartitionStatus(
        topic, partition, f"a.{topic}", topic.split("-")[0], 100, 100 - records, records, seconds, None, state
    )


def flow_status(*partitions: PartitionStatus, at_ms: int = 1_000_000, errors: list[str] | None = None) -> FlowStatus:
    families: dict[str, FamilyStatus] = {}
    for p in partitions:
        families.setdefault(p.family, FamilyStatus(p.family)).partitions.append(p)
    return FlowStatus(FLOW, at_ms, list(families.values()), errors=errors or [])


# -- the configuration ---------------------------------------------------------------------------------------------


def test_thresholds_are_off_by_default() -> None:
    flow = parse_config(BASE + FAMILIES).flow("a", "b")
    assert flow.get("mirrorflow.alerts.lag.max.seconds") == ""
    assert thresholds(flow) == {}


def test_a_family_threshold_wins_over_the_flows_and_zero_turns_it_off() -> None:
    flow = parse_config(
        BASE + FAMILIES + "a->b.mirrorflow.alerts.lag.max.seconds = 300\n"
        "mirrorflow.family.orders.alerts.lag.max.seconds = 60\n"
        "a->b.mirrorflow.family.bulk.alerts.lag.max.seconds = 0\n"
    ).flow("a", "b")
    assert thresholds(flow) == {"orders": 60, "default": 300}
    # a top-level value applies to every flow; a family of its own only
    flow = parse_config(BASE + FAMILIES + "mirrorflow.family.default.alerts.lag.max.seconds = 90\n").flow("a", "b")
    assert thresholds(flow) == {"default": 90}
    assert lag_alerts.family_key("orders") == "mirrorflow.family.orders.alerts.lag.max.seconds"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("mirrorflow.alerts.lag.max.seconds = 1m\n", "'1m' is not an integer"),
        ("a->b.mirrorflow.alerts.lag.max.seconds = -1\n", "'-1' is below the minimum 0"),
        ("mirrorflow.family.orders.alerts.lag.max.seconds = soon\n", "'soon' is not an integer"),
        ("mirrorflow.family.nope.alerts.lag.max.seconds = 60\n", "family 'nope' is configured but not listed"),
        ("mirrorflow.family.orders.alerts.lag.max = 60\n", "unknown family setting 'alerts.lag.max'"),
    ],
)
def test_bad_thresholds_are_refused_at_their_line(line: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as bad:
        parse_config(BASE + FAMILIES + line)
    assert ":8: error:" in str(bad.value)  # the line of the value (BASE has 4 lines, FAMILIES 3)
    assert str(bad.value).count("error:") == 1


# -- measuring -----------------------------------------------------------------------------------------------------


def test_over_means_strictly_above_and_the_worst_comes_first() -> None:
    measured = measure(
        flow_status(
            part("orders", 0, 60.0, 5),
            part("orders", 1, 130.5, 2),
            part("orders", 2, 61.0, 40),
            part("orders", 3, 0.0, 0, status.CAUGHT_UP),
        ),
        {"orders": 60},
    )
    [orders] = measured
    assert [(p.topic, p.partition) for p in orders.over] == [("orders", 1), ("orders", 2)]
    assert (orders.in_breach, orders.measured, orders.partitions, orders.worst.partition) == (True, True, 4, 1)


def test_partitions_in_error_leave_a_family_without_verdict_unless_another_is_over() -> None:
    broken = part("orders", 1, 0.0, 0, status.ERROR)
    [quiet] = measure(flow_status(part("orders", 0, 1.0, 1), broken), {"orders": 60})
    assert (quiet.in_breach, quiet.measured, quiet.unmeasured) == (False, False, 1)
    [loud] = measure(flow_status(part("orders", 0, 99.0, 1), broken), {"orders": 60})
    assert (loud.in_breach, loud.measured) == (True, True)
    [absent] = measure(flow_status(errors=["error: cluster 'a' (source of a->b) did not answer"]), {"orders": 60})
    assert (absent.measured, absent.error) == (False, "error: cluster 'a' (source of a->b) did not answer")
    assert lag_alerts.ERROR == status.ERROR  # a copy (status imports the Kafka client), kept equal here


# -- deciding ------------------------------------------------------------------------------------------------------


def evaluations(*seconds: float, threshold: int = 60) -> list[str | None]:
    """Kinds sent by consecutive runs where orders[0] is ``s`` seconds behind; state kept as the Variable keeps it."""
    states: dict[str, AlertState] = {}
    kinds: list[str | None] = []
    for i, lag in enumerate(seconds):
        st = flow_status(part("orders", 0, lag, 3 if lag else 0), at_ms=1_000_000 + i * 60_000)
        [item] = decide(st, {"orders": threshold}, states, by=f"run-{i}")
        assert item.decision is not None
        kinds.append(item.decision.kind)
        states = states_from_dict(json.loads(json.dumps(states_to_dict({"orders": item.decision.state}))))
    return kinds


def test_one_alert_per_breach_and_one_recovery() -> None:
    assert evaluations(0, 10, 120, 180, 240, 30, 0, 61) == [None, None, "alert", None, None, "recovery", None, "alert"]
    assert evaluations(120, 60) == ["alert", "recovery"]  # over from the start is a breach; exactly 60 s is not over


def test_a_family_is_one_breach_however_many_of_its_partitions_go_over() -> None:
    limits = {"orders": 60, "bulk": 600}
    first = decide(flow_status(part("orders", 0, 90, 9), part("bulk", 0, 90, 9)), limits, {}, by="r1")
    assert [(d.lag.family, d.decision.kind, d.verdict) for d in first] == [
        ("orders", "alert", "over"),
        ("bulk", None, "under"),  # its own threshold
    ]
    states = {d.lag.family: d.decision.state for d in first}
    more = decide(flow_status(part("orders", 0, 150, 9), part("orders", 1, 95, 1)), {"orders": 60}, states, by="r2")
    assert [d.decision.kind for d in more] == [None]  # a second partition: same breach


def test_texts_name_flow_family_topic_partition_lag_and_threshold() -> None:
    st = flow_status(part("orders", 2, 125.4, 42), part("orders", 0, 70, 1_500), part("orders", 1, 61, 1))
    [item] = decide(st, {"orders": 60}, {}, by="r1")
    assert item.decision is not None and item.decision.message == (
        "a->b family orders: replication LAGS: orders[2] 125 s behind (42 record(s) not copied), over the "
        "threshold of 60 s (mirrorflow.alerts.lag.max.seconds); 3 of 3 partitions over; next: orders[0] 70 s "
        "behind (1,500 record(s) not copied); orders[1] 61 s behind (1 record(s) not copied)"
    )
    back = flow_status(part("orders", 2, 3.2, 1), part("orders", 0, 0, 0, status.CAUGHT_UP), at_ms=1_000_000 + 300_000)
    [recovered] = decide(back, {"orders": 60}, {"orders": item.decision.state}, by="r2")
    assert recovered.decision is not None and recovered.decision.message == (
        "a->b family orders: lag recovered 300 s after the alert: worst orders[2] 3 s behind (1 record(s) not copied), "
        "under the threshold of 60 s (mirrorflow.alerts.lag.max.seconds)"
    )
    caught_up = flow_status(part("orders", 0, 0, 0, status.CAUGHT_UP), at_ms=1_000_000 + 60_000)
    [again] = decide(caught_up, {"orders": 60}, {"orders": item.decision.state}, by="r3")
    assert again.decision is not None and "lag recovered 60 s after the alert: every partition caught up" in (
        again.decision.message or ""
    )
    many = [part("orders", i, 100 + i, 1) for i in range(6)]
    assert alert_text(FLOW, measure(flow_status(*many), {"orders": 60})[0]).endswith("; and 3 more")


def test_an_unmeasured_family_keeps_its_state() -> None:
    alerted = decide(flow_status(part("orders", 0, 99, 1)), {"orders": 60}, {}, by="r1")[0].decision
    assert alerted is not None
    down = flow_status(errors=["error: cluster 'a' (source of a->b) did not answer"])
    [item] = decide(down, {"orders": 60}, {"orders": alerted.state}, by="r2")
    assert (item.decision, item.verdict, item.previous) == (None, "unmeasured", alerted.state)  # no false recovery


def test_a_retry_reports_what_its_earlier_try_sent_without_sending_it_again() -> None:
    st = flow_status(part("orders", 0, 99, 1))
    [first] = decide(st, {"orders": 60}, {}, by="run-1")
    assert first.decision is not None and first.decision.kind == "alert"
    sent = first.decision.state.sent("alert", first.decision.message or "", by="run-1", at_ms=1_000_500)
    stored = states_from_dict(json.loads(json.dumps(states_to_dict({"orders": sent}))))
    [retry] = decide(st, {"orders": 60}, stored, by="run-1")
    assert retry.decision is not None
    assert (retry.decision.kind, retry.decision.replayed, retry.decision.message) == (
        "alert",
        True,
        first.decision.message,
    )
    [later] = decide(st, {"orders": 60}, stored, by="run-2")
    assert later.decision is not None and (later.decision.kind, later.decision.replayed) == (None, False)


def test_the_payload_is_the_alert_payload_with_reason_lag() -> None:
    st = flow_status(part("orders", 1, 125.0, 42), part("orders", 0, 70.0, 3), at_ms=1_700_000_000_000)
    [lag] = measure(st, {"orders": 60})
    payload = lag_payload(FLOW, lag, kind="alert", message="m", checked_at_ms=st.checked_at_ms)
    assert payload == {
        "source": "mirrorflow",
        "kind": "alert",
        "reason": "lag",
        "flow": "a->b",
        "family": "orders",
        "fresh": False,
        "age_s": 125.0,
        "threshold_s": 60,
        "topic": "orders",
        "partition": 1,
        "lag": 42,
        "lag_seconds": 125.0,
        "lag_records": 42,
        "partitions_over": 2,
        "partitions": [
            {"topic": "orders", "partition": 1, "lag_seconds": 125.0, "lag_records": 42},
            {"topic": "orders", "partition": 0, "lag_seconds": 70.0, "lag_records": 3},
        ],
        "checked_at_ms": 1_700_000_000_000,
        "time": "2023-11-14T22:13:20+00:00",
        "message": "m",
    }
    assert json.loads(json.dumps(payload)) == payload


def test_stored_states_survive_json_and_bad_entries_are_dropped() -> None:
    states = {"orders": AlertState("stale", 5, 5, "alert", "m", "r1", 6)}
    assert states_from_dict(json.loads(json.dumps(states_to_dict(states)))) == states
    assert states_from_dict(
        {"orders": {"state": "weird"}, "bulk": "x", "default": {"state": "fresh", "since_ms": 1}}
    ) == {"default": AlertState("fresh", 1)}
    assert states_from_dict(None) == {}
