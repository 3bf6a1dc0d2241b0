"""WebSocket pass-through through the mesh listener: a real aiohttp WebSocket
client and server, the handshake's subprotocol, messages both ways, the close code and reason
relayed; a backend's 101 reaches only a client that asked to upgrade."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.mesh_env import MeshEnv, WsBackend, chat_backend, service_obj, ws_slice
from tests.kit.mesh_env import mesh as mesh  # the fixture


async def _no_websocket(_request: web.Request) -> web.Response:
    return web.Response(text="no websocket here")


async def switching_anyway(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A broken backend: 101 to every request, asked or not."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n")
    await writer.drain()
    writer.close()


@pytest.fixture
async def ws_backend(mesh: MeshEnv) -> AsyncIterator[WsBackend]:
    async with chat_backend(mesh.cluster.apply) as backend:
        await mesh.until("chat.default", lambda r: r.body == b"plain http", message="chat routed")
        yield backend


async def test_messages_both_ways_and_the_chosen_subprotocol(
    mesh: MeshEnv, ws_backend: WsBackend
) -> None:
    async with mesh.http.ws_connect(
        mesh.url + "/room/1?user=a",
        headers={"Host": "chat.default.svc", "X-Team": "blue"},
        protocols=("chat.v1", "chat.v2"),
    ) as ws:
        await ws_backend.talk(ws, "/room/1", "hello", b"\x00\x01\x02")
    seen = ws_backend.handshakes[-1]
    assert seen["host"] == "chat.default.svc"
    assert seen["x-team"] == "blue"
    assert seen["sec-websocket-protocol"] == "chat.v1,chat.v2"


async def test_the_backends_close_code_and_reason_reach_the_client(
    mesh: MeshEnv, ws_backend: WsBackend
) -> None:
    async with mesh.http.ws_connect(mesh.url + "/close", headers={"Host": "chat.default"}) as ws:
        await ws.send_str("anything")
        message = await ws.receive(timeout=30)
        assert message.type is WSMsgType.CLOSE
        assert (message.data, message.extra) == (4001, "bye")


async def test_a_backend_that_does_not_upgrade_is_502_never_a_101(
    mesh: MeshEnv, ws_backend: WsBackend
) -> None:
    ws_backend.handshakes.clear()
    assert ws_backend.runner is not None
    # A backend that answers the upgrade with plain HTTP: the client gets 502, not 101.
    app = web.Application()
    app.router.add_get("/{tail:.*}", _no_websocket)
    plain = web.AppRunner(app, access_log=None)
    await plain.setup()
    await web.TCPSite(plain, ENDPOINT_HOST, 0).start()
    try:
        await mesh.cluster.apply(service_obj("plain", "default", (80,)))
        await mesh.cluster.apply(ws_slice("plain", plain.addresses[0][1]))
        await mesh.until(
            "plain.default", lambda r: r.body == b"no websocket here", message="plain routed"
        )
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await mesh.http.ws_connect(mesh.url + "/", headers={"Host": "plain.default"})
        assert refused.value.status == 502
        assert refused.value.headers is not None
        assert refused.value.headers["X-Interlock-Reason"] == "upstream-failed"
    finally:
        await plain.cleanup()


async def test_a_101_nobody_asked_for_never_reaches_the_client(mesh: MeshEnv) -> None:
    server = await asyncio.start_server(switching_anyway, ENDPOINT_HOST, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await mesh.cluster.apply(service_obj("broken", "default", (80,)))
        await mesh.cluster.apply(ws_slice("broken", port))
        # Until the endpoints are known the answer is 500/503; then 502, never the 101.
        reply = await mesh.until("broken.default", lambda r: r.status == 502, message="502")
        assert reply.headers["X-Interlock-Reason"] != ""
    finally:
        server.close()
        await server.wait_closed()
