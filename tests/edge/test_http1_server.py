"""The edge's HTTP/1.1 server on the wire (``interlock.dataplane.http1_server``): keep-alive and
pipelining order, chunked and length-framed bodies both ways, 100-continue, HEAD, HTTP/1.0,
the header limits, and a malformed request's 400 — spoken byte for byte over a socket, as a
client that is not aiohttp would."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import cast

import pytest

from interlock.dataplane import http1

from .conftest import HOST, Backend, EdgeHarness, body_json

Wire = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _connect(harness: EdgeHarness) -> Wire:
    return await asyncio.open_connection(*harness.address)


@pytest.fixture
async def wire(harness: EdgeHarness) -> AsyncIterator[Wire]:
    """A connection to the edge, whose route ``/`` goes to the backend."""
    await harness.serve()
    reader, writer = await _connect(harness)
    yield reader, writer
    writer.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One answer read off the connection: status, headers (lower-case names), body (chunked
    or by length; HEAD answers and 1xx have none)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return status, headers, body
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0"))
    return status, headers, await reader.readexactly(length)


async def test_pipelined_requests_are_answered_in_order_on_one_connection(wire: Wire) -> None:
    reader, writer = wire
    writer.write(
        b"".join(f"GET /echo?n={n} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode() for n in range(5))
    )
    for n in range(5):
        status, headers, body = await _read_answer(reader)
        assert status == 200
        assert body_json(body)["path"] == f"/echo?n={n}"
        assert "connection" not in headers  # kept alive
    writer.write(f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
    status, headers, body = await _read_answer(reader)
    assert (status, headers["connection"], body) == (200, "close", b"hello from backend-1")
    assert await asyncio.wait_for(reader.read(), 60) == b""


async def test_a_chunked_upload_streams_and_a_streamed_download_is_chunked(wire: Wire) -> None:
    reader, writer = wire
    writer.write(
        f"POST /upload HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    for _ in range(3):
        writer.write(b"4000\r\n" + b"u" * 0x4000 + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    status, _, body = await _read_answer(reader)
    assert (status, body_json(body)) == (200, {"size": 3 * 0x4000})
    writer.write(f"GET /download?size=200000 HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    status, headers, body = await _read_answer(reader)
    assert (status, len(body)) == (200, 200000)
    assert headers["content-length"] == "200000"


async def test_expect_100_continue_is_answered_when_the_body_is_wanted(
    wire: Wire, backend: Backend
) -> None:
    reader, writer = wire
    writer.write(
        f"POST /upload HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 5\r\n"
        "Expect: 100-continue\r\n\r\n".encode()
    )
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"hello")
    status, _, body = await _read_answer(reader)
    assert (status, body_json(body)) == (200, {"size": 5})
    # Refused before the body is read: no 100, and the unread body closes the connection.
    writer.write(
        b"POST / HTTP/1.1\r\nHost: other.example.com\r\nContent-Length: 5\r\n"
        b"Expect: 100-continue\r\n\r\n"
    )
    status, headers, _ = await _read_answer(reader)
    assert (status, headers["x-interlock-reason"]) == (404, "unknown-host")
    assert headers["connection"] == "close"
    assert [seen.body_size for seen in backend.seen] == [5]


async def test_head_gets_the_headers_of_a_get_without_a_body(wire: Wire) -> None:
    reader, writer = wire
    writer.write(f"HEAD /download?size=1000 HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert re.search(rb"(?i)\r\ncontent-length: 1000\r\n", head)
    # Nothing follows the head: the next answer starts right after it.
    writer.write(f"HEAD / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    assert head.startswith(b"HTTP/1.1 200 ")
    writer.write(b"HEAD / HTTP/1.1\r\nHost: other.example.com\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    assert head.startswith(b"HTTP/1.1 404 ")
    writer.write(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    status, _, body = await _read_answer(reader)
    assert (status, body) == (200, b"hello from backend-1")


async def test_an_http_1_0_client_gets_its_answer_and_the_connection_closed(wire: Wire) -> None:
    reader, writer = wire
    writer.write(f"GET /download?size=5000 HTTP/1.0\r\nHost: {HOST}\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), 60)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"chunked" not in head.lower()
    assert len(body) == 5000


async def test_too_many_or_too_long_headers_are_refused_and_the_connection_closed(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    many = "".join(f"X-H{n}: v\r\n" for n in range(200))
    long_target = "/" + "a" * 9000
    for request, status in [
        (f"GET / HTTP/1.1\r\nHost: {HOST}\r\n{many}\r\n", 431),
        (f"GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Long: {'v' * 9000}\r\n\r\n", 431),
        (f"GET {long_target} HTTP/1.1\r\nHost: {HOST}\r\n\r\n", 414),
        ("GET / HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n", 400),
    ]:
        reader, writer = await _connect(harness)
        try:
            writer.write(request.encode())
            answer, headers, body = await _read_answer(reader)
            assert answer == status, request[:60]
            assert headers["connection"] == "close"
            assert body.startswith(b"bad-request: ")
            assert await asyncio.wait_for(reader.read(), 60) == b""
        finally:
            writer.close()
    assert backend.seen == []


async def test_the_edge_answers_carry_a_date_and_no_server_banner(
    harness: EdgeHarness, backend: Backend
) -> None:
    status, headers, _ = await harness.get("/", host="other.example.com")
    assert status == 404
    assert "Date" in headers and "Server" not in headers
    assert headers["X-Interlock-Reason"] == "unknown-host"


class _WritesRecorded:
    """An upstream connection's transport whose writes are recorded (the rest is the real
    transport's)."""

    def __init__(self, transport: asyncio.Transport, writes: list[bytes]) -> None:
        self._transport = transport
        self._writes = writes

    def write(self, data: bytes) -> None:
        self._writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


async def test_a_body_that_came_with_its_head_goes_upstream_with_it_in_one_write(
    harness: EdgeHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[bytes] = []
    made = http1.UpstreamConnection.connection_made

    def connection_made(self: http1.UpstreamConnection, transport: asyncio.BaseTransport) -> None:
        made(self, _WritesRecorded(cast(asyncio.Transport, transport), writes))  # type: ignore[arg-type]

    monkeypatch.setattr(http1.UpstreamConnection, "connection_made", connection_made)
    bodies: list[bytes] = []
    connections = 0

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                # Answered before its body is read, as nginx's `return` answers.
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                length = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
                assert length is not None
                bodies.append(await reader.readexactly(int(length.group(1))))
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    harness.upstreams.set(
        namespace="default", service="web", port=80, addresses=[server.sockets[0].getsockname()]
    )
    await harness.serve()
    reader, writer = await _connect(harness)
    sent = [b"name=first", b"name=second&more=1"]
    for body in sent:
        writer.write(
            f"POST /form HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status, _, answer = await _read_answer(reader)
        assert (status, answer) == (200, b"ok")
    writer.close()
    server.close()
    assert bodies == sent
    # One write a request, its head and its body; and the connection that answered before
    # reading the first body carried the second request.
    assert [write.endswith(body) for write, body in zip(writes, sent, strict=True)] == [True, True]
    assert connections == 1
