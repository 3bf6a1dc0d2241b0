"""WebSockets through the edge, as an attacker would use them: a permessage-deflate bomb, a
message larger than the edge should hold, and idle connections that lock other clients out.

The edge relays an upgraded connection byte for byte (``interlock/dataplane/websocket.py``):
it negotiates no extension of its own, so it never inflates what a client compressed (the
frame reaches the backend as the client sent it), and a message of any size streams through
instead of being held whole. Upgraded connections have limits of their own — per client
(429), in all (503) — and an idle timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from interlock.dataplane.limits import ProxyLimits
from tests.kit.raw_http1 import parse_answer
from tests.kit.raw_websocket import RawWsBackend, client_frame, raw_handshake

from .conftest import HOST, Edge, running_edge, serve_host, wait_until


@pytest.fixture
async def raw_ws() -> AsyncIterator[RawWsBackend]:
    backend = RawWsBackend()
    backend.server = await asyncio.start_server(backend.handle, "127.0.0.1", 0)
    yield backend
    backend.server.close()


async def test_a_permessage_deflate_bomb_reaches_the_backend_as_sent_never_inflated(
    edge: Edge, raw_ws: RawWsBackend
) -> None:
    await serve_host(edge, host=HOST, service="ws", address=raw_ws.address)
    _reader, writer, head = await raw_handshake(
        edge.address, extensions="permessage-deflate", host=HOST
    )
    try:
        assert head.startswith(b"HTTP/1.1 101"), head
        compressor = zlib.compressobj(wbits=-15)
        bomb = compressor.compress(b"\0" * (16 << 20)) + compressor.flush(zlib.Z_SYNC_FLUSH)
        bomb = bomb[:-4]  # permessage-deflate drops the sync flush's tail (RFC 7692 §7.2.1)
        frame = client_frame(bomb, rsv1=True)
        assert len(frame) < 64 * 1024
        writer.write(frame)
        await writer.drain()
        await wait_until(
            lambda: len(raw_ws.received) >= len(frame), what="the frame reached the backend"
        )
    finally:
        writer.close()
    assert bytes(raw_ws.received[: len(frame)]) == frame  # the client's bytes, not inflated


async def test_the_edge_negotiates_no_compression_the_backend_did_not_choose(edge: Edge) -> None:
    async def plain_ws(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False)
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await ws.send_str(message.data)
        return ws

    app = web.Application()
    app.router.add_get("/ws", plain_ws)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        await serve_host(edge, host=HOST, service="plain", address=runner.addresses[0][:2])
        host, port = edge.address
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                f"http://{host}:{port}/ws", headers={"Host": HOST}, compress=15
            ) as ws,
        ):
            assert ws.compress == 0  # the client offered deflate; nobody took it up
            await ws.send_str("hello")
            assert await ws.receive_str(timeout=30) == "hello"
    finally:
        await runner.cleanup()


async def test_a_large_message_streams_through_before_it_is_complete(
    edge: Edge, raw_ws: RawWsBackend
) -> None:
    await serve_host(edge, host=HOST, service="ws", address=raw_ws.address)
    _reader, writer, head = await raw_handshake(edge.address, host=HOST)
    try:
        assert head.startswith(b"HTTP/1.1 101"), head
        first = os.urandom(1 << 20)
        # A 160 MiB message announced; only its first MiB is sent.
        writer.write(client_frame(first, length=160 << 20))
        await writer.drain()
        await wait_until(
            lambda: len(raw_ws.received) >= len(first),
            deadline=30,
            what="the start of the message reached the backend",
        )
    finally:
        writer.close()


@dataclass
class EchoWs:
    """An aiohttp WebSocket echo backend; counts the connections it holds."""

    open: int = 0
    runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.open += 1
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT:
                    await ws.send_str(message.data)
        finally:
            self.open -= 1
        return ws

    @property
    def address(self) -> tuple[str, int]:
        assert self.runner is not None
        host, port = self.runner.addresses[0][:2]
        return (str(host), int(port))


@pytest.fixture
async def echo_ws() -> AsyncIterator[EchoWs]:
    backend = EchoWs()
    app = web.Application()
    app.router.add_get("/{tail:.*}", backend.handle)
    backend.runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await backend.runner.setup()
    await web.TCPSite(backend.runner, "127.0.0.1", 0).start()
    yield backend
    await backend.runner.cleanup()


async def ws_status(
    session: aiohttp.ClientSession,
    edge: Edge,
    client: str,
    held: list[aiohttp.ClientWebSocketResponse],
) -> tuple[int, str]:
    """Open a WebSocket as ``client`` (X-Forwarded-For from a trusted proxy): 101 (kept in
    ``held``) or the status and reason the edge refused it with."""
    host, port = edge.address
    try:
        ws = await session.ws_connect(
            f"http://{host}:{port}/ws",
            headers={"Host": HOST, "X-Forwarded-For": client},
            timeout=aiohttp.ClientWSTimeout(ws_close=5),
        )
    except aiohttp.WSServerHandshakeError as refused:
        reason = refused.headers.get("X-Interlock-Reason", "") if refused.headers else ""
        return refused.status, reason
    held.append(ws)
    return 101, ""


@contextlib.asynccontextmanager
async def websockets() -> AsyncIterator[
    tuple[aiohttp.ClientSession, list[aiohttp.ClientWebSocketResponse]]
]:
    held: list[aiohttp.ClientWebSocketResponse] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        try:
            yield session, held
        finally:
            for ws in held:
                await ws.close()


async def test_a_hundred_idle_websockets_of_one_client_do_not_lock_another_out(
    echo_ws: EchoWs,
) -> None:
    async with (
        running_edge(trusted_proxies=["127.0.0.1/32"]) as edge,
        websockets() as (session, held),
    ):
        await serve_host(edge, host=HOST, service="echo", address=echo_ws.address)
        opened = await asyncio.gather(
            *(ws_status(session, edge, "10.0.0.1", held) for _ in range(100))
        )
        assert opened == [(101, "")] * 100
        assert await ws_status(session, edge, "10.0.0.2", held) == (101, "")
        assert await ws_status(session, edge, "10.0.0.1", held) == (429, "too-many-upgrades")
        await held[-1].send_str("still served")
        assert await held[-1].receive_str(timeout=30) == "still served"


async def test_upgraded_connections_in_all_are_bounded(echo_ws: EchoWs) -> None:
    limits = ProxyLimits(upgrade_connections=2, upgrade_connections_per_client=2)
    async with (
        running_edge(trusted_proxies=["127.0.0.1/32"], limits=limits) as edge,
        websockets() as (session, held),
    ):
        await serve_host(edge, host=HOST, service="echo", address=echo_ws.address)
        assert await ws_status(session, edge, "10.0.0.1", held) == (101, "")
        assert await ws_status(session, edge, "10.0.0.2", held) == (101, "")
        assert await ws_status(session, edge, "10.0.0.3", held) == (503, "upgrades-full")
        await held.pop(0).close()
        await wait_until(lambda: edge.server._upgrades.open == 1, what="a slot freed")
        assert await ws_status(session, edge, "10.0.0.3", held) == (101, "")


async def test_an_idle_websocket_is_closed_and_its_slot_freed(echo_ws: EchoWs) -> None:
    limits = ProxyLimits(upgrade_idle_timeout=0.5, upgrade_connections_per_client=1)
    async with running_edge(limits=limits) as edge:
        await serve_host(edge, host=HOST, service="echo", address=echo_ws.address)
        reader, writer, head = await raw_handshake(edge.address, host=HOST)
        try:
            assert head.startswith(b"HTTP/1.1 101"), head
            # Idle: the edge closes the connection (and the backend's).
            assert await asyncio.wait_for(reader.read(-1), 60) == b""
        finally:
            writer.close()
        await wait_until(lambda: echo_ws.open == 0, what="the backend's side closed")
        reader, writer, head = await raw_handshake(edge.address, host=HOST)
        writer.close()
        assert head.startswith(b"HTTP/1.1 101"), parse_answer(head).status
