"""Kafka Connect's source offsets of MM2's connectors (``mm2-offsets.<source>.internal``), byte for byte.

Connect finds a stored offset by the exact bytes of its key, so keys are written as Connect's ``JsonConverter``
(schemas disabled, Jackson underneath) writes them: compact, in Java ``HashMap`` field order, with Jackson's
escapes. The decoders treat any other connector's key as "not ours" and a tombstone as "no offset".
"""

from __future__ import annotations

import functools
import json
import re

from .codec import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, WireFormatError, check_int

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
    check_int("partition", partition, INT32_MIN, INT32_MAX)
    part = {"cluster": _str_field("cluster", cluster), "partition": partition, "topic": _str_field("topic", topic)}
    return _connect_bytes([SOURCE_CONNECTOR, part])


def source_offset_value(offset: int) -> bytes:
    """Connect offsets value ``{"offset":N}``: N is the last replicated source offset (MM2 seeks to N+1)."""
    return _connect_bytes({"offset": check_int("offset", offset, INT64_MIN, INT64_MAX)})


def checkpoint_connector_key(group: str, topic: str, partition: int) -> bytes:
    """Connect offsets key of ``MirrorCheckpointConnector`` (``topic`` is the downstream name).

    ``["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders","group":"app1"}]``. MM2 never uses
    the stored value; the key is provided so a shared offsets topic looks the same as MM2's.
    """
    check_int("partition", partition, INT32_MIN, INT32_MAX)
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
    return check_int("offset", offset, INT64_MIN, INT64_MAX)
