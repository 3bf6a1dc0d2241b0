"""HTTP/2 for the data plane: h2c and TLS h2 from clients, h2c to upstreams — what gRPC needs.

aiohttp speaks HTTP/1.1 only, and gRPC is HTTP/2 or nothing (with trailers: ``grpc-status``
comes after the body). The protocol work is python-hyper's ``h2``: a sans-I/O HTTP/2 state
machine (framing, HPACK, flow control, stream states, the RFC 9113 header rules) that is the
HTTP/2 core of hypercorn and httpx, well kept and small. What is ours is the I/O around it:

* :class:`SniffingProtocol` — one listener for both versions: a connection that starts with
  the HTTP/2 preface (h2c "prior knowledge", what a gRPC client sends on a plaintext channel) or
  that negotiated ``h2`` by ALPN on TLS is served by :class:`H2ServerProtocol`, any other by
  aiohttp's HTTP/1.1 handler, which gets the bytes read so far replayed;
* :class:`H2ServerProtocol` — each client stream becomes an :class:`H2Request` handed to the
  front door's handler with an :class:`H2Responder` to answer on; request bodies are read with
  flow control (a stream's window is credited back only as the handler consumes it), so a
  slow upstream slows the client instead of filling memory; the scheme is the connection's
  (a client's ``:scheme`` is not believed), and a client that resets streams faster than its
  :class:`ResetBudget` allows gets GOAWAY (rapid reset, CVE-2023-44487);
* :class:`H2Upstreams` — one h2c connection per upstream address, multiplexing the streams of
  every request sent there, each answer read as events (headers, data, trailers, end).

A request that came in as HTTP/2 goes upstream as HTTP/2 (prior knowledge): a backend that
speaks gRPC speaks it; HTTP/1.1 requests keep going upstream as HTTP/1.1 (``proxy.Forwarder``).
Server push is refused (``SETTINGS_ENABLE_PUSH = 0``), as proxies do.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from loguru import logger
from multidict import CIMultiDict

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

_CONNECTION_SPECIFIC = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
        "http2-settings",
    }
)
"""Headers HTTP/2 forbids (RFC 9113 §8.2.2; ``Host`` travels as ``:authority``)."""

Headers = list[tuple[str, str]]


def regular_headers(headers: Iterable[tuple[str, str]]) -> Headers:
    """``headers`` without pseudo-headers and connection-specific ones (``te`` only as
    ``trailers``), names in lower case."""
    kept: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower.startswith(":") or lower in _CONNECTION_SPECIFIC:
            continue
        if lower == "te" and value.strip().lower() != "trailers":
            continue
        kept.append((lower, value))
    return kept


def _decode(headers: Iterable[tuple[bytes | str, bytes | str]]) -> Headers:
    return [
        (
            k.decode("latin-1") if isinstance(k, bytes) else k,
            v.decode("latin-1") if isinstance(v, bytes) else v,
        )
        for k, v in headers
    ]


class _Connection:
    """What server and client connections share: the h2 state, writing, flow control."""

    def __init__(self, *, client_side: bool) -> None:
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=client_side, header_encoding=None)
        )
        self.transport: asyncio.Transport | None = None
        self._window_open = asyncio.Event()
        self.closed = False

    def flush(self) -> None:
        data = self.h2.data_to_send()
        transport = self.transport
        if data and not self.closed and transport is not None and not transport.is_closing():
            transport.write(data)

    def window_changed(self) -> None:
        self._window_open.set()
        self._window_open = asyncio.Event()

    async def send_data(self, stream_id: int, data: bytes, *, end: bool) -> None:
        """Send ``data`` as the stream's and the connection's windows allow."""
        view = memoryview(data)
        while view:
            if self.closed:
                raise ConnectionError("the HTTP/2 connection closed")
            window = min(
                self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size
            )
            if window <= 0:
                await self._window_open.wait()
                continue
            self.h2.send_data(stream_id, bytes(view[:window]))
            view = view[window:]
            self.flush()
        if end:
            self.h2.end_stream(stream_id)
            self.flush()

    def close_all(self) -> None:
        self.closed = True
        self._window_open.set()


# --- the server side -------------------------------------------------------------------------


class RequestBody(Protocol):
    """A client's request body as the front door's handler reads it: an HTTP/2 stream's
    (:class:`H2Body`) or an HTTP/1.1 request's (``interlock.dataplane.http1_server``)."""

    @property
    def empty(self) -> bool:
        """The request has no body at all."""
        ...

    @property
    def timed_out(self) -> bool:
        """A read waited longer than it was allowed to."""
        ...

    def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]: ...


class Responder(Protocol):
    """How a handler answers one request, whatever the wire: headers, data, trailers or the
    end (:class:`H2Responder`, or ``interlock.dataplane.http1_server.Http1Responder``)."""

    @property
    def status(self) -> int | None: ...

    def send_headers(
        self, status: int, headers: Sequence[tuple[str, str]], *, end: bool
    ) -> None: ...

    async def send_data(self, data: bytes, *, end: bool = False) -> None: ...

    def send_trailers(self, headers: Sequence[tuple[str, str]]) -> None: ...

    def reset(self) -> None: ...

    @property
    def ended(self) -> bool:
        """The answer is complete (or was cut)."""
        ...

    @property
    def bytes(self) -> int:
        """Bytes sent to the client so far (last: its name shadows the type above)."""
        ...


@dataclass(eq=False)
class H2Request:
    """One client stream (or HTTP/1.1 request): its pseudo-headers, headers, and body."""

    method: str
    scheme: str
    authority: str
    path: str
    """The request-target as sent (``/path?query``), still percent-encoded."""
    headers: CIMultiDict[str]
    peer: str
    body: RequestBody
    transport: asyncio.BaseTransport | None = None
    """The client connection (for its TLS peer certificate)."""
    version: str = "2"
    """The HTTP version the client speaks (``2``, or ``1.1`` from the HTTP/1.1 server)."""


class H2BodyTimeout(Exception):
    """The client sent no byte of its request body for the time allowed."""


class H2Body:
    """A stream's request body; each chunk read credits the client's window back."""

    def __init__(self, connection: _Connection, stream_id: int) -> None:
        self._connection = connection
        self._stream_id = stream_id
        self._chunks: asyncio.Queue[tuple[bytes, int] | None] = asyncio.Queue()
        self.ended = False
        self.empty = False
        """The stream ended with its headers: there is no body at all."""
        self.timed_out = False
        """A read with a bound ``within`` timed out."""

    def feed(self, data: bytes, flow_controlled: int) -> None:
        self._chunks.put_nowait((data, flow_controlled))

    def end(self) -> None:
        self._chunks.put_nowait(None)

    async def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]:
        """The body's chunks as they come; :class:`H2BodyTimeout` when none came for ``within``
        seconds."""
        while not self.ended:
            try:
                async with asyncio.timeout(within):
                    item = await self._chunks.get()
            except TimeoutError:
                self.timed_out = True
                raise H2BodyTimeout(f"no byte of the request body for {within:g} s") from None
            if item is None:
                self.ended = True
                return
            data, flow_controlled = item
            connection = self._connection
            if flow_controlled and not connection.closed:
                with contextlib.suppress(h2.exceptions.StreamClosedError):
                    connection.h2.acknowledge_received_data(flow_controlled, self._stream_id)
                connection.flush()
            yield data


class H2Responder:
    """How a handler answers one stream: headers, then data, then trailers or the end."""

    def __init__(self, connection: _Connection, stream_id: int) -> None:
        self._connection = connection
        self._stream_id = stream_id
        self.status: int | None = None
        self.bytes = 0
        self.ended = False

    def send_headers(self, status: int, headers: Sequence[tuple[str, str]], *, end: bool) -> None:
        self.status = status
        self._connection.h2.send_headers(
            self._stream_id, [(":status", str(status)), *regular_headers(headers)], end_stream=end
        )
        self._connection.flush()
        self.ended = end

    async def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.bytes += len(data)
        await self._connection.send_data(self._stream_id, data, end=end)
        self.ended = end

    def send_trailers(self, headers: Sequence[tuple[str, str]]) -> None:
        self._connection.h2.send_headers(self._stream_id, regular_headers(headers), end_stream=True)
        self._connection.flush()
        self.ended = True

    def reset(self) -> None:
        with contextlib.suppress(h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self._connection.h2.reset_stream(self._stream_id, h2.errors.ErrorCodes.CANCEL)
            self._connection.flush()
        self.ended = True


H2Handler = Callable[[H2Request, Responder], Awaitable[None]]


async def answer_with(handler: H2Handler, request: H2Request, responder: Responder) -> None:
    """Run the front door's ``handler`` on ``request``; an answer it left unfinished is ended
    (a 502 when it never began), so a client never waits on an answer nobody sends."""
    await handler(request, responder)
    if not responder.ended:
        await finish_answer(responder)


async def finish_answer(responder: Responder) -> None:
    """End an answer a handler left unfinished: a 502 when it never began."""
    if responder.status is None:
        responder.send_headers(502, [], end=True)
    else:
        await responder.send_data(b"", end=True)


LINGER = 2.0
"""Seconds a connection refused with GOAWAY stays open, reading and dropping what the client
still sends, before it is closed."""


@dataclass(frozen=True, slots=True)
class ResetBudget:
    """How many streams a client may reset on one connection while their handlers run:
    ``resets`` at once, refilled at ``resets`` per ``window`` seconds (Netty's defaults after
    CVE-2023-44487: 200 per 30 s)."""

    resets: int = 200
    window: float = 30.0


class H2ServerProtocol(asyncio.Protocol):
    """Serves one HTTP/2 client connection; each stream runs the handler in its own task."""

    def __init__(
        self,
        handler: H2Handler,
        *,
        scheme: str,
        closed: Callable[[H2ServerProtocol], None] = lambda _protocol: None,
        idle_timeout: float | None = None,
        resets: ResetBudget | None = None,
        underscores_in_headers: bool = True,
    ) -> None:
        self._handler = handler
        self._scheme = scheme
        self._closed = closed
        self._idle_timeout = idle_timeout
        self._idle: asyncio.TimerHandle | None = None
        self._underscores = underscores_in_headers
        """Whether headers whose names hold ``_`` are kept (the edge drops them by default:
        ``ProxyLimits.underscores_in_headers``)."""
        self._resets = ResetBudget() if resets is None else resets
        self._reset_tokens = float(self._resets.resets)
        self._reset_at = 0.0
        self._refused = False
        """Sent GOAWAY for too many resets: what the client still sends is read and dropped."""
        self._connection = _Connection(client_side=False)
        self._bodies: dict[int, H2Body] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._peer = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        transport = cast(asyncio.Transport, transport)
        self._connection.transport = transport
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) else ""
        # The preface (with the first SETTINGS) goes first; the change of setting after it.
        self._connection.h2.initiate_connection()
        self._connection.h2.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self._connection.flush()
        self._arm_idle()

    def _arm_idle(self) -> None:
        """A connection without a stream in flight is closed after ``idle_timeout`` s (what
        HTTP/1.1's keep-alive timeout does): an idle client holds no socket forever."""
        if self._idle_timeout is None or self._tasks or self._connection.closed:
            return
        if self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(self._idle_timeout, self._idled)

    def _idled(self) -> None:
        self._idle = None
        transport = self._connection.transport
        if self._tasks or transport is None or transport.is_closing():
            return
        with contextlib.suppress(h2.exceptions.H2Error):
            self._connection.h2.close_connection()
            self._connection.flush()
        transport.close()

    def _disarm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        connection = self._connection
        try:
            events = connection.h2.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            logger.debug("HTTP/2 client {}: protocol error: {}", self._peer, type(error).__name__)
            connection.flush()
            if connection.transport is not None:
                connection.transport.close()
            return
        for event in events:
            self._event(event)
            if self._refused or connection.transport is None or connection.transport.is_closing():
                return  # refused (too many resets) or terminated: no more streams start
        connection.flush()

    def _event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._request(event)
        elif isinstance(event, h2.events.DataReceived):
            body = self._bodies.get(event.stream_id)
            if body is not None:
                body.feed(event.data, event.flow_controlled_length)
        elif isinstance(event, h2.events.StreamEnded):
            body = self._bodies.get(event.stream_id)
            if body is not None:
                body.end()
        elif isinstance(event, h2.events.StreamReset):
            task = self._tasks.get(event.stream_id)
            if task is not None:
                task.cancel()
                self._spend_reset()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._connection.window_changed()
        elif (
            isinstance(event, h2.events.ConnectionTerminated)
            and self._connection.transport is not None
        ):
            self._connection.transport.close()

    def _spend_reset(self) -> None:
        """A stream was reset while its handler ran (by the client, or by h2 for the client's
        error): one of the connection's resets spent. Resets refill at ``resets`` per
        ``window`` seconds; a client that spends them faster gets GOAWAY (ENHANCE_YOUR_CALM)
        and the connection is closed (CVE-2023-44487, rapid reset: each stream opened costs
        the server a handler, each reset costs the client one frame)."""
        budget = self._resets
        now = asyncio.get_running_loop().time()
        refill = (now - self._reset_at) * budget.resets / budget.window
        self._reset_at = now
        self._reset_tokens = min(float(budget.resets), self._reset_tokens + refill) - 1.0
        if self._reset_tokens >= 0:
            return
        logger.debug(
            "HTTP/2 client {}: over {} stream resets in {:g} s: GOAWAY",
            self._peer,
            budget.resets,
            budget.window,
        )
        connection = self._connection
        with contextlib.suppress(h2.exceptions.H2Error):
            connection.h2.close_connection(error_code=h2.errors.ErrorCodes.ENHANCE_YOUR_CALM)
            connection.flush()
        self._refused = True
        connection.close_all()  # nothing more is written
        for task in list(self._tasks.values()):
            task.cancel()
        transport = connection.transport
        if transport is not None:
            # A lingering close: closing with the client's frames unread would send a TCP
            # reset, which can discard the GOAWAY before the client reads it.
            if transport.can_write_eof():
                transport.write_eof()
            asyncio.get_running_loop().call_later(LINGER, transport.close)

    def _request(self, event: h2.events.RequestReceived) -> None:
        stream_id = event.stream_id
        pseudo: dict[str, str] = {}
        headers: CIMultiDict[str] = CIMultiDict()
        underscores = self._underscores
        for name, value in _decode(event.headers or ()):
            if name.startswith(":"):
                pseudo[name] = value
            elif underscores or "_" not in name:
                headers.add(name, value)
        body = H2Body(self._connection, stream_id)
        if event.stream_ended is not None:
            body.empty = True
            body.end()
        self._bodies[stream_id] = body
        request = H2Request(
            method=pseudo.get(":method", ""),
            # The connection's, as for HTTP/1.1: a client's ``:scheme https`` on plaintext h2c
            # must not tell backends (X-Forwarded-Proto) that it came over TLS.
            scheme=self._scheme,
            authority=pseudo.get(":authority", headers.get("host", "")),
            path=pseudo.get(":path", "/"),
            headers=headers,
            peer=self._peer,
            body=body,
            transport=self._connection.transport,
        )
        self._disarm_idle()
        task = asyncio.get_running_loop().create_task(self._run(request, stream_id))
        self._tasks[stream_id] = task

    async def _run(self, request: H2Request, stream_id: int) -> None:
        responder = H2Responder(self._connection, stream_id)
        try:
            await answer_with(self._handler, request, responder)
        except asyncio.CancelledError:
            responder.reset()
        except (ConnectionError, h2.exceptions.H2Error) as error:
            logger.debug("HTTP/2 stream {}: {}", stream_id, type(error).__name__)
            responder.reset()
        except Exception:
            logger.exception("HTTP/2 stream {}: the handler failed", stream_id)
            responder.reset()
        finally:
            self._bodies.pop(stream_id, None)
            self._tasks.pop(stream_id, None)
            self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_idle()
        self._connection.close_all()
        for task in list(self._tasks.values()):
            task.cancel()
        self._closed(self)

    async def close(self, *, within: float) -> None:
        """Stop the connection: GOAWAY (no new streams), let the streams in flight finish for
        at most ``within`` seconds, then cancel them and close."""
        connection = self._connection
        if connection.transport is None or connection.transport.is_closing():
            return
        with contextlib.suppress(h2.exceptions.H2Error):
            connection.h2.close_connection()
            connection.flush()
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.wait(tasks, timeout=within)
        connection.transport.close()


class SniffingProtocol(asyncio.Protocol):
    """Chooses HTTP/2 or HTTP/1.1 for a new connection, then steps aside (see the module doc)."""

    def __init__(
        self,
        *,
        http1: Callable[[], asyncio.Protocol],
        http2: Callable[[], H2ServerProtocol],
        choose_within: float,
    ) -> None:
        self._http1 = http1
        self._http2 = http2
        self._choose_within = choose_within
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._deadline: asyncio.TimerHandle | None = None
        self.chosen: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        tls = transport.get_extra_info("ssl_object")
        if isinstance(tls, ssl.SSLObject) and tls.selected_alpn_protocol() == "h2":
            self._choose(self._http2())
            return
        # A connection that never says which protocol it speaks is not held forever.
        self._deadline = asyncio.get_running_loop().call_later(self._choose_within, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.chosen is not None:
            self.chosen.data_received(data)
            return
        self._buffer += data
        prefix = self._buffer[: len(PREFACE)]
        if PREFACE.startswith(prefix) and len(self._buffer) < len(PREFACE):
            return  # could still be either
        self._choose(self._http2() if prefix == PREFACE else self._http1())

    def _choose(self, protocol: asyncio.Protocol) -> None:
        assert self._transport is not None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.chosen = protocol
        self._transport.set_protocol(protocol)
        protocol.connection_made(self._transport)
        buffered, self._buffer = self._buffer, b""
        if buffered:
            protocol.data_received(buffered)

    def eof_received(self) -> bool | None:
        if self.chosen is not None:
            return self.chosen.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self.chosen is not None:
            self.chosen.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.chosen is not None:
            self.chosen.pause_writing()

    def resume_writing(self) -> None:
        if self.chosen is not None:
            self.chosen.resume_writing()


# --- the upstream side -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpstreamHeaders:
    status: int
    headers: Headers
    ended: bool = False
    """The headers ended the stream (gRPC's trailers-only answer to most errors)."""


@dataclass(frozen=True, slots=True)
class UpstreamData:
    data: bytes


@dataclass(frozen=True, slots=True)
class UpstreamTrailers:
    headers: Headers


@dataclass(frozen=True, slots=True)
class UpstreamEnd:
    reset: bool = False
    """The upstream reset the stream (or the connection went away) instead of ending it."""


UpstreamEvent = UpstreamHeaders | UpstreamData | UpstreamTrailers | UpstreamEnd


@dataclass(eq=False)
class UpstreamStream:
    """One request sent on an upstream connection; its answer arrives as events."""

    connection: _ClientProtocol
    stream_id: int
    events: asyncio.Queue[UpstreamEvent] = field(default_factory=asyncio.Queue)

    async def send_body(self, chunks: AsyncIterator[bytes]) -> None:
        async for chunk in chunks:
            await self.connection.send_data(self.stream_id, chunk, end=False)
        await self.connection.send_data(self.stream_id, b"", end=True)

    async def next_event(self) -> UpstreamEvent:
        return await self.events.get()

    def cancel(self) -> None:
        self.connection.cancel(self.stream_id)


class _ClientProtocol(_Connection, asyncio.Protocol):
    """One h2c connection to an upstream (prior knowledge)."""

    def __init__(self) -> None:
        _Connection.__init__(self, client_side=True)
        self._streams: dict[int, UpstreamStream] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        self.h2.initiate_connection()
        self.h2.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self.flush()

    @property
    def usable(self) -> bool:
        return (
            not self.closed
            and self.transport is not None
            and not self.transport.is_closing()
            and self.h2.open_outbound_streams < self.h2.remote_settings.max_concurrent_streams
        )

    def open_stream(self, headers: Headers) -> UpstreamStream:
        stream_id = self.h2.get_next_available_stream_id()
        stream = UpstreamStream(connection=self, stream_id=stream_id)
        self._streams[stream_id] = stream
        self.h2.send_headers(stream_id, headers, end_stream=False)
        self.flush()
        return stream

    def cancel(self, stream_id: int) -> None:
        if self._streams.pop(stream_id, None) is not None and not self.closed:
            with contextlib.suppress(h2.exceptions.H2Error):
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                self.flush()

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            logger.debug("HTTP/2 upstream: protocol error: {}", type(error).__name__)
            self.flush()
            if self.transport is not None:
                self.transport.close()
            return
        for event in events:
            self._event(event)
        self.flush()

    def _event(self, event: h2.events.Event) -> None:
        stream_id = getattr(event, "stream_id", None)
        stream = self._streams.get(stream_id) if isinstance(stream_id, int) else None
        if isinstance(event, h2.events.ResponseReceived) and stream is not None:
            headers = _decode(event.headers or ())
            status = int(next((v for k, v in headers if k == ":status"), "502"))
            ended = event.stream_ended is not None
            if ended:
                self._streams.pop(event.stream_id, None)
            stream.events.put_nowait(UpstreamHeaders(status, regular_headers(headers), ended))
        elif isinstance(event, h2.events.DataReceived):
            if event.flow_controlled_length:
                with contextlib.suppress(h2.exceptions.StreamClosedError):
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if stream is not None:
                stream.events.put_nowait(UpstreamData(event.data or b""))
        elif isinstance(event, h2.events.TrailersReceived) and stream is not None:
            stream.events.put_nowait(
                UpstreamTrailers(regular_headers(_decode(event.headers or ())))
            )
        elif isinstance(event, h2.events.StreamEnded) and stream is not None:
            self._streams.pop(event.stream_id, None)
            stream.events.put_nowait(UpstreamEnd())
        elif isinstance(event, h2.events.StreamReset) and stream is not None:
            self._streams.pop(event.stream_id, None)
            stream.events.put_nowait(UpstreamEnd(reset=True))
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self.window_changed()
        elif isinstance(event, h2.events.ConnectionTerminated) and self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close_all()
        for stream in self._streams.values():
            stream.events.put_nowait(UpstreamEnd(reset=True))
        self._streams.clear()


class H2Upstreams:
    """h2c connections to upstreams, one per address, shared by the streams sent there."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        """``tls``: connections speak h2 over TLS with it (ALPN ``h2``) instead of h2c."""
        self._tls = tls
        self._connections: dict[tuple[str, int], _ClientProtocol] = {}
        self._connecting: dict[tuple[str, int], asyncio.Lock] = {}

    async def open(
        self,
        address: tuple[str, int],
        *,
        method: str,
        authority: str,
        path: str,
        headers: Iterable[tuple[str, str]],
    ) -> UpstreamStream:
        """Send a request's headers to ``address``; raises ``OSError`` when no connection can
        be opened."""
        connection = await self._connection(address)
        scheme = "http" if self._tls is None else "https"
        pseudo = [(":method", method), (":scheme", scheme), (":authority", authority)]
        if method != "CONNECT":
            pseudo.append((":path", path))
        return connection.open_stream([*pseudo, *regular_headers(headers)])

    async def _connection(self, address: tuple[str, int]) -> _ClientProtocol:
        lock = self._connecting.setdefault(address, asyncio.Lock())
        async with lock:
            connection = self._connections.get(address)
            if connection is not None and connection.usable:
                return connection
            loop = asyncio.get_running_loop()
            _, protocol = await loop.create_connection(
                _ClientProtocol, address[0], address[1], ssl=self._tls
            )
            self._connections[address] = protocol
            return protocol

    async def close(self) -> None:
        for connection in self._connections.values():
            if connection.transport is not None:
                with contextlib.suppress(h2.exceptions.H2Error):
                    connection.h2.close_connection()
                    connection.flush()
                connection.transport.close()
        self._connections.clear()


@dataclass(frozen=True, slots=True)
class H2Failure:
    """No answer came from the upstream, or one held back (``held``) to be retried; the front
    door answers ``status`` with ``reason`` unless it sends the request again."""

    status: int
    reason: str
    detail: str
    grpc_status: str | None = None
    held: bool = False


async def relay_h2(
    request: H2Request,
    responder: Responder,
    *,
    body: AsyncIterator[bytes] | None = None,
    upstreams: H2Upstreams,
    address: tuple[str, int],
    authority: str,
    path: str,
    headers: Iterable[tuple[str, str]],
    connect_timeout: float,
    headers_timeout: float | None,
    where: str,
    response_edits: Callable[[Headers], Headers] | None = None,
    hold: Callable[[int, str | None], bool] | None = None,
) -> H2Failure | None:
    """Send ``request`` to ``address`` over h2c and relay the answer — headers, data, trailers
    — to ``responder``; an :class:`H2Failure` when nothing was relayed yet. The request body
    is ``body`` when given (a front door read it already), else the client's stream.

    ``headers_timeout`` bounds the wait for the upstream's response headers (the rule's
    timeout); once they came, the body streams for as long as it lasts (gRPC streams do).
    ``hold(status, grpc-status)`` says which answers not to relay (the caller retries them):
    their stream is cancelled and they come back as a ``held`` failure.
    """
    try:
        async with asyncio.timeout(connect_timeout):
            stream = await upstreams.open(
                address,
                method=request.method,
                authority=authority,
                path=path,
                headers=headers,
            )
    except TimeoutError:
        return H2Failure(504, "upstream-timeout", f"{where}: no connection to {address} in time")
    except OSError as error:
        logger.debug("{}: cannot connect to {}: {}", where, address, error)
        return H2Failure(502, "upstream-unreachable", f"{where}: cannot connect to {address}")
    sender = asyncio.get_running_loop().create_task(
        stream.send_body(request.body.chunks() if body is None else body)
    )
    finished = False
    try:
        try:
            async with asyncio.timeout(headers_timeout):
                first = await stream.next_event()
        except TimeoutError:
            return H2Failure(504, "upstream-timeout", f"{where}: {address} did not answer in time")
        if not isinstance(first, UpstreamHeaders):
            return H2Failure(502, "upstream-failed", f"{where}: {address} reset the stream")
        grpc_status = next((v for k, v in first.headers if k == "grpc-status"), None)
        if hold is not None and hold(first.status, grpc_status if first.ended else None):
            detail = f"{where}: {address} answered {first.status} ({grpc_status})"
            return H2Failure(first.status, "upstream", detail, grpc_status, held=True)
        headers_out = first.headers if response_edits is None else response_edits(first.headers)
        responder.send_headers(first.status, headers_out, end=first.ended)
        finished = first.ended
        while not finished:
            event = await stream.next_event()
            if isinstance(event, UpstreamData):
                await responder.send_data(event.data)
            elif isinstance(event, UpstreamTrailers):
                responder.send_trailers(event.headers)
                finished = True
            elif isinstance(event, UpstreamEnd):
                finished = True
                if event.reset:
                    responder.reset()
                else:
                    await responder.send_data(b"", end=True)
        return None
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sender
        if not finished:
            stream.cancel()
