"""Before a run: an unreachable cluster is named, with its role and bootstrap servers."""

from __future__ import annotations

from typing import Any

import pytest

from include.mirrorflow.config import parse_config
from include.mirrorflow.devcluster import free_port
from include.mirrorflow.preflight import ClusterUnreachableError, check_clusters

pytestmark = pytest.mark.integration


def flow(primary: str, backup: str) -> Any:
    return parse_config(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\n"
    ).flow("primary", "backup")


def test_both_clusters_answer(kafka_clusters: Any) -> None:
    health = check_clusters(flow(kafka_clusters.primary, kafka_clusters.backup), timeout=10)
    assert [(h.alias, h.side, h.brokers >= 1) for h in health] == [
        ("primary", "source", True),
        ("backup", "target", True),
    ]


def test_an_unreachable_cluster_is_named(kafka_clusters: Any) -> None:
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(ClusterUnreachableError) as info:
        check_clusters(flow(kafka_clusters.primary, dead), timeout=2)
    message = str(info.value)
    assert f"cluster 'backup' (target of primary->backup, bootstrap.servers {dead}) did not answer" in message
    assert "'primary'" not in message
