"""MM2 record formats byte for byte (Kafka's ``OffsetSync``, ``Checkpoint``, ``Heartbeat``), the run extension and Java's partitioner.

Expected bytes are written out as hex from the document, not produced by the code under test, so a
change that breaks compatibility with MM2 fails here rather than on a shared cluster.
"""

from __future__ import annotations

import struct
from collections import Counter

import pytest

from mirrorflow.wire import (
    Checkpoint,
    CopiedRun,
    Heartbeat,
    OffsetSync,
    WireFormatError,
    WireReader,
    checkpoint_connector_key,
    decode_source_offset_key,
    decode_source_offset_value,
    encode_int16,
    encode_int32,
    encode_int64,
    encode_string,
    heartbeat_connector_key,
    java_partition,
    murmur2,
    source_offset_key,
    source_offset_value,
    to_positive,
)


def h(text: str) -> bytes:
    """Hex as printed in the reference (spaces and '|' separators allowed)."""
    return bytes.fromhex(text.replace("|", " "))


UNICODE_TOPIC = "zamówienia.日本"
UNICODE_GROUP = "grüppe-😀"

# ---------------------------------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------------------------------


def test_integers_are_big_endian_signed() -> None:
    assert encode_int16(-2) == h("ff fe")
    assert encode_int32(3) == h("00 00 00 03")
    assert encode_int64(1000) == h("00 00 00 00 00 00 03 e8")
    assert encode_int64(-1) == h("ff ff ff ff ff ff ff ff")


@pytest.mark.parametrize(
    ("encoder", "value"),
    [(encode_int16, 1 << 15), (encode_int32, -(1 << 31) - 1), (encode_int64, 1 << 63), (encode_int32, True)],
)
def test_integers_out_of_range_or_wrong_type_raise(encoder: object, value: object) -> None:
    with pytest.raises(WireFormatError):
        encoder(value)  # type: ignore[operator]


def test_string_is_int16_length_then_utf8() -> None:
    assert encode_string("orders") == h("00 06 6f 72 64 65 72 73")
    assert encode_string("") == h("00 00")
    assert encode_string("é") == h("00 02 c3 a9")
    assert WireReader(h("00 02 c3 a9")).read_string() == "é"


def test_string_length_limit_is_in_utf8_bytes() -> None:
    assert len(encode_string("a" * 32767)) == 2 + 32767
    with pytest.raises(WireFormatError, match="32767"):
        encode_string("a" * 32768)
    with pytest.raises(WireFormatError):
        encode_string("é" * 16384)  # 16384 characters, 32768 bytes


def test_string_is_not_nullable() -> None:
    with pytest.raises(WireFormatError, match="not nullable"):
        encode_string(None)  # type: ignore[arg-type]


def test_unencodable_string_raises() -> None:
    with pytest.raises(WireFormatError):
        encode_string("\ud800")


def test_negative_string_length_raises() -> None:
    with pytest.raises(WireFormatError, match="negative"):
        WireReader(h("ff ff 41")).read_string()


@pytest.mark.parametrize("data", ["00 05 61 62", "00", "00 00 00"])
def test_truncated_input_raises(data: str) -> None:
    reader = WireReader(h(data))
    with pytest.raises(WireFormatError, match="truncated"):
        reader.read_string()
        reader.read_int32()


def test_invalid_utf8_raises() -> None:
    with pytest.raises(WireFormatError, match="UTF-8"):
        WireReader(h("00 01 ff")).read_string()


# ---------------------------------------------------------------------------------------------------
# OffsetSync (1.2)
# ---------------------------------------------------------------------------------------------------

SYNC_KEY = h("00 06 6f 72 64 65 72 73 | 00 00 00 03")
SYNC_VALUE = h("00 00 00 00 00 00 03 e8 | 00 00 00 00 00 00 03 e5")


def test_offset_sync_worked_example() -> None:
    sync = OffsetSync("orders", 3, 1000, 997)
    assert sync.key() == SYNC_KEY
    assert len(sync.key()) == 12
    assert sync.value() == SYNC_VALUE
    assert len(sync.value()) == 16
    assert OffsetSync.decode(SYNC_KEY, SYNC_VALUE) == sync


def test_offset_sync_unicode_round_trip() -> None:
    sync = OffsetSync(UNICODE_TOPIC, 2_147_483_647, 2**62, 0)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


def test_offset_sync_ignores_unknown_trailing_bytes() -> None:
    decoded = OffsetSync.decode(SYNC_KEY + b"junk", SYNC_VALUE + b"\x01\x02\x03")
    assert decoded == OffsetSync("orders", 3, 1000, 997)
    assert decoded.run is None


def test_offset_sync_truncated_value_raises() -> None:
    with pytest.raises(WireFormatError):
        OffsetSync.decode(SYNC_KEY, SYNC_VALUE[:15])
    with pytest.raises(WireFormatError):
        OffsetSync.decode(SYNC_KEY, None)  # type: ignore[arg-type]


# The run extension: the sync of the worked example closes a run that started at upstream 990 ->
# downstream 987; the record copied before it was upstream 985 -> downstream 986 (986 < 987 because a
# transaction marker may sit in between; 986..989 upstream were compacted away).
RUN = CopiedRun(run_start_upstream=990, run_start_downstream=987, previous_upstream=985, previous_downstream=986)
RUN_VALUE = SYNC_VALUE + h(
    "4d 46 58 31"  # "MFX1"
    "| 00 00 00 00 00 00 03 de"  # run_start_upstream=990
    "| 00 00 00 00 00 00 03 db"  # run_start_downstream=987
    "| 00 00 00 00 00 00 03 d9"  # previous_upstream=985
    "| 00 00 00 00 00 00 03 da"  # previous_downstream=986
)


def test_run_extension_bytes_and_round_trip() -> None:
    sync = OffsetSync("orders", 3, 1000, 997, RUN)
    assert sync.key() == SYNC_KEY
    assert sync.value() == RUN_VALUE
    assert len(RUN_VALUE) == 16 + 4 + 32
    assert OffsetSync.decode(SYNC_KEY, RUN_VALUE) == sync


def test_run_extension_with_unknown_previous_round_trips() -> None:
    sync = OffsetSync(UNICODE_TOPIC, 0, 5, 5, CopiedRun(0, 0))
    decoded = OffsetSync.decode(sync.key(), sync.value())
    assert decoded == sync
    assert decoded.run == CopiedRun(0, 0, -1, -1)


def test_run_extension_is_invisible_to_mm2() -> None:
    # Java's OffsetSync.deserializeRecord reads two INT64 and stops; do the same by hand.
    upstream, downstream = struct.unpack_from(">qq", RUN_VALUE)
    assert (upstream, downstream) == (1000, 997)
    plain = OffsetSync.decode(SYNC_KEY, RUN_VALUE[:16])
    assert (plain.upstream_offset, plain.downstream_offset, plain.run) == (1000, 997, None)


@pytest.mark.parametrize(
    "trailer",
    [RUN_VALUE[16:-1], RUN_VALUE[16:] + b"\x00", b"MFX2" + RUN_VALUE[20:]],
    ids=["short", "long", "other-magic"],
)
def test_run_trailer_of_wrong_shape_is_ignored(trailer: bytes) -> None:
    assert OffsetSync.decode(SYNC_KEY, SYNC_VALUE + trailer).run is None


def test_inconsistent_run_lengths_raise_on_encode() -> None:
    with pytest.raises(WireFormatError, match="one to one"):
        OffsetSync("orders", 3, 1000, 997, CopiedRun(990, 988))


def test_inconsistent_run_lengths_raise_on_decode() -> None:
    bad = SYNC_VALUE + b"MFX1" + struct.pack(">qqqq", 990, 988, -1, -1)
    with pytest.raises(WireFormatError, match="one to one"):
        OffsetSync.decode(SYNC_KEY, bad)


def test_run_starting_after_the_sync_raises() -> None:
    with pytest.raises(WireFormatError):
        OffsetSync("orders", 3, 1000, 997, CopiedRun(1001, 998))


def test_previous_downstream_may_be_unknown_at_a_unit_start() -> None:
    run = CopiedRun(990, 987, 985, -1)
    assert OffsetSync.decode(SYNC_KEY, OffsetSync("orders", 3, 1000, 997, run).value()).run == run


@pytest.mark.parametrize(
    "args",
    [
        (990, 987, -1, 985),  # downstream of "previous" known without its upstream
        (990, 987, 990, 986),  # previous not before the run start upstream
        (990, 987, 985, 987),  # previous not before the run start downstream
        (-1, 987, -1, -1),  # negative run start
    ],
)
def test_invalid_copied_run_raises(args: tuple[int, int, int, int]) -> None:
    with pytest.raises(WireFormatError):
        CopiedRun(*args)


# ---------------------------------------------------------------------------------------------------
# Checkpoint (1.3)
# ---------------------------------------------------------------------------------------------------

CKPT_KEY = h("00 04 61 70 70 31 | 00 08 41 2e 6f 72 64 65 72 73 | 00 00 00 03")
CKPT_VALUE = h("00 00 | 00 00 00 00 00 00 03 e8 | 00 00 00 00 00 00 03 e5 | 00 00")
CKPT_VALUE_X = h("00 00 | 00 00 00 00 00 00 03 e8 | 00 00 00 00 00 00 03 e5 | 00 01 78")


def test_checkpoint_worked_example_empty_metadata() -> None:
    ckpt = Checkpoint("app1", "A.orders", 3, 1000, 997)
    assert ckpt.key() == CKPT_KEY
    assert len(ckpt.key()) == 20
    assert ckpt.value() == CKPT_VALUE
    assert len(ckpt.value()) == 20
    assert Checkpoint.decode(CKPT_KEY, CKPT_VALUE) == ckpt


def test_checkpoint_worked_example_metadata_x() -> None:
    ckpt = Checkpoint("app1", "A.orders", 3, 1000, 997, "x")
    assert ckpt.value() == CKPT_VALUE_X
    assert len(ckpt.value()) == 21
    assert Checkpoint.decode(CKPT_KEY, CKPT_VALUE_X) == ckpt


def test_checkpoint_none_metadata_is_empty_string() -> None:
    ckpt = Checkpoint("app1", "A.orders", 3, 1000, 997, None)  # type: ignore[arg-type]
    assert ckpt.metadata == ""
    assert ckpt.value() == CKPT_VALUE


def test_checkpoint_unicode_round_trip() -> None:
    ckpt = Checkpoint(UNICODE_GROUP, "A." + UNICODE_TOPIC, 7, 12, 10, "métadonnée ✓")
    assert Checkpoint.decode(ckpt.key(), ckpt.value()) == ckpt


def test_checkpoint_version_1_raises() -> None:
    with pytest.raises(WireFormatError, match="version 1"):
        Checkpoint.decode(CKPT_KEY, h("00 01") + CKPT_VALUE[2:])


def test_checkpoint_ignores_trailing_bytes() -> None:
    assert Checkpoint.decode(CKPT_KEY + b"\xff", CKPT_VALUE + b"\x00\x07more") == Checkpoint(
        "app1", "A.orders", 3, 1000, 997
    )


def test_checkpoint_group_too_long_raises() -> None:
    with pytest.raises(WireFormatError):
        Checkpoint("g" * 40000, "A.orders", 3, 1000, 997)


# ---------------------------------------------------------------------------------------------------
# Heartbeat (1.4)
# ---------------------------------------------------------------------------------------------------

HB_KEY = h("00 01 41 | 00 01 42")
HB_VALUE = h("00 00 | 00 00 01 8b cf e5 68 00")


def test_heartbeat_worked_example() -> None:
    hb = Heartbeat("A", "B", 1_700_000_000_000)
    assert hb.key() == HB_KEY
    assert hb.value() == HB_VALUE
    assert (len(hb.key()), len(hb.value())) == (6, 10)
    assert Heartbeat.decode(HB_KEY, HB_VALUE) == hb


def test_heartbeat_unicode_round_trip() -> None:
    hb = Heartbeat("prod-ö", "dr-東京", 1)
    assert Heartbeat.decode(hb.key(), hb.value()) == hb


def test_heartbeat_ignores_trailing_bytes() -> None:
    assert Heartbeat.decode(HB_KEY + b"\x00", HB_VALUE + b"\x01\x02") == Heartbeat("A", "B", 1_700_000_000_000)


def test_heartbeat_version_1_raises() -> None:
    with pytest.raises(WireFormatError, match="version"):
        Heartbeat.decode(HB_KEY, h("00 01") + HB_VALUE[2:])


# ---------------------------------------------------------------------------------------------------
# Connect source offsets (1.5)
# ---------------------------------------------------------------------------------------------------


def test_source_connector_key_and_value_exact_bytes() -> None:
    assert (
        source_offset_key("A", "orders", 3)
        == b'["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]'
    )
    assert source_offset_value(1234) == b'{"offset":1234}'


def test_checkpoint_connector_key_exact_bytes() -> None:
    assert (
        checkpoint_connector_key("app1", "A.orders", 3)
        == b'["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders","group":"app1"}]'
    )
    assert source_offset_value(0) == b'{"offset":0}'


def test_heartbeat_connector_key_exact_bytes() -> None:
    assert (
        heartbeat_connector_key("A", "B")
        == b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    )


def test_connect_strings_are_escaped_like_jackson() -> None:
    # Expected bytes produced by Jackson 2.17/2.21 ObjectMapper.writeValueAsBytes on the equivalent
    # JsonNode: upper-case \u00XX for controls, raw UTF-8 for BMP characters (even U+2028 and DEL),
    # and an escaped surrogate pair for a character outside the BMP.
    key = source_offset_key("</x>", 'q"b\\s/\n\t\x01\x1f\x7f\u2028é😀', -1)
    expected = (
        b'["MirrorSourceConnector",{"cluster":"</x>","partition":-1,"topic":"q\\"b\\\\s/\\n\\t\\u0001\\u001F'
        + "\x7f\u2028é".encode()
        + b'\\uD83D\\uDE00"}]'
    )
    assert key == expected
    assert decode_source_offset_key(key) == ("</x>", 'q"b\\s/\n\t\x01\x1f\x7f\u2028é😀', -1)


def test_source_offset_key_unicode_round_trip() -> None:
    key = source_offset_key("prod-ö", UNICODE_TOPIC, 11)
    assert UNICODE_TOPIC.encode() in key
    assert decode_source_offset_key(key) == ("prod-ö", UNICODE_TOPIC, 11)


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"not json",
        b"\xff\xfe",
        b'["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders","group":"app1"}]',
        b'["MirrorSourceConnector",{"cluster":"A","topic":"orders"}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":"3","topic":"orders"}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":true,"topic":"orders"}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":4294967296,"topic":"orders"}]',
        b'["MirrorSourceConnector",["A",3,"orders"]]',
        b'{"offset":1}',
    ],
)
def test_decode_source_offset_key_returns_none_for_other_keys(data: bytes | None) -> None:
    assert decode_source_offset_key(data) is None


@pytest.mark.parametrize("data", [None, b"", b"null", b"{}", b'{"offset":null}'])
def test_decode_source_offset_value_none_when_absent(data: bytes | None) -> None:
    assert decode_source_offset_value(data) is None


def test_decode_source_offset_value() -> None:
    assert decode_source_offset_value(b'{"offset":1234}') == 1234
    assert decode_source_offset_value(source_offset_value(2**63 - 1)) == 2**63 - 1


@pytest.mark.parametrize(
    "data", [b"{", b"[1]", b'{"offset":"5"}', b'{"offset":1.5}', b'{"offset":9223372036854775808}']
)
def test_decode_source_offset_value_rejects_corrupt_values(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        decode_source_offset_value(data)


# ---------------------------------------------------------------------------------------------------
# murmur2 and the Java default partitioner
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Kafka UtilsTest.testMurmur2
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
        # Computed by running Utils.murmur2's Java code (JDK 17): every tail length, multi-byte UTF-8.
        ("", 275646681),
        ("1", -1993445489),
        ("12", 126087238),
        ("123", -267702483),
        ("1234", -1614185708),
        ("12345", -1188365604),
        ("été-日本-😀", 1688878974),
    ],
)
def test_murmur2_vectors(text: str, expected: int) -> None:
    assert murmur2(text.encode("utf-8")) == expected


def test_murmur2_bytes_with_sign_bit_set() -> None:
    # Java's `data[i] & 0xff` matters for bytes >= 0x80 in both the body and every tail length.
    data = bytes([0xFF, 0x80, 0x7F, 0x00, 0xFE, 0x81, 0x01])
    expected = [275646681, -311467685, -442788720, 968261134, -1059522114, -1958495739, 2053657883, -523946266]
    assert [murmur2(data[:n]) for n in range(len(data) + 1)] == expected


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5


def test_java_partition_matches_java() -> None:
    # (key, partition out of 25) from the Java code: toPositive(murmur2(key)) % 25
    known = {"21": 15, "foobar": 16, "abc": 7, "orders": 22, "key-0": 16, "key-1": 15, "key-2": 2, "key-3": 22}
    for key, partition in known.items():
        assert java_partition(key.encode(), 25) == partition


def test_java_partition_distributes_deterministically() -> None:
    keys = [f"key-{i}".encode() for i in range(1000)]
    first = [java_partition(k, 25) for k in keys]
    assert first == [java_partition(k, 25) for k in keys]
    counts = Counter(first)
    assert set(counts) == set(range(25))
    # Per-partition counts from the Java code for the same 1000 keys.
    java_counts = [32, 31, 40, 38, 43, 38, 36, 43, 34, 38, 43, 38, 44, 41, 51, 48, 35, 34, 41, 42, 44, 40, 43, 46, 37]
    assert [counts[p] for p in range(25)] == java_counts


@pytest.mark.parametrize("num_partitions", [0, -3])
def test_java_partition_needs_partitions(num_partitions: int) -> None:
    with pytest.raises(WireFormatError):
        java_partition(b"k", num_partitions)
