"""A client's request as a front door's handler sees it, whatever the wire it came on.

The edge and the mesh listener serve HTTP/1.1 (``http1_server.py``) and HTTP/2
(``http2_server.py``); each request of either becomes an :class:`H2Request` handed with a
:class:`Responder` for its wire to one handler, so a front door's steps exist once for both
versions. :func:`answer_with` makes sure a client never waits on an answer nobody sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from multidict import CIMultiDict


class RequestBody(Protocol):
    """A client's request body as the front door's handler reads it: an HTTP/2 stream's
    (:class:`H2Body`) or an HTTP/1.1 request's (``interlock.dataplane.http1_server``)."""

    @property
    def empty(self) -> bool:
        """The request has no body at all."""
        ...

    @property
    def timed_out(self) -> bool:
        """A read waited longer than it was allowed to."""
        ...

    def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]: ...

    def take_whole(self) -> bytes | None:
        """All of the body, taken, when all of it has arrived and none of it was read (a small
        body mostly comes in the read its head began): it can go upstream with the request
        head in one write. None otherwise, nothing taken: :meth:`chunks` reads it."""
        ...


class Responder(Protocol):
    """How a handler answers one request, whatever the wire: headers, data, trailers or the
    end (:class:`H2Responder`, or ``interlock.dataplane.http1_server.Http1Responder``)."""

    @property
    def status(self) -> int | None: ...

    def send_headers(
        self, status: int, headers: Sequence[tuple[str, str]], *, end: bool
    ) -> None: ...

    async def send_data(self, data: bytes, *, end: bool = False) -> None: ...

    def send_trailers(self, headers: Sequence[tuple[str, str]]) -> None: ...

    def reset(self) -> None: ...

    def close_after(self) -> None:
        """Take no further request on this connection once this answer is sent (a request
        body left unread cannot be told from the next request); HTTP/2 carries other streams
        on the connection, and ends only this one."""
        ...

    @property
    def ended(self) -> bool:
        """The answer is complete (or was cut)."""
        ...

    @property
    def bytes(self) -> int:
        """Bytes sent to the client so far (last: its name shadows the type above)."""
        ...


@dataclass(eq=False, slots=True)
class H2Request:
    """One client stream (or HTTP/1.1 request): its pseudo-headers, headers, and body."""

    method: str
    scheme: str
    authority: str
    path: str
    """The request-target as sent (``/path?query``), still percent-encoded."""
    headers: CIMultiDict[str]
    peer: str
    body: RequestBody
    transport: asyncio.BaseTransport | None = None
    """The client connection (for its TLS peer certificate)."""
    version: str = "2"
    """The HTTP version the client speaks (``2``, or ``1.1`` from the HTTP/1.1 server)."""
    forwardable: list[tuple[str, str]] | None = None
    """The headers an upstream may get as the client sent them, when the server sorted them
    while parsing (the HTTP/1.1 server): :attr:`headers` in order without the hop-by-hop ones,
    ``Expect``, the front door's held-back names and any ``Host`` after the first. None when
    not sorted, or when a ``Connection`` header lists names or no ``Host`` came (the general
    rules, ``proxy.without_hop_by_hop``, then apply)."""
    first_read: bytes | None = None
    """The read from the client this request began in, when it began a read and every header
    may go upstream as sent (:attr:`forwardable` is all of them): the HTTP/1.1 server's
    ``head_as_sent`` says whether its head is all of it, and the edge then sends those bytes
    with its ``X-Forwarded-*`` lines appended (``steps.decide_now``,
    ``http1.VerbatimHeaders``)."""

    # The dataclass's __init__ written out (the decorator keeps it): in the compiled build
    # (setup.py) a dataclass's generated methods stay interpreted, and one is made per request.
    def __init__(
        self,
        method: str,
        scheme: str,
        authority: str,
        path: str,
        headers: CIMultiDict[str],
        peer: str,
        body: RequestBody,
        transport: asyncio.BaseTransport | None = None,
        version: str = "2",
        forwardable: list[tuple[str, str]] | None = None,
        first_read: bytes | None = None,
    ) -> None:
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
        self.peer = peer
        self.body = body
        self.transport = transport
        self.version = version
        self.forwardable = forwardable
        self.first_read = first_read


H2Handler = Callable[[H2Request, Responder], Awaitable[None]]


async def answer_with(handler: H2Handler, request: H2Request, responder: Responder) -> None:
    """Run the front door's ``handler`` on ``request``; an answer it left unfinished is ended
    (a 502 when it never began), so a client never waits on an answer nobody sends."""
    await handler(request, responder)
    if not responder.ended:
        await finish_answer(responder)


async def finish_answer(responder: Responder) -> None:
    """End an answer a handler left unfinished: a 502 when it never began."""
    if responder.status is None:
        responder.send_headers(502, [], end=True)
    else:
        await responder.send_data(b"", end=True)
