"""An answer whose header would split the HTTP/1.1 head is never written
(``interlock.dataplane.http1_server``): a CR or LF in a name or value, alone or as CRLF, is
refused before a byte of the head goes out, and the connection is cut."""

from __future__ import annotations

import asyncio

import pytest

from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS
from interlock.dataplane.request_stream import H2Request, Responder
from tests.kit.recording_transport import RecordingTransport


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-A", "1\r\nX-Injected: 1"),
        ("X-A", "1\nX-Injected: 1"),
        ("X-A", "1\rX-Injected: 1"),
        ("X-A\r\nX-Injected", "1"),
    ],
)
async def test_a_header_with_cr_or_lf_is_never_written(name: str, value: str) -> None:
    answered = asyncio.Event()

    async def handler(request: H2Request, responder: Responder) -> None:
        try:
            responder.send_headers(200, [(name, value)], end=False)
            await responder.send_data(b"hi", end=True)
        finally:
            answered.set()

    protocol = Http1ServerProtocol(
        handler, scheme="http", limits=DEFAULT_LIMITS, upgrade=lambda: asyncio.Protocol()
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
    await asyncio.wait_for(answered.wait(), 60)
    for _ in range(3):
        await asyncio.sleep(0)  # the protocol's task finishes
    assert b"Injected" not in transport.written
    assert transport.written == b""
    assert transport.closed
    protocol.connection_lost(None)


async def test_a_plain_header_is_written() -> None:
    """The check refuses only CR and LF: the same answer with a plain value goes out whole."""

    async def handler(request: H2Request, responder: Responder) -> None:
        responder.send_headers(200, [("X-A", "1")], end=False)
        await responder.send_data(b"hi", end=True)

    protocol = Http1ServerProtocol(
        handler, scheme="http", limits=DEFAULT_LIMITS, upgrade=lambda: asyncio.Protocol()
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
    for _ in range(10):
        await asyncio.sleep(0)
        if transport.written:
            break
    assert transport.written.startswith(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n")
    assert transport.written.endswith(b"\r\n\r\nhi")
    assert not transport.closed
    protocol.connection_lost(None)
