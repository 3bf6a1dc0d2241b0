"""The express path keeps every safeguard of the usual one.

A plain request on a connection the pool already holds is sent and its answer relayed by
callbacks, without the client connection's task (``StreamForwarder.express``). Each test here
makes a first request (the usual path: the pool has no connection yet), then the request under
test on a pooled connection, checks that the express path took it (:func:`spy_on_express`, on
the handler each connection calls), and checks one safeguard on it: hop-by-hop headers removed from
the answer, a bad upstream answer or a silent upstream turned into 502/504, a pooled connection
the upstream closed sent again on a new one, the upstream exchange given up with a client that
goes, the request counted and logged as the usual one, and a stopping edge waiting for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlock.dataplane.http1_server import Http1Responder, Http1ServerProtocol
from interlock.dataplane.proxy import ProxyTimeouts
from interlock.edge import server as edge_server
from tests.kit.keep_alive_backend import OK, Slow, keep_alive_backend
from tests.kit.raw_http1 import Answer, parse_answer

from .conftest import HOST, Edge, running_edge, serve_host, wait_until


@pytest.fixture
def express_taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per request the express path was asked about: whether it took it."""
    taken: list[bool] = []
    spy_on_express(monkeypatch, taken)
    return taken


def spy_on_express(monkeypatch: pytest.MonkeyPatch, taken: list[bool]) -> None:
    """Record into ``taken`` whether the express path took each request it was asked about
    on the connections an edge opens from now (None from ``EdgeStreams.express``:
    ``StreamForwarder.express`` took it). Spied on where each connection gets it: the
    ``express`` handler that ``EdgeServer`` (not compiled) hands each ``Http1ServerProtocol``;
    the compiled build's calls between compiled modules cannot be replaced."""

    def protocol(handler: Any, *, express: Any, **options: Any) -> Http1ServerProtocol:
        def spy(request: Any, responder: Http1Responder) -> Any:
            outcome = express(request, responder)
            taken.append(outcome is None)
            return outcome

        return Http1ServerProtocol(handler, express=spy, **options)

    monkeypatch.setattr(edge_server, "Http1ServerProtocol", protocol)


def request(path: str = "/", *, close: bool = True) -> bytes:
    connection = "Connection: close\r\n" if close else ""
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n{connection}\r\n".encode()


async def ask(edge: Edge, path: str = "/") -> Answer:
    reader, writer = await asyncio.open_connection(*edge.address)
    try:
        writer.write(request(path))
        await writer.drain()
        return parse_answer(await asyncio.wait_for(reader.read(-1), 30))
    finally:
        writer.close()


async def test_hop_by_hop_headers_of_the_answer_are_not_relayed(
    edge: Edge, express_taken: list[bool]
) -> None:
    hop = (
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: secret\r\n"
        b"Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nX-End: kept\r\n"
        b"Content-Length: 2\r\n\r\nok"
    )
    async with keep_alive_backend([hop]) as backend:
        await serve_host(edge, host=HOST, service="hop", address=backend.address)
        answers = [await ask(edge), await ask(edge)]
    assert express_taken == [False, True]
    assert backend.connections == 1  # the second went on the pooled connection
    for answer in answers:
        assert answer.status == 200 and answer.body == b"ok"
        assert answer.headers["x-end"] == "kept"
        for name in ("x-hop", "keep-alive", "proxy-authenticate"):
            assert name not in answer.headers, answer.raw
        assert answer.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("a head over the bound", b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"),
        ("not HTTP", b"SSH-2.0-OpenSSH\r\n\r\n"),
        ("two lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"),
        ("an unasked 101", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"),
    ],
)
async def test_a_bad_answer_on_the_express_path_is_a_502(
    edge: Edge, express_taken: list[bool], name: str, bad: bytes
) -> None:
    async with keep_alive_backend([OK, bad]) as backend:
        await serve_host(edge, host=HOST, service="bad", address=backend.address)
        assert (await ask(edge)).status == 200
        answer = await ask(edge)
    assert express_taken == [False, True]
    assert answer.status == 502, (name, answer.raw[:200])
    assert b"a" * 1000 not in answer.raw


async def test_a_silent_upstream_on_the_express_path_is_a_504(express_taken: list[bool]) -> None:
    async with (
        running_edge(timeouts=ProxyTimeouts(connect=5.0, read=0.5)) as edge,
        keep_alive_backend([OK, None]) as backend,
    ):
        await serve_host(edge, host=HOST, service="silent", address=backend.address)
        assert (await ask(edge)).status == 200
        answer = await ask(edge)
        backend.release.set()
    assert express_taken == [False, True]
    assert answer.status == 504, answer.raw[:200]
    assert answer.headers["x-interlock-reason"] == "upstream-timeout"


async def test_a_pooled_connection_the_upstream_closed_is_sent_again_on_a_new_one(
    edge: Edge, express_taken: list[bool]
) -> None:
    # The backend closes the pooled connection on the second request without a byte of answer
    # (as one that closed it while it idled): the request goes again, on a new connection.
    async with keep_alive_backend([OK, b"", OK]) as backend:
        await serve_host(edge, host=HOST, service="stale", address=backend.address)
        assert (await ask(edge)).status == 200
        second = await ask(edge)
    assert express_taken == [False, True]
    assert second.status == 200 and second.body == b"ok", second.raw[:200]
    assert backend.connections == 2 and len(backend.requests) == 3


async def test_a_client_that_goes_takes_the_upstream_exchange_with_it(
    express_taken: list[bool],
) -> None:
    # The upstream read timeout far past the wait below: only the client's going closes it.
    async with (
        running_edge(timeouts=ProxyTimeouts(connect=5.0, read=3600.0)) as edge,
        keep_alive_backend([OK, None]) as backend,
    ):
        await serve_host(edge, host=HOST, service="gone", address=backend.address)
        assert (await ask(edge)).status == 200
        _, writer = await asyncio.open_connection(*edge.address)
        writer.write(request())
        await writer.drain()
        await wait_until(lambda: len(backend.requests) == 2, what="the second request upstream")
        writer.close()
        await asyncio.wait_for(backend.closed_by_edge.wait(), 30)
    assert express_taken == [False, True]


async def test_the_express_answer_is_counted_and_logged_as_the_usual_one(
    edge: Edge, express_taken: list[bool], logged: list[dict[str, Any]]
) -> None:
    async with keep_alive_backend([OK]) as backend:
        await serve_host(edge, host=HOST, service="counted", address=backend.address)
        await ask(edge, "/a?secret=1")
        await ask(edge, "/a?secret=1")
    assert express_taken == [False, True]
    usual, express = logged
    for entry in (usual, express):
        entry.pop("durationMs")
    assert express == usual
    assert express["upstream"] == f"127.0.0.1:{backend.address[1]}"
    assert express["path"] == "/a" and express["status"] == 200
    statistics = edge.server.traffic.statistics()
    counted = [count for key, count in statistics.requests.items() if key[0] == "edge"]
    assert counted == [2]


async def test_a_stopping_edge_waits_for_an_express_answer_in_flight(
    express_taken: list[bool],
) -> None:
    async with keep_alive_backend([OK, None]) as backend:
        edge_context = running_edge()
        edge = await edge_context.__aenter__()
        stopped = False
        try:
            await serve_host(edge, host=HOST, service="drain", address=backend.address)
            assert (await ask(edge)).status == 200
            pending = asyncio.ensure_future(ask(edge))
            await wait_until(lambda: len(backend.requests) == 2, what="the request upstream")
            stopping = asyncio.ensure_future(edge_context.__aexit__(None, None, None))
            stopped = True
            await asyncio.sleep(0)
            assert not pending.done()
            backend.release.set()
            answer = await asyncio.wait_for(pending, 30)
            await stopping
        finally:
            if not stopped:
                await edge_context.__aexit__(None, None, None)
    assert express_taken == [False, True]
    assert answer.status == 200 and answer.body == b"ok"


SLOW_BODY = Slow(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst", b"-last")


@pytest.mark.parametrize("stop", ["after the hand-back", "before the answer's head"])
async def test_a_stopping_edge_drains_an_express_answer_handed_back_to_the_task(
    express_taken: list[bool], stop: str
) -> None:
    # The answer's head comes with part of its body: the express path hands the rest to the
    # connection's task (express_continue). The edge stops with the answer on the task (or
    # before its head came, so while it was still express): the client gets all of it, and
    # the stop ends once it is out.
    async with keep_alive_backend([OK, SLOW_BODY]) as backend:
        edge_context = running_edge()
        edge = await edge_context.__aenter__()
        stopping: asyncio.Future[None] | None = None
        try:
            await serve_host(edge, host=HOST, service="slow-body", address=backend.address)
            assert (await ask(edge)).status == 200
            pending = asyncio.ensure_future(ask(edge))
            await wait_until(lambda: len(backend.requests) == 2, what="the request upstream")
            if stop == "after the hand-back":
                backend.head.set()
                await wait_until(lambda: handed_back(edge), what="the hand-back")
            stopping = asyncio.ensure_future(edge_context.__aexit__(None, None, None))
            if stop == "before the answer's head":
                await wait_until(lambda: waiting_on_express(edge), what="the stop's wait")
                backend.head.set()
                await wait_until(lambda: handed_back(edge), what="the hand-back")
            await asyncio.sleep(0)
            assert not pending.done() and not stopping.done()
            backend.release.set()
            answer = await asyncio.wait_for(pending, 30)
            await asyncio.wait_for(stopping, 30)
        finally:
            if stopping is None:
                await edge_context.__aexit__(None, None, None)
    assert express_taken == [False, True]
    assert answer.status == 200 and answer.body == b"first-last", answer.raw[:200]


def handed_back(edge: Edge) -> bool:
    """Whether an express answer in flight was handed to its connection's task
    (``Http1Responder.express_continue``): the answer no longer abandoned with the client by
    the express path, but answered on the task."""
    connections = edge.server._http1_connections
    return any(
        c._answering is not None and c._abandon is None and c._task is not None and not c.lost
        for c in connections
    )


def waiting_on_express(edge: Edge) -> bool:
    """Whether the stopping edge waits for an express answer in flight (close())."""
    connections = edge.server._http1_connections  # type: ignore[attr-defined]
    return any(c._express_over is not None for c in connections)


async def test_a_client_slow_to_take_the_answer_holds_its_next_request(
    edge: Edge, express_taken: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client's transport says its buffer is full after the express answer (asyncio's
    # flow control: the protocol's pause_writing): the request is finished (counted, and the
    # connection free for the next) only once it drained (resume_writing), as the usual path's
    # send_data waits for it.
    statistics = edge.server.traffic.statistics()

    def counted() -> int:
        return sum(count for key, count in statistics.requests.items() if key[0] == "edge")

    async with keep_alive_backend([OK]) as backend:
        await serve_host(edge, host=HOST, service="slow", address=backend.address)
        assert (await ask(edge)).status == 200
        made = edge_server.Http1ServerProtocol  # type: ignore[attr-defined]  # express_taken's
        slow: list[Http1ServerProtocol] = []

        def full(*args: Any, **kwargs: Any) -> Http1ServerProtocol:
            protocol = made(*args, **kwargs)
            protocol.pause_writing()  # what the transport calls over its high-water mark
            slow.append(protocol)
            return protocol

        monkeypatch.setattr(edge_server, "Http1ServerProtocol", full)
        reader, writer = await asyncio.open_connection(*edge.address)
        try:
            writer.write(request(close=False))
            first = await reader.readuntil(b"ok")
            assert counted() == 1  # the answer is out; the request is not finished yet
            writer.write(request(close=True))
            (protocol,) = slow
            protocol.resume_writing()  # what the transport calls once it drained
            second = parse_answer(await asyncio.wait_for(reader.read(-1), 30))
        finally:
            writer.close()
    assert express_taken[:2] == [False, True]
    assert first.startswith(b"HTTP/1.1 200") and second.status == 200
    assert len(backend.requests) == 3 and counted() == 3
