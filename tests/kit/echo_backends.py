"""The one echo backend of the data-plane tests (``tests/dataplane``, the edge's and the mesh
listener's end-to-end tests), the slice that points a Service at it, and the answer a data
plane relays from it.

An echo backend (:class:`Echo`) answers every request with what reached it (``X-Echo`` and
``X-Backend`` name the backend), so a test sees what the edge or the mesh listener forwarded;
its endpoint is a local server (``ENDPOINT_HOST``) that an EndpointSlice names as a pod's would
be. What a request can ask of it:

* any path: ``200`` (or the backend's ``status``) and the JSON report of :func:`request_report`
  (plus ``name``), headers ``X-Echo``, ``X-Backend`` (its name) and ``X-Drop: me``;
* ``?status=N``: answers N; ``?fail_first=N``: the first N requests with this query answer 503;
* ``?read`` (or a backend made with ``read_body``): the whole body first, its length and text in
  the report (``bodyLength``, ``body``);
* a path under ``/stall``, or ``?stall=1``: no answer until the test ends (``stalled`` is set);
* ``?trickle=1``: 200 with 10 of 1000 bytes, then nothing until the test ends.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.kit.lanes import ENDPOINT_HOST


def request_report(backend: str, request: web.Request, *, every_value: bool) -> dict[str, Any]:
    """What an echo backend answers: its name and the request's method, raw path, query and
    headers by lower-cased name (with ``every_value``, a list of each header's values)."""
    headers: dict[str, Any] = (
        {k.lower(): request.headers.getall(k) for k in request.headers}
        if every_value
        else {k.lower(): v for k, v in request.headers.items()}
    )
    return {
        "backend": backend,
        "method": request.method,
        "path": request.raw_path.partition("?")[0],
        "query": request.query_string,
        "headers": headers,
    }


def local_slice(
    service: str, ports: dict[str, int], *, name: str, namespace: str = "default"
) -> dict[str, Any]:
    """An EndpointSlice of ``service`` with one ready endpoint on this machine
    (``ENDPOINT_HOST``), serving each named Service port at the local port given."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ENDPOINT_HOST], "conditions": {"ready": True}}],
        "ports": [
            {"name": port_name, "port": port, "protocol": "TCP"}
            for port_name, port in ports.items()
        ],
    }


@dataclass(frozen=True)
class EchoReply:
    """An answer from a data plane (the edge or the mesh listener) in front of echo backends."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def echo(self) -> dict[str, Any]:
        """The backend's report (fails when the data plane answered itself)."""
        assert "X-Echo" in self.headers, (self.status, self.headers, self.body[:300])
        report: dict[str, Any] = json.loads(self.body)
        return report


class LocalBackend:
    """A local HTTP server standing in for a pod (on ``ENDPOINT_HOST``, which an EndpointSlice
    names): every request goes to :meth:`handle`; ``port`` is known once started."""

    port: int
    runner: web.AppRunner | None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self.runner.setup()
        await web.TCPSite(self.runner, ENDPOINT_HOST, 0).start()
        self.port = int(self.runner.addresses[0][1])

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@dataclass
class Echo(LocalBackend):
    """An HTTP server on this machine that reports what reached it (see the module docstring)."""

    name: str
    every_value: bool = True
    """Each header in the report as the list of its values (else as its first value)."""
    read_body: bool = False
    """Read every request's body (else only with ``?read``)."""
    status: int = 200
    port: int = 0
    received: list[dict[str, Any]] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)
    """Requests by raw query string (``?fail_first=N`` counts per query)."""
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    runner: web.AppRunner | None = None

    @property
    def address(self) -> tuple[str, int]:
        return (ENDPOINT_HOST, self.port)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        report = request_report(self.name, request, every_value=self.every_value)
        report["name"] = self.name
        query = report["query"] = request.raw_path.partition("?")[2]
        if self.read_body or "read" in request.query:
            data = await request.read()
            report["bodyLength"], report["body"] = len(data), data.decode(errors="replace")
        self.received.append(report)
        self.seen[query] += 1
        headers = {"X-Echo": self.name, "X-Backend": self.name, "X-Drop": "me"}
        if request.path.startswith("/stall") or request.query.get("stall"):
            self.stalled.set()
            await self.release.wait()
        if request.query.get("trickle"):
            response = web.StreamResponse(headers=headers)
            response.content_length = 1000
            await response.prepare(request)
            await response.write(b"x" * 10)
            self.stalled.set()
            await self.release.wait()
            return response
        status = int(request.query.get("status", str(self.status)))
        if self.seen[query] <= int(request.query.get("fail_first", "0")):
            status = 503
        return web.json_response(report, status=status, headers=headers)

    async def stop(self) -> None:
        self.release.set()
        await super().stop()
