"""HTTP/2 attacks on the edge and on the mesh listener, with a real h2 client on a raw socket.

* Rapid reset (CVE-2023-44487): a client that opens streams and resets them at once makes the
  server start a handler per stream for the cost of two frames; the patched servers count the
  resets of each connection and close it past a budget. Both listeners now send GOAWAY with
  ``ENHANCE_YOUR_CALM`` and close the connection; a client under the budget is served.
* ``CONNECT`` over HTTP/2 was relayed to the backend as a malformed ``CONNECT /``: it is
  refused (405 ``connect-not-served``) and the backend is never contacted.
* ``:scheme https`` on plaintext h2c reached the backend as ``X-Forwarded-Proto: https``: the
  scheme is the connection's, as for HTTP/1.1.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import h2.errors
import h2.events
import hyperframe.frame
import pytest

from interlock.actors.service_port_watch import ServicePortWatches
from interlock.api.policy_json import policy_body
from interlock.controller.upstreams import SharedUpstreamCache, UpstreamIndex
from interlock.dataplane.limits import ProxyLimits
from interlock.mailbox import ActorSystem
from interlock.mesh.server import MeshServer, MeshSettings
from tests.kit.h2_raw import H2Raw

from .conftest import HOST, CountingBackend, Edge, running_edge, serve_host


async def rapid_reset(address: tuple[str, int], authority: str, pairs: int) -> H2Raw:
    """``pairs`` HEADERS+RST_STREAM on one connection, then a PING; read until the PING's ack
    or the end of the connection."""
    client = await H2Raw.open(address)
    for _ in range(pairs):
        stream_id = client.headers(authority)
        client.h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
        if stream_id % 101 == 0:
            client.flush()
    client.h2.ping(b"12345678")
    client.flush()
    await client.until(h2.events.PingAckReceived)
    return client


def goaway_of(client: H2Raw) -> h2.events.ConnectionTerminated | None:
    return next((e for e in client.events if isinstance(e, h2.events.ConnectionTerminated)), None)


@pytest.fixture
async def hanging(counting_backends: tuple[CountingBackend, CountingBackend]) -> CountingBackend:
    return counting_backends[0]


async def test_rapid_reset_at_the_edge_gets_goaway_and_the_connection_closed(
    edge: Edge, hanging: CountingBackend
) -> None:
    await serve_host(edge, host=HOST, service="hang", address=hanging.address)
    attacker = await rapid_reset(edge.address, HOST, 2000)
    try:
        goaway = goaway_of(attacker)
        assert goaway is not None, "no GOAWAY after 2,000 resets"
        assert goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
        while not attacker.closed:  # the server closes the connection
            await attacker.receive()
    finally:
        attacker.close()
    other = await H2Raw.open(edge.address)
    try:
        status, _, body = await other.answer(other.headers(HOST))
    finally:
        other.close()
    assert (status, body) == (200, b"backend-a")


async def test_resets_the_server_makes_for_the_clients_errors_count_too(
    edge: Edge, hanging: CountingBackend
) -> None:
    """MadeYouReset (CVE-2025-8671): a WINDOW_UPDATE that overflows a stream's window makes
    the server reset the stream itself — the same handler started and cancelled."""
    await serve_host(edge, host=HOST, service="hang", address=hanging.address)
    attacker = await H2Raw.open(edge.address)
    try:
        for _ in range(2000):
            stream_id = attacker.headers(HOST, path="/hang")
            attacker.flush()
            overflow = hyperframe.frame.WindowUpdateFrame(stream_id, window_increment=0x7FFFFFFF)
            attacker.writer.write(overflow.serialize())
        attacker.h2.ping(b"12345678")
        attacker.flush()
        await attacker.until(h2.events.PingAckReceived)
    finally:
        attacker.close()
    goaway = goaway_of(attacker)
    assert goaway is not None, "no GOAWAY after 2,000 streams reset for the client's errors"
    assert goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM


async def test_resets_under_the_budget_keep_the_connection() -> None:
    async with running_edge(limits=ProxyLimits(http2_resets=50)) as edge:
        client = await rapid_reset(edge.address, HOST, 40)
        try:
            assert goaway_of(client) is None
            assert any(isinstance(e, h2.events.PingAckReceived) for e in client.events)
            status, _, _ = await client.answer(client.headers(HOST))
            assert status == 404  # served: no route for this host in this edge
        finally:
            client.close()
        attacker = await rapid_reset(edge.address, HOST, 60)
        attacker.close()
        assert goaway_of(attacker) is not None


@pytest.fixture
async def mesh() -> AsyncIterator[MeshServer]:
    system = ActorSystem()
    watches = ServicePortWatches(system, grace=30.0, encode=policy_body)
    upstreams = UpstreamIndex(
        cache=SharedUpstreamCache(system),
        watches=watches,
        follower="mesh listener",
        client_namespace="default",
    )
    upstreams.start()
    server = MeshServer(upstreams=upstreams, settings=MeshSettings(policy_wait=1.0))
    await server.start(addr="127.0.0.1:0")
    try:
        yield server
    finally:
        await server.stop()
        watches.close()
        await upstreams.close()
        await system.shutdown()


async def test_rapid_reset_at_the_mesh_listener_gets_goaway(mesh: MeshServer) -> None:
    assert mesh.address is not None
    attacker = await rapid_reset(mesh.address, "web.default.svc.cluster.local", 2000)
    attacker.close()
    goaway = goaway_of(attacker)
    assert goaway is not None, "no GOAWAY after 2,000 resets"
    assert goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM


async def test_connect_over_http2_is_refused_at_the_edge(
    edge: Edge, hanging: CountingBackend
) -> None:
    await serve_host(edge, host=HOST, service="hang", address=hanging.address)
    client = await H2Raw.open(edge.address)
    try:
        status, headers, body = await client.answer(client.headers(HOST, method="CONNECT"))
    finally:
        client.close()
    assert status == 405
    assert headers["x-interlock-reason"] == "connect-not-served"
    assert body.startswith(b"connect-not-served: ")
    assert hanging.finished == hanging.active == 0  # never contacted


async def test_connect_over_http2_is_refused_at_the_mesh_listener(mesh: MeshServer) -> None:
    assert mesh.address is not None
    client = await H2Raw.open(mesh.address)
    try:
        stream_id = client.headers("web.default.svc.cluster.local:80", method="CONNECT")
        status, headers, _ = await client.answer(stream_id)
    finally:
        client.close()
    assert status == 405
    assert headers["x-interlock-reason"] == "connect-not-served"


async def test_scheme_https_on_plaintext_h2c_does_not_reach_the_backend_as_https(
    edge: Edge, header_backend: tuple[str, int]
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    client = await H2Raw.open(edge.address)
    try:
        status, _, body = await client.request(
            [(":method", "GET"), (":scheme", "https"), (":authority", HOST), (":path", "/")]
        )
    finally:
        client.close()
    assert status == 200
    assert json.loads(body)["x-forwarded-proto"] == ["http"]
