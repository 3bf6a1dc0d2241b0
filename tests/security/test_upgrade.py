"""A backend's ``101 Switching Protocols`` never reaches a client that did not ask
to upgrade (the edge relays no upgraded connection): 502."""

from __future__ import annotations

import asyncio
import contextlib

from tests.kit.raw_http1 import send_raw

from .conftest import HOST, Edge, get_request, serve_host


async def test_a_101_the_client_never_asked_for_is_a_502(edge: Edge) -> None:
    async def switch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\n"
            b"raw bytes of another protocol"
        )
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            await reader.read(-1)
        writer.close()

    server = await asyncio.start_server(switch, "127.0.0.1", 0)
    try:
        address = ("127.0.0.1", server.sockets[0].getsockname()[1])
        await serve_host(edge, host=HOST, service="switch", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    finally:
        server.close()
    assert answer.status == 502
    assert b"raw bytes of another protocol" not in answer.raw
