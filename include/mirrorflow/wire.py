"""MM2's record formats, byte for byte, in pure Python.

mirrorflow shares its internal topics with MirrorMaker 2: an MM2 checkpoint task must be able to read
the offset syncs mirrorflow writes, a consumer using ``RemoteClusterUtils`` must read mirrorflow's
checkpoints, and a migration must find MM2's Connect source offsets under exactly the key bytes
Connect looks up. Everything here is therefore checked against the byte examples of
Kafka's ``OffsetSync``, ``Checkpoint`` and ``Heartbeat`` classes (``connect/mirror-client``), and no function does any Kafka I/O, so the formats can be tested and
reused (Spark executors, CLI, DAGs) without a cluster.

Encoding follows Kafka's classic protocol ``Schema``/``Struct`` types: fixed-width big-endian signed
integers, a non-nullable ``STRING`` (INT16 length + UTF-8), fields concatenated in schema order and
trailing bytes ignored on read (Java's ``Schema.read`` stops after the declared fields). All records are
validated when they are constructed, so a record object that exists can always be written.
"""

from __future__ import annotations

import functools
import json
import re
import struct
from dataclasses import dataclass

__all__ = [
    "CHECKPOINT_CONNECTOR",
    "HEARTBEAT_CONNECTOR",
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "RUN_MAGIC",
    "SOURCE_CONNECTOR",
    "STRING_MAX_BYTES",
    "Checkpoint",
    "CopiedRun",
    "Heartbeat",
    "OffsetSync",
    "WireFormatError",
    "WireReader",
    "checkpoint_connector_key",
    "decode_source_offset_key",
    "decode_source_offset_value",
    "encode_int16",
    "encode_int32",
    "encode_int64",
    "encode_string",
    "heartbeat_connector_key",
    "java_partition",
    "murmur2",
    "source_offset_key",
    "source_offset_value",
    "to_positive",
]

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# Java's Type.STRING refuses to write more than Short.MAX_VALUE bytes of UTF-8.
STRING_MAX_BYTES = INT16_MAX

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class WireFormatError(ValueError):
    """A value cannot be encoded, or bytes do not decode, in an MM2 record format.

    A ``ValueError`` so callers that already treat bad input generically keep working; readers of the
    internal topics catch it to skip a malformed record, as MM2 does with ``SchemaException``.
    """


# ---------------------------------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------------------------------


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    """Reject non-ints (``bool`` included: Java would never put one there) and out-of-range values."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireFormatError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise WireFormatError(f"{name}={value} is outside [{lo}, {hi}]")
    return value


def encode_int16(value: int, name: str = "INT16") -> bytes:
    """Encode a big-endian signed 16-bit integer (Kafka ``INT16``)."""
    return _INT16.pack(_check_int(name, value, INT16_MIN, INT16_MAX))


def encode_int32(value: int, name: str = "INT32") -> bytes:
    """Encode a big-endian signed 32-bit integer (Kafka ``INT32``)."""
    return _INT32.pack(_check_int(name, value, INT32_MIN, INT32_MAX))


def encode_int64(value: int, name: str = "INT64") -> bytes:
    """Encode a big-endian signed 64-bit integer (Kafka ``INT64``)."""
    return _INT64.pack(_check_int(name, value, INT64_MIN, INT64_MAX))


def _utf8(value: object, name: str) -> bytes:
    """UTF-8 bytes of a STRING field, enforcing Java's non-null and 32767-byte rules.

    Lone surrogates raise instead of being replaced by ``?`` as Java's encoder would: a silently
    altered group or topic name would never match the name it came from.
    """
    if not isinstance(value, str):
        raise WireFormatError(f"{name} must be a str (STRING is not nullable), got {type(value).__name__}")
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WireFormatError(f"{name} is not encodable as UTF-8: {exc}") from exc
    if len(data) > STRING_MAX_BYTES:
        raise WireFormatError(f"{name} is {len(data)} bytes of UTF-8, more than the {STRING_MAX_BYTES} a STRING holds")
    return data


def encode_string(value: str, name: str = "STRING") -> bytes:
    """Encode a Kafka classic ``STRING``: INT16 byte length, then UTF-8. Not nullable."""
    data = _utf8(value, name)
    return _INT16.pack(len(data)) + data


class WireReader:
    """Sequential reader over one record's key or value, mirroring Java's ``ByteBuffer`` reads.

    Every read checks the remaining length, so truncated input raises ``WireFormatError`` instead of
    ``struct.error`` or a silently short string.
    """

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes | bytearray | memoryview | None) -> None:
        if data is None:
            raise WireFormatError("record key or value is null")
        self._data = bytes(data)
        self._pos = 0

    @property
    def position(self) -> int:
        """Bytes consumed so far."""
        return self._pos

    def remaining(self) -> int:
        """Bytes not yet consumed."""
        return len(self._data) - self._pos

    def read_bytes(self, n: int, what: str = "bytes") -> bytes:
        """Consume exactly ``n`` bytes."""
        if n > self.remaining():
            raise WireFormatError(f"truncated record: {what} needs {n} bytes, only {self.remaining()} left")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def rest(self) -> bytes:
        """Consume and return whatever is left (the trailing bytes MM2 ignores)."""
        return self.read_bytes(self.remaining())

    def read_int16(self, what: str = "INT16") -> int:
        """Consume a big-endian signed 16-bit integer."""
        return _INT16.unpack(self.read_bytes(2, what))[0]

    def read_int32(self, what: str = "INT32") -> int:
        """Consume a big-endian signed 32-bit integer."""
        return _INT32.unpack(self.read_bytes(4, what))[0]

    def read_int64(self, what: str = "INT64") -> int:
        """Consume a big-endian signed 64-bit integer."""
        return _INT64.unpack(self.read_bytes(8, what))[0]

    def read_string(self, what: str = "STRING") -> str:
        """Consume a Kafka classic ``STRING``.

        A negative length is an error, as in Java. Invalid UTF-8 is an error too (Java would substitute
        U+FFFD), because a name decoded with replacement characters would not re-encode to the key bytes
        it came from.
        """
        length = self.read_int16(f"{what} length")
        if length < 0:
            raise WireFormatError(f"{what} length {length} cannot be negative")
        data = self.read_bytes(length, what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"{what} is not valid UTF-8: {exc}") from exc


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
            _check_int(name, getattr(self, name), INT64_MIN, INT64_MAX)
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
        _utf8(self.topic, "topic")
        _check_int("partition", self.partition, INT32_MIN, INT32_MAX)
        _check_int("upstream_offset", self.upstream_offset, INT64_MIN, INT64_MAX)
        _check_int("downstream_offset", self.downstream_offset, INT64_MIN, INT64_MAX)
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
        _utf8(self.group, "group")
        _utf8(self.topic, "topic")
        _check_int("partition", self.partition, INT32_MIN, INT32_MAX)
        _check_int("upstream_offset", self.upstream_offset, INT64_MIN, INT64_MAX)
        _check_int("downstream_offset", self.downstream_offset, INT64_MIN, INT64_MAX)
        _utf8(self.metadata, "metadata")

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
        _utf8(self.source_alias, "source_alias")
        _utf8(self.target_alias, "target_alias")
        _check_int("timestamp_ms", self.timestamp_ms, INT64_MIN, INT64_MAX)

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


# ---------------------------------------------------------------------------------------------------
# Connect source offsets (mm2-offsets.<source>.internal)
# ---------------------------------------------------------------------------------------------------

SOURCE_CONNECTOR = "MirrorSourceConnector"
CHECKPOINT_CONNECTOR = "MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR = "MirrorHeartbeatConnector"

# What Jackson's UTF8JsonGenerator escapes with default settings (checked against jackson 2.17 and 2.21):
# '"', '\\', the C0 controls (short forms for \b \t \n \f \r, else \u00XX), and every UTF-16 surrogate,
# so a character outside the BMP is written as an escaped surrogate pair. Hex digits are upper case.
# Python's json.dumps(ensure_ascii=False) differs on the last two points (raw 4-byte UTF-8, lower-case
# hex), and Connect finds offsets by exact key bytes, so strings are escaped here instead.
_JACKSON_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_JACKSON_ESCAPED = re.compile('[\x00-\x1f"\\\\\ud800-\udfff\U00010000-\U0010ffff]')


def _jackson_escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    short = _JACKSON_SHORT.get(ch)
    if short is not None:
        return short
    cp = ord(ch)
    if cp < 0x10000:
        return f"\\u{cp:04X}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04X}\\u{0xDC00 + (cp & 0x3FF):04X}"


def _jackson_json(obj: object) -> str:
    """Compact JSON text exactly as Connect's ``JsonConverter`` (schemas disabled) writes it.

    Dicts are written in their insertion order, so callers build them in Java ``HashMap`` iteration
    order (Connect's offset keys are Java maps).
    """
    if isinstance(obj, str):
        return '"' + _JACKSON_ESCAPED.sub(_jackson_escape_char, obj) + '"'
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, list):
        return "[" + ",".join(_jackson_json(item) for item in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_jackson_json(k)}:{_jackson_json(v)}" for k, v in obj.items()) + "}"
    raise WireFormatError(f"cannot write {type(obj).__name__} as Connect JSON")


def _connect_bytes(obj: object) -> bytes:
    # surrogatepass is unreachable for valid output (surrogates are escaped above) but keeps encoding total.
    return _jackson_json(obj).encode("utf-8", "surrogatepass")


def _str_field(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise WireFormatError(f"{name} must be a str, got {type(value).__name__}")
    return value


def source_offset_key(cluster: str, topic: str, partition: int) -> bytes:
    """Connect offsets key of ``MirrorSourceConnector`` for one source partition.

    ``["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]``; the field order is
    that of MM2's ``HashMap`` and matters because Connect matches offsets by exact key bytes.
    """
    _check_int("partition", partition, INT32_MIN, INT32_MAX)
    part = {"cluster": _str_field("cluster", cluster), "partition": partition, "topic": _str_field("topic", topic)}
    return _connect_bytes([SOURCE_CONNECTOR, part])


def source_offset_value(offset: int) -> bytes:
    """Connect offsets value ``{"offset":N}``: N is the last replicated source offset (MM2 seeks to N+1)."""
    return _connect_bytes({"offset": _check_int("offset", offset, INT64_MIN, INT64_MAX)})


def checkpoint_connector_key(group: str, topic: str, partition: int) -> bytes:
    """Connect offsets key of ``MirrorCheckpointConnector`` (``topic`` is the downstream name).

    ``["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders","group":"app1"}]``. MM2 never uses
    the stored value; the key is provided so a shared offsets topic looks the same as MM2's.
    """
    _check_int("partition", partition, INT32_MIN, INT32_MAX)
    part = {"partition": partition, "topic": _str_field("topic", topic), "group": _str_field("group", group)}
    return _connect_bytes([CHECKPOINT_CONNECTOR, part])


def heartbeat_connector_key(source: str, target: str) -> bytes:
    """Connect offsets key of ``MirrorHeartbeatConnector``.

    ``["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]``.
    """
    part = {
        "sourceClusterAlias": _str_field("sourceClusterAlias", source),
        "targetClusterAlias": _str_field("targetClusterAlias", target),
    }
    return _connect_bytes([HEARTBEAT_CONNECTOR, part])


def _parse_json(data: bytes) -> object:
    return json.loads(bytes(data).decode("utf-8"))


@functools.lru_cache(maxsize=65_536)
def decode_source_offset_key(data: bytes | None) -> tuple[str, str, int] | None:
    """``(cluster, topic, partition)`` of a ``MirrorSourceConnector`` offsets key, else ``None``.

    Remembered by key: a run's plan reads every partition's key, often several times over (an offsets topic not
    compacted yet), and parsing them was a large part of a wide flow's plan.

    The offsets topic holds keys of every connector sharing it, so anything that is not a well-formed
    source-connector key (other connectors, garbage, null) is "not ours" rather than an error. Field
    order is not checked here; note that Connect itself only finds keys in the canonical order.
    """
    if data is None:
        return None
    try:
        parsed = _parse_json(data)
    except (UnicodeDecodeError, ValueError):
        return None
    if not (isinstance(parsed, list) and len(parsed) == 2 and parsed[0] == SOURCE_CONNECTOR):
        return None
    part = parsed[1]
    if not isinstance(part, dict):
        return None
    cluster, topic, partition = part.get("cluster"), part.get("topic"), part.get("partition")
    if not (isinstance(cluster, str) and isinstance(topic, str)):
        return None
    if not isinstance(partition, int) or isinstance(partition, bool) or not INT32_MIN <= partition <= INT32_MAX:
        return None
    return cluster, topic, partition


def decode_source_offset_value(data: bytes | None) -> int | None:
    """The stored source offset, or ``None`` when there is none.

    ``None`` for a tombstone (null or empty value), JSON ``null``, or a map without a non-null
    ``offset``: MM2's ``MirrorUtils.unwrapOffset`` treats all of these as "no offset" (-1) and lets
    ``auto.offset.reset`` decide. Anything else that is not an INT64 offset raises ``WireFormatError``:
    silently treating a corrupt offset as absent would replay the partition from the reset position.
    """
    if data is None or len(data) == 0:
        return None
    try:
        parsed = _parse_json(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireFormatError(f"Connect offset value is not JSON: {exc}") from exc
    if parsed is None:
        return None
    if not isinstance(parsed, dict):
        raise WireFormatError(f"Connect offset value must be a JSON object, got {parsed!r}")
    offset = parsed.get("offset")
    if offset is None:
        return None
    return _check_int("offset", offset, INT64_MIN, INT64_MAX)


# ---------------------------------------------------------------------------------------------------
# Java's default partitioner for keyed records
# ---------------------------------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF
_MURMUR_SEED = 0x9747B28C
_MURMUR_M = 0x5BD1E995
_MURMUR_R = 24


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit murmur2, seed 0x9747b28c, returned as a Java (signed) int.

    Java's wrapping int arithmetic is emulated by keeping every intermediate value masked to 32 bits
    (so ``>>`` acts as Java's ``>>>``), and the result is converted to signed only at the end.
    """
    data = bytes(data)
    length = len(data)
    h = (_MURMUR_SEED ^ length) & _MASK32
    length4 = length // 4
    for k in struct.unpack_from(f"<{length4}I", data):
        k = (k * _MURMUR_M) & _MASK32
        k ^= k >> _MURMUR_R
        k = (k * _MURMUR_M) & _MASK32
        h = (h * _MURMUR_M) & _MASK32
        h ^= k
    # Java's fall-through switch on length % 4.
    tail = length % 4
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _MURMUR_M) & _MASK32
    h ^= h >> 13
    h = (h * _MURMUR_M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which differs for negatives)."""
    return n & 0x7FFFFFFF


def java_partition(key: bytes, num_partitions: int) -> int:
    """Partition the Java producer's default partitioner picks for a non-null key.

    librdkafka's (hence confluent-kafka's) default partitioner is ``consistent_random`` (CRC32), which
    puts keys elsewhere; mirrorflow computes the Java placement explicitly so both agree where a key
    lives.
    """
    _check_int("num_partitions", num_partitions, 1, INT32_MAX)
    if key is None:
        raise WireFormatError("null keys are not hashed (the Java producer spreads them with its sticky partitioner)")
    return to_positive(murmur2(key)) % num_partitions
