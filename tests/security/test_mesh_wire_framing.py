"""The mesh listener's HTTP/1.1 path frames as the edge's does (see test_wire_framing.py).

The mesh listener serves HTTP/1.1 with aiohttp's server behind
:class:`~interlock.dataplane.connections.GuardedServer`, not the edge's parser, so a fix to the
edge's does not reach it by itself: a malformed chunked request body is answered ``400
bad-request`` (the guard's answer to aiohttp's parse error), and a backend's oversized answer head
is a ``502`` (the data plane's upstream client, shared with the edge), here too.
"""

from __future__ import annotations

import pytest

from tests.kit.mesh_listener import AUTHORITY, running_mesh
from tests.kit.raw_http1 import (
    backend_answering,
    malformed_bodies,
    send_a_chunk_that_goes_bad,
    send_raw,
)

from .conftest import BodyBackend


@pytest.mark.parametrize(("name", "request_bytes"), malformed_bodies(AUTHORITY))
async def test_a_malformed_chunked_body_is_answered_400(
    body_backend: BodyBackend, name: str, request_bytes: str
) -> None:
    async with running_mesh(body_backend.address) as mesh:
        answer = await send_raw(mesh, request_bytes.encode(), deadline=20.0)
    assert answer.status == 400, (name, answer.raw[:200])
    assert answer.headers["x-interlock-reason"] == "bad-request"


async def test_a_chunk_that_goes_bad_after_the_body_started_streaming_is_answered_400(
    body_backend: BodyBackend,
) -> None:
    async with running_mesh(body_backend.address) as mesh:
        answer = await send_a_chunk_that_goes_bad(mesh, host=AUTHORITY)
    assert answer.status == 400, answer.raw[:200]


async def test_a_backends_100_kb_answer_head_is_a_502() -> None:
    big = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n"
    get = f"GET / HTTP/1.1\r\nHost: {AUTHORITY}\r\nConnection: close\r\n\r\n".encode()
    async with backend_answering(big) as backend, running_mesh(backend) as mesh:
        answer = await send_raw(mesh, get)
    assert answer.status == 502, answer.raw[:200]
    assert b"a" * 1000 not in answer.raw
