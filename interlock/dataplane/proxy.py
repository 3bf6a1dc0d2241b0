"""Forwarding one request to an upstream and streaming the answer back: :class:`Forwarder`.

A reverse proxy has a handful of duties that are easy to forget and each breaks something when
forgotten: hop-by-hop headers belong to one connection and must not cross the proxy
(RFC 9110 §7.6.1), the upstream needs to know who the client was (``X-Forwarded-*``), bodies must
stream both ways so a large upload or download costs a buffer, not its size, and a slow or dead
upstream must turn into 504/502 instead of a hung client. All upstream traffic goes through one
pool of keep-alive HTTP/1.1 connections (``interlock/dataplane/http1.py``: no cookies — they
belong to clients, not to the proxy — no redirects followed, no decompression). The pool is
bounded per upstream address (``ProxyLimits.upstream_connections``) so that one slow or flooded
backend cannot hold the connections every other backend needs, and a request body is read from
the client with a bound between two reads (:class:`ClientBody`), so a client that stops sending
releases its upstream.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Protocol

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, istr

from interlock.dataplane.answers import BODY_TIMEOUT, answer
from interlock.dataplane.header_names import (
    CONNECTION,
    X_FORWARDED_FOR,
    X_FORWARDED_HOST,
    X_FORWARDED_PROTO,
)
from interlock.dataplane.http1 import (
    AnswerTaker,
    Http1Response,
    UpstreamConnectError,
    UpstreamConnection,
    UpstreamPool,
)
from interlock.dataplane.interpreted import aiohttp_chunks
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.source import Address
from interlock.dataplane.upstream_tls import (
    MAX_VERIFIED_SETTINGS,
    peer_problem,
    unverified_client_context,
    verified_client_context,
)
from interlock.dataplane.wire import answer_response
from interlock.logs import module_logger
from interlock.model.backend_tls import BackendTLS
from interlock.model.module_settings import BAD_HEADER_VALUE, HEADER_NAME

# Not loguru's logger itself: this module is compiled (interlock.logs.module_logger).
logger = module_logger(__name__)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection (RFC 9110 §7.6.1), never forwarded."""

# The server answered ``Expect: 100-continue`` itself before the handler ran.
_NOT_FORWARDED = frozenset({"expect"})

_NEVER_HOP_BY_HOP = frozenset({"host", "content-length", "content-encoding", "content-type"})
"""End-to-end headers a ``Connection`` list cannot remove: ``Connection: Host`` made the backend
see the upstream address instead of the routed host, and the others frame or describe the body."""


_CHECKED_NAMES: set[str] = set()
"""Header names (as spelled) already found end-to-end — not hop-by-hop, not ``Proxy-*`` — by
:func:`without_hop_by_hop`: a client and a backend send the same few names on every message, and
checking each again (``lower()``, a set look-up, a slice) was ~2,000 instructions a name. Exact
spellings, so a name is found here only if that very string passed the check; bounded in count
and length (:data:`_CHECKED_MOST`, :data:`_CHECKED_LONGEST`), so new names from a client cannot
grow it: past that they are checked as before. A ``Connection`` list is never looked up here."""
_CHECKED_MOST = 256
_CHECKED_LONGEST = 64


def without_hop_by_hop(headers: Mapping[str, str] | CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """A copy without hop-by-hop headers: the fixed list, any ``Proxy-*``, and those
    ``Connection`` names (except :data:`_NEVER_HOP_BY_HOP`)."""
    if CONNECTION not in headers:
        # Most messages: no name to look up from a ``Connection`` list, and often nothing to
        # drop, so a plain copy (in C) once no name is hop-by-hop.
        if _CHECKED_NAMES.issuperset(headers):
            return CIMultiDict(headers)
        for name in headers:
            lower = name.lower()
            # ``lower[:6] ==`` rather than ``startswith``, whose arguments are parsed by
            # ``PyArg_ParseTuple``: ~400 instructions a header, twice a request, against ~150.
            if lower in HOP_BY_HOP or lower[:6] == "proxy-":
                break
            if len(_CHECKED_NAMES) < _CHECKED_MOST and len(name) <= _CHECKED_LONGEST:
                # The name object itself, not a ``str`` copy: an answer's names are the same
                # ``istr`` objects on every answer (``http1._names``), found again by identity
                # (an ``istr`` met against a ``str`` is compared the slow way, ~250 instructions
                # a name); an ``istr`` is equal only to its exact spelling, as the ``str`` is.
                _CHECKED_NAMES.add(name)
        else:
            return CIMultiDict(headers)
    listed = {
        token.strip().lower()
        for value in _all_values(headers, CONNECTION)
        for token in value.split(",")
        if token.strip()
    } - _NEVER_HOP_BY_HOP
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in listed or lower[:6] == "proxy-":
            continue
        kept.add(name, value)
    return kept


def _all_values(headers: Mapping[str, str] | CIMultiDictProxy[str], name: str) -> list[str]:
    if isinstance(headers, CIMultiDictProxy | CIMultiDict):
        return list(headers.getall(name, []))
    return [v for k, v in headers.items() if k.lower() == name.lower()]


IPNetwork = IPv4Network | IPv6Network


def parse_trusted_proxies(cidrs: Sequence[str]) -> tuple[IPNetwork, ...]:
    """Trusted proxy CIDRs; raises ValueError naming the entry that does not parse."""
    networks: list[IPNetwork] = []
    for index, cidr in enumerate(cidrs):
        try:
            networks.append(ip_network(cidr.strip()))
        except ValueError:
            raise ValueError(f"trustedProxies[{index}]: {cidr!r} is not a valid CIDR") from None
    return tuple(networks)


def _peer_address(peer: str) -> IPv4Address | IPv6Address | None:
    try:
        address = ip_address(peer.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


CLIENT_ADDRESS_HEADERS = tuple(
    istr(name)
    for name in (
        "Forwarded",
        "X-Real-IP",
        "True-Client-IP",
        "X-Client-IP",
        "X-Cluster-Client-IP",
        "CF-Connecting-IP",
        "Fastly-Client-IP",
    )
)
"""Headers in which proxies tell a backend the client's address (RFC 7239 ``Forwarded``, nginx's
``X-Real-IP``, CDNs' own); frameworks believe them (Django, Rails, Express with ``trust proxy``),
so a client must not be able to set them directly."""


def set_forwarded_headers(
    headers: CIMultiDict[str],
    *,
    peer_ip: str,
    scheme: str,
    host: str,
    trusted: Sequence[IPNetwork],
) -> None:
    """Set X-Forwarded-For/-Proto/-Host for the upstream.

    What a client sends in these headers is kept (and appended to) only when the peer is a
    trusted proxy; otherwise it is replaced, so a client cannot pose as another address to the
    upstream. The other headers backends read a client address from
    (:data:`CLIENT_ADDRESS_HEADERS`) are likewise kept only from a trusted proxy, else dropped.
    """
    peer = _peer_address(peer_ip) if trusted else None
    from_proxy = peer is not None and any(peer in network for network in trusted)
    if not from_proxy:
        for name in CLIENT_ADDRESS_HEADERS:
            headers.popall(name, None)
    prior_for = ", ".join(headers.getall(X_FORWARDED_FOR, [])) if from_proxy else ""
    proto = headers.get(X_FORWARDED_PROTO) if from_proxy else None
    forwarded_host = headers.get(X_FORWARDED_HOST) if from_proxy else None
    headers[X_FORWARDED_FOR] = f"{prior_for}, {peer_ip}" if prior_for else peer_ip
    headers[X_FORWARDED_PROTO] = proto or scheme
    headers[X_FORWARDED_HOST] = forwarded_host or host


class ResponseHooks(Protocol):
    """What the module chain does around the upstream exchange."""

    @property
    def inert(self) -> bool:
        """The three calls below do nothing (no circuit breaker, no response header change,
        no compression): a relay may skip them."""
        ...

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool: ...

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None: ...

    def response_headers(self, headers: CIMultiDict[str]) -> None: ...

    @property
    def response_edit(self) -> HeadEdit | None:
        """When the hooks' only effect on an answer is a change of its headers known before it
        comes (no circuit breaker to tell, no compression): that change, for an answer relayed
        from its bytes (``Http1Responder.relay_as_received``); else None."""
        ...


class HeadEdit:
    """A response-header change known in advance, made on an answer's head as received (its
    bytes): every line of a :attr:`removed` name goes (case-insensitively, wherever and however
    often it appears), then :attr:`added`'s lines are appended — what the hooks'
    ``response_headers`` does to the answer's headers, rendered again (the removed names include
    every added one, so what is added does not depend on the answer). Built by :meth:`of`, which
    refuses what the rendering path would not write as it is."""

    __slots__ = ("_edited", "_head", "added", "dated", "removed")

    def __init__(self, removed: tuple[bytes, ...], added: bytes, dated: bool | None) -> None:
        self.removed = removed
        """Each removed name as its lines begin in a head, lower-cased: the CRLF ending the
        line before, the name, its colon (llhttp refuses blanks before the colon, and CR and LF
        within a line: such bytes begin a line of that name and nothing else)."""
        self.added = added
        """The added lines, each after a CRLF (the head's last line has none)."""
        self.dated = dated
        """Whether the edited head has a ``Date`` (None: as the answer had)."""
        self._head = b""
        self._edited = added  # an empty head's (no line to cut out)
        """The head edited last, and its edit: a backend sends the same head again and again
        (until its ``Date`` changes, each second), mostly as the very object
        ``interlock.dataplane.http1._whole`` kept of it; the edit is a function of the head's
        bytes alone, so it is kept whatever the connection (cutting the lines out was ~2,900
        instructions a request, compiled: ``lower()`` and a search per name)."""

    @staticmethod
    def of(removed: Iterable[str], added: Sequence[tuple[str, str]]) -> HeadEdit | None:
        """The edit removing ``removed`` (lower-case names; those of ``added`` among them) then
        adding ``added`` (in order); None when the answer must go the rendering way: a name
        that is not an HTTP token, a value with a control character (the headers module refuses
        both when it is built: checked again here, as the rendering path checks for CR and LF
        on every answer) or one that does not encode as that path encodes it, or a name the
        proxy owns (framing, hop-by-hop: the module refuses those too)."""
        names = sorted({name.lower() for name in removed})
        if not {name.lower() for name, _ in added}.issubset(names):
            return None  # an added name's lines from the answer would stay
        for name in [*names, *(name for name, _ in added)]:
            if not HEADER_NAME.fullmatch(name) or name.lower() in _PROXY_OWNED:
                return None
        lines = []
        for name, value in added:
            if BAD_HEADER_VALUE.search(value):
                return None
            try:
                lines.append(f"\r\n{name}: {value}".encode())
            except UnicodeEncodeError:
                return None
        dated = None
        if "date" in names:
            dated = any(name.lower() == "date" for name, _ in added)
        return HeadEdit(tuple(f"\r\n{name}:".encode() for name in names), b"".join(lines), dated)

    def edited(self, head: bytes) -> bytes:
        """``head`` (a status line and header lines, the last without its CRLF, as
        ``interlock.dataplane.http1._whole`` found it) with the change made."""
        if head is self._head or head == self._head:
            return self._edited
        edited = self._edit(head)
        self._head, self._edited = head, edited
        return edited

    def _edit(self, head: bytes) -> bytes:
        if self.removed:
            lowered = head.lower()  # bytes: ASCII letters only, each byte where it was
            for needle in self.removed:
                at = lowered.find(needle)
                while at >= 0:
                    end = lowered.find(b"\r\n", at + 2)
                    if end < 0:
                        end = len(lowered)  # the head's last line
                    head = head[:at] + head[end:]
                    lowered = lowered[:at] + lowered[end:]
                    at = lowered.find(needle, at)
        return head + self.added if self.added else head


_PROXY_OWNED = HOP_BY_HOP | {"host", "content-length"}
"""Names a head edit may not touch: they frame the message or belong to one hop (what
``interlock.model.module_settings.PROXY_OWNED_HEADERS`` refuses in the headers module)."""


@dataclass(frozen=True, slots=True)
class ProxyTimeouts:
    """Upstream timeouts in seconds."""

    connect: float = 5.0
    """To open a connection (and obtain a pooled one); exceeded → 504."""
    read: float = 60.0
    """Between two reads from the upstream, headers included; exceeded → 504."""


DEFAULT_TIMEOUTS = ProxyTimeouts()


MAX_READ_BODY = 1024 * 1024
"""Largest request body the edge reads whole (for webhookVerification); larger → 413."""


class ClientBodyTimeout(Exception):
    """The client sent no byte of its request body for ``ProxyLimits.body_timeout`` seconds."""


class ClientBody:
    """A request body read from the client chunk by chunk, each read bounded in time.

    A client that stops sending in the middle of its body would otherwise hold its upstream
    connection (and a slot of that upstream's limit) for as long as it likes.
    """

    def __init__(self, request: web.BaseRequest, *, timeout: float) -> None:
        self._request = request
        self._timeout = timeout
        self.timed_out = False

    @property
    def empty(self) -> bool:
        """The request has no body at all."""
        return not self._request.body_exists

    def take_whole(self) -> bytes | None:
        """None: aiohttp's reader is read with :meth:`chunks`."""
        return None

    def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]:
        """The body as it arrives; :class:`ClientBodyTimeout` when no byte came for ``within``
        seconds (the timeout it was made with by default)."""
        return aiohttp_chunks(self, self._timeout if within is None else within)

    async def read(self, *, max_size: int) -> bytes | None:
        """The whole body (for modules that need it), each read bounded in time; ``None`` when
        it is longer than ``max_size`` bytes."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            size += len(chunk)
            if size > max_size:
                return None
            parts.append(chunk)
        return b"".join(parts)


def body_timed_out() -> web.Response:
    """408 for a client too slow to send its body; the connection is not reused."""
    response = answer_response(answer(BODY_TIMEOUT))
    response.force_close()
    return response


class Forwarder:
    """Sends requests upstream over one connection pool and streams the responses back."""

    def __init__(
        self, *, timeouts: ProxyTimeouts = DEFAULT_TIMEOUTS, limits: ProxyLimits = DEFAULT_LIMITS
    ) -> None:
        self._timeouts = timeouts
        self._limits = limits
        self._pool: UpstreamPool | None = None
        self._tls_pool: UpstreamPool | None = None
        """Connections that speak TLS (``Forward.upstream_tls``), made on first use."""
        self._verified: dict[BackendTLS, UpstreamPool] = {}
        """Connections verified as a BackendTLSPolicy says (``Forward.backend_tls``): a pool
        per setting, made on first use (at most
        :data:`~interlock.dataplane.upstream_tls.MAX_VERIFIED_SETTINGS`)."""

    async def start(self) -> None:
        if self._pool is None:
            self._pool = UpstreamPool(
                per_address=self._limits.upstream_connections,
                total=self._limits.max_connections,
                connect_timeout=self._timeouts.connect,
            )

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._tls_pool is not None:
            self._tls_pool.close()
            self._tls_pool = None
        for pool in self._verified.values():
            pool.close()
        self._verified.clear()

    def _tls(self) -> UpstreamPool:
        if self._tls_pool is None:
            self._tls_pool = UpstreamPool(
                per_address=self._limits.upstream_connections,
                total=self._limits.max_connections,
                connect_timeout=self._timeouts.connect,
                ssl=unverified_client_context(alpn=("http/1.1",)),
            )
        return self._tls_pool

    def _verified_pool(self, tls: BackendTLS, address: Address) -> UpstreamPool:
        pool = self._verified.get(tls)
        if pool is not None:
            return pool
        try:
            context = verified_client_context(tls, alpn=("http/1.1",))
        except ssl.SSLError as error:
            # Neither the CA bundle's nor the key's content: only what could not be loaded.
            raise UpstreamConnectError(
                address, ssl.SSLError(f"TLS to the backend cannot be set up ({error.reason})")
            ) from None
        if len(self._verified) >= MAX_VERIFIED_SETTINGS:
            # Settings no longer served (a policy or certificate that changed): start afresh.
            for stale in self._verified.values():
                stale.close()
            self._verified.clear()
        pool = UpstreamPool(
            per_address=self._limits.upstream_connections,
            total=self._limits.max_connections,
            connect_timeout=self._timeouts.connect,
            ssl=context,
            server_hostname=tls.hostname,
            peer_check=functools.partial(peer_problem, tls),
        )
        self._verified[tls] = pool
        return pool

    def open(
        self,
        method: str,
        *,
        address: Address,
        path: str,
        query: str,
        headers: CIMultiDict[str],
        data: bytes | AsyncIterator[bytes] | None,
        headers_within: float | None = None,
        idle: float | None = None,
        tls: bool = False,
        backend_tls: BackendTLS | None = None,
    ) -> Awaitable[Http1Response]:
        """Send one request to ``address`` and return the upstream's response once its headers
        arrived (the caller relays it with :meth:`relay` or releases it).

        ``path`` and ``query`` are what to request, still percent-encoded; ``headers`` the
        upstream request headers, already rewritten. ``headers_within`` bounds the wait for the
        response headers (``TimeoutError``), ``idle`` replaces the time allowed between two
        reads; ``tls``: over TLS (:mod:`interlock.dataplane.upstream_tls`), ``backend_tls``:
        over TLS verified as it says. Raises ``aiohttp.ClientError`` subclasses
        (``interlock.dataplane.http1``), ``TimeoutError`` and ``ClientBodyTimeout``.
        """
        if self._pool is None:
            raise RuntimeError("Forwarder.start() was not called")
        if backend_tls is not None:
            pool = self._verified_pool(backend_tls, address)
        else:
            pool = self._tls() if tls else self._pool
        sent = pool.request(
            address,
            method,
            f"{path}?{query}" if query else path,
            headers,
            data,
            read_timeout=self._timeouts.read if idle is None else idle,
        )
        # Awaited by the caller: no coroutine of its own around the exchange's.
        return sent if headers_within is None else _within(sent, headers_within)

    def open_pooled(
        self,
        method: str,
        address: Address,
        path: str,
        query: str,
        headers: CIMultiDict[str],
        idle: float | None = None,
        tls: bool = False,
        taker: AnswerTaker | None = None,
    ) -> tuple[UpstreamConnection, asyncio.Future[Http1Response] | None] | None:
        """:meth:`open` for a request without a body and without a bound on the wait for the
        answer's headers, on a connection already pooled, without a coroutine
        (:meth:`UpstreamPool.start <interlock.dataplane.http1.UpstreamPool.start>`): the
        connection and its answer to come, or None when none is idle (nothing was sent)."""
        if self._pool is None:
            raise RuntimeError("Forwarder.start() was not called")
        pool = self._tls() if tls else self._pool
        return pool.start(
            address,
            method,
            f"{path}?{query}" if query else path,
            headers,
            read_timeout=self._timeouts.read if idle is None else idle,
            taker=taker,
        )

    async def relay(
        self,
        request: web.BaseRequest,
        upstream: Http1Response,
        *,
        hooks: ResponseHooks,
        where: str,
        cut_after: float | None = None,
    ) -> web.StreamResponse:
        """Stream ``upstream``'s answer to the client (and release it); after ``cut_after`` s
        the connection is cut (too late for a status: the client has one)."""
        async with upstream:
            return await self._relay(
                request, upstream, hooks=hooks, where=where, cut_after=cut_after
            )

    async def _relay(
        self,
        request: web.BaseRequest,
        upstream: Http1Response,
        *,
        hooks: ResponseHooks,
        where: str,
        cut_after: float | None,
    ) -> web.StreamResponse:
        headers = without_hop_by_hop(upstream.headers)
        hooks.response_headers(headers)
        compress = hooks.should_compress(request.headers, headers)
        if compress:
            headers.popall("Content-Length", None)
            headers.add("Vary", "Accept-Encoding")
        response = RelayedResponse(status=upstream.status, reason=upstream.reason)
        response.headers.extend(headers)
        if compress:
            response.enable_compression(web.ContentCoding.gzip)
        try:
            if cut_after is None:
                await _stream(request, upstream, response)
            else:
                async with asyncio.timeout(cut_after):
                    await _stream(request, upstream, response)
        except ConnectionResetError:
            # The client left; the upstream connection is dropped with the unread body.
            logger.debug("{}: the client closed the connection", where)
        except (TimeoutError, aiohttp.ClientError) as exc:
            # Too late for an error status: the client already has one (or the request
            # timeout ran out while the body streamed). Cutting the connection is the only
            # honest signal that the body is incomplete.
            logger.debug("{}: upstream body interrupted: {!r}", where, exc)
            if request.transport is not None:
                request.transport.close()
        return response


async def _within(sent: Awaitable[Http1Response], seconds: float) -> Http1Response:
    async with asyncio.timeout(seconds):
        return await sent


async def _stream(
    request: web.BaseRequest, upstream: Http1Response, response: web.StreamResponse
) -> None:
    await response.prepare(request)
    async for chunk in upstream.chunks():
        await response.write(chunk)
    await response.write_eof()


class RelayedResponse(web.StreamResponse):
    """A response whose headers are the upstream's after the modules' changes, and only those.

    aiohttp fills in ``Server`` and ``Content-Type`` when they are missing; for a relayed
    response that would undo a ``headers.response.remove: [Server]`` and invent a media type the
    upstream never sent, so what aiohttp added is taken out again.

    Headers go out with the first body chunk rather than alone: one ``send`` instead of two per
    small response, which is most of the proxy's cost where system calls are expensive.
    """

    _send_headers_immediately = False

    async def _prepare_headers(self) -> None:
        had = {name for name in ("Server", "Content-Type") if name in self.headers}
        await super()._prepare_headers()
        for name in ("Server", "Content-Type"):
            if name not in had:
                self.headers.popall(name, None)
