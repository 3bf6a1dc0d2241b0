"""What the mesh listener's end-to-end tests share: echo backends standing in for pods, the
Services and EndpointSlices that point at them, and a client of the mesh listener that calls a
Service either by ``Host`` header or as an ``HTTP_PROXY`` client (absolute-form target).

Each echo backend answers 200 with a JSON report of what it received (its own name, method,
path, query, headers), so a test checks on the wire what the policy made of the request.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from interlock.config import MeshConfig
from interlock.controller.app import Controller
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.echo_backends import Echo, EchoReply, local_slice
from tests.kit.lanes import ENDPOINT_HOST

GATEWAY = "gateway.networking.k8s.io"


@dataclass(frozen=True)
class Reply(EchoReply):
    @property
    def backend(self) -> str | None:
        return self.headers.get("X-Echo")


def service_obj(name: str, namespace: str, ports: tuple[int, ...]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": f"p{p}", "port": p, "protocol": "TCP"} for p in ports]},
    }


def slice_obj(name: str, namespace: str, ports: dict[int, Echo]) -> dict[str, Any]:
    # One slice per Service: each port's endpoint is a different local server.
    served = {f"p{port}": echo.port for port, echo in ports.items()}
    return local_slice(name, served, name=f"{name}-mesh", namespace=namespace)


def route_obj(
    name: str,
    *,
    namespace: str = "default",
    parent: str,
    parent_namespace: str | None = None,
    rules: list[dict[str, Any]],
    port: int | None = None,
) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": "core", "kind": "Service", "name": parent}
    if parent_namespace is not None:
        ref["namespace"] = parent_namespace
    if port is not None:
        ref["port"] = port
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"parentRefs": [ref], "rules": rules},
    }


def ref(name: str, port: int = 80, *, weight: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "port": port, "weight": weight, **extra}


Via = Literal["host", "proxy"]


@dataclass
class MeshEnv:
    cluster: Cluster
    controller: Controller
    http: aiohttp.ClientSession
    echoes: list[Echo] = field(default_factory=list)

    @property
    def url(self) -> str:
        assert self.controller.mesh is not None
        return self.controller.mesh.url

    async def serve(
        self, name: str, *, namespace: str = "default", ports: tuple[int, ...] = (80,)
    ) -> dict[int, Echo]:
        """A Service ``name`` whose every port has one ready endpoint: an echo server named
        ``name`` (``name:port`` when there are several ports)."""
        servers: dict[int, Echo] = {}
        for port in ports:
            echo = Echo(name if len(ports) == 1 else f"{name}:{port}", every_value=False)
            await echo.start()
            self.echoes.append(echo)
            servers[port] = echo
        await self.cluster.apply(service_obj(name, namespace, ports))
        await self.cluster.apply(slice_obj(name, namespace, servers))
        return servers

    async def has_status(self, route: dict[str, Any]) -> bool:
        """Whether the controller wrote ``route``'s status (a parent's conditions): it has seen
        the route."""
        stored = await self.cluster.get(route)
        return bool(stored and (stored.get("status") or {}).get("parents"))

    async def call(
        self,
        authority: str,
        path: str = "/",
        *,
        via: Via = "host",
        method: str = "GET",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """A request for ``authority`` through the mesh listener."""
        if via == "host":
            sent = {"Host": authority, **(headers or {})}
            url, proxy = self.url + path, None
        else:
            sent, url, proxy = dict(headers or {}), f"http://{authority}{path}", self.url
        async with self.http.request(
            method, url, headers=sent, proxy=proxy, allow_redirects=False
        ) as response:
            return Reply(response.status, dict(response.headers), await response.read())

    async def until(
        self,
        authority: str,
        check: Callable[[Reply], bool],
        path: str = "/",
        *,
        message: str,
        **kwargs: Any,
    ) -> Reply:
        """Call until ``check`` holds for the reply (the controller sees changes eventually)."""
        last: list[Reply] = []

        async def holds() -> bool:
            last[:] = [await self.call(authority, path, **kwargs)]
            return check(last[0])

        try:
            await eventually(holds, message=message)
        except AssertionError as error:
            seen = last[0] if last else None
            raise AssertionError(f"{message}; last reply: {seen}") from error
        return last[0]

    async def until_backend(
        self, authority: str, backend: str, path: str = "/", **kw: Any
    ) -> Reply:
        return await self.until(
            authority,
            lambda r: r.backend == backend,
            path,
            message=f"{authority}{path} → {backend}",
            **kw,
        )


@pytest.fixture
async def mesh(cluster: Cluster, start_controller: StartController) -> AsyncIterator[MeshEnv]:
    controller = await start_controller(identity="mesh-replica", mesh=MeshConfig(addr=LOCAL))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        env = MeshEnv(cluster, controller, http)
        try:
            yield env
        finally:
            for echo in env.echoes:
                await echo.stop()


@dataclass
class WsBackend:
    """A WebSocket echo server; ``/close`` closes with 4001 after the first message; any other
    path answers plain HTTP to a non-WebSocket request."""

    port: int = 0
    handshakes: list[dict[str, str]] = field(default_factory=list)
    runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return web.Response(text="plain http")
        self.handshakes.append({k.lower(): v for k, v in request.headers.items()})
        ws = web.WebSocketResponse(protocols=("chat.v2",))
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                if request.path == "/close":
                    await ws.close(code=4001, message=b"bye")
                    break
                await ws.send_str(f"echo {message.data} via {request.path}")
            elif message.type is WSMsgType.BINARY:
                await ws.send_bytes(message.data[::-1])
        return ws

    @staticmethod
    async def talk(ws: aiohttp.ClientWebSocketResponse, path: str, text: str, data: bytes) -> None:
        """Over an open connection to :meth:`handle` at ``path``: ``text`` comes back echoed
        with the path, ``data`` reversed."""
        assert ws.protocol == "chat.v2"
        await ws.send_str(text)
        assert await ws.receive_str(timeout=30) == f"echo {text} via {path}"
        await ws.send_bytes(data)
        assert await ws.receive_bytes(timeout=30) == data[::-1]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, ENDPOINT_HOST, 0).start()
        self.port = self.runner.addresses[0][1]


def ws_slice(name: str, port: int) -> dict[str, Any]:
    return local_slice(name, {"p80": port}, name=f"{name}-mesh")


@contextlib.asynccontextmanager
async def chat_backend(
    apply: Callable[[dict[str, Any]], Awaitable[object]],
) -> AsyncIterator[WsBackend]:
    """A :class:`WsBackend` behind the Service ``default/chat`` (port 80), objects written with
    ``apply``; stopped when the block ends."""
    backend = WsBackend()
    await backend.start()
    try:
        await apply(service_obj("chat", "default", (80,)))
        await apply(ws_slice("chat", backend.port))
        yield backend
    finally:
        assert backend.runner is not None
        await backend.runner.cleanup()
