"""Requests as the edge's HTTP/1.1 server hands them to the steps, from the bytes a client
sends (read by read), without a listening socket."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import httptools

from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.request_stream import H2Request, Responder
from interlock.edge.steps import HELD_BACK
from tests.kit.recording_transport import RecordingTransport


async def parsed_requests(*reads: bytes, count: int = 1) -> list[H2Request]:
    """The first ``count`` requests of ``reads`` (each body read to its end, each answered
    204), as the server parsed them."""
    return [request for request, _ in await served_requests(*reads, count=count)]


async def served_requests(
    *reads: bytes, count: int = 1, held_back: frozenset[str] = HELD_BACK
) -> list[tuple[H2Request, bytes]]:
    """:func:`parsed_requests` with each request's body as the handler read it, over one
    connection whose server holds back ``held_back`` (the edge's names by default)."""
    served: list[tuple[H2Request, bytes]] = []
    handled = asyncio.Event()

    async def handler(request: H2Request, responder: Responder) -> None:
        body = b""
        async for chunk in request.body.chunks():
            body += chunk
        served.append((request, body))
        responder.send_headers(204, [], end=True)
        if len(served) == count:
            handled.set()

    await served_connection(handler, reads, handled, held_back=held_back)
    return served


async def served_connection(
    handler: Callable[[H2Request, Responder], Awaitable[None]],
    reads: Iterable[bytes],
    done: asyncio.Event,
    *,
    limits: ProxyLimits = DEFAULT_LIMITS,
    held_back: frozenset[str] = frozenset(),
) -> tuple[Http1ServerProtocol, RecordingTransport]:
    """One connection of the edge's HTTP/1.1 server with ``handler``: ``reads`` fed to it in
    turn, then closed once ``done`` is set (the handler sets it)."""
    protocol = Http1ServerProtocol(
        handler, scheme="http", limits=limits, upgrade=asyncio.Protocol, held_back=held_back
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    for read in reads:
        protocol.data_received(read)
    await asyncio.wait_for(done.wait(), 30)
    protocol.connection_lost(None)
    return protocol, transport


def backend_reads(head: bytes) -> tuple[bytes, bytes, list[tuple[bytes, bytes]]]:
    """What a backend reads of a request ``head``: method, target, headers (llhttp, as the
    edge)."""
    seen: list[tuple[bytes, bytes]] = []
    url: list[bytes] = []

    class Reader:
        def on_url(self, part: bytes) -> None:
            url.append(part)

        def on_header(self, name: bytes, value: bytes) -> None:
            seen.append((name, value))

    parser = httptools.HttpRequestParser(Reader())
    parser.feed_data(head)
    return parser.get_method(), b"".join(url), seen
