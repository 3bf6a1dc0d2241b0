"""Choosing a route by path — pure functions, no I/O.

Ingress path semantics are easy to get subtly wrong (``/foo`` must match ``/foo/bar`` but never
``/foobar``; an Exact path beats any Prefix), and a wrong match sends a request past the modules
of the route it belonged to. Keeping the rules here, free of aiohttp, lets them be tested alone.
The path matched is the one :func:`interlock.dataplane.request_target.clean_path` made of the
request-target, as the host is :func:`~interlock.dataplane.request_target.normalize_host`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from interlock.edge.provider import PathType


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
        # path_matches and prefix_key, inlined: this runs for every request and every route of
        # its host (one call each cost more than the rest of the loop).
        route_path = route.path
        prefix = route_path.rstrip("/")
        if route.path_type == "Exact":
            if request_path != route_path:
                continue
            exact = 1
        elif prefix and request_path != prefix and not request_path.startswith(prefix + "/"):
            continue
        else:
            exact = 0
        rank = (exact, len(prefix), route.route_id)
        if best_rank is None or _better(rank, best_rank):
            best, best_rank = route, rank
    return best


def _better(rank: tuple[int, int, str], than: tuple[int, int, str]) -> bool:
    """Exact beats Prefix, then longer beats shorter, then the smaller route id wins."""
    if rank[:2] != than[:2]:
        return rank[:2] > than[:2]
    return rank[2] < than[2]
