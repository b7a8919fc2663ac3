"""The long-poll proxy's Kafka parsing (``tests.longpoll_proxy``), on frames built by hand from Kafka's message
definitions: an integration test that counts held fetches is only as good as this."""

from __future__ import annotations

import struct

from tests.longpoll_proxy import FETCH, METADATA, _cap_api_versions, _patch_ports, fetch_is_empty

CORRELATION = struct.pack(">i", 7)


def fetch_v11(records: bytes | None, partition_error: int = 0, aborted: int = -1) -> bytearray:
    """A Fetch v11 response: one topic, one partition."""
    partition = struct.pack(">ihqqqi", 0, partition_error, 10, 10, 0, aborted) + b"\x00" * 16 * max(0, aborted)
    partition += struct.pack(">i", -1)  # PreferredReadReplica
    partition += struct.pack(">i", -1) if records is None else struct.pack(">i", len(records)) + records
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + partition
    return bytearray(CORRELATION + struct.pack(">ihii", 0, 0, 0, 1) + topic)


def test_a_fetch_response_is_empty_only_without_records_and_errors() -> None:
    assert fetch_is_empty(fetch_v11(None), 11)
    assert fetch_is_empty(fetch_v11(b""), 11)
    assert fetch_is_empty(fetch_v11(None, aborted=2), 11)
    assert not fetch_is_empty(fetch_v11(b"\x01" * 61), 11)
    assert not fetch_is_empty(fetch_v11(None, partition_error=1), 11)  # OFFSET_OUT_OF_RANGE: answered at once


def test_api_versions_cap_fetch_and_metadata_names_the_proxy_port() -> None:
    entries = b"".join(struct.pack(">hhh", key, 0, top) + b"\x00" for key, top in ((FETCH, 16), (METADATA, 12)))
    versions = bytearray(CORRELATION + struct.pack(">h", 0) + bytes([3]) + entries + struct.pack(">i", 0) + b"\x00")
    _cap_api_versions(versions, 3)
    assert struct.unpack_from(">hhh", versions, 7) == (FETCH, 0, 11)
    assert struct.unpack_from(">hhh", versions, 14) == (METADATA, 0, 12)

    host = b"127.0.0.1"
    broker = struct.pack(">i", 1) + bytes([len(host) + 1]) + host + struct.pack(">i", 9092) + b"\x00\x00"
    metadata = bytearray(CORRELATION + b"\x00" + struct.pack(">i", 0) + bytes([2]) + broker + b"\x00\x01\x00")
    _patch_ports(metadata, METADATA, 12, {9092: 40001})
    assert struct.unpack_from(">i", metadata, 10 + 1 + len(host) + 4) == (40001,)
