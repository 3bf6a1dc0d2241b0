"""Fixtures for the edge data plane: a recording backend and an edge in front of it, both real
HTTP servers on free local ports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from interlock.dataplane.proxy import ProxyTimeouts
from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import BackendTarget
from interlock.edge.server import EdgeServer
from interlock.model.moduleset import Modules
from interlock.model.service import ServicePortKey
from tests.kit.edge_routes import serve_route

HOST = "app.example.com"
BACKEND = BackendTarget(ServicePortKey("default", "web", 80))


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, list[str]]
    body_size: int


@dataclass
class Backend:
    """A local HTTP server that records every request it receives.

    ``/echo`` answers with the request as JSON; ``/download?size=N`` streams N bytes;
    ``/upload`` counts the body; ``/hang`` never answers until the test ends (``/partial``
    sends the headers and 1 KiB of a 1 MiB body, then nothing); ``/status/N``
    answers N; anything else answers ``hello from <name>``.
    """

    name: str
    seen: list[Seen] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    runner: web.AppRunner | None = None
    port: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        size = 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
        headers: dict[str, list[str]] = {}
        for key, value in request.headers.items():
            headers.setdefault(key.lower(), []).append(value)
        self.seen.append(
            Seen(
                request.method, request.raw_path.split("?")[0], request.query_string, headers, size
            )
        )
        if request.path == "/echo":
            return web.json_response(
                {"path": request.raw_path, "headers": headers, "size": size, "name": self.name}
            )
        if request.path == "/download":
            total = int(request.query["size"])
            response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            response.content_length = total
            await response.prepare(request)
            chunk = b"x" * 65536
            sent = 0
            while sent < total:
                part = chunk[: min(len(chunk), total - sent)]
                await response.write(part)
                sent += len(part)
            await response.write_eof()
            return response
        if request.path == "/upload":
            return web.json_response({"size": size})
        if request.path == "/partial":
            response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            response.content_length = 1024 * 1024
            await response.prepare(request)
            await response.write(b"p" * 1024)
            await self.release.wait()
            return response
        if request.path == "/hang":
            await self.release.wait()
            return web.Response(text="late")
        if request.path.startswith("/status/"):
            return web.Response(status=int(request.path.rsplit("/", 1)[1]), text="status")
        if request.path == "/hop":
            return web.Response(
                text="hop",
                headers={
                    "Connection": "X-Private",
                    "X-Private": "secret-hop",
                    "Keep-Alive": "timeout=5",
                    "Proxy-Authenticate": "Basic",
                    "X-Kept": "yes",
                },
            )
        if request.path == "/text":
            return web.Response(text="compress me " * 500, content_type="text/plain")
        return web.Response(text=f"hello from {self.name}")

    async def start(self) -> None:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self.runner.addresses[0][1])

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    server = Backend(name="backend-1")
    await server.start()
    yield server
    await server.stop()


@dataclass
class EdgeHarness:
    edge: InProcessEdge
    upstreams: StaticUpstreams
    server: EdgeServer
    client: aiohttp.ClientSession

    @property
    def address(self) -> tuple[str, int]:
        """Where the edge listens for plain HTTP (the harness always asks for it)."""
        address = self.server.addresses.http
        assert address is not None
        return address

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    async def get(
        self, path: str, *, host: str = HOST, **kwargs: Any
    ) -> tuple[int, dict[str, str], bytes]:
        return await self.request("GET", path, host=host, **kwargs)

    async def request(
        self, method: str, path: str, *, host: str = HOST, **kwargs: Any
    ) -> tuple[int, dict[str, str], bytes]:
        headers = dict(kwargs.pop("headers", {}) or {})
        headers["Host"] = host
        # encoded=True: send the path exactly as written (yarl would resolve dot segments).
        url = URL(self.url + path, encoded=True)
        async with self.client.request(method, url, headers=headers, **kwargs) as response:
            return response.status, dict(response.headers), await response.read()

    async def serve(
        self,
        *,
        route_id: str = "root",
        path: str = "/",
        path_type: str = "Prefix",
        modules: Modules | None = None,
        backend: BackendTarget | None = BACKEND,
        host: str = HOST,
    ) -> None:
        """Apply modules, then attach the backend — the order an edge actor follows."""
        await serve_route(
            self.edge,
            host=host,
            route_id=route_id,
            path=path,
            path_type=path_type,  # type: ignore[arg-type]
            modules=modules,
            backend=backend,
        )


def body_json(body: bytes) -> dict[str, object]:
    data = json.loads(body)
    assert isinstance(data, dict)
    return data


@pytest.fixture
async def harness(backend: Backend) -> AsyncIterator[EdgeHarness]:
    edge = InProcessEdge()
    upstreams = StaticUpstreams({("default", "web", 80): [backend.address]})
    server = EdgeServer(
        edge=edge, upstreams=upstreams, timeouts=ProxyTimeouts(connect=2.0, read=0.5)
    )
    await server.start(addr="127.0.0.1:0")
    client = aiohttp.ClientSession(auto_decompress=False)
    yield EdgeHarness(edge=edge, upstreams=upstreams, server=server, client=client)
    await client.close()
    await server.stop()
