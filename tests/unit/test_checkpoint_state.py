"""The fast reads of a flow's state (``checkpoints/state.py``) give exactly what wire's decoders, record by record,
give: the same syncs replayed, the same last checkpoint per key, the same progress, the same refusals."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow.checkpoints.state import (
    add_syncs,
    latest_checkpoints,
    latest_progress,
    progress_key,
    progress_offset,
    sync_fields,
)
from mirrorflow.checkpoints.translate import OffsetTranslator
from mirrorflow.replication.progress import TARGET_NEXT_HEADER, StoredProgress
from mirrorflow.wire import (
    RUN_MAGIC,
    Checkpoint,
    OffsetSync,
    WireFormatError,
    decode_source_offset_key,
    decode_source_offset_value,
    encode_string,
    source_offset_key,
    source_offset_value,
)

OFFSETS = st.integers(-3, 40)
TOPICS = ("t", "orders", "é")


def sync_key(topic: str, partition: int) -> bytes:
    return encode_string(topic) + struct.pack(">i", partition)


@st.composite
def sync_values(draw: st.DrawFn) -> bytes:
    """Sync values in every form: MM2's 16 bytes, with a run (valid or not), other trailers, truncated."""
    upstream, downstream = draw(OFFSETS), draw(OFFSETS)
    head = struct.pack(">qq", upstream, downstream)
    form = draw(st.sampled_from(["mm2", "run", "run", "run", "other magic", "trailer", "short"]))
    if form == "mm2":
        return head
    if form == "short":
        return head[: draw(st.integers(0, 15))]
    if form == "trailer":
        return head + draw(st.binary(max_size=40))
    run = struct.pack(">qqqq", *(draw(OFFSETS) for _ in range(4)))
    if form == "run" and draw(st.booleans()):  # often consistent, so that valid runs are common
        su = draw(st.integers(0, max(upstream, 0)))
        sd = downstream - (upstream - su)
        pu = draw(st.integers(-1, su - 1)) if su > 0 else -1
        pd = -1 if pu == -1 or sd <= 0 else draw(st.integers(-1, sd - 1))
        run = struct.pack(">qqqq", su, sd, pu, pd)
    return head + (RUN_MAGIC if form == "run" else b"MFX2") + run


def wire_sync(key: bytes, value: bytes) -> OffsetSync | None:
    try:
        return OffsetSync.decode(key, value)
    except WireFormatError:
        return None


@given(sync_values())
@settings(max_examples=500)
def test_a_sync_value_decodes_as_wire_decodes_it(value: bytes) -> None:
    fast = sync_fields(value)
    wire = wire_sync(sync_key("t", 0), value)
    if fast is not None:
        assert wire is not None
        run = wire.run
        expected_run = (
            None
            if run is None
            else (run.run_start_upstream, run.run_start_downstream, run.previous_upstream, run.previous_downstream)
        )
        assert fast == (wire.upstream_offset, wire.downstream_offset, expected_run)
    elif len(value) == 16 + len(RUN_MAGIC) + 32 and value[16:20] == RUN_MAGIC:
        assert wire is None or wire.run is None  # only a run wire refuses is left to it


BAD_SYNC_KEYS = [b"", b"\x00", b"\x00\x05ab", b"\xff\xff\x00\x00\x00\x00", b"\x00\x01\xff\x00\x00\x00\x00"]


@st.composite
def sync_records(draw: st.DrawFn) -> list[tuple[bytes | None, bytes | None]]:
    records: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 19))
        if kind == 0:
            records.append((draw(st.sampled_from(BAD_SYNC_KEYS)), draw(sync_values())))
        elif kind == 1:
            records.append((None, draw(sync_values())) if draw(st.booleans()) else (sync_key("t", 0), None))
        else:
            key = sync_key(draw(st.sampled_from(TOPICS)), draw(st.integers(0, 2)))
            if draw(st.booleans()):
                key += b"\x07"  # trailing bytes after the partition: ignored, as Java does
            records.append((key, draw(sync_values())))
    return records


def kept_syncs(translator: OffsetTranslator, topic: str, partition: int) -> list[tuple[int, int]]:
    history = translator.store.history(topic, partition)
    return [] if history is None else [(s.upstream, s.downstream) for s in history.syncs()]


def state_of(translator: OffsetTranslator) -> Any:
    """Everything a translator answers, for every partition and offset the tests use."""
    partitions = [(t, p) for t in TOPICS for p in range(3)]
    return (
        translator.syncs_read,
        translator.partitions(),
        {tp: kept_syncs(translator, *tp) for tp in partitions},
        {(t, p, u): translator.translate(t, p, u) for t, p in partitions for u in range(-2, 45)},
        {(t, p, d): translator.translate_back(t, p, d) for t, p in partitions for d in range(-2, 45, 3)},
    )


@given(sync_records())
@settings(max_examples=300, deadline=None)
def test_offset_sync_records_replay_as_decoding_each_with_wire_does(records: list[Any]) -> None:
    decoded = [s for key, value in records if key is not None and value is not None if (s := wire_sync(key, value))]
    assert state_of(add_syncs(OffsetTranslator(), records)) == state_of(OffsetTranslator().add_all(decoded))


@given(sync_records())
@settings(max_examples=100, deadline=None)
def test_only_the_wanted_partitions_are_decoded(records: list[Any]) -> None:
    wanted = {("t", 0), ("orders", 1)}
    only = add_syncs(OffsetTranslator(), records, wanted=wanted)
    decoded = [s for key, value in records if key is not None and value is not None if (s := wire_sync(key, value))]
    whole = OffsetTranslator().add_all([s for s in decoded if (s.topic, s.partition) in wanted])
    assert state_of(only) == state_of(whole)
    assert only.translate("t", 1, 5).kind == "unavailable" or ("t", 1) in wanted


# ----------------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------------


@st.composite
def checkpoint_records(draw: st.DrawFn) -> list[tuple[bytes | None, bytes | None]]:
    records: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(draw(st.integers(0, 40))):
        cp = Checkpoint(
            draw(st.sampled_from(["g", "h", "ü"])),
            draw(st.sampled_from(["A.t", "A.u"])),
            draw(st.integers(0, 2)),
            draw(OFFSETS),
            draw(OFFSETS),
            draw(st.sampled_from(["", "meta", "ß"])),
        )
        key, value = cp.key(), cp.value()
        damage = draw(st.integers(0, 9))
        if damage == 0:
            value = b"\x00\x01" + value[2:]  # version 1
        elif damage == 1:
            value = value[: draw(st.integers(0, len(value) - 1))]  # truncated
        elif damage == 2:
            value = value[:18] + b"\x00\x02\xff\xfe"  # metadata that is not UTF-8
        elif damage == 3:
            value = value + b"\x09\x09"  # trailing bytes: ignored
        elif damage == 4:
            key = key + b"\x01"  # trailing key bytes: the same (group, topic, partition)
        elif damage == 5:
            key = key[: draw(st.integers(0, len(key) - 1))]
        elif damage == 6:
            value = None  # type: ignore[assignment]
        records.append((key, value))
    return records


def forward(records: list[tuple[bytes | None, bytes | None]]) -> dict[tuple[str, str, int], Checkpoint]:
    """What reading the topic record by record with wire's decoder keeps (the old ``read_checkpoints``)."""
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in records:
        if key is None or value is None:
            continue
        try:
            cp = Checkpoint.decode(key, value)
        except WireFormatError:
            continue
        latest[(cp.group, cp.topic, cp.partition)] = cp
    return latest


@given(checkpoint_records())
@settings(max_examples=300)
def test_the_last_valid_checkpoint_per_key_is_kept(records: list[Any]) -> None:
    assert latest_checkpoints(records) == forward(records)


@given(checkpoint_records())
def test_checkpoints_keep_the_order_of_a_forward_read_when_every_record_is_valid(records: list[Any]) -> None:
    valid = [(k, v) for k, v in records if k is not None and v is not None and forward([(k, v)])]
    assert list(latest_checkpoints(valid)) == list(forward(valid))


# ----------------------------------------------------------------------------------------------------
# The copy's progress
# ----------------------------------------------------------------------------------------------------

NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)


@given(NAMES, NAMES, st.integers(-(2**32), 2**32))
def test_progress_keys_as_jackson_writes_them_decode_as_wire_decodes_them(cluster: str, topic: str, part: int) -> None:
    if -(2**31) <= part < 2**31:
        key = source_offset_key(cluster, topic, part)
        assert progress_key(key) == decode_source_offset_key(key) == (cluster, topic, part)
    spelled = b'["MirrorSourceConnector",{"cluster":"c","partition":%d,"topic":"t"}]' % part
    assert progress_key(spelled) == decode_source_offset_key(spelled)


ODD_KEYS = [
    b'["MirrorSourceConnector",{"cluster":"c","partition":01,"topic":"t"}]',
    b'["MirrorSourceConnector",{"cluster":"c","partition":-0,"topic":"t"}]',
    b'["MirrorSourceConnector",{"cluster":"c","partition":1234567890123456789012345,"topic":"t"}]',
    b'["MirrorSourceConnector", {"cluster":"c","partition":1,"topic":"t"}]',
    b'["MirrorSourceConnector",{"topic":"t","cluster":"c","partition":1}]',
    b'["MirrorSourceConnector",{"cluster":"c\xff","partition":1,"topic":"t"}]',
    b'["MirrorSourceConnector",{"cluster":"c\x01","partition":1,"topic":"t"}]',
    b'["MirrorSourceConnector",{"cluster":"c\\"d","partition":1,"topic":"t"}]',
    b'["MirrorCheckpointConnector",{"partition":1,"topic":"t","group":"g"}]',
    b"",
    b"not json",
]


@given(st.one_of(st.sampled_from(ODD_KEYS), st.binary(max_size=30)))
def test_other_progress_keys_are_left_to_wire(key: bytes) -> None:
    assert progress_key(key) == decode_source_offset_key(key)


def outcome(fn: Any, value: Any) -> Any:
    try:
        return fn(value)
    except WireFormatError:
        return "refused"


ODD_VALUES = [
    b'{"offset":01}',
    b'{"offset":-0}',
    b'{"offset":99999999999999999999}',
    b'{"offset":null}',
    b'{"offset": 5}',
    b"null",
    b"",
    b"[1]",
    b'{"other":1}',
    None,
]


@given(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1).map(source_offset_value), st.sampled_from(ODD_VALUES), st.binary(max_size=20)
    )
)
def test_progress_values_decode_as_wire_decodes_them(value: bytes | None) -> None:
    assert outcome(progress_offset, value) == outcome(decode_source_offset_value, value)


@dataclass
class Message:
    """A consumed message as ``latest_progress`` reads it."""

    _key: bytes | None
    _value: bytes | None
    _headers: list[tuple[str, bytes | None]] | None = None

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000)


def forward_progress(messages: list[Message], alias: str) -> dict[tuple[str, int], StoredProgress]:
    """``read_stored_progress``'s loop, message by message."""
    result: dict[tuple[str, int], StoredProgress] = {}
    for message in messages:
        key = message.key()
        decoded = decode_source_offset_key(key) if key else None
        if decoded is None or decoded[0] != alias:
            continue
        value = message.value()
        offset = decode_source_offset_value(value) if value is not None else None
        if offset is None:
            result.pop((decoded[1], decoded[2]), None)
        else:
            result[(decoded[1], decoded[2])] = StoredProgress.from_message(offset, message.headers(), 1_000)
    return result


@st.composite
def progress_messages(draw: st.DrawFn) -> list[Message]:
    messages = []
    for _ in range(draw(st.integers(0, 30))):
        cluster, topic, partition = (
            draw(st.sampled_from(["A", "B"])),
            draw(st.sampled_from(TOPICS)),
            draw(st.integers(0, 2)),
        )
        key = source_offset_key(cluster, topic, partition)
        if draw(st.integers(0, 9)) == 0:  # another spelling of the same key: JSON, not Jackson's bytes
            key = b'["MirrorSourceConnector", {"cluster":"%s","partition":%d,"topic":"%s"}]' % (
                cluster.encode(),
                partition,
                topic.encode("unicode_escape").replace(b"\\x", b"\\u00"),
            )
        value = (
            draw(st.sampled_from([None, b"", b'{"offset":null}']))
            if draw(st.integers(0, 5)) == 0
            else source_offset_value(draw(st.integers(0, 99)))
        )
        headers = [(TARGET_NEXT_HEADER, str(draw(st.integers(0, 99))).encode())] if draw(st.booleans()) else None
        messages.append(Message(key, value, headers))
    return messages


@given(progress_messages())
@settings(max_examples=300)
def test_progress_is_the_last_record_per_partition_tombstones_clearing_it(messages: list[Message]) -> None:
    assert latest_progress(messages, "A") == forward_progress(messages, "A")
    wanted = {("t", 0), ("é", 2)}
    expected = {tp: p for tp, p in forward_progress(messages, "A").items() if tp in wanted}
    assert latest_progress(messages, "A", wanted) == expected
