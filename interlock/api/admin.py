"""The admin server: liveness, readiness and debug views of a running controller.

Kept apart from the policy API so that probes and operators never compete with policy
clients, and so that more endpoints (``/metrics``, ``/debug/edges``) can be added by whoever
owns that data: :meth:`AdminApp.add_debug` mounts any JSON-able view under ``/debug/``, and
:attr:`AdminApp.app` is a plain aiohttp application for anything else (before it is served).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web


def _json_default(value: object) -> object:
    # Statistics objects are dataclasses or expose ``_asdict``/``__dict__``; show what they hold.
    for attr in ("_asdict", "model_dump"):
        method = getattr(value, attr, None)
        if callable(method):
            return method()
    if hasattr(value, "__dataclass_fields__"):
        return {name: getattr(value, name) for name in value.__dataclass_fields__}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def json_body(data: object) -> web.Response:
    """A JSON response for debug data of any common shape (dataclasses, sets, models)."""
    text = json.dumps(data, default=_json_default, indent=2, sort_keys=True)
    return web.Response(text=text, content_type="application/json")


class AdminApp:
    """``/healthz`` (the process serves HTTP), ``/readyz`` (initial sync done) and ``/debug/*``."""

    def __init__(self, *, is_ready: Callable[[], bool]) -> None:
        self._is_ready = is_ready
        self._debug: dict[str, Callable[[Mapping[str, str]], Any]] = {}
        self.app = web.Application()
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/debug/", self._debug_index)
        self.app.router.add_get("/debug/{name}", self._debug_view)

    def add_debug(self, name: str, view: Callable[[], Any]) -> None:
        """Serve ``view()`` as JSON at ``/debug/{name}``; it must never include Secret data."""
        self._debug[name] = lambda _query: view()

    def add_debug_query(self, name: str, view: Callable[[Mapping[str, str]], Any]) -> None:
        """Serve ``view(query)`` as JSON at ``/debug/{name}``, given the URL's query string."""
        self._debug[name] = view

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        if self._is_ready():
            return web.Response(text="ok\n")
        return web.Response(text="initial sync not finished\n", status=503)

    async def _debug_index(self, _request: web.Request) -> web.Response:
        return json_body(sorted(f"/debug/{name}" for name in self._debug))

    async def _debug_view(self, request: web.Request) -> web.Response:
        view = self._debug.get(request.match_info["name"])
        if view is None:
            raise web.HTTPNotFound(text=f"no debug view {request.match_info['name']!r}\n")
        return json_body(view(request.query))
