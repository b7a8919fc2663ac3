"""Before a run: do both clusters of a flow answer?

A run against a dead cluster used to fail deep inside Spark, minutes later, with a librdkafka traceback
(``Failed to get metadata``) that did not say which cluster was down. Every entry point that talks to
clusters (``mirrorflow replicate`` and the other CLI commands, the Spark app before its SparkSession, the
DAGs' ``check_clusters`` tasks) first asks each cluster for its metadata and fails with one line naming the
cluster, its role and its bootstrap servers, so the operator knows at a glance where to look.

How long it waits: ``mirrorflow.cluster.timeout`` (default 25 s) at most, both clusters checked at the
same time so the total stays within it. A cluster that refuses every connection or whose host name does
not resolve has already answered, in a way: once librdkafka reports all its bootstrap brokers down, the
check gives it :data:`REFUSED_GRACE_S` to come back (a broker restarting) and then fails, well inside the
timeout. Only a cluster that says nothing at all (packets dropped, an overloaded broker) costs the whole
timeout.

A caller that has an answer without the cluster (``mirrorflow translate`` falls back to the checkpoints on
the target when the source is gone) asks for a ``quick`` check: a plain TCP connection to each bootstrap
server first, and when every one of them is refused or does not resolve, the check fails at once, in
milliseconds, without starting librdkafka at all (no grace: nothing is waiting for the broker to come back).
A cluster that accepts the connection, or says nothing, goes through the usual check, bounded by the
caller's (short) timeout.

librdkafka logs every failed reconnect; like every mirrorflow client, these send that log to the Python logger
``mirrorflow.librdkafka`` at DEBUG (``clients.LibrdkafkaLog``), so the user sees one line, not dozens.
"""

from __future__ import annotations

import errno
import functools
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from .config.model import FlowConfig, Side
from .kafka import clients
from .kafka.errors import event_words
from .kafka.refusals import refusal

log = logging.getLogger(__name__)

#: The key bounding how long a check waits for a cluster (a duration such as ``30s``).
TIMEOUT_KEY = "mirrorflow.cluster.timeout"

#: After librdkafka reports every bootstrap broker down (refused, unresolvable, authentication failed), how
#: long a check still waits for one to come back before failing. Short, because a refused connection rarely
#: turns into an answer within seconds, and the DAGs retry anyway.
REFUSED_GRACE_S = 5.0

_POLL_S = 0.1
# Errors that end the grace period early when every broker is down: they say why.
_REASONS = (
    KafkaError._TRANSPORT,
    KafkaError._RESOLVE,
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError.SASL_AUTHENTICATION_FAILED,
)
# What list_topics says when nothing answered at all (its "Broker transport failure" explains nothing).
_SILENT = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)
_ALL_DOWN = (KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
# A quick check's TCP connect: a refusal is immediate; a server that has not accepted by then is left to librdkafka.
_CONNECT_S = 0.5
# connect() errors that mean nobody will answer on that address (as librdkafka's "all brokers down" does).
_FINAL_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}


class ClusterUnreachableError(RuntimeError):
    """One or both clusters of a flow did not answer; the message (one line) names each of them.

    ``sides`` says which did not answer (a failed-over flow expects its source to be gone).
    """

    def __init__(self, message: str, sides: tuple[Side, ...] = ()) -> None:
        super().__init__(message)
        self.sides = sides


@dataclass(frozen=True)
class ClusterHealth:
    alias: str
    side: Side
    bootstrap_servers: str
    brokers: int
    topics: int
    seconds: float


def cluster_timeout(flow: FlowConfig) -> float:
    """Seconds a check of this flow's clusters may take (``mirrorflow.cluster.timeout``)."""
    return float(flow.get_seconds(TIMEOUT_KEY))


def _describe(flow: FlowConfig, side: Side) -> tuple[str, str]:
    alias = flow.source if side == "source" else flow.target
    return alias, flow.client_config(side, "admin").get("bootstrap.servers", "?")


def _unreachable(flow: FlowConfig, side: Side, seconds: float, reason: str) -> ClusterUnreachableError:
    """The one line naming the cluster; "within N s" only when the check waited (a refusal is immediate)."""
    alias, bootstrap = _describe(flow, side)
    waited = f" within {seconds:.0f} s" if seconds >= 1 else ""
    return ClusterUnreachableError(
        f"cluster '{alias}' ({side} of {flow.name}, bootstrap.servers {bootstrap}) did not answer{waited}: {reason}",
        (side,),
    )


def _address(family: int, sockaddr: tuple[Any, ...]) -> str:
    """``ipv4#127.0.0.1:9092``, as librdkafka names an address in its errors."""
    return f"ipv6#[{sockaddr[0]}]:{sockaddr[1]}" if family == socket.AF_INET6 else f"ipv4#{sockaddr[0]}:{sockaddr[1]}"


def refused_everywhere(bootstrap: str, connect_timeout: float = _CONNECT_S) -> str | None:
    """Why no bootstrap server can be reached (every address refuses or does not resolve), else None.

    A plain TCP connect, no Kafka protocol: a refusal or a resolver error comes back in milliseconds, where
    librdkafka would keep reconnecting (and logging) until its timeout. None as soon as one address accepts
    the connection (or has not refused within ``connect_timeout``, or the servers cannot be parsed): the
    cluster may well answer, so the caller asks it properly. The reason reads like librdkafka's.
    """
    reasons: list[str] = []
    for server in (s.strip() for s in bootstrap.split(",") if s.strip()):
        address = clients.server_address(server)
        if address is None:
            return None
        host, port = address
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            reasons.append(f"Failed to resolve '{host}:{port}': {exc.strerror}")
            continue
        for family, kind, proto, _name, sockaddr in addresses:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(connect_timeout)
                try:
                    sock.connect(sockaddr)
                except OSError as exc:
                    if exc.errno not in _FINAL_ERRNOS:  # a timeout, say: not a refusal
                        return None
                    reasons.append(f"Connect to {_address(family, sockaddr)} failed: {exc.strerror}")
                    continue
            return None  # accepted: something listens there
    return reasons[-1] if reasons else None


class _Unanswered(Exception):
    """What :func:`probe` says when no metadata came back: why (librdkafka's words), after how long, and the
    client's error events (a refused login or certificate is told apart from silence with them)."""

    def __init__(self, reason: str, seconds: float, errors: list[KafkaError]) -> None:
        super().__init__(reason)
        self.reason, self.seconds, self.errors = reason, seconds, errors


def probe(new_admin: Callable[..., Any], timeout: float, label: str) -> tuple[int, int, float]:
    """Ask a cluster for its metadata: (brokers, topics, seconds), or ``_Unanswered``.

    ``new_admin(**overrides)`` builds the admin client that asks (a flow's, counted by ``kafka_calls``, or one
    of bare properties).
    ``timeout`` bounds the whole check; a cluster all of whose brokers refuse connections, fail authentication
    or do not resolve fails after ``min(timeout, REFUSED_GRACE_S)``.
    """
    started = time.monotonic()
    errors: list[KafkaError] = []  # appended by admin.poll() below, in this thread
    admin = new_admin(
        **{
            # Fewer reconnect attempts (and log lines) while a cluster is down: the backoff doubles up to 5 s. The
            # first backoff stays librdkafka's 100 ms: a client that reconnects once while it negotiates API
            # versions (noida-db makes it) would otherwise wait a whole second, on every run.
            "reconnect.backoff.max.ms": 5000,
            "error_cb": errors.append,
        }
    )
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def ask() -> None:
        # list_topics blocks and cannot be interrupted; in its own (daemon) thread, this one can watch the
        # error callbacks and give up early. An abandoned call ends by itself at the timeout.
        try:
            outcome["metadata"] = admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            outcome["error"] = exc.args[0] if exc.args else exc
        finally:
            done.set()

    threading.Thread(target=ask, name=f"preflight-{label}", daemon=True).start()
    all_down_since: float | None = None
    while not done.wait(_POLL_S):
        admin.poll(0)  # serves librdkafka's log (to DEBUG) and its errors (to ``errors``)
        now = time.monotonic()
        if all_down_since is None and any(e.code() in _ALL_DOWN for e in errors):
            all_down_since = now
        if all_down_since is not None and now - started >= min(timeout, REFUSED_GRACE_S):
            break
        if now - started >= timeout + 1.0:  # list_topics overran its own timeout: never wait longer
            break
    admin.poll(0)
    seconds = time.monotonic() - started
    metadata = outcome.get("metadata")
    if metadata is not None:
        return len(metadata.brokers), len(metadata.topics), seconds
    reasons = [event_words(e) for e in errors if e.code() in _REASONS]
    if reasons:
        reason = reasons[-1]
    elif isinstance(outcome.get("error"), KafkaError) and outcome["error"].code() not in _SILENT:
        reason = outcome["error"].str()
    else:
        reason = "no answer to a metadata request (is the host reachable from here? a firewall?)"
    raise _Unanswered(reason, seconds, errors)


def check_cluster(flow: FlowConfig, side: Side, timeout: float | None = None, *, quick: bool = False) -> ClusterHealth:
    """Metadata of one side of a flow, or ``ClusterUnreachableError`` (one line naming the cluster).

    ``timeout`` (default: the flow's ``mirrorflow.cluster.timeout``) bounds the whole check (see :func:`probe`).
    ``quick``: for a caller with an answer without this cluster; every bootstrap server refusing a TCP connection
    (or not resolving) fails at once, before librdkafka starts (see :func:`refused_everywhere`).
    """
    timeout = cluster_timeout(flow) if timeout is None else timeout
    alias, bootstrap = _describe(flow, side)
    started = time.monotonic()
    if quick and (refused := refused_everywhere(bootstrap, min(timeout, _CONNECT_S))) is not None:
        log.debug("cluster '%s' (%s) refused at once: %s", alias, side, refused)
        raise _unreachable(flow, side, time.monotonic() - started, refused)
    try:
        brokers, topics, seconds = probe(functools.partial(clients.admin, flow, side), timeout, alias)
    except _Unanswered as exc:
        config = clients.client_properties(flow, side, "admin")
        said = refusal(exc.errors, alias, bootstrap, config)
        if said is not None:
            raise ClusterUnreachableError(
                f"cluster '{alias}' ({side} of {flow.name}, bootstrap.servers {bootstrap}) {said}", (side,)
            ) from None
        raise _unreachable(flow, side, exc.seconds, exc.reason) from None
    log.debug("cluster '%s' (%s) answered in %.3f s: %d broker(s)", alias, side, seconds, brokers)
    return ClusterHealth(alias, side, bootstrap, brokers, topics, round(seconds, 3))


def check_connection(name: str, java_props: dict[str, str], timeout: float) -> str:
    """One cluster given by Kafka (Java) client properties, as an Airflow connection holds them: a line saying
    what answered, or ``ClusterUnreachableError`` naming ``name`` and why (within ``timeout``)."""
    config = clients.client_config(java_props, f"mirrorflow-check-{name}")
    bootstrap = java_props.get("bootstrap.servers", "?")

    def new_admin(**overrides: Any) -> Any:
        return clients.build_client(AdminClient, {**config, **overrides}, f"{name} admin client")

    try:
        brokers, topics, seconds = probe(new_admin, timeout, name)
    except _Unanswered as exc:
        said = refusal(exc.errors, name, bootstrap, config)
        if said is not None:
            raise ClusterUnreachableError(f"{name} (bootstrap.servers {bootstrap}) {said}") from None
        waited = f" within {exc.seconds:.0f} s" if exc.seconds >= 1 else ""
        raise ClusterUnreachableError(
            f"{name} (bootstrap.servers {bootstrap}) did not answer{waited}: {exc.reason}"
        ) from None
    return f"{name} (bootstrap.servers {bootstrap}) answered in {seconds:.1f} s: {brokers} broker(s), {topics} topic(s)"


def check_clusters(
    flow: FlowConfig, timeout: float | None = None, sides: tuple[Side, ...] = ("source", "target")
) -> list[ClusterHealth]:
    """Both clusters of a flow (or ``sides``), checked at the same time so the total stays within ``timeout``.

    If any is unreachable: one ``ClusterUnreachableError`` naming every unreachable cluster, on one line.
    """
    results: dict[Side, ClusterHealth | Exception] = {}

    def check(side: Side) -> None:
        try:
            results[side] = check_cluster(flow, side, timeout)
        except Exception as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            results[side] = exc

    threads = [threading.Thread(target=check, args=(side,), name=f"preflight-{side}") for side in sides]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for side in sides:
        if isinstance(results[side], Exception) and not isinstance(results[side], ClusterUnreachableError):
            raise results[side]  # a client setting librdkafka refuses, say: not a reachability problem
    unreachable = [side for side in sides if isinstance(results[side], ClusterUnreachableError)]
    if unreachable:
        raise ClusterUnreachableError("; ".join(str(results[side]) for side in unreachable), tuple(unreachable))
    return [r for side in sides if isinstance(r := results[side], ClusterHealth)]


__all__ = [
    "REFUSED_GRACE_S",
    "TIMEOUT_KEY",
    "ClusterHealth",
    "ClusterUnreachableError",
    "check_cluster",
    "check_clusters",
    "check_connection",
    "cluster_timeout",
    "refused_everywhere",
]
