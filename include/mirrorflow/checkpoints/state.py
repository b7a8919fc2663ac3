"""A flow's translation state as the clusters hold it: offset syncs, the copy's progress, checkpoints.

Every checkpoint run (emit, the group offset sync, failover, status) starts from three whole topics: the offset
syncs, the copy's progress (``mm2-offsets.<source>.internal``) and the checkpoints. On a whole-cluster flow that
is tens of thousands of records a run, and without compaction (the embedded broker, or the active segment of a
real one) every record ever written. librdkafka reads them in a few tens of milliseconds; decoding them record by
record in Python cost several times that. So here:

* the three topics are read concurrently, as raw (key, value) records (:func:`read_raw`);
* checkpoints and progress are reduced to the last record per key *before* decoding: a key decoded once, one value
  decoded per (group, partition) or per source partition, however long the uncompacted history;
* offset syncs are all replayed in topic order (MM2's store depends on every one of them), but decoded with
  ``struct`` and a key decoded once per partition, and only for the source partitions the caller asks about.

Anything the fast paths do not recognise is handed to :mod:`mirrorflow.wire`'s decoders, which decide (and say why
a record is refused): the results are exactly what decoding every record with them gives.
"""

from __future__ import annotations

import contextvars
import logging
import re
import struct
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Self, TypeVar

from ..config.model import FlowConfig
from ..kafka import clients
from ..replication.progress import StoredProgress, progress_topic, read_messages, read_partitions, topic_partitions
from ..wire import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    RUN_MAGIC,
    Checkpoint,
    OffsetSync,
    WireFormatError,
    decode_source_offset_key,
    decode_source_offset_value,
)
from .best import BestTranslator
from .translate import OffsetTranslator

log = logging.getLogger(__name__)

T = TypeVar("T")

#: One record as read: (key, value), either may be None.
Raw = tuple[bytes | None, bytes | None]
#: (topic, partition) of a source partition.
SourcePartition = tuple[str, int]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SYNC = struct.Struct(">qq")
_SYNC_WITH_RUN = struct.Struct(f">qq{len(RUN_MAGIC)}sqqqq")
_CHECKPOINT_HEAD = struct.Struct(">hqqh")  # version, upstream, downstream, metadata length


def submit(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``pool.submit`` in a copy of this thread's context, so the Kafka calls made there count as the caller's."""
    return pool.submit(contextvars.copy_context().run, fn, *args)


# ----------------------------------------------------------------------------------------------------
# Raw reads
# ----------------------------------------------------------------------------------------------------


def read_raw(flow: FlowConfig, side: str, topic: str, timeout: float) -> list[Raw]:
    """Every (key, value) of ``topic`` partition 0 on the flow's ``side``, from the beginning to its end.

    A bounded reader (``clients.bounded_reader``, read_committed): it never waits for a long poll at its end.
    """
    config = clients.client_properties(flow, side, "consumer")  # type: ignore[arg-type]
    return list(read_partitions(config, topic, [0], timeout))


def read_progress_messages(flow: FlowConfig, topic: str, timeout: float) -> list[Any]:
    """Every message of the progress topic on the target (all its partitions), as a bounded reader reads them."""
    config = clients.client_properties(flow, "target", "consumer")
    partitions = topic_partitions(config, topic, timeout)
    return list(read_messages(config, topic, partitions, timeout)) if partitions else []


# ----------------------------------------------------------------------------------------------------
# Offset syncs
# ----------------------------------------------------------------------------------------------------


def _string_int32_key(key: bytes) -> tuple[str, int] | None:
    """(STRING, INT32) at the start of a key, or None when anything is unusual (wire's decoder then decides)."""
    if len(key) < 6:
        return None
    n = _INT16.unpack_from(key)[0]
    if n < 0 or len(key) < n + 6:
        return None
    try:
        topic = key[2 : 2 + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return topic, _INT32.unpack_from(key, 2 + n)[0]


def _run_is_valid(upstream: int, downstream: int, su: int, sd: int, pu: int, pd: int) -> bool:
    """The checks ``CopiedRun`` and ``OffsetSync`` make of a decoded run (``tests/unit/test_checkpoint_state.py``
    holds both to the same answers): a refusal here is handed to wire, which says why."""
    return (
        su >= 0
        and sd >= 0
        and pu >= -1
        and pd >= -1
        and not (pu == -1 and pd != -1)
        and pu < su
        and pd < sd
        and upstream >= su
        and upstream - su == downstream - sd
    )


def sync_fields(value: bytes) -> tuple[int, int, tuple[int, int, int, int] | None] | None:
    """(upstream, downstream, run) of an offset sync's value in the two forms writers use: MM2's 16 bytes, and
    mirrorflow's with a valid run after them. None otherwise: ``OffsetSync.decode`` decides."""
    size = len(value)
    if size == _SYNC.size:
        upstream, downstream = _SYNC.unpack(value)
        return upstream, downstream, None
    if size == _SYNC_WITH_RUN.size:
        upstream, downstream, magic, su, sd, pu, pd = _SYNC_WITH_RUN.unpack(value)
        if magic == RUN_MAGIC and _run_is_valid(upstream, downstream, su, sd, pu, pd):
            return upstream, downstream, (su, sd, pu, pd)
    return None


def add_syncs(
    translator: OffsetTranslator,
    records: Sequence[Raw],
    *,
    topic: str = "offset syncs",
    wanted: Collection[SourcePartition] | None = None,
) -> OffsetTranslator:
    """Replay offset-sync records into ``translator`` in topic order, as ``add_all`` of their decoded syncs does.

    ``wanted``: only these source partitions are decoded and kept (None: all); a translator asked about any other
    partition answers "unavailable". Records that are not offset syncs are skipped with a warning, as MM2 does.
    """
    keys: dict[bytes, tuple[str, int] | WireFormatError] = {}
    for key, value in records:
        if key is None or value is None:
            continue
        where = keys.get(key)
        if where is None:
            where = _string_int32_key(key)
            if where is None:
                try:
                    probe = OffsetSync.decode(key, bytes(_SYNC.size))
                    where = (probe.topic, probe.partition)
                except WireFormatError as exc:
                    where = exc
            keys[key] = where
        if isinstance(where, WireFormatError):
            log.warning("%s: skipping a record that is not an offset sync: %s", topic, where)
            continue
        if wanted is not None and where not in wanted:
            continue
        fields = sync_fields(value)
        if fields is not None:
            translator.add_offsets(where[0], where[1], *fields)
            continue
        try:
            translator.add(OffsetSync.decode(key, value))
        except WireFormatError as exc:
            log.warning("%s: skipping a record that is not an offset sync: %s", topic, exc)
    translator.store.finish_initial_read()
    return translator


# ----------------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------------

#: A valid checkpoint value (version 0, offsets 0, metadata ""), to decode a key alone with wire's decoder.
_ANY_CHECKPOINT_VALUE = bytes(_CHECKPOINT_HEAD.size)


def _checkpoint_key(key: bytes) -> tuple[str, str, int] | WireFormatError:
    """(group, topic, partition) of a checkpoint key (trailing bytes ignored, as wire and MM2 do)."""
    size = len(key)
    if size >= 8:
        n = _INT16.unpack_from(key)[0]
        if 0 <= n and size >= n + 8:
            m = _INT16.unpack_from(key, 2 + n)[0]
            end = 4 + n + m
            if 0 <= m and size >= end + 4:
                try:
                    return (
                        key[2 : 2 + n].decode("utf-8"),
                        key[4 + n : end].decode("utf-8"),
                        _INT32.unpack_from(key, end)[0],
                    )
                except UnicodeDecodeError:
                    pass
    try:
        cp = Checkpoint.decode(key, _ANY_CHECKPOINT_VALUE)
    except WireFormatError as exc:
        return exc
    return cp.group, cp.topic, cp.partition


def _checkpoint(where: tuple[str, str, int], key: bytes, value: bytes) -> Checkpoint:
    """The checkpoint of one record whose key decoded to ``where``; raises ``WireFormatError`` as wire does."""
    size = len(value)
    if size >= _CHECKPOINT_HEAD.size:
        version, upstream, downstream, n = _CHECKPOINT_HEAD.unpack_from(value)
        start = _CHECKPOINT_HEAD.size
        if version == 0 and 0 <= n <= size - start:
            try:
                metadata = value[start : start + n].decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                return Checkpoint(where[0], where[1], where[2], upstream, downstream, metadata)
    return Checkpoint.decode(key, value)


def latest_checkpoints(records: Sequence[Raw], *, topic: str = "checkpoints") -> dict[tuple[str, str, int], Checkpoint]:
    """The last valid checkpoint per (group, remote topic, partition), as decoding every record in order gives.

    Read from the end, a (group, partition) is decoded until one of its records is valid: earlier ones cannot
    change the answer, so an uncompacted history costs one dictionary look-up per record. The result is ordered
    as the forward read orders it (by first appearance), for callers that iterate it.
    """
    keys: dict[bytes, tuple[str, str, int] | WireFormatError] = {}
    found: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in reversed(records):
        if key is None or value is None:
            continue
        where = keys.get(key)
        if where is None:
            where = keys[key] = _checkpoint_key(key)
        if isinstance(where, WireFormatError):
            log.warning("%s: skipping a record that is not a checkpoint: %s", topic, where)
            continue
        if where in found:
            continue
        try:
            found[where] = _checkpoint(where, key, value)
        except WireFormatError as exc:
            log.warning("%s: skipping a record that is not a checkpoint: %s", topic, exc)
    ordered: dict[tuple[str, str, int], Checkpoint] = {}
    for key in dict.fromkeys(k for k, v in records if k is not None and v is not None):
        where = keys[key]
        if not isinstance(where, WireFormatError) and where in found and where not in ordered:
            ordered[where] = found[where]
    return ordered


# ----------------------------------------------------------------------------------------------------
# The copy's progress
# ----------------------------------------------------------------------------------------------------


#: The progress key and value exactly as Jackson writes them (no escape in the strings, no spaces, no leading zero):
#: every key MM2 and mirrorflow write. Anything else (longer numbers too) is left to wire's JSON decoders.
_PROGRESS_KEY = re.compile(
    rb'\["MirrorSourceConnector",\{"cluster":"([^"\\\x00-\x1f]*)",'
    rb'"partition":(0|-?[1-9][0-9]{0,19}),"topic":"([^"\\\x00-\x1f]*)"\}\]'
)
_PROGRESS_VALUE = re.compile(rb'\{"offset":(0|-?[1-9][0-9]{0,19})\}')


def progress_key(key: bytes) -> tuple[str, str, int] | None:
    """``wire.decode_source_offset_key``, without a JSON parser for the keys Jackson writes."""
    match = _PROGRESS_KEY.fullmatch(key)
    if match is not None:
        partition = int(match[2])
        if INT32_MIN <= partition <= INT32_MAX:
            try:
                return match[1].decode("utf-8"), match[3].decode("utf-8"), partition
            except UnicodeDecodeError:
                pass
    return decode_source_offset_key(key)


def progress_offset(value: bytes | None) -> int | None:
    """``wire.decode_source_offset_value``, without a JSON parser for ``{"offset":N}``."""
    if value is not None:
        match = _PROGRESS_VALUE.fullmatch(value)
        if match is not None:
            offset = int(match[1])
            if INT64_MIN <= offset <= INT64_MAX:
                return offset
    return decode_source_offset_value(value)


def latest_progress(
    messages: Sequence[Any], source_alias: str, wanted: Collection[SourcePartition] | None = None
) -> dict[SourcePartition, StoredProgress]:
    """Stored progress per source partition of ``source_alias`` (later records win, tombstones clear), as
    ``replication.progress.read_stored_progress`` gives it, decoding one key per distinct key and one value per
    partition. ``wanted``: only these partitions (None: all)."""
    last: dict[bytes, tuple[int, Any]] = {}
    for position, message in enumerate(messages):
        key = message.key()
        if key:
            last[key] = (position, message)
    chosen: dict[SourcePartition, tuple[int, Any]] = {}
    for key, (position, message) in last.items():
        decoded = progress_key(key)
        if decoded is None or decoded[0] != source_alias:
            continue
        where = (decoded[1], decoded[2])
        if wanted is not None and where not in wanted:
            continue
        known = chosen.get(where)
        if known is None or known[0] < position:  # two spellings of one key: the later record wins
            chosen[where] = (position, message)
    result: dict[SourcePartition, StoredProgress] = {}
    for where, (_position, message) in chosen.items():
        offset = progress_offset(message.value())
        if offset is None:
            continue  # a tombstone, or no offset: no progress
        stamp_type, stamp = message.timestamp()
        written = stamp if stamp_type and stamp >= 0 else None
        result[where] = StoredProgress.from_message(offset, message.headers(), written)
    return result


# ----------------------------------------------------------------------------------------------------
# The three reads together
# ----------------------------------------------------------------------------------------------------


def syncs_location(flow: FlowConfig) -> tuple[str, str]:
    """(side, topic) of the flow's offset-syncs topic (``offset-syncs.topic.location``)."""
    if flow.get("offset-syncs.topic.location") == "target":
        return "target", flow.policy.offset_syncs_topic(flow.source)
    return "source", flow.policy.offset_syncs_topic(flow.target)


class StateReads:
    """The offset syncs, the progress and the checkpoints of a flow, read concurrently in the background.

    Started on construction, so a run can ask its clusters about groups meanwhile; decoded when asked, and the
    syncs and progress only for the source partitions the run turned out to need. ``syncs=False``: neither is
    read (they lie on a source that is down). Use as a context manager: the reading threads end with it.
    """

    def __init__(self, flow: FlowConfig, timeout: float, *, syncs: bool = True) -> None:
        self.flow = flow
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="checkpoint-state")  # 3 reads, 1 for :meth:`run`
        self._checkpoints_topic = flow.policy.checkpoints_topic(flow.source)
        self._syncs_side, self._syncs_topic = syncs_location(flow)
        self._raw_checkpoints = submit(self._pool, read_raw, flow, "target", self._checkpoints_topic, timeout)
        self._raw_syncs: Future[list[Raw]] | None = None
        self._progress: Future[list[Any]] | None = None
        if syncs:
            self._raw_syncs = submit(self._pool, read_raw, flow, self._syncs_side, self._syncs_topic, timeout)
            self._progress = submit(self._pool, read_progress_messages, flow, progress_topic(flow.source), timeout)
        self._checkpoints: dict[tuple[str, str, int], Checkpoint] | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn`` on the reads' threads too (a call that waits on a cluster), counted as the caller's."""
        return self._pool.submit(contextvars.copy_context().run, lambda: fn(*args, **kwargs))

    def checkpoints(self) -> dict[tuple[str, str, int], Checkpoint]:
        """The last checkpoint per (group, remote topic, partition) on the target."""
        if self._checkpoints is None:
            self._checkpoints = latest_checkpoints(self._raw_checkpoints.result(), topic=self._checkpoints_topic)
        return self._checkpoints

    def translator(self, wanted: Collection[SourcePartition] | None = None) -> OffsetTranslator | None:
        """The flow's translator for the ``wanted`` source partitions (None: all); None without syncs."""
        if self._raw_syncs is None or self._progress is None:
            return None
        translator = add_syncs(OffsetTranslator(), self._raw_syncs.result(), topic=self._syncs_topic, wanted=wanted)
        for (topic, partition), stored in latest_progress(self._progress.result(), self.flow.source, wanted).items():
            translator.note_progress(topic, partition, stored.offset, stored.target_next)
        return translator

    def best(self, wanted: Collection[SourcePartition] | None = None) -> BestTranslator:
        return BestTranslator(self.translator(wanted), self.checkpoints())


__all__ = [
    "Raw",
    "SourcePartition",
    "StateReads",
    "add_syncs",
    "latest_checkpoints",
    "latest_progress",
    "progress_key",
    "progress_offset",
    "read_progress_messages",
    "read_raw",
    "submit",
    "sync_fields",
    "syncs_location",
]
