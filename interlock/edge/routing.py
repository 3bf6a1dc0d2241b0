"""Choosing an edge by ``Host`` and a route by path — pure functions, no I/O.

Ingress path semantics are easy to get subtly wrong (``/foo`` must match ``/foo/bar`` but never
``/foobar``; an Exact path beats any Prefix), and a wrong match sends a request past the modules
of the route it belonged to. Keeping the rules here, free of aiohttp, lets them be tested alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar
from urllib.parse import unquote

from interlock.edge.provider import PathType


def normalize_host(value: str) -> str:
    """The edge key of a ``Host`` header or an Ingress host: lower case, no port, no final dot.

    ``Example.COM:8080`` → ``example.com``; ``[::1]:80`` → ``[::1]``.
    """
    host = value.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end != -1:
            return host[: end + 1]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def clean_path(raw_path: str) -> tuple[str, str]:
    """``(path to route on, path to forward)`` for a raw request path (no query string).

    Dot segments are removed (RFC 3986 §5.2.4, percent-encoded dots included) before routing and
    from what is forwarded: otherwise ``/public/../admin`` would be matched as ``/public`` here and
    served as ``/admin`` by the upstream, past the modules of the ``/admin`` route. Repeated
    slashes are merged (as nginx does), so ``//host/x`` never reads as a host. The routing
    path is percent-decoded (``%2F`` included), which can only make a match more specific.
    Raises ValueError for a path that is not absolute or that still has a dot segment once
    decoded (the server answers 400).
    """
    if not raw_path.startswith("/"):
        raise ValueError(f"request path {raw_path[:100]!r} must start with '/'")
    if "%" not in raw_path and "/." not in raw_path and "//" not in raw_path:
        return raw_path, raw_path  # the common case: nothing to decode or remove
    parts = raw_path.split("/")[1:]
    kept: list[str] = []
    for index, segment in enumerate(parts):
        decoded = unquote(segment)
        if segment == "" and index < len(parts) - 1:
            continue
        if decoded in (".", ".."):
            if decoded == ".." and kept:
                kept.pop()
            if index == len(parts) - 1:
                kept.append("")
            continue
        kept.append(segment)
    forward = "/" + "/".join(kept)
    routed = unquote(forward)
    if any(segment in (".", "..") for segment in routed.split("/")):
        # Only an encoded slash can bring a dot segment back (``%2e%2e%2Fadmin``): an upstream
        # that decodes it before resolving dots would climb out of the route.
        raise ValueError(f"request path {raw_path[:100]!r} hides a dot segment")
    return routed, forward


def prefix_key(path: str) -> str:
    """A Prefix path without trailing slashes: ``/foo/`` and ``/foo`` are the same prefix."""
    return path.rstrip("/")


def path_matches(*, path_type: PathType, route_path: str, request_path: str) -> bool:
    """Exact: the same path. Prefix: the same path, or a path below it by whole segments."""
    if path_type == "Exact":
        return request_path == route_path
    prefix = prefix_key(route_path)
    return prefix == "" or request_path == prefix or request_path.startswith(prefix + "/")


class RoutePath(Protocol):
    @property
    def route_id(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def path_type(self) -> PathType: ...


R = TypeVar("R", bound=RoutePath)


def select_route(routes: Iterable[R], request_path: str) -> R | None:
    """The route serving ``request_path``: an Exact match first, else the longest Prefix.

    Ties (two routes with the same path) go to the smallest ``route_id``, so the winner does not
    depend on the order routes were applied in.
    """
    best: R | None = None
    best_rank: tuple[int, int, str] | None = None
    for route in routes:
        if not path_matches(
            path_type=route.path_type, route_path=route.path, request_path=request_path
        ):
            continue
        exact = 1 if route.path_type == "Exact" else 0
        length = len(prefix_key(route.path))
        rank = (exact, length, route.route_id)
        if best_rank is None or _better(rank, best_rank):
            best, best_rank = route, rank
    return best


def _better(rank: tuple[int, int, str], than: tuple[int, int, str]) -> bool:
    """Exact beats Prefix, then longer beats shorter, then the smaller route id wins."""
    if rank[:2] != than[:2]:
        return rank[:2] > than[:2]
    return rank[2] < than[2]
