"""What a connection remembers of its last request's headers (``http1_server._Seen``, by
position) and what the server knows of a canonical ``GET`` line without asking llhttp
(``Http1ServerProtocol.on_headers_complete``): each request of a connection is handed over as
it would be on a connection of its own, whatever came before it, and a ``Connection`` or
``Proxy-Connection`` header is read as llhttp reads it."""

from __future__ import annotations

import asyncio

import pytest

from interlock.dataplane import http1_server
from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.request_stream import H2Request, Responder
from tests.kit.http1_parsing import parsed_requests, served_connection
from tests.kit.recording_transport import RecordingTransport

LONG = b"v" * (http1_server._SEEN_LENGTH + 1)

HEADS = [
    b"GET /1 HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
    b"GET /2 HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\n\r\n",  # the same
    b"GET /3 HTTP/1.1\r\nHost: b\r\nX-A: 9\r\nX-B: 2\r\n\r\n",  # values changed
    b"GET /4 HTTP/1.1\r\nHost: b\r\nx-a: 9\r\nX-C: 2\r\n\r\n",  # names changed, values not
    b"GET /5 HTTP/1.1\r\nHost: b\r\nX-B: 2\r\n\r\n",  # a header fewer, the next moved up
    b"GET /6 HTTP/1.1\r\nHost: b\r\nX-B: 2\r\nX_U: 1\r\nX-A: 1\r\n\r\n",  # one dropped
    b"GET /7 HTTP/1.1\r\nHost: b\r\nX-B: 2\r\nX_U: 1\r\nX-A: 1\r\n\r\n",
    b"GET /8 HTTP/1.1\r\nHost: b\r\nX-L: " + LONG + b"\r\nX-A: 1\r\n\r\n",  # too long to keep
    b"GET /9 HTTP/1.1\r\nHost: b\r\nX-L: " + LONG[:-1] + b"w\r\nX-A: 1\r\n\r\n",
    b"GET /10 HTTP/1.1\r\nHost: b\r\nX-L: " + LONG[:-1] + b"w\r\nX-A: 1\r\n\r\n",
    b"GET /11 HTTP/1.1\r\nHost: b\r\nConnection: x-a\r\nX-A: 1\r\n\r\n",  # a Connection list
    b"GET /12 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok",
    b"GET /13 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
    b"GET /14 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
    b"GET /15 HTTP/1.1\r\nHost: b\r\nX-A: \xe9\r\nContent-Length: 0\r\n\r\n",
    b"GET /16 HTTP/1.1\r\n\r\n",  # no Host
    b"GET /17 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
    b"GET /18 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
    b"GET /19 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
    b"GET /20 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n",  # the first two of the last
    b"GET /21 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
    b"GET /22 HTTP/1.1\r\nHost: b\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
]


def _handed(request: H2Request) -> tuple[object, ...]:
    """Everything the server made of a request's head."""
    return (
        request.method,
        request.path,
        request.authority,
        list(request.headers.items()),
        request.forwardable,
        request.first_read,
    )


async def _serve(
    *reads: bytes, count: int, limits: ProxyLimits = DEFAULT_LIMITS
) -> tuple[list[tuple[object, ...]], Http1ServerProtocol, RecordingTransport]:
    """What the server made of the first ``count`` requests of ``reads`` on one connection
    (:func:`_handed`, as the handler got them: each then changes the request's headers, which
    no later request may see), the connection's server and its transport."""
    served: list[tuple[object, ...]] = []
    handled = asyncio.Event()

    async def handler(request: H2Request, responder: Responder) -> None:
        async for _chunk in request.body.chunks():
            pass
        served.append(_handed(request))
        request.headers["X-Changed"] = "by the handler"
        request.headers.popall("X-A", None)
        responder.send_headers(204, [], end=True)
        if len(served) == count:
            handled.set()

    protocol, transport = await served_connection(handler, reads, handled, limits=limits)
    return served, protocol, transport


@pytest.mark.parametrize("underscores", [False, True])
async def test_each_request_is_handed_over_as_on_a_connection_of_its_own(
    underscores: bool,
) -> None:
    limits = ProxyLimits(underscores_in_headers=underscores)
    alone = [(await _serve(head, count=1, limits=limits))[0][0] for head in HEADS]
    # One read each, and all in one read (the later ones begin no read: no first_read).
    for reads in (HEADS, [b"".join(HEADS)]):
        together, protocol, _ = await _serve(*reads, count=len(HEADS), limits=limits)
        for index, (handed, reference) in enumerate(zip(together, alone, strict=True)):
            expected = reference
            if len(reads) == 1:  # the first begins the read, the others none
                began = None if index or reference[-1] is None else reads[0]
                expected = (*reference[:-1], began)
            assert handed == expected, index
        assert len(protocol._seen) <= http1_server._SEEN_POSITIONS
        assert all(len(entry.raw_value) <= http1_server._SEEN_LENGTH for entry in protocol._seen)


async def test_a_connection_remembers_a_bounded_number_of_headers() -> None:
    many = b"".join(b"X-%d: %d\r\n" % (n, n) for n in range(http1_server._SEEN_POSITIONS + 20))
    head = b"GET / HTTP/1.1\r\nHost: a\r\n" + many + b"\r\n"
    # A name changed, then a value: what the connection remembers follows both.
    renamed = head.replace(b"X-1:", b"X-one:")
    changed = renamed.replace(b"X-2: 2", b"X-2: two")
    served, protocol, _ = await _serve(head, head, renamed, changed, count=4)
    assert served[0] == served[1]
    headers = served[1][3]
    assert isinstance(headers, list) and ("X-40", "40") in headers
    assert ("X-one", "1") in served[2][3] and ("X-2", "two") in served[3][3]  # type: ignore[operator]
    assert len(protocol._seen) == http1_server._SEEN_POSITIONS
    assert [entry.field for entry in protocol._seen[2:4]] == [("X-one", "1"), ("X-2", "two")]


@pytest.mark.parametrize(
    ("head", "kept"),
    [
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", True),
        (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", False),
        (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n", False),
        (b"GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n", False),
        (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n", True),
        (b"GET / HTTP/1.0\r\nHost: a\r\n\r\n", False),
        (b"GET / HTTP/1.0\r\nHost: a\r\nProxy-Connection: keep-alive\r\n\r\n", True),
        (b"HEAD / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n", False),
    ],
)
async def test_a_connection_is_kept_as_llhttp_reads_its_headers(head: bytes, kept: bool) -> None:
    # After one request on a connection (what it remembers of it aside).
    first = b"GET /first HTTP/1.1\r\nHost: a\r\n\r\n"
    served, _, transport = await _serve(first, head, count=2)
    assert [handed[1] for handed in served] == ["/first", "/"]
    assert transport.closed is not kept


@pytest.mark.parametrize(
    "reads",
    [
        (b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ",),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n",),
        (b"GET / HTTP/1.1\r\nHo", b"st: a\r\nX-Slow: 1"),
    ],
)
async def test_an_incomplete_head_is_timed_from_the_read_it_began_in(
    reads: tuple[bytes, ...],
) -> None:
    # (Its time is taken at the end of that read, not as it begins.)
    async def handler(request: H2Request, responder: Responder) -> None:
        responder.send_headers(204, [], end=True)

    loop = asyncio.get_running_loop()
    protocol = Http1ServerProtocol(
        handler, scheme="http", limits=DEFAULT_LIMITS, upgrade=asyncio.Protocol
    )
    protocol.connection_made(RecordingTransport())
    before = loop.time()
    protocol.data_received(reads[0])
    after = loop.time()
    began = protocol._headers_began
    assert began is not None and before <= began <= after
    assert protocol._header_timer is not None
    for read in reads[1:]:
        protocol.data_received(read)
        assert protocol._headers_began == began
    protocol.connection_lost(None)
    assert protocol._headers_began is None


async def test_a_connection_hands_on_its_last_target_only_for_the_same_bytes() -> None:
    """A target as the last request's (the same bytes, however they were read) is handed over
    as the same text object (no decode; its hash kept for the steps' look-ups); any other is
    decoded anew."""
    heads = [
        b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /a?x HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /b HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /b",  # the same target, in two reads
        b" HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /%E9 HTTP/1.1\r\nHost: a\r\n\r\n",
    ]
    requests = await parsed_requests(*heads, count=6)
    assert [request.path for request in requests] == ["/a", "/a", "/a?x", "/b", "/b", "/%E9"]
    assert requests[1].path is requests[0].path and requests[4].path is requests[3].path
    assert requests[2].path is not requests[0].path
