"""One writer per flow family: a run holds a lock kept by Kafka's group membership.

Exactly-once units are already fenced per partition by their transactional.id, but at-least-once
units are not, and two runs of one family (a manual trigger next to a scheduled run, the CLI next to
Airflow) must never both write. The lock is partition 0 of a one-partition topic on the target,
owned by one member of a consumer group with the cooperative-sticky assignor: a second member
joining does not take it away, and it moves only when the holder leaves or its session expires
(a crashed run). Nothing is ever written or committed; the lock lives as long as the run's process.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Self

from confluent_kafka import Consumer, ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

from ..config.keys import is_client_key

LOCK_TOPIC = "mirrorflow-locks.internal"  # ".internal": never replicated (MM2's isInternalTopic)


class LockHeldError(RuntimeError):
    """Another run of the same flow family is writing."""


class FamilyLock:
    """Context manager: ``with FamilyLock(...) as lock:`` then check ``lock.held`` between waves."""

    def __init__(self, consumer_config: dict[str, Any], group: str, wait_s: float = 30.0) -> None:
        self.config = {
            **consumer_config,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
            # Also the rebalance timeout: a contender that gave up mid-join delays the next holder this long at most.
            "max.poll.interval.ms": 15000,
        }
        self.group = group
        self.wait_s = wait_s
        self._held = False
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self._held

    def _on_assign(self, _consumer: Consumer, partitions: list[Any]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._held = True

    def _on_revoke(self, _consumer: Consumer, partitions: list[Any]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._held = False

    def _holder(self) -> str | None:
        """Who holds the lock now, asked without joining (a contender that joins and gives up would
        leave a half-finished join behind, which delays the next holder)."""
        admin = AdminClient({k: v for k, v in self.config.items() if is_client_key(k) or k == "client.id"})
        try:
            (description,) = [f.result(10) for f in admin.describe_consumer_groups([self.group]).values()]
        except KafkaException:
            return None
        if description.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD) or not description.members:
            return None
        member = description.members[0]
        return f"{member.client_id} on {member.host}"

    def __enter__(self) -> Self:
        holder = self._holder()
        if holder is not None:
            raise LockHeldError(f"another run holds the lock {self.group} ({holder})")
        consumer = Consumer(self.config)
        consumer.subscribe([LOCK_TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke)
        deadline = time.monotonic() + self.wait_s
        while not self._held and time.monotonic() < deadline:
            consumer.poll(0.2)
        if not self._held:
            consumer.close()
            raise LockHeldError(f"another run holds the lock {self.group} (waited {self.wait_s:.0f} s)")
        self._consumer = consumer
        self._thread = threading.Thread(target=self._keep, name=f"lock {self.group}", daemon=True)
        self._thread.start()
        return self

    def _keep(self) -> None:
        """Serve group callbacks while the run works, so membership (and the lock) stays ours."""
        assert self._consumer is not None
        while not self._stop.is_set():
            self._consumer.poll(0.5)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._consumer is not None:
            self._consumer.close()
        self._held = False
