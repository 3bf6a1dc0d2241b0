"""Which HTTP version the edge's HTTP/1.1 server takes a request for
(``Http1ServerProtocol.on_headers_complete``): HTTP/1.1 from the read the request began in when
that read holds its canonical request line from its first byte, else from llhttp. An HTTP/1.0
client that keeps its connection is told so (``Connection: keep-alive``), an HTTP/1.1 client
is not; each answer here says which one the server took its request for, whatever else came in
the same read before it, and however the request was split over reads.
"""

from __future__ import annotations

import asyncio

import pytest

from interlock.dataplane.request_stream import H2Request, Responder
from tests.kit.http1_parsing import served_connection

V10 = b"GET /a HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n"
V11 = b"GET /b HTTP/1.1\r\nHost: a\r\n\r\n"


async def versions(*reads: bytes, count: int) -> list[str]:
    """For each of the first ``count`` requests of ``reads`` (one connection): "1.0" when its
    answer tells an HTTP/1.0 client the connection stays, else "1.1"."""
    seen: list[str] = []
    answered = asyncio.Event()

    async def handler(request: H2Request, responder: Responder) -> None:
        responder.send_headers(200, [], end=False)
        await responder.send_data(request.path.encode(), end=True)
        seen.append(request.path)
        if len(seen) == count:
            answered.set()

    _, transport = await served_connection(handler, reads, answered)
    heads = [answer.partition(b"\r\n\r\n")[0] for answer in transport.written.split(b"HTTP/1.1 ")]
    return ["1.0" if b"\r\nConnection: keep-alive" in head else "1.1" for head in heads if head]


@pytest.mark.parametrize(
    ("reads", "expected"),
    [
        ((V10,), ["1.0"]),
        ((V11,), ["1.1"]),
        # The second request's line is as long as the first's: read at the read's start, it
        # would be taken for the first's version.
        ((V11 + V10,), ["1.1", "1.0"]),
        ((V10 + V11,), ["1.0", "1.1"]),
        ((V11 + V10 + V11,), ["1.1", "1.0", "1.1"]),
        # What llhttp skips before a request moves its line from the read's start.
        ((b"\r\n" + V10,), ["1.0"]),
        ((b"\r\n\r\n" + V11,), ["1.1"]),
        # A request line split over two reads, or a head begun in an earlier read.
        ((V10[:9], V10[9:]), ["1.0"]),
        ((V10[:20], V10[20:]), ["1.0"]),
        ((V11[:20], V11[20:]), ["1.1"]),
        ((V11 + V10[:20], V10[20:]), ["1.1", "1.0"]),
    ],
)
async def test_each_request_is_taken_for_the_version_it_names(
    reads: tuple[bytes, ...], expected: list[str]
) -> None:
    assert await versions(*reads, count=len(expected)) == expected
