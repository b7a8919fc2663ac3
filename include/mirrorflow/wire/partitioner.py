"""Java's default partitioner for keyed records: Kafka's ``Utils.murmur2`` and ``Utils.toPositive``.

librdkafka's default partitioner puts keys elsewhere, so where a key written by mirrorflow must be found by a Java
client (or the reverse), the partition is computed here, as the Java producer computes it.
"""

from __future__ import annotations

import struct

from .codec import INT32_MAX, WireFormatError, check_int

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
    check_int("num_partitions", num_partitions, 1, INT32_MAX)
    if key is None:
        raise WireFormatError("null keys are not hashed (the Java producer spreads them with its sticky partitioner)")
    return to_positive(murmur2(key)) % num_partitions
