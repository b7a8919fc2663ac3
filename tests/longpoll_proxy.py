"""A loopback TCP proxy that gives a Kafka broker Apache Kafka's long poll: empty fetches are held.

What it emulates: Apache Kafka answers a Fetch that finds no records only after the request's ``MaxWaitMs``
(the client's ``fetch.wait.max.ms``, librdkafka's default 500 ms; ``ReplicaManager.fetchMessages`` parks it as a
``DelayedFetch``). The embedded test broker (noida-db) answers it at once, so a reader that waits for an empty
fetch (the end-of-partition event, or a ``poll`` timing out) is fast here and slow on Apache Kafka. Put between
librdkafka and one broker, this proxy holds each Fetch response that carries no records, with no error, until
``MaxWaitMs`` after the request arrived, then forwards it. Responses of one connection keep their order, as a
Kafka broker answers a connection's requests one at a time: whatever follows a held fetch waits behind it.

What it does not emulate: a held fetch never returns early when records arrive during the wait (the broker's
empty answer is sent late as it was; the client's next fetch finds the records), and ``fetch.min.bytes`` above
1 (any records make a response non-empty). Fetch requests with ``MinBytes`` 0 or ``MaxWaitMs`` 0 are answered at
once, as Kafka does.

How: Kafka framing (4-byte size, request header api_key, api_version, correlation_id, client_id). The ApiVersions
response is rewritten so the broker offers Fetch up to v11 (the last version before flexible encoding, simple to
parse) and FindCoordinator up to v3. Metadata (every version) and FindCoordinator responses name the proxy's port
instead of the broker's, in place (a port is an int32, so sizes do not change), so librdkafka keeps talking
through the proxy. One proxy per broker: other brokers in a Metadata response are left as they are, and so are
the node endpoints a KIP-951 "not leader" answer may carry (the embedded clusters have one broker each).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Self

FETCH, METADATA, FIND_COORDINATOR, API_VERSIONS = 1, 3, 10, 18
#: Highest version the proxy lets the broker offer, per API key (see the module docstring).
VERSION_CAPS = {FETCH: 11, FIND_COORDINATOR: 3}
_FLEXIBLE_FROM = {METADATA: 9, FIND_COORDINATOR: 3, API_VERSIONS: 3}


@dataclass(frozen=True)
class HeldFetch:
    """One empty fetch the proxy held (or is holding): the request's MaxWaitMs, its client.id, and how long the
    proxy holds it (s: MaxWaitMs less the time the broker took to answer)."""

    max_wait_ms: int
    client_id: str
    held_s: float


@dataclass(frozen=True)
class _Request:
    api_key: int
    api_version: int
    client_id: str
    arrived: float
    max_wait_ms: int = 0
    min_bytes: int = 0


class _Reader:
    """Kafka primitive types read from a buffer, keeping the position (for patching in place)."""

    def __init__(self, data: bytearray, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def skip(self, size: int) -> None:
        self.pos += max(0, size)

    def string(self, flexible: bool) -> str:
        """A (nullable) string: int16 size, or unsigned varint size + 1 when flexible; None reads as ''."""
        size = self.uvarint() - 1 if flexible else self.take(">h")
        text = bytes(self.data[self.pos : self.pos + max(0, size)]).decode("utf-8", "replace")
        self.skip(size)
        return text

    def array_size(self, flexible: bool) -> int:
        """An array's element count: int32, or unsigned varint count + 1 when flexible; -1 for null."""
        return self.uvarint() - 1 if flexible else self.take(">i")

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.skip(self.uvarint())


def _parse_request(frame: bytes, now: float) -> tuple[int, _Request]:
    """(correlation id, what the response handling needs to know) of one request frame."""
    reader = _Reader(bytearray(frame))
    api_key, api_version, correlation_id = reader.take(">h"), reader.take(">h"), reader.take(">i")
    client_id = reader.string(flexible=False)  # the header's client_id is never a compact string
    if api_key == FETCH and 3 <= api_version <= 11:  # header v1 (no tagged fields) up to v11
        reader.take(">i")  # ReplicaId
        max_wait_ms, min_bytes = reader.take(">i"), reader.take(">i")
        return correlation_id, _Request(api_key, api_version, client_id, now, max_wait_ms, min_bytes)
    return correlation_id, _Request(api_key, api_version, client_id, now)


def _cap_api_versions(frame: bytearray, version: int) -> None:
    """Lower the broker's MaxVersion of the capped APIs in an ApiVersions response frame, in place."""
    reader = _Reader(frame, 4)  # after the correlation id (ApiVersions answers always use header v0)
    error_code = reader.take(">h")
    flexible = version >= 3 and error_code == 0  # an UNSUPPORTED_VERSION answer is always in v0's format
    for _ in range(reader.array_size(flexible)):
        api_key, _min_version = reader.take(">h"), reader.take(">h")
        cap = VERSION_CAPS.get(api_key)
        if cap is not None and reader.take(">h") > cap:
            struct.pack_into(">h", frame, reader.pos - 2, cap)
        elif cap is None:
            reader.skip(2)
        if flexible:
            reader.tagged_fields()


def _patch_ports(frame: bytearray, api_key: int, version: int, ports: dict[int, int]) -> None:
    """Replace broker ports in a Metadata or FindCoordinator (v0-v3) response frame, in place."""
    flexible = version >= _FLEXIBLE_FROM[api_key]
    reader = _Reader(frame, 4)  # after the correlation id
    if flexible:
        reader.tagged_fields()  # response header v1
    if api_key == FIND_COORDINATOR:
        if version >= 1:
            reader.take(">i")  # ThrottleTimeMs
        reader.take(">h")  # ErrorCode
        if version >= 1:
            reader.string(flexible)  # ErrorMessage
        reader.take(">i")  # NodeId
        reader.string(flexible)
        _patch_port(frame, reader, ports)
        return
    if version >= 3:
        reader.take(">i")  # ThrottleTimeMs
    for _ in range(reader.array_size(flexible)):
        reader.take(">i")  # NodeId
        reader.string(flexible)  # Host
        _patch_port(frame, reader, ports)
        if version >= 1:
            reader.string(flexible)  # Rack
        if flexible:
            reader.tagged_fields()


def _patch_port(frame: bytearray, reader: _Reader, ports: dict[int, int]) -> None:
    port = reader.take(">i")
    if port in ports:
        struct.pack_into(">i", frame, reader.pos - 4, ports[port])


def fetch_is_empty(frame: bytearray, version: int) -> bool:
    """True when a Fetch v4-v11 response frame carries no records, no error and no preferred read replica: what
    Apache Kafka holds for MaxWaitMs before answering."""
    reader = _Reader(frame, 4)  # after the correlation id (header v0 up to v11)
    reader.take(">i")  # ThrottleTimeMs
    if version >= 7:
        if reader.take(">h") != 0:  # ErrorCode
            return False
        reader.take(">i")  # SessionId
    for _ in range(reader.array_size(False)):
        reader.string(False)  # Topic
        for _ in range(reader.array_size(False)):
            reader.take(">i")  # Partition
            if reader.take(">h") != 0:  # ErrorCode
                return False
            reader.skip(8 + 8 + (8 if version >= 5 else 0))  # HighWatermark, LastStableOffset, LogStartOffset
            aborted = reader.array_size(False)
            reader.skip(16 * aborted)  # ProducerId, FirstOffset
            if version >= 11 and reader.take(">i") != -1:  # PreferredReadReplica
                return False
            if reader.take(">i") > 0:  # RecordSet: null (-1) or empty means no records
                return False
    return True


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


class LongPollProxy:
    """``LongPollProxy("127.0.0.1:9092")``: listens on a free loopback port (``bootstrap``) and forwards to the
    broker, holding empty fetches (see the module docstring). ``held`` lists the fetches it held, ``fetches``
    counts every Fetch response; ``close()`` (or leaving the ``with`` block) drops every connection."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self._server = socket.create_server((host, 0))
        self.port = self._server.getsockname()[1]
        self.held: list[HeldFetch] = []
        self.fetches = 0
        self.errors: list[str] = []  # what the proxy could not parse (a test should find none)
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name=f"longpoll-proxy-{self.port}", daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"{self.upstream[0]}:{self.port}"

    def held_at_least(self, max_wait_ms: int) -> list[HeldFetch]:
        """The held fetches whose request asked to wait ``max_wait_ms`` or more."""
        with self._lock:
            return [fetch for fetch in self.held if fetch.max_wait_ms >= max_wait_ms]

    def reset(self) -> None:
        with self._lock:
            self.held.clear()
            self.fetches = 0

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sockets, self._sockets = [self._server, *self._sockets], []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
                broker = socket.create_connection(self.upstream)
            except OSError:
                return
            for sock in (client, broker):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, broker]
            pending: dict[int, _Request] = {}
            threading.Thread(target=self._requests, args=(client, broker, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(broker, client, pending), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket, pending: dict[int, _Request]) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                frame = _recv_frame(client)
                correlation_id, request = _parse_request(frame, time.monotonic())
                pending[correlation_id] = request  # before the broker can answer it
                broker.sendall(struct.pack(">i", len(frame)) + frame)
        self._drop(client, broker)

    def _responses(self, broker: socket.socket, client: socket.socket, pending: dict[int, _Request]) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                frame = bytearray(_recv_frame(broker))
                (correlation_id,) = struct.unpack_from(">i", frame)
                request = pending.pop(correlation_id, None)
                if request is not None:
                    try:
                        self._handle(frame, request)
                    except (struct.error, IndexError) as exc:
                        with self._lock:
                            self.errors.append(f"api {request.api_key} v{request.api_version}: {exc!r}")
                client.sendall(struct.pack(">i", len(frame)) + frame)
        self._drop(broker, client)

    def _handle(self, frame: bytearray, request: _Request) -> None:
        """Rewrite the response ``frame`` in place; hold it first if it is an empty fetch."""
        if request.api_key == API_VERSIONS:
            _cap_api_versions(frame, request.api_version)
        elif request.api_key == METADATA or (request.api_key == FIND_COORDINATOR and request.api_version <= 3):
            _patch_ports(frame, request.api_key, request.api_version, {self.upstream[1]: self.port})
        elif request.api_key == FETCH:
            with self._lock:
                self.fetches += 1
            if not 4 <= request.api_version <= 11:
                raise struct.error(f"Fetch v{request.api_version} is not parsed (capped at v11)")
            if request.max_wait_ms > 0 and request.min_bytes > 0 and fetch_is_empty(frame, request.api_version):
                hold = max(0.0, request.arrived + request.max_wait_ms / 1000 - time.monotonic())
                with self._lock:  # counted as the hold begins: a client may give up (and close) before it ends
                    self.held.append(HeldFetch(request.max_wait_ms, request.client_id, hold))
                self._closed.wait(hold)

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
