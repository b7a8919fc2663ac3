"""MM2's record formats, byte for byte, in pure Python.

mirrorflow shares its internal topics with MirrorMaker 2: an MM2 checkpoint task must be able to read
the offset syncs mirrorflow writes, a consumer using ``RemoteClusterUtils`` must read mirrorflow's
checkpoints, and a migration must find MM2's Connect source offsets under exactly the key bytes
Connect looks up. Everything here is therefore checked against the byte examples of Kafka's
``OffsetSync``, ``Checkpoint`` and ``Heartbeat`` classes (``connect/mirror-client``), and no function
does any Kafka I/O, so the formats can be tested and reused (Spark executors, CLI, DAGs) without a cluster.

Encoding follows Kafka's classic protocol ``Schema``/``Struct`` types (``codec``); the records are in
``records``, Connect's offsets keys and values in ``connect_offsets``, Java's key partitioner in
``partitioner``. Callers import from ``mirrorflow.wire``, which re-exports every public name.
"""

from __future__ import annotations

from .codec import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    STRING_MAX_BYTES,
    WireFormatError,
    WireReader,
    encode_int16,
    encode_int32,
    encode_int64,
    encode_string,
)
from .connect_offsets import (
    CHECKPOINT_CONNECTOR,
    HEARTBEAT_CONNECTOR,
    SOURCE_CONNECTOR,
    checkpoint_connector_key,
    decode_source_offset_key,
    decode_source_offset_value,
    heartbeat_connector_key,
    source_offset_key,
    source_offset_value,
)
from .partitioner import java_partition, murmur2, to_positive
from .records import RUN_MAGIC, Checkpoint, CopiedRun, Heartbeat, OffsetSync

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
