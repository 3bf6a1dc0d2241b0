"""HTTP/1.1 spoken byte by byte, for the security tests of the edge and the mesh listener: a
request sent as is and the answer read off the socket, malformed chunked bodies, and a backend
that answers whatever head the test gives it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass
class Answer:
    """An HTTP response read off a raw socket."""

    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes


def parse_answer(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(status=status, headers=headers, body=body, raw=raw)


async def send_raw(address: tuple[str, int], data: bytes, *, deadline: float = 30.0) -> Answer:
    """Send ``data`` as is and read until the server closes (requests say Connection: close)."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(data)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(-1), deadline)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return parse_answer(raw)


def malformed_bodies(host: str) -> list[tuple[str, str]]:
    """Requests to ``host`` whose chunked body is malformed, each with what is wrong with it."""
    head = f"POST /upload HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    return [
        (
            "unknown transfer coding",
            head + "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ),
        (
            "chunk size overflow",
            head + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nhello\r\n0\r\n\r\n",
        ),
        ("bare LF in a chunk", head + "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n"),
        (
            "Content-Length in the trailer",
            head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n",
        ),
    ]


async def send_a_chunk_that_goes_bad(address: tuple[str, int], *, host: str) -> Answer:
    """A chunked POST whose first chunk is sent, then a chunk size that is not one."""
    head = f"POST /upload HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write((head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n").encode())
        await writer.drain()
        writer.write(b"zz\r\nnot a chunk size\r\n0\r\n\r\n")
        await writer.drain()
        return parse_answer(await asyncio.wait_for(reader.read(-1), 20.0))
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def backend_answering(head: bytes) -> AsyncIterator[tuple[str, int]]:
    """A backend that reads a request head and answers ``head`` and a short body."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(head + b"Content-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield ("127.0.0.1", server.sockets[0].getsockname()[1])
    finally:
        server.close()
