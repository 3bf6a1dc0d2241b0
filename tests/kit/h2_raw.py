"""An HTTP/2 client on a raw socket for the security tests, which send what a well-behaved client
would not (streams reset as soon as opened, ``CONNECT``, a scheme the connection is not,
header names h2 libraries refuse to send upstream): each frame as the test writes it."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.events import Event

_FOREVER = 120.0
"""Deadline of a read that must end (a failure, not a wait that passes)."""


@dataclass
class H2Raw:
    """An h2c connection (prior knowledge) whose frames the test writes as it likes."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    h2: h2.connection.H2Connection
    events: list[Event] = field(default_factory=list)
    closed: bool = False

    @classmethod
    async def open(cls, address: tuple[str, int]) -> H2Raw:
        reader, writer = await asyncio.open_connection(*address)
        connection = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="latin-1")
        )
        connection.initiate_connection()
        writer.write(connection.data_to_send())
        return cls(reader, writer, connection)

    def flush(self) -> None:
        self.writer.write(self.h2.data_to_send())

    def headers(self, authority: str, *, path: str = "/", method: str = "GET") -> int:
        stream_id = self.h2.get_next_available_stream_id()
        pseudo = [(":method", method), (":authority", authority)]
        if method != "CONNECT":
            pseudo += [(":scheme", "http"), (":path", path)]
        self.h2.send_headers(stream_id, pseudo, end_stream=method != "CONNECT")
        return stream_id

    async def receive(self) -> None:
        try:
            data = await asyncio.wait_for(self.reader.read(65536), _FOREVER)
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed = True
            return
        with contextlib.suppress(h2.exceptions.ProtocolError):
            self.events.extend(self.h2.receive_data(data))
        self.flush()

    async def until(self, done: type[Event]) -> Event | None:
        """Read until an event of type ``done`` (returned) or the server closes (None)."""
        while not self.closed:
            for event in self.events:
                if isinstance(event, done):
                    return event
            await self.receive()
        return None

    async def request(self, headers: list[tuple[str, str]]) -> tuple[int, dict[str, str], bytes]:
        """Send ``headers`` (pseudo-headers first) on a new stream that ends with them, and read
        its answer: status, headers, body."""
        stream_id = self.h2.get_next_available_stream_id()
        self.h2.send_headers(stream_id, headers, end_stream=True)
        self.flush()
        return await self.answer(stream_id)

    async def answer(self, stream_id: int) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = 0, dict[str, str](), b""
        while not self.closed:
            for event in self.events:
                if getattr(event, "stream_id", None) != stream_id:
                    continue
                if isinstance(event, h2.events.ResponseReceived):
                    # The connection decodes header fields (``header_encoding``): str pairs.
                    headers = {str(k): str(v) for k, v in event.headers or ()}
                    status = int(headers.pop(":status"))
                elif isinstance(event, h2.events.DataReceived):
                    body += event.data or b""
                    self.h2.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    return status, headers, body
            self.events.clear()
            self.flush()
            await self.receive()
        raise ConnectionError("the server closed the connection before answering")

    def close(self) -> None:
        self.writer.close()
