"""HTTP/2 to upstreams for the data plane: h2c (or h2 over TLS) — what gRPC backends speak.

* :class:`H2Upstreams` — one connection per upstream address, multiplexing the streams of
  every request sent there, each answer read as events (headers, data, trailers, end);
* :func:`relay_h2` — one request sent there and its answer relayed to the client's
  :class:`~interlock.dataplane.request_stream.Responder`, or an :class:`H2Failure` when nothing
  was relayed yet (the front door answers it, or retries).

The frames are python-hyper's ``h2`` (``http2_frames.py``). Server push is refused
(``SETTINGS_ENABLE_PUSH = 0``), as proxies do.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from loguru import logger

from interlock.dataplane.http2_frames import (
    FlowControlledConnection,
    Headers,
    decode_headers,
    regular_headers,
)
from interlock.dataplane.request_stream import H2Request, Responder


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


class _ClientProtocol(FlowControlledConnection, asyncio.Protocol):
    """One h2c connection to an upstream (prior knowledge)."""

    def __init__(self) -> None:
        FlowControlledConnection.__init__(self, client_side=True)
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
            headers = decode_headers(event.headers or ())
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
                UpstreamTrailers(regular_headers(decode_headers(event.headers or ())))
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

    def __init__(
        self,
        *,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        peer_check: Callable[[dict[str, Any] | None], str | None] | None = None,
    ) -> None:
        """``tls``: connections speak h2 over TLS with it (ALPN ``h2``) instead of h2c, sending
        ``server_hostname`` as SNI; ``peer_check``: why the verified peer certificate is
        refused, or None (as :class:`~interlock.dataplane.http1.UpstreamPool`'s)."""
        self._tls = tls
        self._server_hostname = server_hostname
        self._peer_check = peer_check
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
            transport, protocol = await loop.create_connection(
                _ClientProtocol,
                address[0],
                address[1],
                ssl=self._tls,
                server_hostname=self._server_hostname if self._tls is not None else None,
            )
            if self._peer_check is not None:
                problem = self._peer_check(transport.get_extra_info("peercert"))
                if problem is not None:
                    transport.close()
                    raise ssl.SSLCertVerificationError(problem)
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
