"""The mesh listener's HTTP/1.1 path frames as the edge's does (see test_wire_framing.py).

The mesh listener serves HTTP/1.1 with aiohttp's server behind
:class:`~interlock.dataplane.connections.GuardedServer`, not the edge's parser, so a fix to the
edge's does not reach it by itself: a malformed chunked request body is answered ``400
bad-request`` (the guard's answer to aiohttp's parse error), and a backend's oversized answer head
is a ``502`` (the data plane's upstream client, shared with the edge), here too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

import pytest

from interlock.dataplane.source import Address, UpstreamError
from interlock.mesh.server import MeshServer, MeshSettings
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.service import ServicePortKey, parse_service
from tests.kit.raw_http1 import (
    backend_answering,
    malformed_bodies,
    send_a_chunk_that_goes_bad,
    send_raw,
)

from .conftest import BodyBackend

AUTHORITY = "upload.default.svc.cluster.local"


class _OneService:
    """The mesh's upstreams: every Service port named is ``default/upload:80`` at one address."""

    def __init__(self) -> None:
        self.address: Address = ("127.0.0.1", 9)
        service = parse_service(
            {
                "metadata": {"name": "upload", "namespace": "default"},
                "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80}]},
            }
        )
        self._policy = build_outbound_policy(service, "default", "upload", 80, "default", [])

    async def ready(
        self, target: ServicePortKey, *, within: float
    ) -> OutboundPolicy | UpstreamError:
        return self._policy

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        return [self.address]


@contextlib.asynccontextmanager
async def running_mesh(backend: Address) -> AsyncIterator[tuple[str, int]]:
    upstreams = _OneService()
    upstreams.address = backend
    server = MeshServer(upstreams=upstreams, settings=MeshSettings(policy_wait=1.0))
    address = await server.start(addr="127.0.0.1:0")
    try:
        yield address
    finally:
        await server.stop()


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
