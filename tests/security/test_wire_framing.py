"""HTTP/1.1 framing errors are answered, and a backend's oversized head is not relayed.

A request body whose chunked framing is malformed used to leave the client with no answer at
all (the request was already on its way upstream, and the parser's error only stopped the
reading); it gets the ``400`` every other malformed request gets. A backend's answer head of
100 KB was relayed to the client as it was; past the data plane's bound it is a ``502``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from .conftest import (
    HOST,
    Answer,
    BodyBackend,
    Edge,
    get_request,
    parse_answer,
    send_raw,
    serve_host,
)

_HEAD = f"POST /upload HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n"


MALFORMED_BODIES = [
    (
        "unknown transfer coding",
        _HEAD + "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ),
    (
        "chunk size overflow",
        _HEAD + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nhello\r\n0\r\n\r\n",
    ),
    ("bare LF in a chunk", _HEAD + "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n"),
    (
        "Content-Length in the trailer",
        _HEAD + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n",
    ),
]
"""Malformed chunked request bodies (shared with test_mesh_wire_framing)."""


@pytest.mark.parametrize(("name", "request_bytes"), MALFORMED_BODIES)
async def test_a_malformed_chunked_body_is_answered_400(
    edge: Edge, body_backend: BodyBackend, name: str, request_bytes: str
) -> None:
    await serve_host(edge, host=HOST, service="upload", address=body_backend.address)
    answer = await send_raw(edge.address, request_bytes.encode(), deadline=20.0)
    assert answer.status == 400, (name, answer.raw[:200])
    assert answer.headers["x-interlock-reason"] == "bad-request"


async def test_a_chunk_that_goes_bad_after_the_body_started_streaming_is_answered_400(
    edge: Edge, body_backend: BodyBackend
) -> None:
    await serve_host(edge, host=HOST, service="upload", address=body_backend.address)
    answer = await send_a_chunk_that_goes_bad(edge.address, host=HOST)
    assert answer.status == 400, answer.raw[:200]


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


async def test_a_backends_100_kb_answer_head_is_a_502(edge: Edge) -> None:
    big = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n"
    async with backend_answering(big) as address:
        await serve_host(edge, host=HOST, service="big", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    assert answer.status == 502, answer.raw[:200]
    assert b"a" * 1000 not in answer.raw


async def test_many_headers_that_add_up_past_the_bound_are_a_502_too(edge: Edge) -> None:
    many = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: %b\r\n" % (i, b"v" * 900) for i in range(90))
    async with backend_answering(many) as address:
        await serve_host(edge, host=HOST, service="many", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    assert answer.status == 502, answer.raw[:200]


async def test_an_answer_head_under_the_bound_is_relayed(edge: Edge) -> None:
    fine = b"HTTP/1.1 200 OK\r\nX-Cookie-Jar: " + b"c" * 16_000 + b"\r\n"
    async with backend_answering(fine) as address:
        await serve_host(edge, host=HOST, service="fine", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    assert answer.status == 200
    assert answer.body == b"ok"
