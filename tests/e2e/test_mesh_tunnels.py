"""CONNECT tunnels through the mesh listener, end to end: TCPRoutes and TLSRoutes on the wire.

A client sends ``CONNECT NAME.NAMESPACE.svc:PORT`` to the mesh listener as an ``HTTPS_PROXY``
client does, and the Service port's policy chooses where its bytes go: a TCPRoute's backends by
weight, a TLSRoute by the server name of the client's ClientHello (a real ``ssl`` client that
verifies the backend's own certificate: the listener never terminates TLS). A backend that
cannot be used, no ready endpoint and an authority that names no Service are answered before
the ``200`` (or, for TLS, the connection closed before any byte reaches a backend).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from loguru import logger
from prometheus_client.parser import text_string_to_metric_families

from interlock.config import MeshConfig, ObservabilityConfig
from interlock.controller.app import Controller
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.echo_backends import local_slice
from tests.kit.mesh_env import GATEWAY, service_obj
from tests.kit.outbound_objects import stream_route
from tests.kit.stream_backends import StreamEcho
from tests.kit.tls_certs import self_signed

PORT = 5432


@dataclass
class TunnelEnv:
    cluster: Cluster
    controller: Controller
    address: tuple[str, int]
    lines: list[dict[str, Any]]
    tmp: Path
    backends: list[StreamEcho] = field(default_factory=list)

    async def backend(self, name: str, *, cert_for: str | None = None) -> StreamEcho:
        """A Service ``name`` (port 5432) whose one endpoint is a new :class:`StreamEcho`;
        with ``cert_for``, a TLS one serving a self-signed certificate for that name."""
        tls = None
        if cert_for is not None:
            cert, key = self_signed(cert_for)
            (self.tmp / f"{name}.crt").write_text(cert)
            (self.tmp / f"{name}.key").write_text(key)
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(self.tmp / f"{name}.crt", self.tmp / f"{name}.key")
        echo = StreamEcho(name, tls)
        await echo.start()
        self.backends.append(echo)
        await self.cluster.apply(service_obj(name, "default", (PORT,)))
        await self.cluster.apply(local_slice(name, {f"p{PORT}": echo.port}, name=f"{name}-tunnel"))
        return echo

    def trust(self, name: str) -> ssl.SSLContext:
        """A client context that trusts only backend ``name``'s certificate (and checks that
        it is for the server name the client asks for)."""
        context = ssl.create_default_context(cafile=self.tmp / f"{name}.crt")
        assert context.check_hostname
        return context

    async def connect(self, authority: str) -> Tunnel:
        """Send ``CONNECT authority`` to the mesh listener; the answer's head is read."""
        reader, writer = await asyncio.open_connection(*self.address)
        writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        return Tunnel(status, headers, reader, writer)

    async def until_status(self, authority: str, status: int) -> Tunnel:
        """CONNECT until the answer has ``status`` (the controller sees changes eventually)."""
        found: list[Tunnel] = []

        async def answered() -> bool:
            tunnel = await self.connect(authority)
            if tunnel.status == status:
                found.append(tunnel)
                return True
            await tunnel.close()
            return False

        await eventually(answered, message=f"CONNECT {authority} answered {status}")
        return found[0]

    async def greeting(self, authority: str) -> str:
        """The name of the backend a new plain tunnel reaches (its greeting), or the status."""
        tunnel = await self.connect(authority)
        try:
            if tunnel.status != 200:
                return f"status {tunnel.status}"
            line = await asyncio.wait_for(tunnel.reader.readline(), 30)
            return line.decode().removeprefix("hello from ").strip()
        finally:
            await tunnel.close()

    async def until_greeting(self, authority: str, name: str) -> None:
        async def reached() -> bool:
            return await self.greeting(authority) == name

        await eventually(reached, message=f"CONNECT {authority} reaches {name}")

    async def metrics(self) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        """The admin ``/metrics`` samples: name → sorted labels → value."""
        assert self.controller.admin_site is not None
        async with (
            aiohttp.ClientSession() as http,
            http.get(self.controller.admin_site.url + "/metrics") as response,
        ):
            text = await response.text()
        found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = tuple(sorted(sample.labels.items()))
                found.setdefault(sample.name, {})[labels] = sample.value
        return found


@dataclass
class Tunnel:
    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def body(self) -> bytes:
        length = int(self.headers.get("content-length", "0"))
        return await asyncio.wait_for(self.reader.readexactly(length), 30)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


@pytest.fixture
async def tunnels(
    cluster: Cluster, start_controller: StartController, tmp_path: Path
) -> AsyncIterator[TunnelEnv]:
    lines: list[dict[str, Any]] = []

    def sink(message: Any) -> None:
        if message.record["extra"].get("logger") == "access":
            lines.append(json.loads(message.record["message"]))

    handle = logger.add(sink, level="INFO")
    controller = await start_controller(
        identity="mesh-tunnels",
        mesh=MeshConfig(addr=LOCAL),
        observability=ObservabilityConfig(access_log=True),
    )
    assert controller.mesh is not None and controller.mesh.address is not None
    address = controller.mesh.address
    env = TunnelEnv(cluster, controller, (address.host, address.port), lines, tmp_path)
    try:
        yield env
    finally:
        logger.remove(handle)
        for backend in env.backends:
            await backend.stop()


def route(kind: str, name: str, backends: list[tuple[str, int]], **spec: Any) -> dict[str, Any]:
    """A TCPRoute or TLSRoute on Service ``default/db`` port 5432 with weighted backends."""
    refs = [{"name": b, "port": PORT, "weight": w} for b, w in backends]
    return stream_route(kind, name, refs, **spec)


async def parent_without_endpoints(env: TunnelEnv, name: str = "db") -> None:
    await env.cluster.apply(service_obj(name, "default", (PORT,)))


async def tcp_route_to_one_backend(env: TunnelEnv) -> StreamEcho:
    """Service ``db`` (no endpoints) whose TCPRoute sends to ``db-v1``, once it does."""
    await parent_without_endpoints(env)
    backend = await env.backend("db-v1")
    await env.cluster.apply(route("TCPRoute", "db", [("db-v1", 1)]))
    await env.until_greeting("db.default:5432", "db-v1")
    return backend


async def test_a_tcp_route_tunnels_bytes_both_ways_by_weight(tunnels: TunnelEnv) -> None:
    await parent_without_endpoints(tunnels)
    await tunnels.backend("db-v1")
    await tunnels.backend("db-v2")
    await tunnels.cluster.apply(route("TCPRoute", "db", [("db-v1", 1), ("db-v2", 0)]))
    await tunnels.until_greeting("db.default.svc:5432", "db-v1")

    # Bytes both ways; the client's half-close reaches the backend, whose last words still
    # come back through the tunnel.
    tunnel = await tunnels.connect("db.default.svc.cluster.local:5432")
    assert tunnel.status == 200
    assert "server" not in tunnel.headers and "content-length" not in tunnel.headers
    payload = bytes(range(256)) * 512  # 128 KiB, more than one read
    assert await tunnel.reader.readline() == b"hello from db-v1\n"
    tunnel.writer.write(payload)
    await tunnel.writer.drain()
    tunnel.writer.write_eof()
    rest = await asyncio.wait_for(tunnel.reader.read(), 30)  # until the tunnel closes
    assert rest == payload + b"bye from db-v1\n"
    await tunnel.close()

    async def logged() -> bool:
        return any(
            line["method"] == "CONNECT" and line["bytesReceived"] == len(payload)
            for line in tunnels.lines
        )

    await eventually(logged, message="the tunnel's access log line")
    line = next(x for x in tunnels.lines if x["bytesReceived"] == len(payload))
    assert line["status"] == 200
    assert line["target"] == "default/db:5432"
    assert line["route"] == "TCPRoute default/db rule 0"
    assert line["bytes"] == len(b"hello from db-v1\n") + len(payload) + len(b"bye from db-v1\n")
    assert line["upstream"].endswith(f":{tunnels.backends[0].port}")

    # All or nothing, the other way; then half and half within a wide bound.
    await tunnels.cluster.apply(route("TCPRoute", "db", [("db-v1", 0), ("db-v2", 1)]))
    await tunnels.until_greeting("db.default:5432", "db-v2")
    for _ in range(5):
        assert await tunnels.greeting("db.default:5432") == "db-v2"
    await tunnels.cluster.apply(route("TCPRoute", "db", [("db-v1", 1), ("db-v2", 1)]))
    await tunnels.until_greeting("db.default:5432", "db-v1")
    reached = Counter([await tunnels.greeting("db.default:5432") for _ in range(60)])
    assert set(reached) == {"db-v1", "db-v2"}, reached
    assert min(reached.values()) >= 10, reached


async def test_a_tls_route_reaches_the_backend_its_server_name_matches(
    tunnels: TunnelEnv,
) -> None:
    await parent_without_endpoints(tunnels)
    await tunnels.backend("db-main", cert_for="db.example.com")
    await tunnels.backend("db-other", cert_for="eu.replica.example.com")
    await tunnels.cluster.apply(
        route("TLSRoute", "db-main", [("db-main", 1)], hostnames=["db.example.com"])
    )
    await tunnels.cluster.apply(
        route("TLSRoute", "db-other", [("db-other", 1)], hostnames=["*.example.com"])
    )

    async def handshake(server_name: str, trusted: str) -> str:
        tunnel = await tunnels.connect("db.default.svc:5432")
        assert tunnel.status == 200
        try:
            await tunnel.writer.start_tls(tunnels.trust(trusted), server_hostname=server_name)
            assert await tunnel.reader.readline() == f"hello from {trusted}\n".encode()
            tunnel.writer.write(b"select 1\n")
            assert await tunnel.reader.readline() == b"select 1\n"
            # The certificate is the backend's own, verified for the name: no termination.
            tls = tunnel.writer.get_extra_info("ssl_object")
            assert isinstance(tls, ssl.SSLObject)
            return str(dict(x[0] for x in tls.getpeercert()["subject"])["commonName"])
        finally:
            await tunnel.close()

    def routed(server_name: str, trusted: str) -> Callable[[], Awaitable[bool]]:
        async def reaches() -> bool:
            with contextlib.suppress(ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
                return await handshake(server_name, trusted) == server_name
            return False

        return reaches

    # Each route is in the policy when its own name reaches its backend: the two are two route
    # actors, and the second may arrive after the first is served (a CI run on the real lane
    # met the wildcard's name refused just after db.example.com had reached db-main).
    await eventually(
        routed("db.example.com", "db-main"), message="TLS to db.example.com reaches db-main"
    )
    await eventually(
        routed("eu.replica.example.com", "db-other"),
        message="TLS to eu.replica.example.com reaches db-other",
    )
    # Both in: the exact name wins over the wildcard; another name under it takes the wildcard.
    assert await handshake("db.example.com", "db-main") == "db.example.com"
    assert await handshake("eu.replica.example.com", "db-other") == "eu.replica.example.com"

    # A name no TLSRoute matches: the connection is closed after the 200, nothing forwarded.
    before = sum(b.connections for b in tunnels.backends)
    tunnel = await tunnels.connect("db.default.svc:5432")
    assert tunnel.status == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await tunnel.writer.start_tls(tunnels.trust("db-main"), server_hostname="db.example.org")
    await tunnel.close()
    assert sum(b.connections for b in tunnels.backends) == before

    async def logged() -> bool:
        return any(line["reason"] == "no-sni-match" for line in tunnels.lines)

    await eventually(logged, message="the closed tunnel's access log line")


async def test_a_backend_that_cannot_be_used_refuses_the_tunnel(tunnels: TunnelEnv) -> None:
    await parent_without_endpoints(tunnels)
    await tunnels.cluster.apply(route("TCPRoute", "db", [("db-missing", 1)]))
    refused = await tunnels.until_status("db.default.svc:5432", 500)
    assert refused.headers["x-interlock-reason"] == "backend-not-found"
    assert b"db-missing" in await refused.body()
    await refused.close()

    # For TLS the refusal comes after the 200: the connection closes during the handshake.
    await tunnels.cluster.delete(route("TCPRoute", "db", []))
    await tunnels.backend("db-tls", cert_for="db.example.com")
    await tunnels.cluster.apply(
        route("TLSRoute", "db-tls", [("db-missing", 1)], hostnames=["db.example.com"])
    )

    async def closed_after_200() -> bool:
        tunnel = await tunnels.connect("db.default.svc:5432")
        try:
            if tunnel.status != 200:
                return False
            try:
                await tunnel.writer.start_tls(
                    tunnels.trust("db-tls"), server_hostname="db.example.com"
                )
            except (ssl.SSLError, ConnectionError):
                return True
            return False
        finally:
            await tunnel.close()

    await eventually(closed_after_200, message="a TLS tunnel to a missing backend is closed")
    assert any(
        line["reason"] == "backend-not-found" and line["status"] == 200 for line in tunnels.lines
    )


async def test_no_ready_endpoint_and_no_service_are_answered(tunnels: TunnelEnv) -> None:
    await parent_without_endpoints(tunnels)
    await parent_without_endpoints(tunnels, "db-empty")
    await tunnels.cluster.apply(route("TCPRoute", "db", [("db-empty", 1)]))
    empty = await tunnels.until_status("db.default.svc:5432", 503)
    assert empty.headers["x-interlock-reason"] == "no-ready-endpoints"
    await empty.close()

    for authority in ("db", "db.default.svc.example.org:5432", "127.0.0.1:5432", "db.default"):
        unknown = await tunnels.connect(authority)
        assert unknown.status == 404, authority
        assert unknown.headers["x-interlock-reason"] == "unknown-host"
        assert (await unknown.body()).startswith(b"unknown-host: ")
        await unknown.close()


async def test_connect_to_an_http_port(tunnels: TunnelEnv) -> None:
    # No route: the Default route's backend, the Service itself, as Linkerd's opaque fallback.
    await tunnels.backend("plain")
    await tunnels.until_greeting("plain.default:5432", "plain")
    # HTTP routes choose by path and headers, which a tunnel has not: refused.
    await tunnels.cluster.apply(
        {
            "apiVersion": f"{GATEWAY}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "plain-http", "namespace": "default"},
            "spec": {
                "parentRefs": [{"group": "core", "kind": "Service", "name": "plain", "port": PORT}],
                "rules": [{"backendRefs": [{"name": "plain", "port": PORT}]}],
            },
        }
    )
    refused = await tunnels.until_status("plain.default:5432", 405)
    assert refused.headers["x-interlock-reason"] == "not-a-tunnel"
    assert b"HTTPRoute default/plain-http" in await refused.body()
    await refused.close()


async def test_tunnels_are_counted_and_an_unreachable_endpoint_is_a_connect_error(
    tunnels: TunnelEnv,
) -> None:
    await tcp_route_to_one_backend(tunnels)
    tunnel = await tunnels.connect("db.default:5432")
    tunnel.writer.write(b"ping\n")
    tunnel.writer.write_eof()
    assert await tunnel.reader.read() == b"hello from db-v1\nping\nbye from db-v1\n"
    await tunnel.close()
    target = (("front", "mesh"), ("target", "default/db:5432"))

    async def counted() -> bool:
        found = await tunnels.metrics()
        carried = found.get("interlock_tunnel_bytes_total", {})
        up = carried.get((("direction", "to_upstream"), *target), 0)
        down = carried.get((("direction", "to_client"), *target), 0)
        durations = found.get("interlock_tunnel_duration_seconds_count", {})
        return up >= 5 and down >= 30 and durations.get(target, 0) >= 1

    await eventually(counted, message="the tunnel's bytes and duration in /metrics")

    # The endpoint stops accepting connections: 502 before any 200, counted as a connect error.
    await tunnels.backends[0].stop()
    refused = await tunnels.connect("db.default:5432")
    assert refused.status == 502
    assert refused.headers["x-interlock-reason"] == "upstream-unreachable"
    await refused.close()
    found = await tunnels.metrics()
    assert found["interlock_upstream_connect_errors_total"][target] >= 1


async def test_bytes_sent_with_the_connect_are_not_lost_and_tls_ports_need_tls(
    tunnels: TunnelEnv,
) -> None:
    await tcp_route_to_one_backend(tunnels)
    # A client that does not wait for the 200 (its first bytes in the same packet).
    reader, writer = await asyncio.open_connection(*tunnels.address)
    writer.write(b"CONNECT db.default:5432 HTTP/1.1\r\nHost: db.default:5432\r\n\r\nearly\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    assert head.startswith(b"HTTP/1.1 200 Connection established\r\n")
    writer.write_eof()
    answered = await asyncio.wait_for(reader.read(), 30)
    assert answered == b"hello from db-v1\nearly\nbye from db-v1\n"
    writer.close()

    # On a TLSRoute port, bytes that are not a ClientHello close the tunnel unforwarded.
    await tunnels.cluster.delete(route("TCPRoute", "db", []))
    await tunnels.cluster.apply(
        route("TLSRoute", "db-tls", [("db-v1", 1)], hostnames=["db.example.com"])
    )

    async def closed() -> bool:
        before = tunnels.backends[0].connections
        tunnel = await tunnels.connect("db.default:5432")
        try:
            assert tunnel.status == 200
            tunnel.writer.write(b"GET / HTTP/1.1\r\n\r\n")
            rest = await asyncio.wait_for(tunnel.reader.read(), 30)
            return rest == b"" and tunnels.backends[0].connections == before
        finally:
            await tunnel.close()

    await eventually(closed, message="plain bytes on a TLS port close the tunnel")
    assert any(line["reason"] == "bad-request" for line in tunnels.lines)
