"""HTTP Upgrade pass-through for protocols other than WebSocket, at the edge and at the mesh
listener, on both lanes: a client that asks (``Connection: upgrade``, ``Upgrade: echo-proto``)
gets the backend's 101 and then bytes relayed both ways untouched; ``Upgrade: h2c`` is not
passed through (the request goes on as plain HTTP/1.1); a backend that refuses the upgrade is a
502, never a 101."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tests.kit.dataplane_env import EdgeEnv, service_obj, slice_obj
from tests.kit.dataplane_env import edge as edge  # the fixture
from tests.kit.e2e_clients import eventually
from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.mesh_env import MeshEnv, ws_slice
from tests.kit.mesh_env import mesh as mesh  # the fixture
from tests.kit.mesh_env import service_obj as mesh_service

PROTOCOL = "echo-proto"
GREETING = b"hello\x00\xff"
"""What the backend sends right after its 101, in the same write as the head."""
PAYLOAD = bytes(range(256)) * 64


@dataclass
class UpgradeBackend:
    """A raw HTTP/1.1 server: switches to ``echo-proto`` (then echoes every byte), refuses any
    other upgrade with 426, answers a plain request with the headers it received (JSON)."""

    heads: list[dict[str, str]] = field(default_factory=list)
    server: asyncio.Server | None = None
    port: int = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, ENDPOINT_HOST, 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                seen = {"request": lines[0]}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        seen[name.strip().lower()] = value.strip()
                self.heads.append(seen)
                upgrade = seen.get("upgrade", "")
                if upgrade == PROTOCOL:
                    writer.write(
                        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                        b"Upgrade: echo-proto\r\nX-Backend: tunnel\r\n\r\n" + GREETING
                    )
                    while data := await reader.read(65536):
                        writer.write(data)
                        await writer.drain()
                    return
                if upgrade:
                    writer.write(
                        b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n"
                    )
                    return
                body = json.dumps(seen).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Backend: plain\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@dataclass
class Exchange:
    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


async def ask(url: str, host: str, path: str, extra: str) -> Exchange:
    """A raw HTTP/1.1 request to ``url`` with the header lines ``extra``; its answer head."""
    address, _, port = url.removeprefix("http://").rpartition(":")
    reader, writer = await asyncio.open_connection(address, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())
    async with asyncio.timeout(30):
        head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return Exchange(int(lines[0].split(" ")[1]), headers, reader, writer)


async def check_upgrades(url: str, host: str, backend: UpgradeBackend) -> None:
    """What both front doors must do with upgrades (see the module docstring)."""
    switched = await ask(url, host, "/up", f"Connection: Upgrade\r\nUpgrade: {PROTOCOL}\r\n")
    try:
        assert switched.status == 101
        assert switched.headers["upgrade"] == PROTOCOL
        assert switched.headers["x-backend"] == "tunnel"
        async with asyncio.timeout(30):
            assert await switched.reader.readexactly(len(GREETING)) == GREETING
            switched.writer.write(PAYLOAD)
            assert await switched.reader.readexactly(len(PAYLOAD)) == PAYLOAD
    finally:
        switched.writer.close()
    asked = backend.heads[-1]
    assert (asked["upgrade"], asked["connection"].lower()) == (PROTOCOL, "upgrade")
    assert asked["request"] == "GET /up HTTP/1.1"
    # h2c by upgrade is not passed through: a plain request reaches the backend.
    h2c = await ask(
        url,
        host,
        "/h2c",
        "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        "HTTP2-Settings: AAMAAABkAAQAAP__\r\n",
    )
    try:
        assert (h2c.status, h2c.headers["x-backend"]) == (200, "plain")
    finally:
        h2c.writer.close()
    plain = backend.heads[-1]
    assert "upgrade" not in plain and "http2-settings" not in plain, plain
    # A backend that refuses the upgrade: 502, never its answer as a 101.
    refused = await ask(url, host, "/up", "Connection: upgrade\r\nUpgrade: other-proto\r\n")
    try:
        assert refused.status == 502
        assert refused.headers["x-interlock-reason"] == "upstream-failed"
    finally:
        refused.writer.close()


@pytest.fixture
async def upgrade_backend() -> AsyncIterator[UpgradeBackend]:
    backend = UpgradeBackend()
    await backend.start()
    yield backend
    await backend.stop()


async def test_an_upgrade_through_the_edge(edge: EdgeEnv, upgrade_backend: UpgradeBackend) -> None:
    await edge.cluster.apply(service_obj("tunnel"))
    await edge.cluster.apply(slice_obj("tunnel", upgrade_backend.port))
    await edge.route(
        "upgrade",
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/up"}}],
            "backendRefs": [{"name": "tunnel", "port": 80}],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/h2c"}}],
            "backendRefs": [{"name": "tunnel", "port": 80}],
        },
        {"backendRefs": [{"name": "v1", "port": 80}]},
    )
    await check_upgrades(edge.url, "dp.test", upgrade_backend)


async def test_an_upgrade_through_the_mesh_listener(
    mesh: MeshEnv, upgrade_backend: UpgradeBackend
) -> None:
    await mesh.cluster.apply(mesh_service("tunnel", "default", (80,)))
    await mesh.cluster.apply(ws_slice("tunnel", upgrade_backend.port))
    authority = "tunnel.default.svc:80"

    async def plain() -> bool:
        answered = await ask(mesh.url, authority, "/ready", "")
        answered.writer.close()
        return answered.status == 200

    await eventually(plain, message=f"{authority} reaches the backend")
    await check_upgrades(mesh.url, authority, upgrade_backend)
