"""Through a running edge: on a route whose only response change is the headers module's, the
upstream's answer goes from its bytes with that change made on them (``HeadEdit``), and writes
what the usual path wrote for the same answer; every answer the edited relay must refuse goes
the usual path, the change made as before.

As in ``tests/security/test_answer_as_received.py``, each test sends
two requests on one keep-alive client connection: the first takes the usual path (the pool has
no connection yet), the second the one under test; a head that went from its bytes keeps its
:data:`SPACED` line as sent (a rendered one has its blanks stripped)."""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass
from typing import Any

import pytest

from interlock.edge.provider import BackendTarget
from interlock.model.moduleset import Modules
from interlock.model.service import ServicePortKey
from tests.kit.edge_routes import serve_route
from tests.kit.keep_alive_backend import keep_alive_backend
from tests.security.conftest import HOST, Edge, running_edge

SPACED = b"X-Spaced:   kept as sent\r\n"
"""A header line a head relayed from its bytes keeps as it is, and a rendered one does not."""
DATED = b"Date: Tue, 01 Dec 1998 10:00:00 GMT\r\n"


@dataclass
class Relayed:
    """One answer as the client read it: its head (without the blank line) and body."""

    head: bytes
    body: bytes

    @property
    def as_received(self) -> bool:
        return SPACED in self.head + b"\r\n"

    def values(self, name: str) -> list[bytes]:
        lines = (line.partition(b":") for line in self.head.split(b"\r\n")[1:])
        return [value.strip() for found, _, value in lines if found.lower() == name.encode()]


def get(method: str = "GET", version: str = "1.1", extra: str = "") -> bytes:
    return f"{method} / HTTP/{version}\r\nHost: {HOST}\r\n{extra}\r\n".encode()


async def read_answer(reader: asyncio.StreamReader, *, head_only: bool) -> Relayed:
    """One answer, framed by its Content-Length or chunked (none read after a HEAD)."""
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30))[:-4]
    answer = Relayed(head, b"")
    if head_only:
        return answer
    if length := answer.values("content-length"):
        answer.body = await reader.readexactly(int(length[0]))
        return answer
    while size := int(await reader.readuntil(b"\r\n"), 16):
        answer.body += (await reader.readexactly(size + 2))[:-2]
    await reader.readexactly(2)
    return answer


RESPONSE = {"add": {"X-Frame-Options": "DENY"}, "remove": ["Server"]}
"""The module reference's example: ``Server`` removed, ``X-Frame-Options`` set."""

ANSWER = (
    b"HTTP/1.1 200 OK\r\nServer: a\r\n"
    + SPACED
    + b"x-frame-options: SAMEORIGIN\r\n"
    + DATED
    + b"Content-Length: 2\r\nSERVER: b\r\n\r\nok"
)
"""Both of the module's names sent by the upstream, ``Server`` twice and in two cases, one of
them the head's last line."""

CIRCUIT_BREAKER = {
    "errorThresholdPercentage": 50,
    "volumeThreshold": 20,
    "rollingWindow": "10s",
    "trippedDuration": "30s",
}


async def edited_twice(
    answer: bytes,
    *,
    modules: dict[str, Any] | None = None,
    requests: tuple[bytes, bytes] = (get(), get()),
    head_only: bool = False,
) -> list[Relayed]:
    """The two answers a client gets for ``requests`` on one connection, through a route with
    the headers module (:data:`RESPONSE`) and ``modules``, the upstream answering ``answer``."""
    settings = {"headers": {"response": RESPONSE}, **(modules or {})}
    async with running_edge() as edge, keep_alive_backend([answer]) as backend:
        await serve(edge, backend.address, Modules.model_validate(settings))
        reader, writer = await asyncio.open_connection(*edge.address)
        try:
            answers = []
            for request in requests:
                writer.write(request)
                answers.append(await read_answer(reader, head_only=head_only))
        finally:
            writer.close()
    assert backend.connections == 1  # the second went on the pooled connection
    return answers


async def serve(edge: Edge, address: tuple[str, int], modules: Modules) -> None:
    edge.upstreams.set(namespace="default", service="edited", port=80, addresses=[address])
    backend = BackendTarget(ServicePortKey("default", "edited", 80))
    await serve_route(edge.edge, host=HOST, modules=modules, backend=backend)


def changed(answer: Relayed) -> bool:
    """Whether the module's change was made: no ``Server``, one ``X-Frame-Options: DENY``."""
    return not answer.values("server") and answer.values("x-frame-options") == [b"DENY"]


async def test_the_answer_goes_from_its_bytes_edited_as_the_usual_path_writes_it() -> None:
    usual, edited = await edited_twice(ANSWER)
    assert [usual.as_received, edited.as_received] == [False, True]
    assert changed(usual) and changed(edited)
    # But for the blanks the usual path strips from a value, the same bytes.
    spaced = SPACED[:-2].replace(b":   ", b": ")
    assert edited.head.replace(SPACED[:-2], spaced) == usual.head
    assert edited.body == usual.body == b"ok"


@pytest.mark.parametrize(
    ("why", "answer", "requests"),
    [
        (
            "chunked",
            b"HTTP/1.1 200 OK\r\nServer: a\r\n" + SPACED + b"Transfer-Encoding: chunked\r\n\r\n"
            b"2\r\nok\r\n0\r\n\r\n",
            (get(), get()),
        ),
        (
            "a hop-by-hop header",
            ANSWER.replace(b"\r\n\r\n", b"\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\r\n"),
            (get(), get()),
        ),
        ("HTTP/1.0", ANSWER, (get(version="1.0", extra="Connection: keep-alive\r\n"),) * 2),
        ("a closing request", ANSWER, (get(), get(extra="Connection: close\r\n"))),
    ],
)
async def test_what_the_edited_relay_refuses_goes_the_usual_path(
    why: str, answer: bytes, requests: tuple[bytes, bytes]
) -> None:
    for relayed in await edited_twice(answer, requests=requests):
        assert not relayed.as_received, why
        assert changed(relayed) and relayed.body == b"ok", why
        assert not relayed.values("keep-alive") or why == "HTTP/1.0", why


async def test_the_answer_to_a_head_request_goes_the_usual_path() -> None:
    for relayed in await edited_twice(ANSWER, requests=(get("HEAD"),) * 2, head_only=True):
        assert not relayed.as_received and changed(relayed)
        assert relayed.values("content-length") == [b"2"]


async def test_a_circuit_breaker_is_told_every_answer() -> None:
    for relayed in await edited_twice(ANSWER, modules={"circuitBreaker": CIRCUIT_BREAKER}):
        assert not relayed.as_received and changed(relayed)


async def test_a_compressed_route_compresses() -> None:
    body = b"a" * 2048
    answer = (
        b"HTTP/1.1 200 OK\r\nServer: a\r\n" + SPACED + b"Content-Type: text/plain\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    request = get(extra="Accept-Encoding: gzip\r\n")
    answers = await edited_twice(
        answer, modules={"compression": {"enabled": True}}, requests=(request, request)
    )
    for relayed in answers:
        assert not relayed.as_received and changed(relayed)
        assert relayed.values("content-encoding") == [b"gzip"]
        assert gzip.decompress(relayed.body) == body


async def test_a_compressed_route_s_answer_to_a_client_without_gzip_goes_from_its_bytes() -> None:
    """Compression is off for a request whose client accepts no gzip (known before the
    answer comes): its answer goes from its bytes, edited, as on a route without it."""
    body = b"a" * 2048
    answer = (
        b"HTTP/1.1 200 OK\r\nServer: a\r\n" + SPACED + b"Content-Type: text/plain\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    refusing = get(extra="Accept-Encoding: gzip;q=0, br\r\n")
    for requests in ((get(), get()), (refusing, refusing)):
        usual, edited = await edited_twice(
            answer, modules={"compression": {"enabled": True}}, requests=requests
        )
        assert [usual.as_received, edited.as_received] == [False, True]
        for relayed in (usual, edited):
            assert changed(relayed) and not relayed.values("content-encoding")
            assert relayed.body == body
