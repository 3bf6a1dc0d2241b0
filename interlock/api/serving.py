"""Start an aiohttp application on a ``HOST:PORT`` address and learn the port it really got.

The policy API, the admin server (and later the edge) all listen on addresses where port 0
means "any free port"; tests and the CLI then need the bound address. One helper keeps that
and the shutdown order the same everywhere.

An application may put a protocol of its own in front of aiohttp's (``app[FRONT]``): it reads
each connection's first bytes and either serves the connection itself or hands it to aiohttp.
The policy API does, to serve its long-lived watch streams with less memory
(``interlock/api/policy_stream.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from interlock.config import Address

Front = Callable[[Callable[[], asyncio.Protocol]], asyncio.Protocol]
"""Given aiohttp's protocol factory, a protocol for one new connection."""
FRONT: web.AppKey[Front] = web.AppKey("front", Front)  # type: ignore[arg-type]


class RunningSite:
    """An application being served; :attr:`address` is the bound address (never port 0)."""

    def __init__(
        self,
        *,
        runner: web.AppRunner,
        address: Address,
        server: asyncio.AbstractServer | None = None,
    ) -> None:
        self.runner = runner
        self.address = address
        self._server = server

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.address.host in ("0.0.0.0", "") else self.address.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.address.port}"

    async def stop(self) -> None:
        """Stop accepting, cancel open handlers (watch streams end), release the port."""
        if self._server is not None:
            self._server.close()
        await self.runner.cleanup()


SERVER = "interlock"
"""The ``Server`` header of the policy API and the admin server: aiohttp's default
(``Python/3.x aiohttp/3.y``) tells a scanner which versions to look up."""


async def _without_banner(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER


async def serve(
    app: web.Application, address: Address, *, shutdown_timeout: float = 5.0
) -> RunningSite:
    """Serve ``app`` on ``address``; handlers are cancelled when their client disconnects.

    Handler cancellation matters for long-lived watch streams: without it, a client that went
    away is only noticed at the next write, and its subscription would linger until then.
    Responses say ``Server: interlock``, never aiohttp's version banner.
    """
    app.on_response_prepare.append(_without_banner)
    runner = web.AppRunner(
        app, handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout
    )
    await runner.setup()
    front = app.get(FRONT)
    if front is not None:
        return await _serve_with_front(runner, front, address)
    site = web.TCPSite(runner, address.host, address.port, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    # The first listening socket's address: the real port when ``address.port`` is 0.
    port = int(runner.addresses[0][1]) if runner.addresses else address.port
    return RunningSite(runner=runner, address=Address(host=address.host, port=port))


async def _serve_with_front(runner: web.AppRunner, front: Front, address: Address) -> RunningSite:
    handlers = runner.server
    assert handlers is not None
    try:
        server = await asyncio.get_running_loop().create_server(
            lambda: front(handlers), address.host, address.port, reuse_address=True
        )
    except BaseException:
        await runner.cleanup()
        raise
    port = int(server.sockets[0].getsockname()[1]) if server.sockets else address.port
    return RunningSite(runner=runner, address=Address(host=address.host, port=port), server=server)
