"""interlock's HTTP/1.1 server (``interlock.api.http_server``) under the policy API and the
admin server: keep-alive, the request head's timeout, limits and 400s, HEAD, streamed answers
with flow control, and handlers cancelled when their client goes away."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Iterator

import pytest
from loguru import logger

from interlock.api.http_server import MAX_BODY, MAX_HEADERS, MAX_LINE, Response, StreamResponse
from interlock.api.routes import Request, Routes
from interlock.api.serving import RunningSite, serve
from interlock.config import Address

SECRET = "s3cr3t-token-value"
CHUNK = 1 << 20


class Handlers:
    """Routes whose handlers tell the test what happened to them."""

    def __init__(self) -> None:
        self.cancelled: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.blocked: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.routes = Routes()
        self.routes.add_get("/hello", self.hello)
        self.routes.add_get("/forever", self.forever)
        self.routes.add_get("/flood", self.flood)
        self.routes.add_get("/broken-stream", self.broken_stream)

    async def hello(self, request: Request) -> Response:
        return Response(text=f"hello {request.query.get('n', '')}\n")

    async def forever(self, request: Request) -> StreamResponse:
        response = StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        await response.write(b"first\n")
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set_result("cancelled")
            raise
        return response

    async def flood(self, request: Request) -> StreamResponse:
        # Writes 32 MiB to a client that reads nothing until ``blocked`` says a write waited.
        response = StreamResponse()
        await response.prepare(request)
        for written in range(32):
            write = asyncio.ensure_future(response.write(bytes([65 + written % 26]) * CHUNK))
            for _ in range(5):
                await asyncio.sleep(0)
            if not write.done() and not self.blocked.done():
                self.blocked.set_result(written)
            await write
        await response.write_eof()
        return response

    async def broken_stream(self, request: Request) -> StreamResponse:
        response = StreamResponse()
        await response.prepare(request)
        await response.write(b"partial")
        raise RuntimeError("after the head")


@pytest.fixture
async def handlers() -> Handlers:
    return Handlers()


@pytest.fixture
async def site(handlers: Handlers) -> AsyncIterator[RunningSite]:
    running = await serve(handlers.routes, Address("127.0.0.1", 0), head_timeout=0.3)
    yield running
    await running.stop()


async def _connect(
    site: RunningSite,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", site.address.port)


@contextlib.asynccontextmanager
async def _connection(
    site: RunningSite,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await _connect(site)
    try:
        yield reader, writer
    finally:
        writer.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    """One answer with a Content-Length body: (status line, headers, body)."""
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode("latin-1")
    status, *lines = head[:-4].split("\r\n")
    headers = {name.lower(): value for name, _, value in (x.partition(": ") for x in lines)}
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 10)
    return status, headers, body


async def _ask(site: RunningSite, raw: bytes) -> bytes:
    """Send ``raw``, read until the server closes the connection."""
    reader, writer = await _connect(site)
    writer.write(raw)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    out = io.StringIO()
    sink = logger.add(out, level="DEBUG", format="{level} {name} {message}")
    try:
        yield out
    finally:
        logger.remove(sink)


async def test_keep_alive_serves_requests_one_after_another_on_one_connection(
    site: RunningSite,
) -> None:
    async with _connection(site) as (reader, writer):
        for n in range(3):
            writer.write(f"GET /hello?n={n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            status, headers, body = await _read_answer(reader)
            assert status == "HTTP/1.1 200 OK"
            assert body == f"hello {n}\n".encode()
            assert "connection" not in headers  # HTTP/1.1: kept alive without saying so
            assert headers["server"] == "interlock"
        # Pipelined: three requests in one write, answered in order.
        writer.write(
            b"".join(
                f"GET /hello?n=p{n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode() for n in range(3)
            )
        )
        for n in range(3):
            assert (await _read_answer(reader))[2] == f"hello p{n}\n".encode()


async def test_http_1_0_is_kept_alive_only_when_it_asks(site: RunningSite) -> None:
    async with _connection(site) as (reader, writer):
        writer.write(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        status, headers, _ = await _read_answer(reader)
        assert status == "HTTP/1.0 200 OK" and headers["connection"] == "keep-alive"
        writer.write(b"GET /hello HTTP/1.0\r\n\r\n")
        status, headers, body = await _read_answer(reader)
        assert body == b"hello \n" and "connection" not in headers
        assert await asyncio.wait_for(reader.read(), 10) == b""  # then closed


async def test_head_gets_the_head_only(site: RunningSite) -> None:
    async with _connection(site) as (reader, writer):
        writer.write(b"HEAD /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 7\r\n" in head
        # The next answer follows the head at once: no body bytes were sent in between.
        writer.write(b"GET /hello?n=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, _, body = await _read_answer(reader)
        assert (status, body) == ("HTTP/1.1 200 OK", b"hello 2\n")
        # A streamed answer too: neither chunks nor the last chunk.
        writer.write(b"HEAD /broken-stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert b"Transfer-Encoding" not in head


@pytest.mark.parametrize(
    "raw",
    [
        b"NOT HTTP AT ALL " + SECRET.encode() + b"\r\n\r\n",
        b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad\x01: " + SECRET.encode() + b"\r\n\r\n",
        b"GET /hello HTTP/1.1\r\nCookie: " + SECRET.encode() * (MAX_LINE // 10) + b"\r\n\r\n",
        b"GET /" + b"a" * (MAX_LINE + 1) + b" HTTP/1.1\r\n\r\n",
        b"GET /hello HTTP/1.1\r\n" + b"X-A: 1\r\n" * (MAX_HEADERS + 1) + b"\r\n",
        b"GET /hello HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    ],
    ids=["garbage", "bad header name", "long header", "long line", "many headers", "framing"],
)
async def test_a_malformed_request_is_answered_400_and_closed_without_echoing_it(
    site: RunningSite, debug_log: io.StringIO, raw: bytes
) -> None:
    answer = await _ask(site, raw)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:200]
    assert b"\r\nConnection: close" in head and b"\r\nServer: interlock" in head
    assert body == b"400: Bad Request"
    assert SECRET not in debug_log.getvalue()
    assert "malformed request" in debug_log.getvalue()  # what kind, at DEBUG


async def test_a_body_larger_than_the_limit_is_refused_413(site: RunningSite) -> None:
    answer = await _ask(
        site, f"GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert b"\r\nConnection: close\r\n" in answer


async def test_a_body_nobody_reads_ends_the_connection_after_the_answer(
    site: RunningSite,
) -> None:
    # Chunked, never finished: answered, then closed rather than waited for.
    answer = await _ask(
        site, b"GET /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"
    )
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"hello \n")


@pytest.mark.parametrize("sent", [b"", b"GET /hello HTTP/1.1\r\nHost: 127.0"])
async def test_a_connection_that_does_not_send_a_whole_head_in_time_is_closed(
    site: RunningSite, sent: bytes
) -> None:
    # head_timeout is 0.3 s here: nothing, or half a head, then the server closes unanswered.
    assert await _ask(site, sent) == b""


async def test_an_idle_keep_alive_connection_is_closed_after_the_head_timeout(
    site: RunningSite,
) -> None:
    async with _connection(site) as (reader, writer):
        writer.write(b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await _read_answer(reader))[2] == b"hello \n"
        assert await asyncio.wait_for(reader.read(), 10) == b""


async def test_a_client_gone_mid_stream_cancels_its_handler(
    site: RunningSite, handlers: Handlers
) -> None:
    reader, writer = await _connect(site)
    writer.write(b"GET /forever HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert b"Transfer-Encoding: chunked\r\n" in head
    assert await asyncio.wait_for(reader.readexactly(11), 10) == b"6\r\nfirst\n\r\n"
    await asyncio.wait_for(handlers.started.wait(), 10)
    writer.close()
    assert await asyncio.wait_for(handlers.cancelled, 10) == "cancelled"


async def test_a_stream_waits_while_its_client_does_not_read(
    site: RunningSite, handlers: Handlers
) -> None:
    async with _connection(site) as (reader, writer):
        writer.write(b"GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        # Not reading: the socket fills and a write waits, long before the 32 MiB are out.
        written = await asyncio.wait_for(handlers.blocked, 30)
        assert written < 31
        answer = await asyncio.wait_for(reader.read(), 30)
    _, _, chunked = answer.partition(b"\r\n\r\n")
    body = b""
    while True:
        size, _, chunked = chunked.partition(b"\r\n")
        if int(size, 16) == 0:
            break
        body, chunked = body + chunked[: int(size, 16)], chunked[int(size, 16) + 2 :]
    assert body == b"".join(bytes([65 + n % 26]) * CHUNK for n in range(32))


async def test_a_handler_failing_after_its_head_closes_the_connection(site: RunningSite) -> None:
    answer = await _ask(site, b"GET /broken-stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.count(b"HTTP/1.1") == 1  # no second answer after the first one's head
    assert answer.endswith(b"7\r\npartial\r\n")  # and no last chunk: the answer is cut short


async def test_stopping_closes_idle_connections_and_ends_running_handlers(
    handlers: Handlers,
) -> None:
    running = await serve(handlers.routes, Address("127.0.0.1", 0), shutdown_timeout=0.1)
    idle_reader, idle_writer = await _connect(running)
    busy_reader, busy_writer = await _connect(running)
    idle_writer.write(b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await _read_answer(idle_reader)
    busy_writer.write(b"GET /forever HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await asyncio.wait_for(handlers.started.wait(), 10)
    await running.stop()
    assert await asyncio.wait_for(idle_reader.read(), 10) == b""
    assert await asyncio.wait_for(handlers.cancelled, 10) == "cancelled"
    assert (await asyncio.wait_for(busy_reader.read(), 10)).endswith(b"6\r\nfirst\n\r\n")
    idle_writer.close()
    busy_writer.close()
