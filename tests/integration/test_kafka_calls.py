"""A run's own Kafka calls (lock, discovery, metadata, progress reads) do not grow with its partitions.

Those parts of a run must cost milliseconds, not seconds; the count of calls is what keeps them there,
and unlike a timing it is the same on any machine. The report counts them (``kafka_calls``).
"""

from __future__ import annotations

from typing import Any

import pytest

from mirrorflow.replication.executor import LocalExecutor
from mirrorflow.replication.run import replicate
from tests.integration.test_replication import make_config, prefix
from tests.kafka_helpers import create_topic, own_records, produce

pytestmark = pytest.mark.integration

#: What a run with nothing new asks of the clusters today, a change that adds calls must raise these on purpose:
#: 18 admin calls (5 list_offsets, 4 describe_topics, 4 describe_configs, 3 create_topics that find the internal
#: and lock topics there, 2 list_topics), 3 admin clients, 4 consumers (progress, lock) and the lock's producer.
MAX_ADMIN_CALLS = 18
MAX_CLIENTS = 8


def produce_everywhere(bootstrap: str, topic: str, partitions: int) -> None:
    produce(bootstrap, topic, [{"value": b"v", "partition": p} for p in range(partitions)])


def calls_of(kafka_clusters: Any, config: Any, topic: str, partitions: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The calls of a scheduled run copying a record of every partition, and of the run after it (nothing new).

    The topic's first run (it creates the remote topic, the internal topics) comes before and is not counted.
    """

    def run() -> Any:
        report = replicate(config, "primary->backup", None, LocalExecutor(), only_topics={topic})
        assert report.ok, report.errors
        return report

    produce_everywhere(kafka_clusters.primary, topic, partitions)
    run()
    produce_everywhere(kafka_clusters.primary, topic, partitions)
    copying = run()
    assert own_records(copying) == partitions
    idle = run()
    assert own_records(idle) == 0
    return copying.kafka_calls, idle.kafka_calls


def test_the_calls_of_a_run_do_not_grow_with_its_partitions(kafka_clusters: Any) -> None:
    name = prefix()
    narrow = create_topic(kafka_clusters.primary, f"{name}-narrow", partitions=2)
    wide = create_topic(kafka_clusters.primary, f"{name}-wide", partitions=24)
    config = make_config(kafka_clusters, name)

    narrow_copy, narrow_idle = calls_of(kafka_clusters, config, narrow, 2)
    wide_copy, wide_idle = calls_of(kafka_clusters, config, wide, 24)

    assert wide_idle == narrow_idle, f"2 partitions: {narrow_idle}\n24 partitions: {wide_idle}"
    assert wide_copy == narrow_copy, f"2 partitions: {narrow_copy}\n24 partitions: {wide_copy}"
    assert 0 < narrow_idle["admin"] <= MAX_ADMIN_CALLS, narrow_idle
    assert 0 < narrow_idle["clients"] <= MAX_CLIENTS, narrow_idle
