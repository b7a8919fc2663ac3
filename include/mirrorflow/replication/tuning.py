"""The copier's settings: unit length, checkpoint interval, batch sizes and the librdkafka defaults of its clients.

The copier reads them as ``tuning.NAME`` when it uses them, so a test may set one for a case. The figures behind
each choice are in docs/performance.md ("Figures behind the copier's settings").
"""

from __future__ import annotations

from typing import Any

CHECKPOINT_EVERY_S = 1.0
CHECKPOINT_EVERY_RECORDS = 10_000
"""At-least-once: a unit stores progress at least every second and every 10,000 records of a partition, so a
crash repeats at most 10,000 records per partition (fewer at low rates)."""

UNIT_SECONDS = 30.0
"""A unit copies its partition in spans: transactions of at most ``mirrorflow.unit.max.records`` and
``mirrorflow.unit.max.bytes`` (exactly-once), or that much between progress checkpoints (at-least-once). After a
span it goes on with the next one, on the same consumer and producer, until it reaches its end or has run this long;
then it returns to the driver, which logs progress, checks that it still holds the run lock and plans the next
wave. Why not a unit per span: each unit opens a consumer, reads the stored progress and costs the driver a Spark
job, and a broker that answers a fetch with a partition's whole backlog (the embedded test broker) sends the rest of
that backlog again to every new consumer."""

CONSUME_WAIT_S = 0.1
"""How long one consume call waits when fewer records than asked are there (a transactional source's markers and
aborted records take offsets without being delivered); the unit's own timeout is counted across calls."""

PRODUCER_DEFAULTS: dict[str, Any] = {"linger.ms": 20, "reconnect.backoff.ms": 20}
"""librdkafka settings of the copier's producers unless the flow's client configuration sets them.

A longer linger lets batches fill (fewer, larger produce requests: less work for both ends); a copy is never
waiting on a single record, since the consumer hands them over by the thousand. ``reconnect.backoff.ms``: librdkafka
waits half of it between leaving the bootstrap connection and connecting to the broker the metadata named, so a new
producer pays that before ``init_transactions`` can ask for its producer id. Reconnecting after a failure still
backs off exponentially up to ``reconnect.backoff.max.ms``."""

CONSUMER_DEFAULTS: dict[str, Any] = {
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "queued.min.messages": 10_000,
    "queued.max.messages.kbytes": 32 * 1024,
}
"""librdkafka settings of a unit's source consumer unless the flow's client configuration sets them.

It has one partition, so a fetch may bring more of it than librdkafka's 1 MiB default (a lane's consumer,
``lane_reader``, has many, within ``fetch.max.bytes``). Its read-ahead is bounded, against librdkafka's 100,000
records and 64 MiB: a unit copies up to an end offset, and records fetched past it are thrown away when the unit
closes, so on a live topic every run fetched again what the one before had read ahead. A copier hands records to its
producer far slower than a fetch brings them, so it keeps a few seconds of work queued either way; and a consumer at
the end of a partition on a broker that answers such fetches at once (the embedded test broker) no longer fetches in
a loop for as long as the copy takes."""

CONSUME_BATCH: int = CONSUMER_DEFAULTS["queued.min.messages"] // 2  # 5,000
CONSUME_BYTES: int = CONSUMER_DEFAULTS["queued.max.messages.kbytes"] * 1024 // 2  # 16 MiB
"""Records asked of the consumer per call: at most ``CONSUME_BATCH``, about ``CONSUME_BYTES`` at the unit's
record size so far, and never more than the unit still needs (so the call returns as soon as the last of them is
there). Both are half of the consumer's read-ahead (``CONSUMER_DEFAULTS``), so a call leaves records queued and
librdkafka does not fetch again while the unit is still working through what it has; a call that empties the queue
leaves a fetcher at the partition's end looping on empty fetches against a broker that answers them at once. A call
costs about the same for one record as for thousands, so smaller calls cost nothing measurable."""

KEEP_PRODUCERS = 64
"""Idle record producers kept per process, as many as a family's ``TRANSACTION_SLOTS`` (least recently used dropped
first): each holds connections and a few librdkafka threads."""

PROBE_AFTER_IDLE_S = 1.0
"""A kept transactional producer idle this long (kept by an earlier wave or run) first sends one record and waits
for its report, to learn at once whether another process fenced it since, rather than after a span. The units of a
lane follow each other within milliseconds and skip that: the probe costs a round trip per unit, during which the
source consumer, at the end of its partition and not yet paused, may fetch in a loop. A fenced producer is caught
either way: nothing it sends can commit, and the unit is copied again with a new producer (``copy.copy_unit``)."""

UNIT_THREADS = 8
"""Units one process copies at once (threads): see ``copy.copy_units``."""
