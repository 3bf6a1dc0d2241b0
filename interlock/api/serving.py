"""Serve HTTP routes on a ``HOST:PORT`` address and learn the port it really got.

The policy API, the admin server (and the demo's echo backends) all listen on addresses where
port 0 means "any free port"; tests and the CLI then need the bound address. One helper keeps
that and the shutdown order the same everywhere.

The controller's servers are :class:`~interlock.api.routes.Routes` on interlock's own HTTP/1.1
server (:mod:`interlock.api.http_server`), so that ``interlock run`` imports none of
``aiohttp.web``'s modules (issue 29 item 5); an ``aiohttp.web.Application`` (the demo's echo
backends) is served through aiohttp's runner, imported only then. Routes may put a protocol of
their own in front of the server's (``Routes.front``): it reads each connection's first bytes
and either serves the connection itself or hands it to the server. The policy API does, to serve
its long-lived watch streams with less memory (``interlock/api/policy_stream.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from interlock.api.http_server import HEAD_TIMEOUT, HttpServer
from interlock.api.routes import SERVER, Routes
from interlock.config import Address

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["SERVER", "RunningSite", "serve"]

_BACKLOG = 128
"""Connections waiting to be accepted (aiohttp's ``TCPSite`` default)."""


class RunningSite:
    """Routes being served; :attr:`address` is the bound address (never port 0)."""

    def __init__(self, *, address: Address, stop: Callable[[], Awaitable[None]]) -> None:
        self.address = address
        self._stop = stop

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.address.host in ("0.0.0.0", "") else self.address.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.address.port}"

    async def stop(self) -> None:
        """Stop accepting, cancel open handlers (watch streams end), release the port."""
        await self._stop()


async def serve(
    app: Routes | web.Application,
    address: Address,
    *,
    shutdown_timeout: float = 5.0,
    head_timeout: float = HEAD_TIMEOUT,
) -> RunningSite:
    """Serve ``app`` on ``address``; handlers are cancelled when their client disconnects.

    ``head_timeout``: seconds a connection of :class:`Routes` may take to send a whole request
    head, after it opened or after its last answer (``web.Application``: aiohttp's 75).

    Handler cancellation matters for long-lived watch streams: without it, a client that went
    away is only noticed at the next write, and its subscription would linger until then.
    Responses say ``Server: interlock``, never aiohttp's version banner.
    """
    if isinstance(app, Routes):
        return await _serve_routes(
            app, address, shutdown_timeout=shutdown_timeout, head_timeout=head_timeout
        )
    return await _serve_application(app, address, shutdown_timeout=shutdown_timeout)


async def _serve_routes(
    routes: Routes, address: Address, *, shutdown_timeout: float, head_timeout: float
) -> RunningSite:
    loop = asyncio.get_running_loop()
    # As aiohttp.web's application did: in asyncio's debug mode a handler's unexpected error
    # is answered 500 with its traceback (else only the status's description).
    handlers = HttpServer(routes.handle, debug=loop.get_debug(), head_timeout=head_timeout)
    front = routes.front
    factory: Callable[[], asyncio.Protocol] = handlers if front is None else lambda: front(handlers)
    server = await loop.create_server(
        factory, address.host, address.port, reuse_address=True, backlog=_BACKLOG
    )

    async def stop() -> None:
        # aiohttp's runner's order: stop accepting, let requests already read start, close
        # idle connections, the shutdown callbacks, then wait for the running handlers (and
        # cancel those still running after shutdown_timeout).
        server.close()
        await asyncio.sleep(0)
        handlers.pre_shutdown()
        for callback in routes.on_shutdown:
            await callback()
        await handlers.shutdown(shutdown_timeout)

    # The first listening socket's address: the real port when ``address.port`` is 0.
    port = int(server.sockets[0].getsockname()[1]) if server.sockets else address.port
    return RunningSite(address=Address(host=address.host, port=port), stop=stop)


async def _serve_application(
    app: web.Application, address: Address, *, shutdown_timeout: float
) -> RunningSite:
    from aiohttp import web

    async def without_banner(_request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = SERVER

    app.on_response_prepare.append(without_banner)
    runner = web.AppRunner(
        app, handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout
    )
    await runner.setup()
    site = web.TCPSite(runner, address.host, address.port, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    port = int(runner.addresses[0][1]) if runner.addresses else address.port
    return RunningSite(address=Address(host=address.host, port=port), stop=runner.cleanup)
