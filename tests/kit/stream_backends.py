"""A TCP (or TLS) backend standing in for a pod in the tunnel tests: the mesh listener's
``CONNECT`` tunnels (TCPRoute, TLSRoute) and the Gateway's TLS passthrough listeners. Its
endpoint is a local server (``ENDPOINT_HOST``) that an EndpointSlice names as a pod's would be."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

from tests.kit.lanes import ENDPOINT_HOST


@dataclass
class StreamEcho:
    """A TCP (or, with ``tls``, TLS) server standing in for a pod: to every connection it sends
    ``hello from NAME\\n``, then echoes what it reads; once the client half-closes it sends
    ``bye from NAME\\n`` and closes (so a test sees that a half-close is passed on)."""

    name: str
    tls: ssl.SSLContext | None = None
    port: int = 0
    connections: int = 0
    server: asyncio.Server | None = None
    handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            writer.write(f"hello from {self.name}\n".encode())
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.write(f"bye from {self.name}\n".encode())
            await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            self.handlers.discard(task)

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, ENDPOINT_HOST, 0, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for task in list(self.handlers):
                task.cancel()
            await self.server.wait_closed()
