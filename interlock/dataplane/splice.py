"""A client's connection taken over from the HTTP server, and bytes spliced both ways.

Once the mesh listener answered a ``CONNECT`` with ``200``, the connection is no longer HTTP:
whatever the client sends is the tunnelled protocol's (a TLS handshake, a database's wire
protocol). aiohttp's connection handler would keep parsing it as requests, and it closes the
connection as soon as the client half-closes (shuts down its sending side), which a tunnel
must survive: a client may send its last query and shut down writing while the answer is still
on its way. :func:`take_over` therefore moves the connection to asyncio's own stream protocol
(which keeps a half-closed connection open), bytes aiohttp had already read after the request
head included; :func:`splice` then copies each direction until its sender ends it, passes that
end on (a half-close, when the other side can take one), and closes both connections once both
directions ended or either side broke.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from aiohttp import web

CHUNK = 64 * 1024
"""Bytes read at once; a reader holding twice this much stops reading its socket."""


@dataclass(slots=True)
class Spliced:
    """Bytes copied so far, each way (kept current while the splice runs)."""

    to_client: int = 0
    to_upstream: int = 0


class _Tail:
    """Takes aiohttp's payload-parser slot to receive what the client sent after its request
    head (aiohttp read it already) and what arrives until the protocol is switched."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self._reader.feed_eof()


def take_over(request: web.BaseRequest) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The client's connection of ``request`` as a stream pair, after the answer head was sent.

    The aiohttp handler of ``request`` must close the connection when it returns
    (``request.protocol.force_close()``): aiohttp no longer sees the connection's end.
    """
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("the client closed its connection")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK, loop=loop)
    request.protocol.set_parser(_Tail(reader))  # type: ignore[arg-type]  # feed_data/feed_eof
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def splice(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    counts: Spliced,
) -> None:
    """Copy bytes both ways until both directions ended (or either side broke), counting them
    in ``counts``; both connections are closed on return (or cancellation)."""

    async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter, up: bool) -> None:
        while data := await source.read(CHUNK):
            sink.write(data)
            if up:
                counts.to_upstream += len(data)
            else:
                counts.to_client += len(data)
            await sink.drain()
        if sink.can_write_eof() and not sink.is_closing():
            sink.write_eof()  # the other direction may go on

    tasks = [
        asyncio.ensure_future(copy(client[0], upstream[1], True)),
        asyncio.ensure_future(copy(upstream[0], client[1], False)),
    ]
    try:
        # A direction that raised (a reset) ends the tunnel; one that ended cleanly waits for
        # the other.
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for _, writer in (client, upstream):
            writer.close()
