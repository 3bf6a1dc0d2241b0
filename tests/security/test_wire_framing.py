"""HTTP/1.1 framing errors are answered, and a backend's oversized head is not relayed.

A request body whose chunked framing is malformed used to leave the client with no answer at
all (the request was already on its way upstream, and the parser's error only stopped the
reading); it gets the ``400`` every other malformed request gets. A backend's answer head of
100 KB was relayed to the client as it was; past the data plane's bound it is a ``502``.
"""

from __future__ import annotations

import pytest

from tests.kit.raw_http1 import (
    backend_answering,
    malformed_bodies,
    send_a_chunk_that_goes_bad,
    send_raw,
)

from .conftest import HOST, BodyBackend, Edge, get_request, serve_host


@pytest.mark.parametrize(("name", "request_bytes"), malformed_bodies(HOST))
async def test_a_malformed_chunked_body_is_answered_400(
    edge: Edge, body_backend: BodyBackend, name: str, request_bytes: str
) -> None:
    await serve_host(edge, host=HOST, service="upload", address=body_backend.address)
    answer = await send_raw(edge.address, request_bytes.encode(), deadline=20.0)
    assert answer.status == 400, (name, answer.raw[:200])
    assert answer.headers["x-interlock-reason"] == "bad-request"


async def test_a_chunk_that_goes_bad_after_the_body_started_streaming_is_answered_400(
    edge: Edge, body_backend: BodyBackend
) -> None:
    await serve_host(edge, host=HOST, service="upload", address=body_backend.address)
    answer = await send_a_chunk_that_goes_bad(edge.address, host=HOST)
    assert answer.status == 400, answer.raw[:200]


async def test_a_backends_100_kb_answer_head_is_a_502(edge: Edge) -> None:
    big = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n"
    async with backend_answering(big) as address:
        await serve_host(edge, host=HOST, service="big", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    assert answer.status == 502, answer.raw[:200]
    assert b"a" * 1000 not in answer.raw


async def test_many_headers_that_add_up_past_the_bound_are_a_502_too(edge: Edge) -> None:
    many = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: %b\r\n" % (i, b"v" * 900) for i in range(90))
    async with backend_answering(many) as address:
        await serve_host(edge, host=HOST, service="many", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    assert answer.status == 502, answer.raw[:200]


async def test_an_answer_head_under_the_bound_is_relayed(edge: Edge) -> None:
    fine = b"HTTP/1.1 200 OK\r\nX-Cookie-Jar: " + b"c" * 16_000 + b"\r\n"
    async with backend_answering(fine) as address:
        await serve_host(edge, host=HOST, service="fine", address=address)
        answer = await send_raw(edge.address, get_request("/"))
    assert answer.status == 200
    assert answer.body == b"ok"
