"""A route as requests see it (:class:`ServedRoute`) and choosing one by path — pure, no I/O.

Ingress path semantics are easy to get subtly wrong (``/foo`` must match ``/foo/bar`` but never
``/foobar``; an Exact path beats any Prefix), and a wrong match sends a request past the modules
of the route it belonged to. Keeping the rules here, free of aiohttp, lets them be tested alone.
The path matched is the one :func:`interlock.dataplane.request_target.clean_path` made of the
request-target, as the host is :func:`~interlock.dataplane.request_target.normalize_host`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from interlock.edge.modules import ModuleChain
from interlock.edge.provider import BackendTarget, PathType
from interlock.model.moduleset import Modules, SecretValue


@dataclass(frozen=True, slots=True, eq=False)
class ServedRoute:
    """A route exactly as requests see it (``inprocess.py``). Replaced whole, never changed in
    place. Here, in a compiled module (setup.py), and not in ``inprocess.py``, which is not: the
    edge's steps read its attributes on every request, a C field each here, a look-up in a
    Python object's slots there."""

    route_id: str
    path: str
    path_type: PathType
    chain: ModuleChain | None
    """None for a reservation: modules never applied, no backend, 503."""
    backend: BackendTarget | None
    # Kept to recognise a re-apply of the same configuration, which must not reset the
    # rate-limit and circuit-breaker counters held by the chain.
    modules: Modules | None
    secrets: Mapping[tuple[str, str], SecretValue]


def prefix_key(path: str) -> str:
    """A Prefix path without trailing slashes: ``/foo/`` and ``/foo`` are the same prefix."""
    return path.rstrip("/")


def path_matches(*, path_type: PathType, route_path: str, request_path: str) -> bool:
    """Exact: the same path. Prefix: the same path, or a path below it by whole segments."""
    if path_type == "Exact":
        return request_path == route_path
    prefix = prefix_key(route_path)
    return prefix == "" or request_path == prefix or request_path.startswith(prefix + "/")


_EXACT: Final = 1 << 40
"""What an Exact match adds to a route's rank (:func:`_rank`): more than any path's length."""


def _rank(route: ServedRoute, request_path: str) -> int:
    """How well ``route`` serves ``request_path``: -1 when it does not; else its path's length
    without trailing slashes, plus :data:`_EXACT` for an Exact match (Exact beats Prefix, then
    longer beats shorter). :func:`path_matches` and :func:`prefix_key`, inlined: this runs for
    every request and every route of its host; rstrip (a call) only for a path that ends with a
    slash (a slice: endswith parses its arguments into a tuple when interpreted)."""
    route_path = route.path
    prefix = route_path.rstrip("/") if route_path[-1:] == "/" else route_path
    if route.path_type == "Exact":
        return _EXACT + len(prefix) if request_path == route_path else -1
    if prefix and request_path != prefix and not request_path.startswith(prefix + "/"):
        return -1
    return len(prefix)


def select_route(routes: dict[str, ServedRoute], request_path: str) -> ServedRoute | None:
    """The route serving ``request_path`` among a host's table of routes (by route id): an Exact
    match first, else the longest Prefix.

    Ties (two routes with the same path) go to the smallest ``route_id``, so the winner does not
    depend on the order routes were applied in. A dict, not any mapping: compiled, its values
    are iterated as a dict's (a generic iteration over a values view was ~600 instructions a
    request); the edges build their tables as dicts when their routes change
    (``InProcessEdge.routes_of_host``, ``GatewayPortEdge.update``).
    """
    best: ServedRoute | None = None
    best_rank = -1
    for route in routes.values():
        rank = _rank(route, request_path)
        if rank > best_rank or (
            rank == best_rank and best is not None and route.route_id < best.route_id
        ):
            best, best_rank = route, rank
    return best
