"""The primitives of MM2's record formats: Kafka's classic fixed-width integers and ``STRING``, and a checked reader.

Every encoder validates its value (type and range) and every read checks the remaining length, so a bad value or
truncated bytes raise ``WireFormatError`` here rather than ``struct.error`` or a short string in a record type.
The record types (``records``), the Connect offsets (``connect_offsets``) and the partitioner build on these.
"""

from __future__ import annotations

import struct

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


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """Reject non-ints (``bool`` included: Java would never put one there) and out-of-range values."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireFormatError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise WireFormatError(f"{name}={value} is outside [{lo}, {hi}]")
    return value


def encode_int16(value: int, name: str = "INT16") -> bytes:
    """Encode a big-endian signed 16-bit integer (Kafka ``INT16``)."""
    return _INT16.pack(check_int(name, value, INT16_MIN, INT16_MAX))


def encode_int32(value: int, name: str = "INT32") -> bytes:
    """Encode a big-endian signed 32-bit integer (Kafka ``INT32``)."""
    return _INT32.pack(check_int(name, value, INT32_MIN, INT32_MAX))


def encode_int64(value: int, name: str = "INT64") -> bytes:
    """Encode a big-endian signed 64-bit integer (Kafka ``INT64``)."""
    return _INT64.pack(check_int(name, value, INT64_MIN, INT64_MAX))


def string_bytes(value: object, name: str) -> bytes:
    """UTF-8 bytes of a STRING field, enforcing Java's rules: not null, at most ``STRING_MAX_BYTES``.

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
    data = string_bytes(value, name)
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
