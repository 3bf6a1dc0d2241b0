"""One client must not starve every host, nor hold a connection forever.

Limits are small here (five connections per upstream, one-second client timeouts) so that each
attack needs a handful of sockets; every wait is for a condition (a count reached, a connection
closed, a 408 received) under a generous deadline, never a measured duration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.proxy import ProxyTimeouts
from tests.kit.raw_http1 import parse_answer, send_raw

from .conftest import CountingBackend, Edge, running_edge, serve_host, wait_until

SLOW = ProxyTimeouts(connect=60.0, read=300.0)


def _upload_headers(host: str, *, length: int) -> bytes:
    return (
        f"POST /upload HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


async def _read_until_closed(reader: asyncio.StreamReader, *, deadline: float = 60.0) -> bytes:
    return await asyncio.wait_for(reader.read(-1), deadline)


@contextlib.asynccontextmanager
async def _serving_a(backend: CountingBackend, **server_options: Any) -> AsyncIterator[Edge]:
    """A running edge (``server_options`` as for ``running_edge``) serving ``a.example.com``
    from ``backend``."""
    async with running_edge(**server_options) as edge:
        await serve_host(edge, host="a.example.com", service="a", address=backend.address)
        yield edge


@contextlib.asynccontextmanager
async def _connection(
    address: tuple[str, int],
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A raw TCP connection to the edge, closed when the block ends."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        yield reader, writer
    finally:
        writer.close()


async def test_slow_uploads_to_one_host_leave_the_other_hosts_served(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    slow, other = counting_backends
    limits = ProxyLimits(upstream_connections=5, max_connections=6, body_timeout=300.0)
    async with running_edge(limits=limits, timeouts=SLOW) as edge:
        await serve_host(edge, host="a.example.com", service="a", address=slow.address)
        await serve_host(edge, host="b.example.com", service="b", address=other.address)
        writers = []
        try:
            for _ in range(8):
                _, writer = await asyncio.open_connection(*edge.address)
                writer.write(_upload_headers("a.example.com", length=1_000_000) + b"x" * 10)
                await writer.drain()
                writers.append(writer)
            await wait_until(lambda: slow.active == 5, what="five uploads reach backend a")
            answer = await send_raw(
                edge.address,
                b"GET / HTTP/1.1\r\nHost: b.example.com\r\nConnection: close\r\n\r\n",
            )
            assert (answer.status, answer.body) == (200, b"backend-b")
            assert slow.peak == 5  # the other three wait for one of a's five connections
        finally:
            for writer in writers:
                writer.close()


async def test_a_client_that_leaves_cancels_its_upstream_request(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    async with _serving_a(backend, timeouts=SLOW) as edge:
        _, writer = await asyncio.open_connection(*edge.address)
        writer.write(b"GET /hang HTTP/1.1\r\nHost: a.example.com\r\n\r\n")
        await writer.drain()
        await wait_until(lambda: backend.active == 1, what="the request reaches the backend")
        writer.close()
        await wait_until(lambda: backend.cancelled == 1, what="the upstream request is cancelled")


async def test_headers_sent_too_slowly_get_408_and_the_connection_closed(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    async with _serving_a(backend, limits=ProxyLimits(header_timeout=1.0)) as edge:
        async with _connection(edge.address) as (reader, writer):
            writer.write(b"GET / HTTP/1.1\r\nHost: a.example.com\r\nX-Slow: ")
            loop = asyncio.get_running_loop()
            end = loop.time() + 60.0
            received = b""
            while loop.time() < end:
                # One more header byte at a time, each well within any read timeout.
                with contextlib.suppress(ConnectionError):
                    writer.write(b"a")
                    await writer.drain()
                try:
                    # read(n) returns as soon as anything arrived: a timeout loses nothing.
                    received = await asyncio.wait_for(reader.read(65536), 0.2)
                except TimeoutError:
                    continue
                received += await _read_until_closed(reader)
                break
            else:
                raise AssertionError("the edge still waits for headers dribbled for 60 s")
        assert parse_answer(received).status == 408
        assert backend.finished == 0


async def test_a_connection_that_sends_nothing_is_closed(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    async with _serving_a(backend, limits=ProxyLimits(idle_timeout=1.0)) as edge:
        async with _connection(edge.address) as (reader, writer):
            assert await _read_until_closed(reader) == b""
        # And a keep-alive connection is closed once idle after its request.
        async with _connection(edge.address) as (reader, writer):
            writer.write(b"GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n")
            received = await _read_until_closed(reader)
        answer = parse_answer(received)
        assert (answer.status, answer.body) == (200, b"backend-a")


async def test_a_stalled_body_gets_408_and_releases_the_upstream(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    async with _serving_a(backend, limits=ProxyLimits(body_timeout=1.0), timeouts=SLOW) as edge:
        async with _connection(edge.address) as (reader, writer):
            writer.write(_upload_headers("a.example.com", length=1000) + b"x" * 10)
            await writer.drain()
            answer = parse_answer(await _read_until_closed(reader))
        assert answer.status == 408
        await wait_until(
            lambda: backend.active == 0 and backend.finished == 1,
            what="the upstream request ends",
        )
