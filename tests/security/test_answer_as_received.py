"""An answer relayed with its head as received keeps every safeguard of a rendered one.

On the express path (``tests/security/test_express_path.py``), when the route's modules change
nothing of an answer and the client's request is an HTTP/1.1 keep-alive one (not HEAD), the
upstream's answer head may go to the client as it came (``Http1Responder.relay_as_received``):
only when its status line is the one the edge would write, it has a ``Content-Length``, no
hop-by-hop header, a head within the bound, and llhttp parsed all of it. Each test sends two
requests on one keep-alive client connection (the first takes the usual path: the pool has no
connection yet; the second is the one under test), sees whether each head went as received (its
:data:`SPACED` line arrives with its spaces: llhttp strips them from a value it parses, so a
rendered head has ``X-Spaced: kept as sent``), and checks one safeguard; each fails with that
safeguard taken out of ``interlock.dataplane.http1._as_received``,
``Http1Responder.relay_as_received`` or ``Http1Response.headers_as_parsed``. Which heads the
edge looked at to relay as received, and with what verdict, is read from ``http1._verdicts``
(:func:`looked_at`), the cache of verdicts both builds fill: the compiled build's calls within
its modules cannot be spied on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from interlock.dataplane import http1
from interlock.dataplane.http1 import MAX_RESPONSE_HEAD
from tests.kit.keep_alive_backend import OK, Slow, keep_alive_backend

from .conftest import HOST, Edge, running_edge, serve_host, wait_until

DATED = b"Date: Tue, 01 Dec 2026 10:00:00 GMT\r\n"
SPACED = b"X-Spaced:   kept as sent\r\n"
"""A header line a head relayed as received keeps as it is, and a rendered one does not."""


@dataclass
class Relayed:
    head: bytes
    body: bytes

    @property
    def status_line(self) -> bytes:
        return self.head.partition(b"\r\n")[0]

    @property
    def as_received(self) -> bool:
        """Whether the head went as received: its :data:`SPACED` line as sent."""
        return SPACED in self.head + b"\r\n"

    def values(self, name: str) -> list[str]:
        return [
            value.strip().decode("latin-1")
            for found, _, value in (line.partition(b":") for line in self.head.split(b"\r\n")[1:])
            if found.strip().lower() == name.encode()
        ]


async def read_answer(reader: asyncio.StreamReader, *, head_only: bool = False) -> Relayed:
    """One answer from a keep-alive connection, framed by its Content-Length or chunked."""
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30))[:-4]
    length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    if head_only:
        return Relayed(head, b"")
    if length is not None:
        return Relayed(head, await reader.readexactly(int(length.group(1))))
    assert re.search(rb"(?i)\r\ntransfer-encoding: *chunked", head), head
    body = b""
    while True:
        size = int(await reader.readuntil(b"\r\n"), 16)
        chunk = await reader.readexactly(size + 2)
        if not size:
            return Relayed(head, body)
        body += chunk[:-2]


def get(method: str = "GET", version: str = "1.1", extra: str = "") -> bytes:
    return f"{method} / HTTP/{version}\r\nHost: {HOST}\r\n{extra}\r\n".encode()


@contextlib.asynccontextmanager
async def client(edge: Edge) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(*edge.address)
    try:
        yield reader, writer
    finally:
        writer.close()


@pytest.fixture
def looked_at() -> Iterator[dict[bytes, tuple[int, str, bool, int]]]:
    """The heads the edge looked at to relay as received (``http1._as_received``, asked only
    when the express path would relay the answer so, and for the answer's first bytes), each
    with its verdict (``http1._REFUSED``: not as received): ``http1._verdicts``, emptied for the
    test and after it (the dictionary itself: it is ``Final``, and the compiled build reads it
    without looking it up in the module). Heads over ``_VERDICT_LONGEST`` bytes are not in it."""
    http1._forget_verdicts()
    yield http1._verdicts
    http1._forget_verdicts()


def head_of(answer: bytes) -> bytes:
    """An answer's head as ``http1._verdicts`` keys it: without its blank line."""
    return answer.partition(b"\r\n\r\n")[0]


async def twice(edge: Edge, answer: bytes, request: bytes = get(), **read: Any) -> list[Relayed]:
    """``request`` twice on one client connection, the backend answering ``answer`` to both."""
    async with keep_alive_backend([answer]) as backend, client(edge) as (reader, writer):
        await serve_host(edge, host=HOST, service="raw", address=backend.address)
        answers = []
        for _ in range(2):
            writer.write(request)
            answers.append(await read_answer(reader, **read))
    assert backend.connections == 1  # the second went on the pooled connection
    return answers


async def test_the_usual_answer_goes_as_received_with_a_date_added_once(
    edge: Edge, looked_at: dict[bytes, tuple[int, str, bool, int]]
) -> None:
    for dated in (DATED, b""):
        looked_at.clear()
        head = b"HTTP/1.1 200 OK\r\n" + SPACED + b"Content-Length: 2\r\n" + dated
        usual, received = await twice(edge, head + b"\r\nok")
        # The first answer's pooled connection was new: the usual path, not looked at.
        assert [usual.as_received, received.as_received] == [False, True]
        assert looked_at == {head[:-2]: (200, "OK", bool(dated), 2)}
        assert (received.head + b"\r\n").startswith(head) and received.body == b"ok"
        assert len(received.values("date")) == len(usual.values("date")) == 1
        if dated:
            assert received.head + b"\r\n" == head
        assert received.values("x-spaced") == usual.values("x-spaced") == ["kept as sent"]


@pytest.mark.parametrize(
    "hop",
    [
        b"Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\n",
        b"Connection: keep-alive, Keep-Alive\r\nKeep-Alive: timeout=5\r\n",
        b"Proxy-Authenticate: Basic\r\n",
        b"proxy-anything: x\r\n",
        b"TE: trailers\r\n",
        b"Trailer: X-Sum\r\n",
        b"Upgrade: h2c\r\n",
    ],
)
async def test_hop_by_hop_headers_keep_an_answer_from_going_as_received(
    edge: Edge, looked_at: dict[bytes, tuple[int, str, bool, int]], hop: bytes
) -> None:
    name = hop.partition(b":")[0].decode().lower()
    sent = b"HTTP/1.1 200 OK\r\n" + SPACED + hop + b"Content-Length: 2\r\n\r\nok"
    answers = await twice(edge, sent)
    assert looked_at == {head_of(sent): http1._REFUSED}
    for answer in answers:
        assert not answer.as_received
        assert answer.body == b"ok" and not answer.values(name), answer.head
        assert not answer.values("x-hop")


@pytest.mark.parametrize(
    "keep",
    [
        b"Connection: keep-alive\r\n",
        b"connection:Keep-Alive \t\r\n",
        b"Connection: keep-alive\r\nCONNECTION: keep-alive\r\n",
        b"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n",  # Node.js's http server
        b"keep-alive: timeout=5, max=100\r\n",
    ],
)
async def test_an_answer_saying_keep_alive_goes_as_received_without_saying_it(
    edge: Edge, looked_at: dict[bytes, tuple[int, str, bool, int]], keep: bytes
) -> None:
    # nginx says "Connection: keep-alive" with every HTTP/1.1 answer (Node.js a Keep-Alive line
    # too): hop-by-hop, so the client never sees them, whichever way the answer goes; only these
    # lines are cut out of a head relayed as received (another Connection token keeps the
    # answer the usual way: above).
    for dated in (DATED, b""):
        looked_at.clear()
        sent = b"HTTP/1.1 200 OK\r\n" + keep + SPACED + b"Content-Length: 2\r\n" + dated
        usual, received = await twice(edge, sent + b"\r\nok")
        assert [usual.as_received, received.as_received] == [False, True]
        assert looked_at == {sent[:-2]: (200, "OK", bool(dated), 2)}
        for answer in (usual, received):
            assert not answer.values("connection") and answer.body == b"ok", answer.head
            assert not answer.values("keep-alive")
            assert len(answer.values("date")) == 1
        cut = b"HTTP/1.1 200 OK\r\n" + SPACED + b"Content-Length: 2\r\n" + dated
        assert (received.head + b"\r\n").startswith(cut)
        if dated:
            assert received.head + b"\r\n" == cut


@pytest.mark.parametrize(
    ("sent", "written"),
    [
        (b"HTTP/1.1 200 Fine", b"HTTP/1.1 200 OK"),
        (b"HTTP/1.0 200 OK", b"HTTP/1.1 200 OK"),
        (b"HTTP/1.1 299 Odd", b"HTTP/1.1 299 Unknown"),
    ],
)
async def test_a_status_line_the_edge_would_not_write_is_written_again(
    edge: Edge, sent: bytes, written: bytes
) -> None:
    keep = b"Connection: keep-alive\r\n" if sent.startswith(b"HTTP/1.0") else b""
    answers = await twice(edge, sent + b"\r\n" + SPACED + keep + b"Content-Length: 2\r\n\r\nok")
    for answer in answers:
        assert answer.status_line == written and answer.body == b"ok"
        assert not answer.as_received


async def test_an_informational_answer_is_not_relayed(edge: Edge) -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
    answers = await twice(edge, early + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    for answer in answers:
        assert answer.status_line == b"HTTP/1.1 200 OK" and answer.body == b"ok"
        assert not answer.values("link")


async def test_a_head_request_gets_no_body(edge: Edge) -> None:
    answers = await twice(
        edge,
        b"HTTP/1.1 200 OK\r\n" + SPACED + b"Content-Length: 2\r\n\r\n",
        get("HEAD"),
        head_only=True,
    )
    for answer in answers:
        assert not answer.as_received
        assert answer.values("content-length") == ["2"]


async def test_an_http_1_0_client_is_told_the_connection_stays(edge: Edge) -> None:
    request = get(version="1.0", extra="Connection: keep-alive\r\n")
    answers = await twice(
        edge, b"HTTP/1.1 200 OK\r\n" + SPACED + b"Content-Length: 2\r\n\r\nok", request
    )
    for answer in answers:
        assert not answer.as_received
        assert answer.values("connection") == ["keep-alive"] and answer.body == b"ok"


async def second_answer(edge: Edge, second: bytes) -> Relayed:
    """What the client gets for a second request, on one connection, the backend answering
    the first with :data:`OK` on a connection it keeps, then ``second``."""
    async with keep_alive_backend([OK, second]) as backend:
        await serve_host(edge, host=HOST, service="second", address=backend.address)
        async with client(edge) as (reader, writer):
            writer.write(get())
            assert (await read_answer(reader)).body == b"ok"
            writer.write(get())
            answer = await read_answer(reader)
    assert backend.connections == 1
    return answer


async def test_a_head_over_the_bound_is_a_502(edge: Edge) -> None:
    big = OK.replace(b"OK\r\n", b"OK\r\nX-Big: " + b"a" * MAX_RESPONSE_HEAD + b"\r\n")
    answer = await second_answer(edge, big)
    assert answer.status_line.startswith(b"HTTP/1.1 502"), answer.head[:200]
    assert b"a" * 1000 not in answer.head + answer.body


def test_a_head_over_the_bound_read_at_once_is_not_relayed_as_received() -> None:
    # The edge's own reads split such a head (the test above); one read may hold it whole.
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
    filler = b"X-Big: " + b"a" * (MAX_RESPONSE_HEAD - len(head) - 11) + b"\r\n"
    assert http1._as_received(head + filler + b"\r\nok") is not None  # at the bound: relayed
    assert http1._as_received(head + b"X" + filler + b"\r\nok") is None


def test_a_head_seen_before_gets_the_verdict_it_got_and_no_other(
    looked_at: dict[bytes, tuple[int, str, bool, int]],
) -> None:
    # The verdicts are remembered by the head's exact bytes: one byte apart, another verdict.
    plain = b"HTTP/1.1 200 OK\r\nConnectiox: close\r\nContent-Length: 2\r\n\r\nok"
    hop = plain.replace(b"Connectiox", b"Connection")
    for _ in range(2):
        assert http1._as_received(plain) is not None
        assert http1._as_received(hop) is None
        assert http1._as_received(plain + b"more") is None  # not the whole answer alone
    assert len(http1._verdicts) == 2
    for n in range(2 * http1._VERDICTS_MOST):
        http1._as_received(plain.replace(b"close", b"%05d" % n))
    assert len(http1._verdicts) <= http1._VERDICTS_MOST
    long = plain.replace(b"close", b"x" * http1._VERDICT_LONGEST)
    assert http1._as_received(long) is not None and long[:-6] not in http1._verdicts


@pytest.mark.parametrize(
    ("name", "bad", "eligible"),
    [
        ("a folded line", b"X-A: a\r\n b\r\n", True),
        ("a bare LF", b"X-A: a\nX-B: b\r\n", True),
        ("a bare CR", b"X-A: a\rX-B: b\r\n", True),
        # _verdict refuses a second length itself (it finds both); llhttp refuses it too.
        ("a second length", b"Content-Length: 3\r\n", False),
        ("a second length, not digits", b"Content-Length: x\r\n", False),
        ("a space before the colon", b"X-A : a\r\n", True),
    ],
)
async def test_what_llhttp_refuses_is_refused_before_anything_is_relayed(
    edge: Edge,
    looked_at: dict[bytes, tuple[int, str, bool, int]],
    name: str,
    bad: bytes,
    eligible: bool,
) -> None:
    # What _as_received does not look for: llhttp parses the head before it is relayed.
    sent = OK.replace(b"\r\n\r\n", b"\r\n" + bad + b"\r\n")
    answer = await second_answer(edge, sent)
    assert list(looked_at) == [head_of(sent)], name
    assert (looked_at[head_of(sent)] != http1._REFUSED) == eligible, name
    assert answer.status_line.startswith(b"HTTP/1.1 502"), (name, answer.head)
    assert b"X-A" not in answer.head and b"X-B" not in answer.head


async def test_an_answer_whose_body_is_still_coming_is_rendered_with_its_headers(
    edge: Edge, looked_at: dict[bytes, tuple[int, str, bool, int]]
) -> None:
    head = b"HTTP/1.1 200 OK\r\nX-Kept: yes\r\n" + SPACED + b"Content-Length: 2\r\n\r\n"
    async with keep_alive_backend([OK, Slow(head + b"o", b"k")]) as backend:
        await serve_host(edge, host=HOST, service="slow", address=backend.address)
        async with client(edge) as (reader, writer):
            writer.write(get())
            assert (await read_answer(reader)).body == b"ok"
            writer.write(get())
            backend.head.set()
            relayed = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            backend.release.set()
            body = await asyncio.wait_for(reader.readexactly(2), 30)
    # Its head could go as received (the verdict), not with its body still coming.
    assert looked_at == {head_of(head): (200, "OK", False, 2)}
    answer = Relayed(relayed[:-4], body)
    assert not answer.as_received
    assert answer.values("x-kept") == ["yes"] and answer.values("content-length") == ["2"]
    assert answer.body == b"ok"


async def test_an_answer_as_received_is_counted_and_logged_as_a_rendered_one(
    edge: Edge, logged: list[dict[str, Any]]
) -> None:
    answers = await twice(
        edge, b"HTTP/1.1 404 Not Found\r\n" + DATED + SPACED + b"Content-Length: 2\r\n\r\nno"
    )
    assert [answer.as_received for answer in answers] == [False, True]
    rendered, received = logged
    for entry, answer in zip((rendered, received), answers, strict=True):
        assert entry.pop("status") == 404
        assert entry.pop("bytes") == len(answer.head) + 4 + len(answer.body)
        entry.pop("durationMs")
    assert rendered == received
    statistics = edge.server.traffic.statistics()
    counted = {key: count for key, count in statistics.requests.items() if key[0] == "edge"}
    assert list(counted.values()) == [2] and next(iter(counted))[3] == "4xx"


async def test_a_stopping_edge_closes_the_connection_after_an_answer_in_flight(
    looked_at: dict[bytes, tuple[int, str, bool, int]],
) -> None:
    kept = OK.replace(b"OK\r\n", b"OK\r\nX-Kept: yes\r\n" + SPACED)
    async with keep_alive_backend([OK, None], released=kept) as backend:
        edge_context = running_edge()
        edge = await edge_context.__aenter__()
        stopped = False
        try:
            await serve_host(edge, host=HOST, service="drain", address=backend.address)
            async with client(edge) as (reader, writer):
                writer.write(get())
                assert (await read_answer(reader)).body == b"ok"
                writer.write(get())
                await wait_until(lambda: len(backend.requests) == 2, what="the request upstream")
                stopping = asyncio.ensure_future(edge_context.__aexit__(None, None, None))
                stopped = True
                connections = edge.server._http1_connections
                await wait_until(
                    lambda: all(connection.closing for connection in connections),
                    what="the edge stopping",
                )
                backend.release.set()
                answer = await read_answer(reader)
                await stopping
        finally:
            if not stopped:
                await edge_context.__aexit__(None, None, None)
    # Rendered after all, with the headers parsed from the head as received.
    assert looked_at == {head_of(kept): (200, "OK", False, 2)} and not answer.as_received
    assert answer.body == b"ok" and answer.values("connection") == ["close"]
    assert answer.values("x-kept") == ["yes"] and answer.values("content-length") == ["2"]
