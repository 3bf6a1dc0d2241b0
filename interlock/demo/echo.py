"""Echo backends for the demo: tiny HTTP servers that answer with who they are and what they got.

The demo's traffic split (80/20 between ``echo-v1`` and ``echo-v2``) and its modules (a header
added, credentials checked) are only visible if the backend shows them, so each server answers
every request with its name, the method, the path and the request headers as JSON.
``Authorization`` is never echoed: the demo's curl line sends a password through it.
"""

from __future__ import annotations

from aiohttp import web

from interlock.api.serving import RunningSite, serve
from interlock.config import Address

_HIDDEN_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


class EchoServer:
    """An aiohttp server on ``host`` (port 0 picks a free one) answering as ``name``."""

    def __init__(self, *, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.name = name
        self.host = host
        self.port = port
        self._site: RunningSite | None = None

    async def start(self) -> None:
        """Listen; afterwards :attr:`port` is the bound port."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._echo)
        self._site = await serve(app, Address(self.host, self.port), shutdown_timeout=1.0)
        self.port = self._site.address.port

    async def stop(self) -> None:
        site, self._site = self._site, None
        if site is not None:
            await site.stop()

    async def _echo(self, request: web.Request) -> web.Response:
        headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower() not in _HIDDEN_HEADERS
        }
        return web.json_response(
            {
                "backend": self.name,
                "method": request.method,
                "path": request.path_qs,
                "headers": headers,
            }
        )
