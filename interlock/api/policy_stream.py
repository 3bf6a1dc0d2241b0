"""Policy watch streams served without the HTTP server's per-connection machinery.

A watch stream is held open for hours by each of thousands of mesh proxies and edges, and
through a general HTTP server each one keeps kilobytes alive: the connection with its parser,
the parsed request (headers, URL), the response, and a task with its coroutines (through
aiohttp's, about 12 KiB; ``benchmarks/stream_memory.py`` shows it by file). What a stream does
once open is small: write the current policy, then each newer one, as a chunk. So a
connection's first bytes are read here: a well-formed
``GET /v1/outbound/{namespace}/{service}/{port}?watch=true`` (HTTP/1.1, no body) whose target
already has a policy is served by this module's protocol — no task, no parser, one callback on
the slot — and every other request (a plain GET, the schema, anything malformed or waiting for
the initial sync, HTTP/1.0) is handed, bytes and transport, to the server's connection
(:mod:`interlock.api.http_server`), which answers it exactly as before. The stream is the same
on the wire (chunked NDJSON, the slot's body bytes unchanged) and keeps the slot's semantics: a
reader whose socket is full is not written to, and gets the newest policy when it drains.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qsl, unquote

from interlock.api.http_server import HEAD_TIMEOUT
from interlock.api.policy_target import BadRequest, watch_target
from interlock.mailbox.slot import LatestValueSlot
from interlock.model.policy_watch import PolicyUpdate, WatchTarget

if TYPE_CHECKING:
    from interlock.api.policy import PolicyApiCounters, PolicySource

_OUTBOUND = "/v1/outbound/"
_HEAD_LIMIT = 8192
_HEAD_TIMEOUT = HEAD_TIMEOUT
"""Seconds a connection may take to send its request head (the server's default)."""
_BODY_HEADERS = (b"content-length", b"transfer-encoding", b"expect", b"upgrade")
_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
_LAST_CHUNK = b"0\r\n\r\n"


class WatchStreams:
    """Serves the lean watch streams of one policy app; :meth:`protocol` is the server's
    protocol factory, ``fallback`` the server's (``http_server.HttpServer``)."""

    __slots__ = ("allows_host", "connections", "counters", "is_ready", "open_slots", "source")

    def __init__(
        self,
        *,
        source: PolicySource,
        counters: PolicyApiCounters,
        open_slots: set[LatestValueSlot[PolicyUpdate]],
        is_ready: Callable[[], bool],
        allows_host: Callable[[str | None], bool],
    ) -> None:
        self.allows_host = allows_host
        """Whether a ``Host`` header is answered; the server's guard refuses the others."""
        self.source = source
        self.counters = counters
        self.open_slots = open_slots
        self.is_ready = is_ready
        self.connections: set[_Connection] = set()
        """The streams open now."""

    def protocol(self, fallback: Callable[[], asyncio.Protocol]) -> asyncio.Protocol:
        return _Connection(self, fallback)

    def end(self) -> None:
        """End every stream now (the last chunk, then close), releasing its slot."""
        for connection in list(self.connections):
            connection.end()


def chunk(body: bytes) -> bytes:
    """One policy as an HTTP/1.1 chunk: the body and its newline."""
    return b"%x\r\n%b\n\r\n" % (len(body) + 1, body)


class _Connection(asyncio.Protocol):
    """One connection: reads the request head, then either streams or hands over to the server."""

    __slots__ = (
        "_fallback",
        "_paused",
        "_slot",
        "_streams",
        "_target",
        "_timer",
        "_transport",
        "_version",
        "_waiter",
    )

    def __init__(self, streams: WatchStreams, fallback: Callable[[], asyncio.Protocol]) -> None:
        self._streams = streams
        self._fallback = fallback
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._target: WatchTarget | None = None
        self._slot: LatestValueSlot[PolicyUpdate] | None = None
        self._version = 0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._timer = asyncio.get_running_loop().call_later(_HEAD_TIMEOUT, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._slot is not None:
            return  # a watch stream reads nothing more; pipelined requests are not served
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # Decided on the first bytes: a request head that did not arrive whole in them is
        # the server's (it buffers, times out and answers malformed heads as before).
        end = data.find(b"\r\n\r\n", 0, _HEAD_LIMIT)
        if end < 0 or not self._stream(data[:end]):
            self._hand_over(data)

    def _hand_over(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        protocol = self._fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.data_received(data)
        self._transport = None

    def _stream(self, head: bytes) -> bool:
        """Start the watch stream ``head`` asks for, if it is one this module serves."""
        lines = head.split(b"\r\n")
        request = lines[0].split(b" ")
        if len(request) != 3 or request[0] != b"GET" or request[2] != b"HTTP/1.1":
            return False
        host: str | None = None
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                return False
            if name.lower() in _BODY_HEADERS and value.strip() != b"0":
                return False
            if name.lower() == b"host":
                if host is not None:
                    return False  # the parser refuses two Host headers
                host = value.strip().decode("latin-1")
        if not self._streams.allows_host(host):
            return False  # the host guard answers 421
        try:
            path, _, query = request[1].decode("ascii").partition("?")
        except UnicodeDecodeError:
            return False
        params: dict[str, str] = {}
        for key, text in parse_qsl(query):
            params.setdefault(key, text)
        if params.get("watch", "").lower() not in ("true", "1", "yes"):
            return False
        if not path.startswith(_OUTBOUND):
            return False
        parts = path[len(_OUTBOUND) :].split("/")
        if len(parts) != 3:
            return False
        streams = self._streams
        try:
            target = watch_target(
                namespace=unquote(parts[0]),
                service=unquote(parts[1]),
                port_text=unquote(parts[2]),
                client_namespace=params.get("clientNamespace"),
            )
        except BadRequest:
            return False  # the handler answers the 400 naming the wrong part
        if not streams.is_ready():
            return False  # the handler waits for the initial sync (or answers 503)
        slot = streams.source.open_watch(target)
        update = slot.latest
        if slot.closed or update is None:
            streams.source.close_watch(target, slot)
            return False  # the handler waits for the first policy (or answers 503)
        assert self._transport is not None
        self._target, self._slot, self._version = target, slot, slot.version
        streams.connections.add(self)
        streams.open_slots.add(slot)
        counters = streams.counters
        counters.count("watch", 200)
        counters.watches_opened += 1
        counters.watches_open += 1
        self._transport.write(_HEADERS + chunk(update.body))
        self._arm()
        return True

    def _arm(self) -> None:
        assert self._slot is not None
        waiter = self._waiter = self._slot.wait(after=self._version)
        waiter.add_done_callback(self._woken)

    def _woken(self, _waiter: asyncio.Future[None]) -> None:
        self._waiter = None
        slot, transport = self._slot, self._transport
        if slot is None or transport is None:
            return  # the connection is gone
        if slot.closed:
            self.end()
        elif not self._paused:
            self._send()
        # Paused: the socket is full; resume_writing sends the newest policy.

    def _send(self) -> None:
        slot, transport = self._slot, self._transport
        assert slot is not None and transport is not None
        if slot.version > self._version and slot.latest is not None:
            self._version = slot.version
            transport.write(chunk(slot.latest.body))
        self._arm()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._slot is not None and self._waiter is None:
            if self._slot.closed:
                self.end()
            else:
                self._send()

    def eof_received(self) -> bool | None:
        return None  # the client is done: close the connection (and end its stream)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._release()
        self._transport = None

    def end(self) -> None:
        """End the stream as a complete response (the server is stopping)."""
        transport = self._transport
        self._release()
        if transport is not None:
            transport.write(_LAST_CHUNK)
            transport.close()

    def _release(self) -> None:
        slot, target = self._slot, self._target
        if slot is None or target is None:
            return
        self._slot = None
        if self._waiter is not None:
            self._waiter.remove_done_callback(self._woken)
            self._waiter = None
        streams = self._streams
        streams.connections.discard(self)
        streams.counters.watches_open -= 1
        streams.open_slots.discard(slot)
        streams.source.close_watch(target, slot)
