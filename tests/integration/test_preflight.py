"""Before a run: an unreachable cluster is named, with its role and bootstrap servers, in one line and fast."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mirrorflow.config import parse_config
from mirrorflow.preflight import (
    REFUSED_GRACE_S,
    ClusterUnreachableError,
    check_cluster,
    check_clusters,
    cluster_timeout,
)
from mirrorflow_dev.devcluster import free_port

pytestmark = pytest.mark.integration


def flow(primary: str, backup: str, extra: str = "") -> Any:
    return parse_config(
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        f"primary->backup.enabled = true\n{extra}"
    ).flow("primary", "backup")


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A port that accepts TCP connections (the kernel's backlog) and never says a word: a hung broker."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"127.0.0.1:{server.getsockname()[1]}"


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
    assert "'primary'" not in message and info.value.sides == ("target",)


def test_a_refused_connection_fails_fast_within_the_default_timeout(
    kafka_clusters: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    checked = flow(dead, kafka_clusters.backup)
    assert cluster_timeout(checked) == 25  # mirrorflow.cluster.timeout's default
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as info:
        check_clusters(checked)
    seconds = time.monotonic() - started
    assert REFUSED_GRACE_S - 0.5 < seconds < REFUSED_GRACE_S + 10  # the grace, not the 30 s timeout
    assert str(info.value) == (
        f"cluster 'primary' (source of primary->backup, bootstrap.servers {dead}) did not answer within "
        f"{REFUSED_GRACE_S:.0f} s: Connect to ipv4#{dead} failed: Connection refused"
    )
    # librdkafka's reconnect log went to Python logging at DEBUG, not to stderr.
    assert capfd.readouterr().err == ""


def test_an_unresolvable_host_is_named_with_the_resolver_error() -> None:
    with pytest.raises(ClusterUnreachableError) as info:
        check_cluster(flow("no-such-host.invalid:9092", "127.0.0.1:1"), "source")
    assert "cluster 'primary' (source of primary->backup, bootstrap.servers no-such-host.invalid:9092)" in str(
        info.value
    )
    assert "Failed to resolve 'no-such-host.invalid:9092'" in str(info.value)


def test_both_dead_are_checked_at_once_and_both_named() -> None:
    source, target = f"127.0.0.1:{free_port()}", "no-such-host.invalid:9092"
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as info:
        check_clusters(flow(source, target))
    seconds = time.monotonic() - started
    assert seconds < 2 * REFUSED_GRACE_S  # in parallel: one grace, not two
    assert info.value.sides == ("source", "target")
    message = str(info.value)
    assert "\n" not in message
    assert message.index(f"cluster 'primary' (source of primary->backup, bootstrap.servers {source})") < message.index(
        f"; cluster 'backup' (target of primary->backup, bootstrap.servers {target})"
    )


def test_a_silent_cluster_costs_the_configured_timeout(kafka_clusters: Any, silent_broker: str) -> None:
    checked = flow(kafka_clusters.primary, silent_broker, "primary->backup.mirrorflow.cluster.timeout = 3s\n")
    assert cluster_timeout(checked) == 3
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as info:
        check_clusters(checked)
    seconds = time.monotonic() - started
    assert 2.9 < seconds < 10
    assert str(info.value).startswith(
        f"cluster 'backup' (target of primary->backup, bootstrap.servers {silent_broker}) did not answer within 3 s"
    )
    assert "no answer to a metadata request" in str(info.value)
