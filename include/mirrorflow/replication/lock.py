"""One writer per topic partition: a run holds a lease on what it copies, recorded in a Kafka topic.

Exactly-once units are fenced per partition by their transactional.id, but at-least-once units are
not, so two runs that copy the same partitions (a manual trigger next to a scheduled run, the CLI next
to Airflow, a run over every family next to a one-family run) must never both write.

Why a lease and not consumer-group membership (the earlier design): membership frees a crashed
holder's lock only if the broker evicts the dead member after its session timeout, and the embedded
broker mirrorflow ships for development and the demo never does, so a killed run blocked its family
until the broker restarted; and looking the holder up needed a ready group coordinator, which a
freshly started broker does not have. A lease needs nothing but produce, list-offsets-by-timestamp
and fetch on one partition, which every Kafka-compatible broker serves, and it ends by itself.

How: the lease log is partition 0 of the one-partition topic ``mirrorflow-locks.internal`` on the
target (``cleanup.policy=delete``, ``message.timestamp.type=LogAppendTime``). A run's *scope* is its
flow and the families it copies (``*`` = all of them; ``*`` overlaps every family of the flow). To
claim, a run appends ``claim`` (key: a fresh holder id; value: JSON flow, scope, holder, ttl_ms,
state), then reads the partition from the first record newer than its claim's timestamp minus the
look-back up to its own claim, replaying in log order: a holder is alive if its newest claim or renew
is younger than its TTL at the claim's timestamp and no release followed. The claim is granted iff no
other live holder's scope overlaps. Every contender reads the same log, so a later claim always sees
an earlier one: of two concurrent claims the first in the log wins, and a refused claim is released at
once (were it not, it would only refuse others until its TTL ends: never two writers). The holder
renews every TTL/3 from a thread and releases on exit; a killed holder's lease ends one TTL after its
last renewal.

Clocks: the record timestamps are the broker's (LogAppendTime), so a contender compares two times
taken by the same clock. The holder stops counting on its lease once ``TTL - margin`` has passed on
its own monotonic clock since it *sent* its last acknowledged renewal, which is before the broker
stamped it: only the clocks' rates must agree (and a partition leader moving to a broker whose clock
is more than the margin behind could shorten a lease). A lock topic that keeps CreateTime (made by
hand or by an older mirrorflow) stamps records with each run's host clock: then the hosts' clocks must
agree within the margin; a warning says so.

What the lease cannot do: the run checks ``held`` between waves, so a holder whose renewals fail
(the target unreachable, the process paused) may finish the wave it is in after its lease ended.
Exactly-once units are still fenced by their transactional.id; at-least-once units may then write
duplicates, never gaps.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..kafka.calls import CountingAdmin, note
from ..kafka.clients import bounded_reader
from ..kafka.errors import is_retriable

log = logging.getLogger(__name__)

LOCK_TOPIC = "mirrorflow-locks.internal"  # ".internal": never replicated (MM2's isInternalTopic)
ALL_FAMILIES = "*"
LOOKBACK_MIN_MS = 10 * 60 * 1000  # leases of runs with a TTL up to this are seen whatever this run's TTL
RETENTION_MIN_MS = 24 * 60 * 60 * 1000

# Besides what a run retries everywhere (``kafka.errors.is_retriable``), what a claim waits out while its topic is
# being created: the topic or its partition not known yet, no broker to ask.
_CLAIM_WAITS = {KafkaError._UNKNOWN_TOPIC, KafkaError._NOENT, KafkaError.BROKER_NOT_AVAILABLE}
# The connection settings the lock's own clients take from the target's client properties.
_CONNECTION_PREFIXES = ("ssl.", "sasl.", "socket.", "enable.ssl")
_CONNECTION_KEYS = (
    "bootstrap.servers",
    "security.protocol",
    "client.id",
    "broker.address.family",
    "client.rack",
    "logger",
)

T = TypeVar("T")


class LockError(RuntimeError):
    """The lock could not be claimed (the target did not answer in time, or refused): Kafka's error is named."""


class LockHeldError(LockError):
    """Another run whose scope overlaps this run's holds the lock."""


def overlaps(a: Iterable[str], b: Iterable[str]) -> bool:
    """Scopes overlap if they share a family or either is every family (``*``)."""
    a, b = set(a), set(b)
    return ALL_FAMILIES in a or ALL_FAMILIES in b or bool(a & b)


def describe_scope(flow: str, scope: Iterable[str]) -> str:
    families = sorted(scope)
    return f"{flow} (every family)" if ALL_FAMILIES in families else f"{flow} family {', '.join(families)}"


@dataclass(frozen=True)
class Lease:
    """One holder as the lease log shows it: its newest claim or renew."""

    holder_id: str
    flow: str
    scope: tuple[str, ...]
    holder: str
    ttl_ms: int
    timestamp: int  # ms, of the newest claim or renew
    since: int  # ms, of the oldest claim or renew seen in the window

    def alive_at(self, timestamp: int) -> bool:
        return timestamp < self.timestamp + self.ttl_ms

    def describe(self) -> str:
        until = datetime.fromtimestamp((self.timestamp + self.ttl_ms) / 1000, UTC).isoformat(timespec="seconds")
        since = datetime.fromtimestamp(self.since / 1000, UTC).isoformat(timespec="seconds")
        return (
            f"{self.holder}, holding {describe_scope(self.flow, self.scope)} since {since}; "
            f"its lease ends at {until} unless renewed (TTL {self.ttl_ms / 1000:g} s)"
        )


def live_leases(records: Iterable[tuple[bytes | None, bytes | None, int]]) -> dict[str, Lease]:
    """Replay (key, value, timestamp) records in log order: each holder's newest claim or renew, unless released.

    Records that are not lease records (another tool writing to the topic) are skipped.
    """
    leases: dict[str, Lease] = {}
    for key, value, timestamp in records:
        try:
            holder_id = key.decode() if key else ""
            data = json.loads(value or b"")
            state, flow, scope = data["state"], str(data["flow"]), tuple(str(s) for s in data["scope"])
            ttl_ms, holder = int(data["ttl_ms"]), str(data.get("holder", holder_id))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
        if not holder_id:
            continue
        if state == "release":
            leases.pop(holder_id, None)
        elif state in ("claim", "renew"):
            since = leases[holder_id].since if holder_id in leases else timestamp
            leases[holder_id] = Lease(holder_id, flow, scope, holder, ttl_ms, timestamp, since)
    return leases


def blockers(
    records: Iterable[tuple[bytes | None, bytes | None, int]], holder_id: str, flow: str, scope: Iterable[str], at: int
) -> list[Lease]:
    """The other holders whose live lease overlaps ``scope`` at timestamp ``at`` (the claim's): empty = granted."""
    scope = tuple(scope)
    return [
        lease
        for lease in live_leases(records).values()
        if lease.holder_id != holder_id and lease.flow == flow and overlaps(lease.scope, scope) and lease.alive_at(at)
    ]


def _kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, (FutureTimeout, TimeoutError)):
        return KafkaError(KafkaError._TIMED_OUT, "no answer in time")
    return None


def _words(error: KafkaError) -> str:
    """Kafka's name for the error and librdkafka's text: what an operator can search for."""
    return f"{error.name()} ({error.str()})"


def connection_settings(client_config: dict[str, Any]) -> dict[str, Any]:
    """Bootstrap, security and client.id of a client configuration: what the lock's own clients take over."""
    return {k: v for k, v in client_config.items() if k in _CONNECTION_KEYS or k.startswith(_CONNECTION_PREFIXES)}


class FamilyLock:
    """Context manager: ``with FamilyLock(...) as lock:`` then check ``lock.held`` between waves.

    ``families`` None (or containing ``*``) is every family of the flow. ``wait_s`` bounds how long the
    claim waits out a target that is not ready (no leader, no controller, timeouts); a live holder is
    reported at once.
    """

    def __init__(
        self,
        client_config: dict[str, Any],
        flow: str,
        families: Iterable[str] | None = None,
        *,
        ttl_s: float = 30.0,
        wait_s: float = 60.0,
        replication_factor: int = -1,
        lookback_s: float = 0.0,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError(f"the lock TTL must be positive, not {ttl_s}")
        self.connection = connection_settings(client_config)
        self.flow = flow
        self.scope: tuple[str, ...] = tuple(sorted(set(families))) if families else (ALL_FAMILIES,)
        if ALL_FAMILIES in self.scope:
            self.scope = (ALL_FAMILIES,)
        self.ttl_ms = max(1, int(ttl_s * 1000))
        # How far back the claim reads the log: every lease that can still be alive, and at least ``lookback_s``
        # of run history (capped by what the log keeps) for whoever needs it (``read_back``).
        self.lookback_ms = max(LOOKBACK_MIN_MS, 2 * self.ttl_ms, min(int(lookback_s * 1000), RETENTION_MIN_MS))
        self.wait_s = wait_s
        self.replication_factor = replication_factor
        self.holder_id = uuid.uuid4().hex
        self.holder = f"{self.connection.get('client.id', 'mirrorflow')} on {socket.gethostname()} (pid {os.getpid()})"
        self.margin_s = self.ttl_ms / 1000 / 5
        self.renew_every_s = self.ttl_ms / 1000 / 3
        self.claim_ms: float | None = None  # how long the claim took (topic, claim record, read-back)
        self._valid_until = 0.0  # monotonic
        self._claimed = False
        self._released = False
        self._stop = threading.Event()
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._last_error: KafkaError | None = None
        # What went wrong with the lease while it was held, for the run's report (``take_warnings``): a run that
        # rode through a broker restart says so in its report, not only in its log.
        self._warnings: list[str] = []
        # The run's summary, set by the run before it exits: the release record carries it under "run", so the
        # cluster keeps a history of runs without Airflow (history.py reads it back; lease readers ignore it).
        self.summary: dict[str, Any] | None = None
        # The log as the claim read it, (key, value, timestamp) up to the claim: the recent run history for free
        # (the run reads when ACLs were last synced from it, history.py).
        self.read_back: list[tuple[bytes | None, bytes | None, int]] = []
        # When the holder last synced topic ACLs (ms since the epoch), kept across the batches of a continuous run
        # and written into the release's summary; None until known.
        self.acls_synced_ms: int | None = None
        self.configs_synced_ms: int | None = None  # the same for topic configs

    @property
    def name(self) -> str:
        return describe_scope(self.flow, self.scope)

    @property
    def held(self) -> bool:
        """True while the lease is surely ours: claimed, not released, and renewed within TTL minus the margin."""
        return self._claimed and not self._released and time.monotonic() < self._valid_until

    @property
    def lost_reason(self) -> str | None:
        """Why ``held`` is False (None while it is True): for the run report."""
        if self.held:
            return None
        if not self._claimed:
            return "never claimed"
        if self._released:
            return "released"
        last = f": {_words(self._last_error)}" if self._last_error is not None else ""
        return f"no renewal acknowledged for {self.ttl_ms / 1000 - self.margin_s:g} s{last}"

    def _warn(self, message: str) -> None:
        """Log a problem of the lease once, and keep it for the run's report."""
        if message not in self._warnings:
            log.warning("%s", message)
            self._warnings.append(message)

    def take_warnings(self) -> list[str]:
        """The lease's problems since the last call (a continuous run's batches each take their own)."""
        taken, self._warnings = self._warnings, []
        return taken

    # -- Kafka plumbing ------------------------------------------------------------------------------

    def _note(self, error: KafkaError) -> None:
        """librdkafka's error callback: keep the newest error so a timeout can be explained in Kafka's words."""
        self._last_error = error

    def _retrying(self, what: str, attempt: Callable[[], T], deadline: float) -> T:
        """Run ``attempt`` until it succeeds, waiting out retriable errors until ``deadline``."""
        delay = 0.1
        while True:
            try:
                return attempt()
            except (KafkaException, FutureTimeout, TimeoutError) as exc:
                error = _kafka_error(exc)
                assert error is not None
                if error.code() in (KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT) and self._last_error is not None:
                    error = self._last_error  # what the client saw while waiting says more than "timed out"
                retriable = is_retriable(error) or error.code() in _CLAIM_WAITS
                if not retriable or time.monotonic() + delay >= deadline:
                    waited = f" within {self.wait_s:g} s" if retriable else ""
                    where = f"{LOCK_TOPIC} at {self.connection.get('bootstrap.servers', '?')}"
                    raise LockError(
                        f"cannot {what} the run lock of {self.name} on {where}{waited}: {_words(error)}"
                    ) from None
                log.info("lock %s: %s: %s; retrying", self.name, what, _words(error))
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _ensure_topic(self, admin: AdminClient, deadline: float) -> None:
        """Create the lease log if missing, by CreateTopics only (a metadata request may auto-create it with
        broker defaults). TOPIC_ALREADY_EXISTS is the usual answer; a principal without CREATE on the
        cluster goes on and finds out when it produces."""
        retention = max(RETENTION_MIN_MS, 4 * max(LOOKBACK_MIN_MS, 2 * self.ttl_ms))
        config = {
            "cleanup.policy": "delete",
            "retention.ms": str(retention),
            "message.timestamp.type": "LogAppendTime",
            "segment.ms": str(retention),  # retention deletes whole segments only: roll them as often
        }
        topic = NewTopic(LOCK_TOPIC, num_partitions=1, replication_factor=self.replication_factor, config=config)
        timeout = max(0.1, min(10.0, deadline - time.monotonic()))
        try:
            admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[LOCK_TOPIC].result(
                timeout + 1
            )
        except KafkaException as exc:
            error = _kafka_error(exc)
            if error is None or error.code() not in (
                KafkaError.TOPIC_ALREADY_EXISTS,
                KafkaError.TOPIC_AUTHORIZATION_FAILED,
                KafkaError.CLUSTER_AUTHORIZATION_FAILED,
            ):
                raise

    def _producer_config(self) -> dict[str, Any]:
        return {
            **self.connection,
            "acks": "all",
            # One record at a time, each awaited: claim, renewals and release stay in order without idempotence
            # (whose producer-id handshake would cost every claim a round trip or more).
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 0,
            "message.timeout.ms": self.ttl_ms,
            "request.timeout.ms": max(1000, min(30000, self.ttl_ms)),
            "allow.auto.create.topics": False,
            "error_cb": self._note,
        }

    def _send(self, state: str, deadline: float, run: dict[str, Any] | None = None) -> tuple[int, int, int]:
        """Append one record of this holder; wait for its delivery: (offset, timestamp ms, timestamp type).

        ``run``: the run's summary, which a release record carries under ``"run"``."""
        assert self._producer is not None
        value: dict[str, Any] = {"flow": self.flow, "scope": list(self.scope), "holder": self.holder}
        value["ttl_ms"] = self.ttl_ms
        if run is not None:
            value["run"] = run
        outcome: list[tuple[KafkaError | None, Any]] = []
        self._producer.produce(
            LOCK_TOPIC,
            key=self.holder_id.encode(),
            value=json.dumps({**value, "state": state}).encode(),
            partition=0,
            on_delivery=lambda err, msg: outcome.append((err, msg)),
        )
        while not outcome and time.monotonic() < deadline:
            self._producer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
        if not outcome:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no delivery report for the {state} record"))
        error, msg = outcome[0]
        if error is not None:
            raise KafkaException(error)
        kind, timestamp = msg.timestamp()
        return msg.offset(), timestamp, kind

    def _read(self, from_timestamp: int, up_to: int, deadline: float) -> list[tuple[bytes | None, bytes | None, int]]:
        """(key, value, timestamp) from the first record at or after ``from_timestamp`` up to offset ``up_to``."""
        note("new consumer")
        consumer = Consumer(
            bounded_reader(
                self.connection,
                **{
                    "group.id": "mirrorflow-locks",  # required by librdkafka; assign() only, never joined or committed
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    "error_cb": self._note,
                },
            )
        )
        try:
            remaining = max(0.1, deadline - time.monotonic())
            (start,) = consumer.offsets_for_times([TopicPartition(LOCK_TOPIC, 0, from_timestamp)], remaining)
            if start.error is not None:
                raise KafkaException(start.error)
            consumer.assign([TopicPartition(LOCK_TOPIC, 0, start.offset if start.offset >= 0 else up_to)])
            records: list[tuple[bytes | None, bytes | None, int]] = []
            while time.monotonic() < deadline:
                msg = consumer.poll(min(0.5, max(0.01, deadline - time.monotonic())))
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(msg.error())
                records.append((msg.key(), msg.value(), msg.timestamp()[1]))
                if msg.offset() >= up_to:
                    return records
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{LOCK_TOPIC} not read up to offset {up_to}"))
        finally:
            consumer.close()

    # -- claim, renew, release -----------------------------------------------------------------------

    def _claim(self, deadline: float) -> list[Lease]:
        """Append the claim and read the log back up to it: the live overlapping leases before it."""
        self._claimed = True  # a claim record may exist from here on: release it whatever happens next
        sent = time.monotonic()
        offset, timestamp, kind = self._send("claim", deadline)
        self._valid_until = sent + self.ttl_ms / 1000 - self.margin_s
        if kind == TIMESTAMP_CREATE_TIME:
            log.warning(
                "%s keeps CreateTime timestamps: leases trust the hosts' clocks to agree within %.1f s; "
                "set message.timestamp.type=LogAppendTime on it",
                LOCK_TOPIC,
                self.margin_s,
            )
        records = self._read(timestamp - self.lookback_ms, offset, deadline)
        self.read_back = records
        return blockers(records, self.holder_id, self.flow, self.scope, timestamp)

    def __enter__(self) -> Self:
        started = time.monotonic()
        deadline = started + self.wait_s
        admin = CountingAdmin(AdminClient({**self.connection, "error_cb": self._note}))
        self._producer = Producer(self._producer_config())
        note("new admin")
        note("new producer")
        try:
            self._retrying("create", lambda: self._ensure_topic(admin, deadline), deadline)
            others = self._retrying("claim", lambda: self._claim(deadline), deadline)
        except BaseException:
            self._release()
            raise
        if others:
            self._release()
            raise LockHeldError(
                f"another run holds the lock of {self.name}: " + "; ".join(lease.describe() for lease in others)
            )
        self._last_error = None
        self.claim_ms = round((time.monotonic() - started) * 1000, 1)
        log.info("lock %s claimed by %s in %.0f ms", self.name, self.holder, self.claim_ms)
        self._thread = threading.Thread(target=self._keep, name=f"lock {self.name}", daemon=True)
        self._thread.start()
        return self

    def _keep(self) -> None:
        """Renew every TTL/3 (sooner after a failure) until stopped or the lease can no longer be counted on."""
        wait = self.renew_every_s
        while not self._stop.wait(wait):
            if not self.held:
                self._warn(f"lock {self.name} lost: {self.lost_reason}")
                return
            sent = time.monotonic()
            try:
                self._send("renew", min(sent + self.renew_every_s, self._valid_until))
            except KafkaException as exc:
                error = _kafka_error(exc)
                self._warn(f"lock {self.name}: renewal failed: {_words(error) if error else exc}")
                wait = min(1.0, self.renew_every_s)
                continue
            self._valid_until = sent + self.ttl_ms / 1000 - self.margin_s
            self._last_error = None
            wait = self.renew_every_s

    def _release(self) -> None:
        """Append the release (best effort: an unreleased lease ends with its TTL anyway) and drop the producer."""
        if self._producer is None:
            return
        if self._claimed and not self._released:
            self._released = True
            try:
                self._send_release(time.monotonic() + min(5.0, self.ttl_ms / 1000))
            except KafkaException as exc:
                error = _kafka_error(exc)
                log.warning(
                    "lock %s: release not written (%s); it ends with its TTL", self.name, error and _words(error)
                )
        self._producer = None

    def _send_release(self, deadline: float) -> None:
        """The release with the run's summary; without it if the broker refuses the record as too large (a flow
        of very many families): freeing the lease matters more than the history."""
        try:
            self._send("release", deadline, self.summary)
        except KafkaException as exc:
            error = _kafka_error(exc)
            too_large = (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE)
            if self.summary is None or error is None or error.code() not in too_large:
                raise
            log.warning("lock %s: the run summary is too large for %s: released without it", self.name, LOCK_TOPIC)
            self._send("release", deadline)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.ttl_ms / 1000 + 5)
        self._release()
        self._released = True
