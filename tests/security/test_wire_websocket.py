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
import base64
import contextlib
import hashlib
import os
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from interlock.dataplane.limits import ProxyLimits

from .conftest import HOST, Edge, parse_answer, running_edge, serve_host, wait_until

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _accept(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + _GUID).digest())


def client_frame(payload: bytes, *, opcode: int = 2, rsv1: bool = False, length: int = -1) -> bytes:
    """A masked client frame (RFC 6455 §5.2); ``length`` may announce more than ``payload``."""
    size = len(payload) if length < 0 else length
    first = 0x80 | (0x40 if rsv1 else 0) | opcode
    if size < 126:
        head = struct.pack("!BB", first, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", first, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, size)
    mask = os.urandom(4)
    return head + mask + _masked(payload, mask)


def _masked(payload: bytes, mask: bytes) -> bytes:
    whole = (mask * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(whole, "big")).to_bytes(
        len(payload), "big"
    )


@dataclass
class RawWsBackend:
    """Answers a WebSocket handshake (accepting ``permessage-deflate`` when offered, as a
    backend that supports it does), then keeps every byte it receives."""

    received: bytearray = field(default_factory=bytearray)
    handshakes: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.handshakes.append(head)
        headers = {
            line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip()
            for line in head.split(b"\r\n")[1:]
            if b":" in line
        }
        answer = (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + _accept(headers[b"sec-websocket-key"]) + b"\r\n"
        )
        if b"permessage-deflate" in headers.get(b"sec-websocket-extensions", b""):
            answer += b"Sec-WebSocket-Extensions: permessage-deflate\r\n"
        writer.write(answer + b"\r\n")
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                self.received += data
        writer.close()

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        return ("127.0.0.1", self.server.sockets[0].getsockname()[1])


@pytest.fixture
async def raw_ws() -> AsyncIterator[RawWsBackend]:
    backend = RawWsBackend()
    backend.server = await asyncio.start_server(backend.handle, "127.0.0.1", 0)
    yield backend
    backend.server.close()


async def raw_handshake(
    address: tuple[str, int], *, extensions: str = "", host: str = HOST
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection(*address)
    key = base64.b64encode(os.urandom(16)).decode()
    offer = f"Sec-WebSocket-Extensions: {extensions}\r\n" if extensions else ""
    writer.write(
        (
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    return reader, writer, head


async def test_a_permessage_deflate_bomb_reaches_the_backend_as_sent_never_inflated(
    edge: Edge, raw_ws: RawWsBackend
) -> None:
    await serve_host(edge, host=HOST, service="ws", address=raw_ws.address)
    _reader, writer, head = await raw_handshake(edge.address, extensions="permessage-deflate")
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
    _reader, writer, head = await raw_handshake(edge.address)
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
        reader, writer, head = await raw_handshake(edge.address)
        try:
            assert head.startswith(b"HTTP/1.1 101"), head
            # Idle: the edge closes the connection (and the backend's).
            assert await asyncio.wait_for(reader.read(-1), 60) == b""
        finally:
            writer.close()
        await wait_until(lambda: echo_ws.open == 0, what="the backend's side closed")
        reader, writer, head = await raw_handshake(edge.address)
        writer.close()
        assert head.startswith(b"HTTP/1.1 101"), parse_answer(head).status
