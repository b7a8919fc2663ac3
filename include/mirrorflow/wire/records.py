"""MM2's internal-topic records: ``OffsetSync`` (with mirrorflow's ``CopiedRun``), ``Checkpoint``, ``Heartbeat``.

Each record is validated when it is constructed, so one that exists can always be written, and its ``key()`` and
``value()`` are the bytes of Kafka's classes of the same name (``connect/mirror-client``); ``decode`` reads what MM2
or mirrorflow wrote, ignoring trailing bytes as Java's ``Schema.read`` does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .codec import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    WireFormatError,
    WireReader,
    check_int,
    encode_int16,
    encode_int32,
    encode_int64,
    encode_string,
    string_bytes,
)

# ---------------------------------------------------------------------------------------------------
# OffsetSync, with mirrorflow's copied-run extension
# ---------------------------------------------------------------------------------------------------

#: Marks mirrorflow's extension after the 16 MM2 bytes of an OffsetSync value ("MirrorFlow eXtension 1").
RUN_MAGIC = b"MFX1"
_RUN = struct.Struct(">qqqq")
_RUN_TRAILER_LEN = len(RUN_MAGIC) + _RUN.size


@dataclass(frozen=True)
class CopiedRun:
    """A contiguous, one-to-one stretch of copied records ending at an offset sync.

    Why: MM2's sync only pins one record; for any other committed offset its translation falls back to
    the "+1 rule" and a failed-over consumer re-reads up to ``offset.lag.max`` records. mirrorflow copies
    partitions in ordered runs and knows more, so it appends this to the sync value, where MM2 never
    looks (Java's ``Schema.read`` ignores trailing bytes).

    Meaning, for the enclosing ``OffsetSync`` (topic, partition, upstream_offset, downstream_offset):

    * every committed source record with upstream offset in ``[run_start_upstream, upstream_offset]`` was
      copied, in order, to downstream offsets ``[run_start_downstream, downstream_offset]``, one to one
      and contiguous on both sides, so ``upstream_offset - run_start_upstream == downstream_offset -
      run_start_downstream`` (validated whenever a sync with a run is built or decoded). A committed
      offset U inside the run therefore translates exactly to ``run_start_downstream + (U -
      run_start_upstream)``;
    * ``previous_upstream``/``previous_downstream`` name the copied record immediately before the run
      start (-1 for both when unknown), and no committed source record lies strictly between
      ``previous_upstream`` and ``run_start_upstream`` (a gap from compaction, transaction markers or
      aborted records). A committed offset U in ``[previous_upstream + 1, run_start_upstream]`` thus
      translates exactly to ``run_start_downstream``: the next record such a consumer reads is the run's
      first one. ``previous_downstream`` may be -1 alone: at the start of a work unit the copier knows
      the stored progress (``previous_upstream``: everything up to it was copied earlier) but not where
      that record landed; the previous unit's last sync says so.
    """

    run_start_upstream: int
    run_start_downstream: int
    previous_upstream: int = -1
    previous_downstream: int = -1

    def __post_init__(self) -> None:
        for name in ("run_start_upstream", "run_start_downstream", "previous_upstream", "previous_downstream"):
            check_int(name, getattr(self, name), INT64_MIN, INT64_MAX)
        if self.run_start_upstream < 0 or self.run_start_downstream < 0:
            raise WireFormatError(f"run start offsets must be >= 0: {self}")
        if self.previous_upstream < -1 or self.previous_downstream < -1:
            raise WireFormatError(f"previous offsets must be >= 0, or -1 when unknown: {self}")
        if self.previous_upstream == -1 and self.previous_downstream != -1:
            raise WireFormatError(f"previous_downstream is known but previous_upstream is not: {self}")
        if self.previous_upstream >= self.run_start_upstream or self.previous_downstream >= self.run_start_downstream:
            raise WireFormatError(f"the previous copied record must come before the run start on both sides: {self}")


@dataclass(frozen=True)
class OffsetSync:
    """One record of ``mm2-offset-syncs.<alias>.internal``: upstream offset U was copied to downstream D.

    Key: topic STRING (the upstream name, not renamed) + partition INT32. Value: upstreamOffset INT64 +
    offset INT64, no version header. With ``run`` set, ``RUN_MAGIC`` and the four INT64 of ``CopiedRun``
    follow the 16 MM2 bytes; MM2 readers ignore them and see an ordinary sync.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    run: CopiedRun | None = None

    def __post_init__(self) -> None:
        string_bytes(self.topic, "topic")
        check_int("partition", self.partition, INT32_MIN, INT32_MAX)
        check_int("upstream_offset", self.upstream_offset, INT64_MIN, INT64_MAX)
        check_int("downstream_offset", self.downstream_offset, INT64_MIN, INT64_MAX)
        run = self.run
        if run is None:
            return
        if not isinstance(run, CopiedRun):
            raise WireFormatError(f"run must be a CopiedRun or None, got {type(run).__name__}")
        if self.upstream_offset < run.run_start_upstream:
            raise WireFormatError(f"run starts at upstream {run.run_start_upstream}, after the sync {self}")
        if self.upstream_offset - run.run_start_upstream != self.downstream_offset - run.run_start_downstream:
            raise WireFormatError(
                f"run lengths differ: upstream {run.run_start_upstream}..{self.upstream_offset} vs downstream "
                f"{run.run_start_downstream}..{self.downstream_offset}; a copied run is one to one"
            )

    def key(self) -> bytes:
        """The record key, as MM2's ``OffsetSync.recordKey()``."""
        return encode_string(self.topic, "topic") + encode_int32(self.partition, "partition")

    def value(self) -> bytes:
        """The record value: MM2's 16 bytes, plus the run trailer when there is a run."""
        out = encode_int64(self.upstream_offset) + encode_int64(self.downstream_offset)
        run = self.run
        if run is not None:
            out += RUN_MAGIC + _RUN.pack(
                run.run_start_upstream, run.run_start_downstream, run.previous_upstream, run.previous_downstream
            )
        return out

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        """Parse a record written by MM2 or mirrorflow.

        Trailing bytes are ignored as in Java, unless they are exactly ``RUN_MAGIC`` plus four INT64, in
        which case they are the copied run (and an inconsistent run raises).
        """
        k = WireReader(key)
        topic = k.read_string("topic")
        partition = k.read_int32("partition")
        v = WireReader(value)
        upstream = v.read_int64("upstreamOffset")
        downstream = v.read_int64("offset")
        trailer = v.rest()
        run = None
        if len(trailer) == _RUN_TRAILER_LEN and trailer.startswith(RUN_MAGIC):
            run = CopiedRun(*_RUN.unpack_from(trailer, len(RUN_MAGIC)))
        return cls(topic, partition, upstream, downstream, run)


# ---------------------------------------------------------------------------------------------------
# Checkpoint and Heartbeat
# ---------------------------------------------------------------------------------------------------

_VERSION_0 = 0


def _read_version(reader: WireReader, record: str) -> None:
    """Read the INT16 header and refuse anything but 0: a later version may change the body's meaning."""
    version = reader.read_int16("version")
    if version != _VERSION_0:
        raise WireFormatError(f"unsupported {record} version {version}, only 0 is known")


@dataclass(frozen=True)
class Checkpoint:
    """One record of ``<source>.checkpoints.internal``: a group's translated committed offset.

    Key: group STRING + topic STRING (the downstream, renamed topic) + partition INT32. Value: version
    INT16 (0) + upstreamOffset INT64 + offset INT64 + metadata STRING. ``metadata=None`` becomes ``""``
    because STRING is not nullable and Java's ``OffsetAndMetadata`` does the same.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def __post_init__(self) -> None:
        if self.metadata is None:
            object.__setattr__(self, "metadata", "")
        string_bytes(self.group, "group")
        string_bytes(self.topic, "topic")
        check_int("partition", self.partition, INT32_MIN, INT32_MAX)
        check_int("upstream_offset", self.upstream_offset, INT64_MIN, INT64_MAX)
        check_int("downstream_offset", self.downstream_offset, INT64_MIN, INT64_MAX)
        string_bytes(self.metadata, "metadata")

    def key(self) -> bytes:
        """The record key, as MM2's ``Checkpoint.recordKey()``."""
        return (
            encode_string(self.group, "group")
            + encode_string(self.topic, "topic")
            + encode_int32(self.partition, "partition")
        )

    def value(self) -> bytes:
        """The record value, version 0."""
        return (
            encode_int16(_VERSION_0)
            + encode_int64(self.upstream_offset)
            + encode_int64(self.downstream_offset)
            + encode_string(self.metadata, "metadata")
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        """Parse a checkpoint; version != 0 raises, trailing bytes are ignored."""
        k = WireReader(key)
        group = k.read_string("group")
        topic = k.read_string("topic")
        partition = k.read_int32("partition")
        v = WireReader(value)
        _read_version(v, "checkpoint")
        upstream = v.read_int64("upstreamOffset")
        downstream = v.read_int64("offset")
        metadata = v.read_string("metadata")
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True)
class Heartbeat:
    """One record of ``heartbeats``: cluster ``source_alias`` was alive, as seen from ``target_alias``.

    Key: sourceClusterAlias STRING + targetClusterAlias STRING. Value: version INT16 (0) + timestamp
    INT64 (epoch ms). ``MirrorClient.upstreamClusters()`` reads these keys from replicated heartbeat
    topics, so they must match MM2's bytes exactly.
    """

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def __post_init__(self) -> None:
        string_bytes(self.source_alias, "source_alias")
        string_bytes(self.target_alias, "target_alias")
        check_int("timestamp_ms", self.timestamp_ms, INT64_MIN, INT64_MAX)

    def key(self) -> bytes:
        """The record key, as MM2's ``Heartbeat.recordKey()``."""
        return encode_string(self.source_alias, "sourceClusterAlias") + encode_string(
            self.target_alias, "targetClusterAlias"
        )

    def value(self) -> bytes:
        """The record value, version 0."""
        return encode_int16(_VERSION_0) + encode_int64(self.timestamp_ms, "timestamp")

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        """Parse a heartbeat; version != 0 raises (as for checkpoints), trailing bytes are ignored."""
        k = WireReader(key)
        source = k.read_string("sourceClusterAlias")
        target = k.read_string("targetClusterAlias")
        v = WireReader(value)
        _read_version(v, "heartbeat")
        return cls(source, target, v.read_int64("timestamp"))
