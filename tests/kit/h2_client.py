"""A small real HTTP/2 client for the e2e tests: h2c with prior knowledge, or TLS with ALPN.

python-hyper's ``h2`` state machine over an asyncio connection; one request per connection
(or several on one, :meth:`H2Client.request`), the answer read whole: status, headers, body and
trailers, and the protocol TLS negotiated.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events


@dataclass
class H2Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    trailers: dict[str, str] = field(default_factory=dict)
    reset: bool = False

    @property
    def reason(self) -> str | None:
        return self.headers.get("x-interlock-reason")


class H2Client:
    """One HTTP/2 connection to ``host:port``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self._h2.initiate_connection()
        self._writer.write(self._h2.data_to_send())
        self._events: list[h2.events.Event] = []
        self.alpn: str | None = None
        tls = writer.get_extra_info("ssl_object")
        if tls is not None:
            self.alpn = tls.selected_alpn_protocol()

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> H2Client:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname=server_hostname if tls else None
        )
        return cls(reader, writer)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self._writer.wait_closed()

    async def request(
        self,
        *,
        authority: str,
        path: str = "/",
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        scheme: str = "http",
        within: float = 30.0,
    ) -> H2Reply:
        stream_id = self._h2.get_next_available_stream_id()
        pseudo = [(":method", method), (":scheme", scheme), (":authority", authority)]
        pseudo.append((":path", path))
        sent = [*pseudo, *((k.lower(), v) for k, v in (headers or {}).items())]
        self._h2.send_headers(stream_id, sent, end_stream=not body)
        self._writer.write(self._h2.data_to_send())
        async with asyncio.timeout(within):
            await self._send_body(stream_id, memoryview(body))
            return await self._answer(stream_id)

    async def _send_body(self, stream_id: int, body: memoryview) -> None:
        """As the stream's and the connection's flow-control windows allow."""
        while body:
            window = min(
                self._h2.local_flow_control_window(stream_id), self._h2.max_outbound_frame_size
            )
            if window <= 0:
                await self._receive()  # until a WINDOW_UPDATE
                continue
            self._h2.send_data(stream_id, bytes(body[:window]), end_stream=len(body) <= window)
            body = body[window:]
            self._writer.write(self._h2.data_to_send())

    async def _receive(self) -> None:
        data = await self._reader.read(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self._events.extend(self._h2.receive_data(data))
        self._writer.write(self._h2.data_to_send())

    async def _answer(self, stream_id: int) -> H2Reply:
        reply = H2Reply(0, {}, b"")
        parts: list[bytes] = []
        while True:
            if not self._events:
                await self._receive()
            events, self._events = self._events, []
            for event in events:
                if getattr(event, "stream_id", None) != stream_id:
                    continue
                if isinstance(event, h2.events.ResponseReceived):
                    headers = {_text(k): _text(v) for k, v in event.headers or ()}
                    reply.status = int(headers.pop(":status"))
                    reply.headers = headers
                elif isinstance(event, h2.events.DataReceived):
                    parts.append(event.data or b"")
                    self._h2.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.TrailersReceived):
                    reply.trailers = {_text(k): _text(v) for k, v in event.headers or ()}
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    reply.reset = isinstance(event, h2.events.StreamReset)
                    reply.body = b"".join(parts)
                    self._writer.write(self._h2.data_to_send())
                    return reply
            self._writer.write(self._h2.data_to_send())


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


async def h2_get(
    url: str,
    *,
    authority: str,
    path: str = "/",
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    tls: ssl.SSLContext | None = None,
) -> H2Reply:
    """One request on a new connection to ``url`` (``http://HOST:PORT``)."""
    host, _, port = url.split("://", 1)[1].rpartition(":")
    client = await H2Client.connect(host, int(port), tls=tls, server_hostname=authority)
    try:
        return await client.request(
            authority=authority,
            path=path,
            method=method,
            headers=headers,
            body=body,
            scheme="https" if tls else "http",
        )
    finally:
        await client.close()
