"""What a module sees of a request, and what it answers when it refuses one.

Modules do not touch aiohttp: the server builds a :class:`RequestView` and turns a
:class:`Rejection` (or the oauth/oidc module's :class:`IdentityReply`) into a response. This
keeps every module a pure, synchronous function of its inputs (plus an injected clock), testable
without a socket, and it keeps the server in charge of the one thing modules must not decide:
whether the body is read (only when a module needs it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from multidict import CIMultiDict, CIMultiDictProxy

NO_QUERY: Mapping[str, str] = MappingProxyType({})
"""A view's query when it is not given (read-only: one for all views)."""
NO_HEADERS: Mapping[str, str] = CIMultiDictProxy(CIMultiDict())
"""A view's headers when they are not given (read-only and case-insensitive)."""


class RequestView(NamedTuple):
    """A request as modules see it, read-only. Built by the server from the request (the edge's
    steps pass its fields positionally, in this order; tests and other callers name them). A
    named tuple, not a frozen dataclass: a frozen dataclass's ``__init__`` sets each of its ten
    fields through ``object.__setattr__``, on every request a module checks."""

    method: str
    """The HTTP method, upper case."""
    path: str
    """The path, without the query string."""
    query: Mapping[str, str] = NO_QUERY
    """The query parameters (first value of each)."""
    headers: Mapping[str, str] = NO_HEADERS
    """The request headers; must be case-insensitive (aiohttp's ``CIMultiDictProxy`` is)."""
    authority: str = ""
    """The request's authority as the edge routed it: ``Host`` over HTTP/1.1, ``:authority``
    over HTTP/2 (whose requests carry no ``Host``)."""
    peer_ip: str = ""
    """The address of the TCP peer (a proxy when the edge sits behind one)."""
    body: bytes | None = None
    """The raw body; the server reads it only when ``ModuleChain.needs_body`` is true."""
    scheme: str = "http"
    """``http`` or ``https``, as the client reached the edge."""
    raw_target: str = ""
    """The request-target as the client sent it (path and query, encoding kept), for
    redirects that keep it."""
    peer_certificate: bytes | None = None
    """The client's certificate (DER) as TLS verified it; None over plain HTTP, when the client
    sent none, or when ``ModuleChain.needs_peer_certificate`` is false (the server skips it)."""


class Rejection(NamedTuple):
    """A module's refusal: the server answers with it and never contacts the upstream."""

    status: int
    headers: Mapping[str, str]
    body: str


@dataclass(frozen=True, slots=True)
class IdentityReply:
    """An answer the oauth or oidc module gives itself (a redirect, an error page, the
    callback's result); the server sends it instead of proxying (``identity.py``)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: str


def reject(status: int, body: str, headers: Mapping[str, str] | None = None) -> Rejection:
    """A plain-text refusal. Its headers are read-only: refusals are shared between requests."""
    return Rejection(
        status,
        MappingProxyType({**(headers or {}), "Content-Type": "text/plain; charset=utf-8"}),
        body,
    )
