"""Helpers shared by the benchmark scripts: progress lines, timing, two embedded clusters, plain Kafka setup.

Why a module of its own: every benchmark needs the same throwaway pair of noida-db clusters that is
stopped however the run ends, the same fast way to create topics, records and group commits, and the
same Markdown table, so that the numbers of different scripts are taken and printed the same way.
Nothing here uses the library under measurement (except its dev-cluster manager and ``free_port``).
"""

from __future__ import annotations

import atexit
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.processes import children
from mirrorflow_dev.devcluster import ClusterSpec, DevClusters, free_port

T = TypeVar("T")

FLOW = "primary->backup"
PREFIX = "bench"

_T0 = time.monotonic()
#: Signals received (SIGINT/SIGTERM), so an interrupt that librdkafka turned into a SystemError is known.
INTERRUPTED: list[int] = []


def say(message: str) -> None:
    """A progress line with the elapsed time: group creation at full size takes a while."""
    print(f"[{time.monotonic() - _T0:7.1f} s] {message}", flush=True)


def peak_rss_mib() -> float:
    """Peak resident set of this process so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mib() -> float:
    """Current resident set, to tell what a step added to the peak from what setup already used."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    return float("nan")


def timed(fn: Callable[[], T], profile: bool = False, label: str = "") -> tuple[T, float]:
    """Wall time of ``fn()``; with ``profile`` also the top functions by cumulative time (where it goes)."""
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    try:
        result = fn()
    finally:
        if profiler is not None:
            profiler.disable()
    seconds = time.perf_counter() - started
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        print(f"\n--- cProfile: {label} ({seconds:.2f} s wall) ---\n{out.getvalue()}", flush=True)
    return result, seconds


# ----------------------------------------------------------------------------------------------------
# Clusters and plain Kafka helpers (independent of the library under measurement)
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clusters:
    """The running pair: bootstrap strings, and what is needed to stop one of them on purpose (a disaster)."""

    primary: str
    backup: str
    state_dir: Path
    specs: tuple[ClusterSpec, ...]

    def only(self, alias: str) -> DevClusters:
        """A manager of one cluster of the pair (same state dir), e.g. to stop the primary by its PID."""
        return DevClusters(self.state_dir, [s for s in self.specs if s.alias == alias])

    def pid(self, alias: str) -> int | None:
        """The PID recorded for cluster ``alias`` (its launcher; the broker is a child of it)."""
        try:
            return int(json.loads((self.state_dir / alias / "pid").read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants, with the children they reaped.

    Why CPU and not only wall time: on 2 cores shared by two brokers, Spark and the copier, a figure of wall time
    moves with whatever else runs; the CPU each party spends per record does much less, and says who the cores
    went to.
    """
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / _CLOCK_TICKS  # utime stime cutime cstime
        stack += children(current)
    return total


#: A broker using less than this share of a core over ``QUIET_WINDOW_S`` is quiet (an idle noida-db uses ~0.2%)...
QUIET_SHARE = 0.05
QUIET_WINDOW_S = 0.5
#: ... and it counts as done only after ``QUIET_HOLD_S`` of such windows in a row: noida-db's persistence pauses
#: for up to a second between passes (measured after 400,000 records of 1 KB were loaded, in 0.25 s samples: a full
#: core for 2 s, 0.75 s at rest, a full core for 10.5 s more), and a one-second window that fell in such a pause
#: let a run start against a broker still persisting (a probe's source broker then spent 20.5 us per record read,
#: against 2.8 when it was done).
QUIET_HOLD_S = 3.0


def wait_until_quiet(pids: Sequence[int], limit_s: float = 300.0) -> float:
    """Wait until the process trees ``pids`` (embedded brokers) are idle; return the seconds waited.

    Why: noida-db persists in the background after a write, and the work is proportional to the data it holds,
    not to the write: measured on the 2-vCPU machine, 400 MB loaded kept a broker at a full core for 14 s after
    the producer's last acknowledgement, and then ten 50-byte records a second to another topic kept it there
    again. Without this wait a run is charged with the persistence of what the previous step wrote (the load,
    or the previous variant's copy of a gigabyte), and which variant pays depends on the order. Apache Kafka
    does not do this; on given clusters there is nothing to wait for. Idle means idle for ``QUIET_HOLD_S`` in a
    row, not for one window (the persistence pauses between passes).
    """
    started = time.monotonic()
    before = sum(tree_cpu_seconds(pid) for pid in pids)
    quiet_since: float | None = None
    while time.monotonic() - started < limit_s:
        window_start = time.monotonic()
        time.sleep(QUIET_WINDOW_S)
        now = sum(tree_cpu_seconds(pid) for pid in pids)
        if now - before < QUIET_SHARE * (time.monotonic() - window_start):
            quiet_since = window_start if quiet_since is None else quiet_since
            if time.monotonic() - quiet_since >= QUIET_HOLD_S:
                break
        else:
            quiet_since = None
        before = now
    return time.monotonic() - started


@contextlib.contextmanager
def embedded_clusters() -> Iterator[Clusters]:
    """Two fresh noida-db clusters on free ports; stopped and wiped however the block ends.

    SIGINT and SIGTERM become KeyboardInterrupt so that ``finally`` runs (and are remembered: one that
    lands inside a librdkafka call surfaces as a SystemError instead); atexit is a last safety net. Only the
    process groups recorded in this run's own state dir are ever signalled.
    """
    state_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-"))
    ports: list[int] = []
    while len(ports) < 2:  # free_port() alone could return the same port twice
        port = free_port()
        if port not in ports:
            ports.append(port)
    specs = (ClusterSpec("primary", ports[0]), ClusterSpec("backup", ports[1]))
    manager = DevClusters(state_dir, specs)

    def stop_quietly() -> None:
        with contextlib.suppress(Exception):
            manager.down(timeout=10)

    def on_signal(signum: int, _frame: object) -> None:
        INTERRUPTED.append(signum)
        raise KeyboardInterrupt(f"received signal {signum}")

    atexit.register(stop_quietly)
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        say(f"starting two embedded clusters (noida-db) on ports {ports[0]} and {ports[1]} in {state_dir}")
        manager.up(timeout=60)
        yield Clusters(specs[0].bootstrap, specs[1].bootstrap, state_dir, specs)
    finally:
        say("stopping the clusters")
        try:
            for status in manager.down(timeout=30):
                say(f"  {status.alias}: {status.detail}")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            atexit.unregister(stop_quietly)
            shutil.rmtree(state_dir, ignore_errors=True)


def mm2_properties(primary: str, backup: str, *extra: str) -> str:
    """The flow under measurement in MM2 property names (topics ``bench.*``, groups ``bench-*``), plus ``extra``."""
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {primary}\n"
        f"backup.bootstrap.servers = {backup}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {PREFIX}\\\\..*\nprimary->backup.groups = {PREFIX}-.*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.location = target\nsync.topic.acls.enabled = false\n"
        + "".join(f"{line}\n" for line in extra)
    )


def create_topic(bootstrap: str, name: str, partitions: int, timeout: float = 30.0) -> None:
    """Create a topic and wait until metadata shows a leader for every partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entry = admin.list_topics(topic=name, timeout=5).topics.get(name)
        partitions_ok = entry is not None and entry.error is None and len(entry.partitions) == partitions
        if partitions_ok and all(p.leader >= 0 for p in entry.partitions.values()):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {name} did not get leaders for {partitions} partition(s) in {timeout} s")


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    """``per_partition`` small records into each partition; raises unless all are acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(
                topic, key=b"k%d" % i, value=f"{tag}-{p}-{i}".encode(), partition=p, on_delivery=on_delivery
            )
        producer.poll(0)
    remaining = producer.flush(30)
    if remaining or errors:
        raise RuntimeError(f"{topic}: {remaining} record(s) not delivered, errors: {errors[:3]}")


TOPIC_CHUNK = 500
"""Topics per ``create_topics``/``delete_topics`` request: one batched call, in chunks a broker takes at once."""


def create_topics(bootstrap: str, names: list[str], partitions: int, rf: int = 1, timeout: float = 300.0) -> None:
    """Every topic in batched ``create_topics`` requests (``TOPIC_CHUNK`` a request), then wait for their leaders."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, len(names), TOPIC_CHUNK):
        chunk = [
            NewTopic(n, num_partitions=partitions, replication_factor=rf) for n in names[start : start + TOPIC_CHUNK]
        ]
        for future in admin.create_topics(chunk, request_timeout=timeout).values():
            future.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=60).topics
        missing = [
            n
            for n in names
            if (entry := topics.get(n)) is None
            or entry.error is not None
            or len(entry.partitions) != partitions
            or any(p.leader < 0 for p in entry.partitions.values())
        ]
        if not missing:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{len(missing)} of {len(names)} topics without leaders for {partitions} partition(s)")


def produce_everywhere(
    bootstrap: str,
    names: list[str],
    partitions: int,
    per_partition: int,
    record: Callable[[int, int], tuple[bytes | None, bytes]],
    timeout: float = 300.0,
) -> None:
    """``per_partition`` records into every partition of every topic with one idempotent producer, ``record(p, i)``
    giving the key and value of partition ``p``'s ``i``-th; raises unless all are acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for topic in names:
        for p in range(partitions):
            for i in range(per_partition):
                key, value = record(p, i)
                while True:
                    try:
                        producer.produce(topic, key=key, value=value, partition=p, on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining or errors:
        raise RuntimeError(f"{remaining} record(s) not delivered, errors: {errors[:3]}")


def spread_commit(
    bootstrap: str, groups: list[str], names: list[str], partitions: int, per_group: int, records: int
) -> None:
    """Group g commits on ``per_group`` partitions of the flow (consecutive from partition ``per_group * g``,
    wrapping around it), at offsets 1..``records``: inside what was copied, so every checkpoint translates.

    ``commit_many`` over several topics: one AdminClient request per group, 100 in flight.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until every future of a chunk resolved
    width = len(names) * partitions
    for start in range(0, len(groups), 100):
        futures = {}
        for g in range(start, min(start + 100, len(groups))):
            tps = []
            for k in range(min(per_group, width)):
                index = (g * per_group + k) % width
                tps.append(TopicPartition(names[index // partitions], index % partitions, 1 + (g * 7 + k) % records))
            futures.update(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(groups[g], tps)]))
        for group, future in futures.items():
            answer = future.result(120)
            failed = [f"{tp.topic}/{tp.partition}: {tp.error}" for tp in answer.topic_partitions or [] if tp.error]
            if failed:
                raise RuntimeError(f"group {group}: commit refused: {failed[:3]}")


def commit_many(
    bootstrap: str, topic: str, groups: list[str], offset_of: Callable[[int, int], int], partitions: int
) -> None:
    """Commit offsets of every group on every partition with AdminClient (one request per group).

    Much faster than a consumer per group; the admin client stays referenced until every future of a
    chunk resolved (a collected client cancels its pending requests).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    chunk = 100
    for start in range(0, len(groups), chunk):
        futures = {}
        for g in range(start, min(start + chunk, len(groups))):
            tps = [TopicPartition(topic, p, offset_of(g, p)) for p in range(partitions)]
            futures.update(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(groups[g], tps)]))
        for group, future in futures.items():
            answer = future.result(60)
            failed = [f"{tp.partition}: {tp.error}" for tp in answer.topic_partitions or [] if tp.error]
            if failed:
                raise RuntimeError(f"group {group}: commit refused: {failed[:3]}")
        say(f"  committed {min(start + chunk, len(groups))}/{len(groups)} groups x {partitions} partitions")
    del admin


# ----------------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    """Median with min-max: a single figure hides how much one run varies."""
    if len(values) == 1:
        return f"{values[0]:.3f} s"
    return f"{statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def table(rows: Sequence[Sequence[str]], header: Sequence[str] = ("measure", "mirrorflow", "MM2 default")) -> str:
    """A Markdown table (aligned, so it reads in a terminal and pastes into docs/performance.md as is)."""
    columns = len(header)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(columns)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
