"""Attacks on the running edge, over raw sockets, against backends that parse requests the way
common servers do.

A proxy's modules guard a route only if the proxy and the backend agree on which path a request
names, and only if one client cannot take what every other client needs. These fixtures run the
real :class:`~interlock.edge.server.EdgeServer` on a free port in front of real backends:

* :class:`FileBackend` — Python's ``http.server`` serving a directory (it decodes ``%2F``, drops
  a ``#fragment`` and resolves dot segments, as nginx and most static servers do);
* :class:`WerkzeugBackend` — werkzeug's WSGI server (the server under Flask and most Python
  apps: the fragment is split off the request-target);
* :class:`NodeBackend` — Node's ``http`` server resolving ``new URL(req.url, base)``, the WHATWG
  URL parser (backslashes are separators, ``%2e%2e`` is ``..``).

Each answers :data:`SECRET` for anything under ``/admin`` and something else for the rest; the
edge puts ``/admin`` behind an ipRestriction that refuses everyone, so the secret reaching a
client through the edge is a bypass.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from interlock.dataplane.proxy import ProxyTimeouts
from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import BackendTarget
from interlock.edge.server import EdgeServer
from interlock.mailbox.testing import eventually as _eventually
from interlock.model.moduleset import IpRestrictionModule, Modules
from interlock.model.service import ServicePortKey
from tests.kit.edge_routes import serve_route
from tests.kit.raw_http1 import Answer, send_raw

HOST = "app.example.com"
BACKEND = BackendTarget(ServicePortKey("default", "web", 80))
SECRET = b"TOP SECRET"
DENY_ALL = Modules(ip_restriction=IpRestrictionModule(allow=[], deny=["0.0.0.0/0", "::/0"]))


def get_request(target: str, *, host: str = HOST, extra: str = "") -> bytes:
    return (f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n").encode(
        "latin-1"
    )


class _ThreadedServer:
    """A blocking test server in a thread (the backend's own threads, not the edge's)."""

    server: Any

    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return (str(host), int(port))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=30)


class FileBackend(_ThreadedServer):
    """``http.server`` serving ``admin/secret.txt`` (the secret) and ``public.txt``."""

    def __init__(self, root: Path) -> None:
        (root / "admin").mkdir()
        (root / "admin" / "secret.txt").write_bytes(SECRET)
        (root / "public.txt").write_bytes(b"public")

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

        handler = functools.partial(Quiet, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.start_thread()


class WerkzeugBackend(_ThreadedServer):
    """werkzeug's WSGI server: the secret for ``/admin`` and below, ``public`` otherwise."""

    def __init__(self) -> None:
        from werkzeug.serving import make_server

        def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            path = environ["PATH_INFO"]
            body = SECRET if path == "/admin" or path.startswith("/admin/") else b"public"
            start_response("200 OK", [("Content-Length", str(len(body)))])
            return [body]

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.start_thread()


_NODE_SERVER = r"""
const http = require('http');
const server = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://backend.invalid').pathname;
  const secret = path === '/admin' || path.startsWith('/admin/');
  res.end(secret ? 'TOP SECRET' : 'public ' + path);
});
server.listen(0, '127.0.0.1', () => { console.log(server.address().port); });
"""


@dataclass
class NodeBackend:
    """Node's ``http`` server routing on ``new URL(req.url, base).pathname`` (WHATWG URL)."""

    process: subprocess.Popen[str]
    port: int

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


@dataclass
class Edge:
    """The edge under attack: ``/`` open, ``/admin`` refused to everyone (403)."""

    server: EdgeServer
    edge: InProcessEdge
    upstreams: StaticUpstreams
    routes: list[str] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        address = self.server.addresses.http
        assert address is not None  # the harness's server listens for plain HTTP
        return address

    async def protect_admin(self, backend: tuple[str, int]) -> None:
        self.upstreams.set(namespace="default", service="web", port=80, addresses=[backend])
        for route_id, path, modules in (("public", "/", Modules()), ("admin", "/admin", DENY_ALL)):
            await serve_route(
                self.edge, host=HOST, route_id=route_id, path=path, modules=modules, backend=BACKEND
            )


@contextlib.asynccontextmanager
async def running_edge(**server_options: Any) -> AsyncIterator[Edge]:
    edge = InProcessEdge()
    upstreams = StaticUpstreams()
    server_options.setdefault("timeouts", ProxyTimeouts(connect=5.0, read=30.0))
    server = EdgeServer(edge=edge, upstreams=upstreams, **server_options)
    await server.start(addr="127.0.0.1:0")
    try:
        yield Edge(server=server, edge=edge, upstreams=upstreams)
    finally:
        await server.stop()


@pytest.fixture
async def edge() -> AsyncIterator[Edge]:
    async with running_edge() as running:
        yield running


@pytest.fixture
def logged(edge: Edge) -> Iterator[list[dict[str, Any]]]:
    """The access log's lines ``edge`` writes (switched on), in order, as their JSON objects:
    what reaches the ``access`` logger (in the compiled build the data plane's calls to
    ``access_log.log_line`` cannot be replaced)."""
    entries: list[dict[str, Any]] = []

    def sink(message: Any) -> None:
        record = message.record
        if record["extra"].get("logger") == "access":
            entries.append(json.loads(record["message"]))

    sink_id = logger.add(sink, level="INFO")
    edge.server.traffic.access_log = True
    try:
        yield entries
    finally:
        logger.remove(sink_id)


@pytest.fixture
def file_backend(tmp_path: Path) -> Iterator[FileBackend]:
    backend = FileBackend(tmp_path)
    yield backend
    backend.stop()


@pytest.fixture
def werkzeug_backend() -> Iterator[WerkzeugBackend]:
    backend = WerkzeugBackend()
    yield backend
    backend.stop()


@pytest.fixture
def node_backend() -> Iterator[NodeBackend]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    process = subprocess.Popen(
        [node, "-e", _NODE_SERVER], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield NodeBackend(process=process, port=port)
    finally:
        process.terminate()
        process.wait(timeout=30)


def json_body(answer: Answer) -> Any:
    return json.loads(answer.body)


async def wait_until(condition: Any, *, deadline: float = 60.0, what: str = "") -> None:
    """Poll ``condition()`` until it is true; fail after a generous ``deadline``."""
    await _eventually(condition, within=deadline, message=what or "condition", interval=0.05)


@dataclass
class CountingBackend:
    """An aiohttp backend that counts requests in progress and those cancelled by a closed
    connection: ``/hang`` never answers, ``/upload`` reads the whole body, others answer the
    backend's name."""

    name: str
    active: int = 0
    peak: int = 0
    cancelled: int = 0
    finished: int = 0
    runner: Any = None
    port: int = 0

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if request.path == "/hang":
                await asyncio.Event().wait()
            if request.path == "/upload":
                body = await request.read()
                return web.Response(text=f"{len(body)}")
            return web.Response(text=self.name)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
            self.finished += 1

    async def start(self) -> None:
        from aiohttp import web

        server = web.Server(self.handle, handler_cancellation=True, access_log=None)
        self.runner = web.ServerRunner(server, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.port = int(self.runner.addresses[0][1])

    async def stop(self) -> None:
        await self.runner.cleanup()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


@pytest.fixture
async def counting_backends() -> AsyncIterator[tuple[CountingBackend, CountingBackend]]:
    first, second = CountingBackend("backend-a"), CountingBackend("backend-b")
    await first.start()
    await second.start()
    yield first, second
    await first.stop()
    await second.stop()


async def serve_host(edge: Edge, *, host: str, service: str, address: tuple[str, int]) -> None:
    """One open route ``/`` on ``host`` to its own Service at ``address``."""
    edge.upstreams.set(namespace="default", service=service, port=80, addresses=[address])
    backend = BackendTarget(ServicePortKey("default", service, 80))
    await serve_route(edge.edge, host=host, backend=backend)


class BodyBackend(_ThreadedServer):
    """``http.server`` answering, for any request, the length and SHA-256 of the body bytes it
    received (Content-Length or chunked), and the Content-Encoding it was told, as JSON. It
    never decodes a body, so what it reports is what the edge sent."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    parts = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()
                    body = b"".join(parts)
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                answer = json.dumps(
                    {
                        "size": len(body),
                        "sha256": hashlib.sha256(body).hexdigest(),
                        "encoding": self.headers.get("Content-Encoding"),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.start_thread()


@pytest.fixture
def body_backend() -> Iterator[BodyBackend]:
    backend = BodyBackend()
    yield backend
    backend.stop()


async def _echo_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")[1:]
    headers: dict[str, list[str]] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), []).append(value.strip())
    body = json.dumps(headers).encode()
    writer.write(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    await writer.drain()
    writer.close()


@pytest.fixture
async def header_backend() -> AsyncIterator[tuple[str, int]]:
    server = await asyncio.start_server(_echo_headers, "127.0.0.1", 0)
    yield ("127.0.0.1", server.sockets[0].getsockname()[1])
    server.close()


async def headers_seen(edge: Edge, extra: str) -> dict[str, list[str]]:
    answer = await send_raw(edge.address, get_request("/", extra=extra))
    assert answer.status == 200, answer.raw[:300]
    seen: dict[str, list[str]] = json.loads(answer.body)
    return seen
