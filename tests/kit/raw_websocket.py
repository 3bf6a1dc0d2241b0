"""A WebSocket spoken byte by byte, for the tests that must send what a well-behaved client
library would refuse to (a frame with RSV1 set, a length larger than what follows): a client's
handshake and frames, and a backend that accepts the upgrade and keeps every byte it receives.
Used by the edge's (``tests/security/test_wire_websocket.py``) and the mesh listener's
(``tests/e2e/test_websocket_mesh_limits.py``) WebSocket tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import struct
from dataclasses import dataclass, field

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


async def raw_handshake(
    address: tuple[str, int], *, host: str, extensions: str = ""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """Open a connection to ``address`` and ask ``host`` for an upgrade to WebSocket (offering
    ``extensions``): the reader, the writer and the answer's head."""
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
