"""The controller's HTTP routes, answered as ``aiohttp.web``'s application answered them.

The policy API and the admin server answer a handful of ``GET`` paths, served by interlock's
own HTTP/1.1 server (:mod:`interlock.api.http_server`: no ``aiohttp.web``, not even its
low-level server, issue 29 item 5). :class:`Routes` is the part of aiohttp's ``Application``
these servers use, answering as it does:

- a path is matched as aiohttp's dispatcher matches it: on the request's decoded path with
  ``%2F`` and ``%25`` kept (``rel_url.path_safe``), an exact path or a template whose
  ``{name}`` segments match ``[^{}/]+`` and are handed over with ``%2F``/``%25`` decoded;
- ``add_get`` serves ``GET`` and ``HEAD`` (the body left out); another method on a known path
  is ``405 Method Not Allowed`` with ``Allow: GET,HEAD``, an unknown path ``404 Not Found``,
  with aiohttp's bodies (raised as a handler raises them);
- an ``Expect`` header is answered first (``100 Continue``, or 417 for anything else), then the
  ``guard`` (the ``Host`` check, :mod:`interlock.api.hosts`) runs around every handler, the
  404 and 405 included, as an application's middleware does;
- every answer says ``Server: interlock``, never aiohttp's version banner.

Served by :func:`interlock.api.serving.serve`; the edge's admin API and the embedded API server
keep ``aiohttp.web`` (a controller that does not run them does not import it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType

from interlock.api.http_server import (
    SERVER,
    HTTPExpectationFailed,
    HTTPMethodNotAllowed,
    HTTPNotFound,
    Request,
    StreamResponse,
)

__all__ = ["SERVER", "Front", "Guard", "Handler", "Request", "Routes"]

_NO_PARAMETERS: Mapping[str, str] = MappingProxyType({})
_GET = frozenset({"GET", "HEAD"})
"""What ``add_get`` serves (aiohttp's ``add_get`` adds ``HEAD`` too)."""


Handler = Callable[[Request], Awaitable[StreamResponse]]
"""Answers one request."""
Guard = Callable[[Request, Handler], Awaitable[StreamResponse]]
"""Runs around every handler (a middleware): answers itself or awaits the handler."""
Front = Callable[[Callable[[], asyncio.Protocol]], asyncio.Protocol]
"""Given the server's protocol factory, a protocol for one new connection."""


def _unquote_path_safe(value: str) -> str:
    # aiohttp's web_urldispatcher._unquote_path_safe: what path_safe kept encoded.
    if "%" not in value:
        return value
    return value.replace("%2F", "/").replace("%25", "%")


class _Template:
    """A path whose ``{name}`` segments are parameters; the others must be equal."""

    __slots__ = ("handler", "segments")

    def __init__(self, path: str, handler: Handler) -> None:
        self.segments = tuple(
            (part[1:-1], True) if part.startswith("{") else (part, False)
            for part in path.split("/")
        )
        self.handler = handler

    def match(self, segments: list[str]) -> dict[str, str] | None:
        if len(segments) != len(self.segments):
            return None
        found: dict[str, str] = {}
        for segment, (text, parameter) in zip(segments, self.segments, strict=True):
            if not parameter:
                if segment != text:
                    return None
            elif not segment or "{" in segment or "}" in segment:
                return None  # aiohttp's parameter pattern: [^{}/]+
            else:
                found[text] = _unquote_path_safe(segment)
        return found


class Routes:
    """``GET`` routes by exact path or ``{name}`` template, a guard around each, and what a
    server of them does at its start (``front``) and shutdown (``on_shutdown``)."""

    def __init__(self, *, guard: Guard | None = None) -> None:
        self._guard = guard
        self._exact: dict[str, Handler] = {}
        self._templates: list[_Template] = []
        self._paths: set[str] = set()
        self.front: Front | None = None
        """A protocol that reads each connection first and may hand it to the server's
        (:mod:`interlock.api.policy_stream`)."""
        self.on_shutdown: list[Callable[[], Awaitable[None]]] = []
        """Awaited when the server stops, after it stopped accepting and closed idle
        connections, before it waits for the handlers still running."""

    def add_get(self, path: str, handler: Handler) -> None:
        """Serve ``GET`` and ``HEAD`` of ``path``: exact, or with whole ``{name}`` segments."""
        if not path.startswith("/"):
            raise ValueError(f"a route's path starts with '/': {path!r}")
        if path in self._paths:
            raise ValueError(f"{path!r} is routed already")
        for part in path.split("/"):
            if ("{" in part or "}" in part) and not (
                part.startswith("{") and part.endswith("}") and part[1:-1].isidentifier()
            ):
                raise ValueError(f"a parameter is a whole segment {{name}}: {path!r}")
        self._paths.add(path)
        if "{" in path:
            self._templates.append(_Template(path, handler))
        else:
            self._exact[path] = handler

    def resolve(self, path: str) -> tuple[Handler, Mapping[str, str]] | None:
        """The handler of ``path`` (a request's ``rel_url.path_safe``) and its parameters."""
        handler = self._exact.get(path)
        if handler is not None:
            return handler, _NO_PARAMETERS
        segments = path.split("/")
        for template in self._templates:
            found = template.match(segments)
            if found is not None:
                return template.handler, found
        return None

    async def handle(self, request: Request) -> StreamResponse:
        """The server's handler: route, answer ``Expect``, guard, handle."""
        resolved = self.resolve(request.rel_url.path_safe)
        handler: Handler
        if resolved is None:
            handler = _not_found
        elif request.method not in _GET:
            handler = _not_allowed
        else:
            handler, request.match_info = resolved
        if request.headers.get("Expect"):
            await _expect(request)
        if self._guard is not None:
            return await self._guard(request, handler)
        return await handler(request)


async def _not_found(_request: Request) -> StreamResponse:
    raise HTTPNotFound()


async def _not_allowed(request: Request) -> StreamResponse:
    raise HTTPMethodNotAllowed(request.method, _GET)


async def _expect(request: Request) -> None:
    # aiohttp's web_urldispatcher._default_expect_handler.
    expect = request.headers.get("Expect", "")
    if request.version == (1, 1):
        if expect.lower() == "100-continue":
            await request.send_continue()
        else:
            raise HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
