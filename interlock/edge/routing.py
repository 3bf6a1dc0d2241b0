"""Choosing an edge by ``Host`` and a route by path — pure functions, no I/O.

Ingress path semantics are easy to get subtly wrong (``/foo`` must match ``/foo/bar`` but never
``/foobar``; an Exact path beats any Prefix), and a wrong match sends a request past the modules
of the route it belonged to. Keeping the rules here, free of aiohttp, lets them be tested alone.
"""

from __future__ import annotations

import re
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


AMBIGUOUS_ENCODINGS = ("%2f", "%5c", "%00", "%23", "%3f", "%25", "%3b")
"""Percent-encoded bytes in a path that backends read differently: a slash or backslash that
one server decodes into a separator and another does not, NUL, ``#`` and ``?`` that a server
decoding before splitting reads as a fragment or a query, ``%`` itself (decoded twice, ``%252F``
becomes a slash) and ``;`` (a path parameter to Tomcat). The edge cannot know which reading its
backend applies, so it refuses them (the list Traefik refuses by default)."""

_AMBIGUOUS_RAW = re.compile(r"[\\#\x00-\x20\x7f]")
"""Raw characters with the same problem: a backslash is a separator to WHATWG URL parsers
(Node, browsers) and to IIS; a ``#`` starts a fragment that gunicorn, werkzeug and Express drop
from the path (a request-target never carries one, RFC 9112 §3.2); controls and spaces are
never valid in a request-target."""


def clean_path(raw_path: str) -> tuple[str, str]:
    """``(path to route on, path to forward)`` for a raw request path (no query string).

    The edge routes on the path the backend will act on, or refuses the request (the server
    answers 400) when backends disagree on what it names — see ``docs/modules.md``, "Which path
    a request names":

    * a path that is not absolute is refused;
    * ambiguous bytes are refused: :data:`AMBIGUOUS_ENCODINGS` and :data:`_AMBIGUOUS_RAW`;
    * dot segments are removed (RFC 3986 §5.2.4, percent-encoded dots included) before routing
      and from what is forwarded: otherwise ``/public/../admin`` would be matched as ``/public``
      here and served as ``/admin`` by the upstream, past the modules of the ``/admin`` route;
      a dot segment with path parameters (``..;x``, which Tomcat reads as ``..``) is refused;
    * repeated slashes are merged (as nginx does), so ``//host/x`` never reads as a host;
    * the routing path is percent-decoded (``%61dmin`` is ``admin``); what is forwarded keeps
      the client's encoding.
    """
    if not raw_path.startswith("/"):
        raise ValueError(f"request path {raw_path[:100]!r} must start with '/'")
    if "%" in raw_path:
        lowered = raw_path.lower()
        for encoded in AMBIGUOUS_ENCODINGS:
            if encoded in lowered:
                raise ValueError(
                    f"request path {raw_path[:100]!r}: {encoded.upper()} is ambiguous "
                    "(backends decode it differently)"
                )
    found = _AMBIGUOUS_RAW.search(raw_path)
    if found is not None:
        raise ValueError(
            f"request path {raw_path[:100]!r}: {found.group()!r} is ambiguous "
            "(backends read it differently)"
        )
    if "%" not in raw_path and "/." not in raw_path and "//" not in raw_path:
        return raw_path, raw_path  # the common case: nothing to decode or remove
    parts = raw_path.split("/")[1:]
    kept: list[str] = []
    for index, segment in enumerate(parts):
        decoded = unquote(segment)
        if segment == "" and index < len(parts) - 1:
            continue
        if decoded.split(";", 1)[0] in (".", "..") and ";" in decoded:
            raise ValueError(f"request path {raw_path[:100]!r} hides a dot segment")
        if decoded in (".", ".."):
            if decoded == ".." and kept:
                kept.pop()
            if index == len(parts) - 1:
                kept.append("")
            continue
        kept.append(segment)
    forward = "/" + "/".join(kept)
    return unquote(forward), forward


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


def split_target(target: str) -> tuple[str, str, str]:
    """A request-target ``/path?query`` → (the path to route on, the path to forward, the raw
    query); ValueError, as :func:`clean_path`, when it is ambiguous or carries a fragment."""
    raw_path, _, query = target.partition("?")
    if "#" in query:
        raise ValueError("a request-target never carries a #fragment")
    path, forward_path = clean_path(raw_path)
    return path, forward_path, query
