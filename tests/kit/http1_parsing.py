"""Requests as the edge's HTTP/1.1 server hands them to the steps, from the bytes a client
sends (read by read), without a listening socket."""

from __future__ import annotations

import asyncio

from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS
from interlock.dataplane.request_stream import H2Request, Responder
from interlock.edge.steps import HELD_BACK
from tests.kit.recording_transport import RecordingTransport


async def parsed_requests(*reads: bytes, count: int = 1) -> list[H2Request]:
    """The first ``count`` requests of ``reads`` (each body read to its end, each answered
    204), as the server parsed them."""
    parsed: list[H2Request] = []
    handled = asyncio.Event()

    async def handler(request: H2Request, responder: Responder) -> None:
        parsed.append(request)
        async for _ in request.body.chunks():
            pass
        responder.send_headers(204, [], end=True)
        if len(parsed) == count:
            handled.set()

    protocol = Http1ServerProtocol(
        handler,
        scheme="http",
        limits=DEFAULT_LIMITS,
        upgrade=asyncio.Protocol,
        held_back=HELD_BACK,
    )
    protocol.connection_made(RecordingTransport())
    for read in reads:
        protocol.data_received(read)
    await asyncio.wait_for(handled.wait(), 30)
    protocol.connection_lost(None)
    return parsed
