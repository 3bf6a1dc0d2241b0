"""WebSockets through the mesh listener are relayed as the edge relays them (issue 26 items 2,
7, 8): byte for byte — a permessage-deflate frame reaches the backend as the client sent it,
never inflated by the listener — with the edge's limits on upgraded connections (per client:
429 ``too-many-upgrades``)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator

import aiohttp
import pytest

from interlock.config import EdgeConfig, MeshConfig
from interlock.controller.app import Controller
from interlock.dataplane.limits import ProxyLimits
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.mesh_env import MeshEnv, WsBackend, chat_backend, service_obj, ws_slice
from tests.kit.mesh_env import mesh as mesh  # the fixture
from tests.kit.raw_websocket import RawWsBackend, client_frame, raw_handshake

SERVICE = "raw.default.svc"


@pytest.fixture
async def listener(cluster: Cluster, start_controller: StartController) -> Controller:
    return await start_controller(
        identity="mesh-ws",
        mesh=MeshConfig(addr=LOCAL),
        edge=EdgeConfig(limits=ProxyLimits(upgrade_connections_per_client=2)),
    )


def _address(mesh: MeshEnv) -> tuple[str, int]:
    host, port = mesh.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@pytest.fixture
async def raw_ws(cluster: Cluster) -> AsyncIterator[RawWsBackend]:
    backend = RawWsBackend()
    backend.server = await asyncio.start_server(backend.handle, ENDPOINT_HOST, 0)
    port = backend.server.sockets[0].getsockname()[1]
    await cluster.apply(service_obj("raw", "default", (80,)))
    await cluster.apply(ws_slice("raw", port))
    yield backend
    backend.server.close()


async def test_a_deflate_frame_reaches_the_backend_as_sent(
    mesh: MeshEnv, raw_ws: RawWsBackend
) -> None:
    async def switched() -> bool:
        _, writer, head = await raw_handshake(
            _address(mesh), extensions="permessage-deflate", host=SERVICE
        )
        writer.close()
        return head.startswith(b"HTTP/1.1 101")

    await eventually(switched, message=f"{SERVICE} upgraded")
    _, writer, _ = await raw_handshake(
        _address(mesh), extensions="permessage-deflate", host=SERVICE
    )
    try:
        compressor = zlib.compressobj(wbits=-15)
        bomb = compressor.compress(b"\0" * (16 << 20)) + compressor.flush(zlib.Z_SYNC_FLUSH)
        frame = client_frame(bomb[:-4], rsv1=True)
        writer.write(frame)
        await writer.drain()

        async def arrived() -> bool:
            return frame in raw_ws.received

        await eventually(arrived, message="the frame reached the backend as sent")
    finally:
        writer.close()


async def test_upgraded_connections_per_client_are_bounded(
    cluster: Cluster, listener: Controller
) -> None:
    async with (
        chat_backend(cluster.apply) as _backend,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
    ):
        assert listener.mesh is not None
        url = listener.mesh.url + "/room/1"
        headers = {"Host": "chat.default.svc"}

        async def routed() -> bool:
            async with http.get(url, headers=headers) as response:
                return await response.read() == b"plain http"

        await eventually(routed, message="chat routed")
        held = [
            await http.ws_connect(url, headers=headers, protocols=("chat.v2",)) for _ in range(2)
        ]
        try:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(url, headers=headers)
            assert refused.value.status == 429
            assert refused.value.headers is not None
            assert refused.value.headers["X-Interlock-Reason"] == "too-many-upgrades"
            await WsBackend.talk(held[0], "/room/1", "still", b"served")
        finally:
            for ws in held:
                await ws.close()
