"""Demo traffic on the primary cluster: a web shop's orders, payments and customers, and two services reading them.

Why this exists: a replication demo needs something to replicate that looks like real use: keyed
JSON records with headers and current timestamps, topics with several partitions, and consumer
groups that commit offsets (MirrorMaker 2 translates those offsets to the backup cluster, so a
consumer can fail over).  The consumers work in a slow phase (half the production rate) and a
catch-up phase, so their lag is visible but bounded.

Timestamps are always "now": a broker deletes records older than the topic's retention, so
back-dated records could vanish before they are copied.
"""

from __future__ import annotations

import collections
import json
import logging
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = [
    "DEFAULT_RATE",
    "DEMO_GROUPS",
    "DEMO_TOPICS",
    "DemoGroup",
    "DemoTopic",
    "ensure_topics",
    "run_traffic",
]

log = logging.getLogger(__name__)

#: Records per second over all topics.
DEFAULT_RATE = 20.0

#: Consumers commit after this many processed records (and when they stop).
COMMIT_EVERY = 5

#: Consumer pacing: a slow phase at this fraction of the production rate, then an unthrottled catch-up phase.
SLOW_FACTOR = 0.5
SLOW_SECONDS = 45.0
CATCH_UP_SECONDS = 15.0

#: The local broker returns a partition's whole backlog in one fetch; librdkafka drops responses larger than this.
_RECEIVE_MESSAGE_MAX_BYTES = 100 * 1024 * 1024

_PROGRESS_EVERY = 30.0

#: A consumer pauses its partitions this long after each batch it took, unless the batch was full (catching up):
#: the embedded broker answers an empty fetch at once (no long poll), so a consumer that is not paused fetches
#: thousands of times a second, even while it throttles itself between records. With three groups at 20 records/s
#: the traffic process and the broker used about 65% of a core between them. Records reach the demo's consumers up
#: to this much later, which a demo does not notice.
IDLE_PAUSE_S = 1.0
_POLL_S = 0.5
#: Records a consumer takes per call in the catch-up phase (it pauses only once it gets fewer).
CATCH_UP_BATCH = 500


@dataclass(frozen=True)
class DemoTopic:
    """A topic the demo writes: its partitions, its share of the records and the service producing it."""

    name: str
    partitions: int
    share: float
    source: str
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoGroup:
    """A consumer group the demo runs on the primary cluster."""

    group: str
    topics: tuple[str, ...]


DEMO_TOPICS: tuple[DemoTopic, ...] = (
    DemoTopic("orders.eu", 3, 0.35, "checkout-eu"),
    DemoTopic("orders.us", 3, 0.30, "checkout-us"),
    DemoTopic("payments.card", 2, 0.25, "payment-gateway"),
    DemoTopic("customers", 1, 0.10, "crm", {"cleanup.policy": "compact"}),
)

DEMO_GROUPS: tuple[DemoGroup, ...] = (
    DemoGroup("order-service", ("orders.eu", "orders.us")),
    DemoGroup("payment-audit", ("payments.card",)),
)


# --------------------------------------------------------------------------
# Topics
# --------------------------------------------------------------------------


def _wait_for_leaders(admin: AdminClient, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        topics = admin.list_topics(timeout=min(5.0, timeout)).topics
        ready = [
            n
            for n in names
            if n in topics and topics[n].error is None and all(p.leader >= 0 for p in topics[n].partitions.values())
        ]
        if len(ready) == len(names):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topics {sorted(set(names) - set(ready))} have no leader after {timeout:.0f} s")
        time.sleep(0.2)


def ensure_topics(bootstrap: str, topics: tuple[DemoTopic, ...] = DEMO_TOPICS, timeout: float = 30.0) -> list[str]:
    """Create the demo topics that do not exist yet (replication factor 1); return the names created."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
    existing = admin.list_topics(timeout=timeout).topics
    missing = [t for t in topics if t.name not in existing]
    created: list[str] = []
    if missing:
        new = [
            NewTopic(t.name, num_partitions=t.partitions, replication_factor=1, config=dict(t.config)) for t in missing
        ]
        # Keep ``admin`` referenced until every future resolved: destroying the client first fails them.
        for name, future in admin.create_topics(new, operation_timeout=timeout).items():
            try:
                future.result(timeout=timeout)
                created.append(name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
    _wait_for_leaders(admin, [t.name for t in topics], timeout)
    return created


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


_COUNTRIES: Mapping[str, tuple[str, ...]] = {"eu": ("DE", "FR", "NL", "ES", "IT"), "us": ("US",)}
_PRODUCTS: tuple[tuple[str, str, float], ...] = (
    ("kb-01", "keyboard", 49.0),
    ("ms-02", "mouse", 19.5),
    ("mn-27", "monitor", 229.0),
    ("hd-10", "headset", 89.9),
)


class _Shop:
    """Makes plausible records: orders of a pool of customers, payments of recent orders, profile updates."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.recent_orders: collections.deque[tuple[str, str, float, str]] = collections.deque(maxlen=200)

    def customer_id(self) -> str:
        return f"cus-{self.rng.randint(1, 500):05d}"

    def order(self, region: str) -> tuple[str, dict[str, Any]]:
        order_id = f"ord-{uuid.uuid4().hex[:12]}"
        lines = [
            {"sku": sku, "name": name, "quantity": self.rng.randint(1, 3), "unit_price": price}
            for sku, name, price in self.rng.sample(_PRODUCTS, self.rng.randint(1, 3))
        ]
        amount = round(sum(line["quantity"] * line["unit_price"] for line in lines), 2)
        currency = "EUR" if region == "eu" else "USD"
        customer = self.customer_id()
        self.recent_orders.append((order_id, customer, amount, currency))
        value = {
            "order_id": order_id,
            "customer_id": customer,
            "region": region,
            "country": self.rng.choice(_COUNTRIES[region]),
            "lines": lines,
            "amount": amount,
            "currency": currency,
            "created_at": _now_iso(),
        }
        return order_id, value

    def payment(self) -> tuple[str, dict[str, Any]]:
        if self.recent_orders:
            order_id, customer, amount, currency = self.rng.choice(self.recent_orders)
        else:
            order_id, customer, amount, currency = f"ord-{uuid.uuid4().hex[:12]}", self.customer_id(), 10.0, "EUR"
        status = self.rng.choices(("authorized", "captured", "declined"), weights=(6, 3, 1))[0]
        value = {
            "payment_id": f"pay-{uuid.uuid4().hex[:12]}",
            "order_id": order_id,
            "customer_id": customer,
            "method": "card",
            "card_brand": self.rng.choice(("visa", "mastercard", "amex")),
            "amount": amount,
            "currency": currency,
            "status": status,
            "created_at": _now_iso(),
        }
        return order_id, value

    def customer(self) -> tuple[str, dict[str, Any]]:
        customer = self.customer_id()
        value = {
            "customer_id": customer,
            "name": f"Customer {customer[4:]}",
            "country": self.rng.choice(("DE", "FR", "NL", "US", "ES")),
            "tier": self.rng.choice(("basic", "plus", "pro")),
            "updated_at": _now_iso(),
        }
        return customer, value

    def record(self, topic: str) -> tuple[str, dict[str, Any]]:
        if topic.startswith("orders."):
            return self.order(topic.split(".", 1)[1])
        if topic.startswith("payments."):
            return self.payment()
        return self.customer()


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"


def _headers(source: str) -> list[tuple[str, bytes]]:
    return [
        ("content-type", b"application/json"),
        ("trace-id", uuid.uuid4().hex.encode()),
        ("source", source.encode()),
    ]


# --------------------------------------------------------------------------
# Counters
# --------------------------------------------------------------------------


@dataclass
class _Counts:
    produced: dict[str, int] = field(default_factory=lambda: {t.name: 0 for t in DEMO_TOPICS})
    delivered: int = 0
    delivery_errors: int = 0
    consumed: dict[str, int] = field(default_factory=lambda: {g.group: 0 for g in DEMO_GROUPS})
    committed: dict[str, int] = field(default_factory=lambda: {g.group: 0 for g in DEMO_GROUPS})
    consumer_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def as_dict(self, elapsed: float) -> dict[str, Any]:
        with self.lock:
            return {
                "produced": dict(self.produced),
                "delivered": self.delivered,
                "delivery_errors": self.delivery_errors,
                "consumed": dict(self.consumed),
                "committed": dict(self.committed),
                "consumer_errors": self.consumer_errors,
                "elapsed": round(elapsed, 3),
            }


# --------------------------------------------------------------------------
# Consumers
# --------------------------------------------------------------------------


def _consumer_rate(group: DemoGroup, rate: float, elapsed: float) -> float | None:
    """Records/s the group may process now (None: unthrottled catch-up phase)."""
    if elapsed % (SLOW_SECONDS + CATCH_UP_SECONDS) >= SLOW_SECONDS:
        return None
    share = sum(t.share for t in DEMO_TOPICS if t.name in group.topics)
    return max(0.5, rate * share * SLOW_FACTOR)


def _commit(consumer: Consumer, group: DemoGroup, counts: _Counts, pending: int) -> int:
    """Commit what was processed; returns what is still pending (all of it if the commit failed)."""
    if pending == 0:
        return 0
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:
            log.warning("%s: commit failed (%s), will retry", group.group, exc.args[0].str())
            return pending
    with counts.lock:
        counts.committed[group.group] += pending
    return 0


def _consume(group: DemoGroup, bootstrap: str, rate: float, stop: threading.Event, counts: _Counts) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group.group,
            "client.id": f"{group.group}-demo",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "receive.message.max.bytes": _RECEIVE_MESSAGE_MAX_BYTES,
        }
    )
    consumer.subscribe(list(group.topics))
    t0, pending = time.monotonic(), 0
    credit, last = 0.0, t0  # records the group may still process in the slow phase (a token bucket)
    started = False  # no pause before the first record: joining the group and the first fetch take a while
    try:
        while not stop.is_set():
            # A cycle: take what the group may process since the last one (all there is, in the catch-up phase),
            # then pause its partitions unless a full batch says more is waiting.
            now = time.monotonic()
            allowed = _consumer_rate(group, rate, now - t0)
            credit = min(credit + (allowed or 0.0) * (now - last), CATCH_UP_BATCH)
            last = now
            budget = max(1, int(credit)) if allowed else CATCH_UP_BATCH
            messages = consumer.consume(budget, timeout=_POLL_S)
            credit = max(0.0, credit - len(messages))
            for msg in messages:
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        with counts.lock:
                            counts.consumer_errors += 1
                    continue
                json.loads(msg.value() or b"null")  # "process" the record
                with counts.lock:
                    counts.consumed[group.group] += 1
                pending += 1
                started = True
                if pending >= COMMIT_EVERY:
                    pending = _commit(consumer, group, counts, pending)
            if started and (allowed or len(messages) < budget):
                _idle(consumer, stop)
        _commit(consumer, group, counts, pending)
    finally:
        consumer.close()


def _idle(consumer: Consumer, stop: threading.Event) -> None:
    """Stop fetching for ``IDLE_PAUSE_S`` (see there); a rebalance meanwhile only ends the pause early."""
    assignment = consumer.assignment()
    if not assignment:
        return
    try:
        consumer.pause(assignment)
        stop.wait(IDLE_PAUSE_S)
        consumer.resume(assignment)
    except KafkaException:  # the assignment changed under us: a new assignment starts unpaused
        pass


@contextmanager
def _consumers(bootstrap: str, rate: float, counts: _Counts) -> Iterator[None]:
    """Run the demo consumer groups in threads for the duration of the block."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=_consume, args=(g, bootstrap, rate, stop, counts), name=g.group, daemon=True)
        for g in DEMO_GROUPS
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


# --------------------------------------------------------------------------
# Producing
# --------------------------------------------------------------------------


def _delivery_callback(counts: _Counts) -> Callable[[KafkaError | None, Any], None]:
    def report(err: KafkaError | None, _msg: Any) -> None:
        with counts.lock:
            if err is None:
                counts.delivered += 1
            else:
                counts.delivery_errors += 1
        if err is not None:
            log.warning("delivery failed: %s", err.str())

    return report


def _produce_one(producer: Producer, shop: _Shop, topic: DemoTopic, counts: _Counts, on_delivery: Callable) -> None:
    key, value = shop.record(topic.name)
    while True:
        try:
            producer.produce(
                topic.name,
                key=key.encode(),
                value=json.dumps(value, separators=(",", ":")).encode(),
                headers=_headers(topic.source),
                on_delivery=on_delivery,
            )
            break
        except BufferError:  # local queue full (broker away): wait for deliveries
            producer.poll(0.5)
    with counts.lock:
        counts.produced[topic.name] += 1


def _produce_loop(producer: Producer, rate: float, stop: threading.Event, deadline: float, counts: _Counts) -> None:
    shop = _Shop(random.Random())
    on_delivery = _delivery_callback(counts)
    weights = [t.share for t in DEMO_TOPICS]
    t0 = next_at = last_report = time.monotonic()
    while not stop.is_set() and time.monotonic() < deadline:
        topic = shop.rng.choices(DEMO_TOPICS, weights=weights)[0]
        _produce_one(producer, shop, topic, counts, on_delivery)
        producer.poll(0)
        now = time.monotonic()
        if now - last_report >= _PROGRESS_EVERY:
            log.info("traffic: %s", json.dumps(counts.as_dict(now - t0)))
            last_report = now
        next_at = max(next_at, now - 1.0) + 1.0 / rate
        stop.wait(max(0.0, min(next_at, deadline) - time.monotonic()))


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (main thread only; elsewhere the caller must set it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        log.info("traffic: signal %d received, stopping", signum)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_traffic(
    bootstrap: str,
    rate: float = DEFAULT_RATE,
    stop: threading.Event | None = None,
    duration: float | None = None,
) -> dict[str, Any]:
    """Produce demo records to ``bootstrap`` at ``rate`` records/s and run the demo consumer groups.

    Runs until ``stop`` is set, ``duration`` seconds passed, or (when no ``stop`` is given and this
    is the main thread) SIGTERM/SIGINT; then flushes the producer, commits the consumers' progress
    and returns the counts: ``produced`` per topic, ``delivered``, ``delivery_errors``, ``consumed``
    and ``committed`` per group, ``consumer_errors`` and ``elapsed`` seconds.
    """
    if rate <= 0:
        raise ValueError(f"rate must be positive, not {rate}")
    created = ensure_topics(bootstrap)
    if created:
        log.info("traffic: created topics %s on %s", ", ".join(created), bootstrap)
    counts = _Counts()
    own_stop = stop is None
    stop = stop or threading.Event()
    deadline = time.monotonic() + duration if duration is not None else float("inf")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "mirrorflow-demo-traffic",
            "allow.auto.create.topics": False,  # the demo topics are created above, with their layout
            "linger.ms": 20,
            "enable.idempotence": True,
        }
    )
    t0 = time.monotonic()
    log.info("traffic: producing %.1f records/s to %s", rate, bootstrap)
    with _stop_on_signals(stop) if own_stop else _no_op(), _consumers(bootstrap, rate, counts):
        try:
            _produce_loop(producer, rate, stop, deadline, counts)
        finally:
            left = producer.flush(30)
            if left:
                log.warning("traffic: %d records not delivered at exit", left)
    result = counts.as_dict(time.monotonic() - t0)
    log.info("traffic: stopped: %s", json.dumps(result))
    return result


@contextmanager
def _no_op() -> Iterator[None]:
    yield
