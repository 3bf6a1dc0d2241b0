"""The data plane through real HTTP: host and path routing, fail-closed answers, proxy duties."""

from __future__ import annotations

import contextlib
import os
import socket

import aiohttp
import pytest

from interlock.dataplane.proxy import ProxyTimeouts
from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import BackendTarget
from interlock.edge.server import EdgeServer
from interlock.model.moduleset import Modules
from interlock.model.service import ServicePortKey

from .conftest import BACKEND, HOST, Backend, EdgeHarness, body_json


async def test_unknown_host_is_404_and_backend_untouched(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    status, _, _ = await harness.get("/", host="other.example.com")
    assert status == 404
    assert backend.seen == []


async def test_host_is_matched_without_port_and_case(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    status, _, body = await harness.get("/", host="APP.Example.com:8080")
    assert (status, body) == (200, b"hello from backend-1")


async def test_route_without_backend_is_503_and_backend_untouched(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve(backend=None)
    for _ in range(3):
        status, _, _ = await harness.get("/anything")
        assert status == 503
    assert backend.seen == []


async def test_detached_backend_is_503_again(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve()
    assert (await harness.get("/"))[0] == 200
    await harness.edge.detach_backend(host=HOST, route_id="root")
    assert (await harness.get("/"))[0] == 503
    assert len(backend.seen) == 1


async def test_backend_service_that_does_not_exist_is_500(
    harness: EdgeHarness, backend: Backend
) -> None:
    missing = BackendTarget(ServicePortKey("default", "ghost", 80), exists=False)
    await harness.serve(backend=missing)
    assert (await harness.get("/"))[0] == 500
    assert backend.seen == []


async def test_resolver_errors_become_the_answer(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve(backend=BackendTarget(ServicePortKey("default", "unknown", 80)))
    assert (await harness.get("/"))[0] == 500
    harness.upstreams.set(namespace="default", service="unknown", port=80, addresses=[])
    assert (await harness.get("/"))[0] == 503
    assert backend.seen == []


async def test_path_routing_exact_then_longest_prefix_by_segment(
    harness: EdgeHarness, backend: Backend
) -> None:
    other = Backend(name="backend-2")
    await other.start()
    try:
        harness.upstreams.set(
            namespace="default", service="api", port=80, addresses=[other.address]
        )
        api = BackendTarget(ServicePortKey("default", "api", 80))
        await harness.serve(route_id="root", path="/", backend=BACKEND)
        await harness.serve(route_id="api", path="/api", backend=api)
        await harness.serve(route_id="api-exact", path="/api/v1", path_type="Exact", backend=None)
        await harness.serve(route_id="api-v1", path="/api/v1/", backend=BACKEND)

        async def served_by(path: str) -> str | int:
            status, _, body = await harness.get(path)
            return body.decode() if status == 200 else status

        assert await served_by("/api") == "hello from backend-2"
        assert await served_by("/api/") == "hello from backend-2"
        assert await served_by("/api/users") == "hello from backend-2"
        assert await served_by("/apis") == "hello from backend-1"  # not a whole segment
        # Exact /api/v1 (no backend: 503) beats the longer Prefix /api/v1/.
        assert await served_by("/api/v1") == 503
        assert await served_by("/api/v1/x") == "hello from backend-1"
    finally:
        await other.stop()


async def test_no_matching_route_is_404(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve(route_id="api", path="/api")
    assert (await harness.get("/other"))[0] == 404
    assert backend.seen == []


async def test_dot_segments_cannot_escape_a_route(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve(route_id="public", path="/public")
    await harness.serve(route_id="admin", path="/admin", backend=None)
    for raw in ("/public/../admin", "/public/%2e%2e/admin", "/public/./../admin/x"):
        status, _, _ = await harness.get(raw)
        assert status == 503, raw  # the /admin route, which has no backend
    status, _, _ = await harness.get("/public/../echo")
    assert status == 404  # /echo belongs to no route
    status, _, _ = await harness.get("/public/%2e%2e%2Fadmin")
    assert status == 400
    status, _, _ = await harness.get("/public//x/../y?q=1")
    assert status == 200
    assert backend.seen[-1].path == "/public/y"
    assert backend.seen[-1].query == "q=1"


async def test_forwarded_headers_are_set(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve()
    status, _, body = await harness.get(
        "/echo",
        headers={
            "X-Forwarded-For": "203.0.113.9",
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Host": "evil.example",
        },
    )
    assert status == 200
    headers = body_json(body)["headers"]
    assert isinstance(headers, dict)
    # The client is not a trusted proxy: what it claims is replaced, not forwarded.
    assert headers["x-forwarded-for"] == ["127.0.0.1"]
    assert headers["x-forwarded-proto"] == ["http"]
    assert headers["x-forwarded-host"] == [HOST]
    assert headers["host"] == [HOST]


async def test_hop_by_hop_headers_are_removed_both_ways(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    status, response_headers, _ = await harness.get(
        "/hop",
        headers={
            "Connection": "keep-alive, X-Client-Private",
            "X-Client-Private": "x",
            "Keep-Alive": "timeout=5",
            "Proxy-Authorization": "Basic Zm9vOmJhcg==",
            "TE": "trailers",
            "Upgrade": "websocket",
            "X-Client-Kept": "yes",
        },
    )
    assert status == 200
    sent = backend.seen[-1].headers
    for name in ("x-client-private", "keep-alive", "proxy-authorization", "te", "upgrade"):
        assert name not in sent, name
    assert sent["x-client-kept"] == ["yes"]
    lower = {k.lower(): v for k, v in response_headers.items()}
    for name in ("x-private", "keep-alive", "proxy-authenticate"):
        assert name not in lower, name
    assert lower["x-kept"] == "yes"


async def test_large_upload_and_download_stream(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve()
    size = 32 * 1024 * 1024

    async def produce() -> object:
        chunk = os.urandom(1024 * 1024)
        for _ in range(size // len(chunk)):
            yield chunk

    status, _, body = await harness.request("POST", "/upload", data=produce())
    assert status == 200
    assert body_json(body)["size"] == size
    assert backend.seen[-1].body_size == size

    async with harness.client.get(
        harness.url + f"/download?size={size}", headers={"Host": HOST}
    ) as response:
        assert response.status == 200
        assert response.headers["Content-Length"] == str(size)
        received = 0
        async for chunk in response.content.iter_any():
            received += len(chunk)
    assert received == size


async def test_upstream_read_timeout_is_504(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve()
    status, _, _ = await harness.get("/hang")
    assert status == 504


async def test_upstream_stalling_mid_body_cuts_the_client_connection(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    async with harness.client.get(harness.url + "/partial", headers={"Host": HOST}) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    # The edge keeps serving other requests.
    assert (await harness.get("/"))[0] == 200


async def test_unreachable_upstream_is_502(harness: EdgeHarness, backend: Backend) -> None:
    closed = Backend(name="closed")
    await closed.start()
    address = closed.address
    await closed.stop()
    harness.upstreams.set(namespace="default", service="web", port=80, addresses=[address])
    await harness.serve()
    assert (await harness.get("/"))[0] == 502


async def test_refused_address_falls_over_to_the_next(
    harness: EdgeHarness, backend: Backend
) -> None:
    closed = Backend(name="closed")
    await closed.start()
    dead = closed.address
    await closed.stop()
    harness.upstreams.set(
        namespace="default", service="web", port=80, addresses=[dead, backend.address]
    )
    await harness.serve()
    for _ in range(4):
        assert (await harness.get("/"))[0] == 200


async def test_round_robin_among_addresses(harness: EdgeHarness, backend: Backend) -> None:
    other = Backend(name="backend-2")
    await other.start()
    try:
        harness.upstreams.set(
            namespace="default", service="web", port=80, addresses=[backend.address, other.address]
        )
        await harness.serve()
        bodies = [(await harness.get("/"))[2] for _ in range(4)]
        assert sorted(bodies) == [b"hello from backend-1"] * 2 + [b"hello from backend-2"] * 2
    finally:
        await other.stop()


async def test_upstream_status_and_method_pass_through(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    assert (await harness.request("DELETE", "/status/418"))[0] == 418
    assert backend.seen[-1].method == "DELETE"
    status, _, body = await harness.request("HEAD", "/")
    assert (status, body) == (200, b"")


async def test_edge_does_not_share_cookies_between_clients(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve()
    await harness.get("/echo", headers={"Cookie": "session=alice"})
    await harness.get("/echo")
    assert "cookie" not in backend.seen[-1].headers


async def test_empty_module_chain_proxies_unchanged(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve(modules=Modules())
    status, headers, body = await harness.get("/text", headers={"Accept-Encoding": "gzip"})
    assert status == 200
    assert "Content-Encoding" not in headers
    assert body == b"compress me " * 500


async def test_upstream_connect_timeout_is_504(backend: Backend) -> None:
    # A listener whose accept backlog is full drops new SYNs: connecting times out.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    edge = InProcessEdge()
    server = EdgeServer(
        edge=edge,
        upstreams=StaticUpstreams({("default", "web", 80): [("127.0.0.1", port)]}),
        timeouts=ProxyTimeouts(connect=0.3, read=0.5),
    )
    await server.start(addr="127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as client:
            harness = EdgeHarness(
                edge=edge, upstreams=StaticUpstreams(), server=server, client=client
            )
            await harness.serve()
            assert (await harness.get("/"))[0] == 504
    finally:
        await server.stop()
        for sock in (*fillers, listener):
            sock.close()
