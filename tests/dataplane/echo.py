"""An echo backend for data-plane tests: it reports what it received, stalls or fails on ask.

* any path: 200 and JSON ``{"method", "path", "query", "headers": {name: [values]}, "name"}``
  (``path`` and ``query`` as received, still percent-encoded), plus ``X-Backend: <name>``;
* ``?status=N``: answers N instead (with the same JSON);
* ``?fail_first=N``: the first N requests with this query answer 503, later ones 200;
* ``?stall=1``: never answers until the test ends (a timeout test waits for ``stalled``);
* ``?trickle=1``: answers 200 with 10 of its 1000 bytes, then nothing until the test ends.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from aiohttp import web


class Echo:
    def __init__(self, name: str = "echo") -> None:
        self.name = name
        self.received: list[dict[str, Any]] = []
        self.seen: Counter[str] = Counter()
        self.stalled = asyncio.Event()
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        report: dict[str, Any] = {
            "name": self.name,
            "method": request.method,
            "path": path,
            "query": query,
            "headers": {k: request.headers.getall(k) for k in request.headers},
            "body": (await request.read()).decode(errors="replace"),
        }
        self.received.append(report)
        self.seen[query] += 1
        if request.query.get("stall"):
            self.stalled.set()
            await self._release.wait()
        if request.query.get("trickle"):
            # Headers and a first chunk, then nothing until the test ends.
            response = web.StreamResponse(headers={"X-Backend": self.name})
            response.content_length = 1000
            await response.prepare(request)
            await response.write(b"x" * 10)
            self.stalled.set()
            await self._release.wait()
            return response
        status = int(request.query.get("status", "200"))
        fail_first = int(request.query.get("fail_first", "0"))
        if self.seen[query] <= fail_first:
            status = 503
        return web.json_response(report, status=status, headers={"X-Backend": self.name})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()
