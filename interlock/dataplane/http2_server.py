"""HTTP/2 from clients for the data plane: h2c and TLS h2 — what gRPC needs.

aiohttp speaks HTTP/1.1 only, and gRPC is HTTP/2 or nothing (with trailers: ``grpc-status``
comes after the body). The frames are python-hyper's ``h2`` (``http2_frames.py``); this module
is the server's I/O around it:

* :class:`SniffingProtocol` — one listener for both versions: a connection that starts with
  the HTTP/2 preface (h2c "prior knowledge", what a gRPC client sends on a plaintext channel) or
  that negotiated ``h2`` by ALPN on TLS is served by :class:`H2ServerProtocol`, any other by
  the HTTP/1.1 server (``http1_server.py``), which gets the bytes read so far replayed;
* :class:`H2ServerProtocol` — each client stream becomes an
  :class:`~interlock.dataplane.request_stream.H2Request` handed to the front door's handler
  with an :class:`H2Responder` to answer on; request bodies are read with flow control (a
  stream's window is credited back only as the handler consumes it), so a slow upstream slows
  the client instead of filling memory; the scheme is the connection's (a client's ``:scheme``
  is not believed), and a client that resets streams faster than its :class:`ResetBudget`
  allows gets GOAWAY (rapid reset, CVE-2023-44487).

A request that came in as HTTP/2 goes upstream as HTTP/2 (``http2_client.py``) when its backend
speaks it; HTTP/1.1 requests keep going upstream as HTTP/1.1 (``proxy.Forwarder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from loguru import logger
from multidict import CIMultiDict

from interlock.dataplane.http2_frames import (
    PREFACE,
    FlowControlledConnection,
    decode_headers,
    regular_headers,
)
from interlock.dataplane.request_stream import H2Handler, H2Request, answer_with


class H2BodyTimeout(Exception):
    """The client sent no byte of its request body for the time allowed."""


class H2Body:
    """A stream's request body; each chunk read credits the client's window back."""

    def __init__(self, connection: FlowControlledConnection, stream_id: int) -> None:
        self._connection = connection
        self._stream_id = stream_id
        self._chunks: asyncio.Queue[tuple[bytes, int] | None] = asyncio.Queue()
        self.ended = False
        self.empty = False
        """The stream ended with its headers: there is no body at all."""
        self.timed_out = False
        """A read with a bound ``within`` timed out."""
        self.arrived = False
        """The client ended the stream: the whole body has arrived (it may not be read yet)."""

    def feed(self, data: bytes, flow_controlled: int) -> None:
        self._chunks.put_nowait((data, flow_controlled))

    def end(self) -> None:
        self.arrived = True
        self._chunks.put_nowait(None)

    def discard(self) -> int:
        """Drop what arrived and was not read; returns its flow-controlled length (the credit
        the client is owed for it)."""
        owed = 0
        while not self._chunks.empty():
            item = self._chunks.get_nowait()
            if item is not None:
                owed += item[1]
        return owed

    def take_whole(self) -> bytes | None:
        """None: each chunk read must credit the client's window back (:meth:`chunks`)."""
        return None

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

    def __init__(self, connection: FlowControlledConnection, stream_id: int) -> None:
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

    def close_after(self) -> None:
        """Nothing: the stream ends with its answer, and its connection carries others."""

    def reset(self) -> None:
        with contextlib.suppress(h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self._connection.h2.reset_stream(self._stream_id, h2.errors.ErrorCodes.CANCEL)
            self._connection.flush()
        self.ended = True


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
        self._connection = FlowControlledConnection(client_side=False)
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
        for name, value in decode_headers(event.headers or ()):
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
            body = self._bodies.pop(stream_id, None)
            if body is not None and not body.ended:
                self._release(stream_id, body)
            self._tasks.pop(stream_id, None)
            self._arm_idle()

    def _release(self, stream_id: int, body: H2Body) -> None:
        """A stream answered before its body was read to the end: the body's bytes that arrived
        unread are credited back to the client (else they hold the connection's window for
        good: after 64 KiB of refused uploads no stream of the connection could send a body),
        and a body still coming is stopped with RST_STREAM NO_ERROR (RFC 9113 §8.1; h2 credits
        what arrives after it by itself)."""
        connection = self._connection
        if connection.closed:
            return
        owed = body.discard()
        with contextlib.suppress(h2.exceptions.H2Error):
            if owed:
                connection.h2.acknowledge_received_data(owed, stream_id)
            if not body.arrived:
                connection.h2.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
        connection.flush()

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
