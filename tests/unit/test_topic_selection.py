"""``topics.only``: the one topic selection of replicate and verify; a wanted topic not discovered is named."""

from __future__ import annotations

import pytest

from mirrorflow import topics
from mirrorflow.config import parse_config

FLOW = parse_config(
    "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
).flow("a", "b")
PLANS = [topics.TopicPlan("t", "a.t", 1), topics.TopicPlan("u", "a.u", 2)]


def test_none_keeps_every_plan_and_a_set_keeps_those() -> None:
    assert topics.only(PLANS, None, FLOW, None, "replicate") == PLANS
    assert topics.only(PLANS, {"u"}, FLOW, None, "verify") == [PLANS[1]]


@pytest.mark.parametrize("purpose", ["replicate", "verify"])
def test_an_unknown_topic_is_named_with_the_flow_family_and_purpose(purpose: str) -> None:
    with pytest.raises(ValueError, match=f"a->b family orders: no such source topic to {purpose}: x, zz"):
        topics.only(PLANS, {"t", "zz", "x"}, FLOW, "orders", purpose)
