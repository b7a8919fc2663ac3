"""A record as comparable bytes: what verification compares and digests, and what differs between two.

Why one encoding: the chunk tasks compare the two sides record by record and fold the same bytes into an
order-sensitive digest, so "equal bytes" and "equal digests" mean the same thing: key, value, headers (names,
values, order) and timestamp, each length-prefixed so that no two different records encode alike (a null key
is not an empty key, a missing header value is not an empty one). Offsets are not part of it: a copy keeps
content and order, never offsets.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

_HEAD = struct.Struct(">iiqi")  # key length, value length (-1: null), timestamp, header count
_HEADER = struct.Struct(">ii")  # name length, value length (-1: null)

FIELDS = ("key", "value", "headers", "timestamp")


def encode(message: Any) -> bytes:
    """A consumed message's key, value, headers and timestamp as bytes (see the module docstring)."""
    key, value, headers = message.key(), message.value(), message.headers()
    parts = [
        _HEAD.pack(
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            message.timestamp()[1],
            len(headers) if headers else 0,
        )
    ]
    if key:
        parts.append(key)
    if value:
        parts.append(value)
    if headers:
        for name, header in headers:
            raw = name.encode()
            parts.append(_HEADER.pack(len(raw), -1 if header is None else len(header)))
            parts.append(raw)
            if header:
                parts.append(header)
    return b"".join(parts)


def decode(data: bytes) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]:
    """(key, value, headers, timestamp) back from :func:`encode`'s bytes: to say what differs."""
    key_len, value_len, timestamp, count = _HEAD.unpack_from(data)
    pos = _HEAD.size
    key = None if key_len < 0 else data[pos : pos + key_len]
    pos += max(0, key_len)
    value = None if value_len < 0 else data[pos : pos + value_len]
    pos += max(0, value_len)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name_len, header_len = _HEADER.unpack_from(data, pos)
        pos += _HEADER.size
        name = data[pos : pos + name_len].decode("utf-8", "replace")
        pos += name_len
        headers.append((name, None if header_len < 0 else data[pos : pos + header_len]))
        pos += max(0, header_len)
    return key, value, headers, timestamp


def differing_fields(source: bytes, target: bytes) -> list[str]:
    """Which of key, value, headers and timestamp differ between two encoded records (in that order)."""
    return [name for name, a, b in zip(FIELDS, decode(source), decode(target), strict=True) if a != b]


def new_digest() -> Any:
    """The order-sensitive digest of a chunk's records: BLAKE2b-128 over their encodings, one after the other.

    Each encoding carries its own lengths, so the concatenation is unambiguous and the digest depends on every
    record and on their order (a swap changes it). 128 bits: an accidental collision is out of reach."""
    return hashlib.blake2b(digest_size=16)


__all__ = ["FIELDS", "decode", "differing_fields", "encode", "new_digest"]
