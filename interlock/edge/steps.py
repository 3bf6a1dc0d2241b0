"""The edge's request steps, once: :func:`decide` turns a request into a :class:`Refusal` or an
:class:`Admitted` forward, for every entry point (HTTP/1.1 and HTTP/2 in ``streams.py``, a
request that upgrades its connection in ``server.py``).

Each request is decided in one fixed order, and every refusal happens before the upstream is
contacted:

1. an HTTP/2 ``CONNECT`` → 405 ``connect-not-served`` (the edge opens no tunnels; an HTTP/1.1
   ``CONNECT``'s authority-form target is refused at step 3);
2. the edge, by ``Host`` (``:authority``; port stripped, case-insensitive) — unknown host → 404;
3. the path the backend will act on (``dataplane.request_target.split_target``) — ambiguous
   → 400;
4. the route, by that path (Exact, then the longest Prefix by whole segments) — none → 404;
   a Gateway's port may narrow it to a rule or answer itself (``gateway_ports.py``);
5. no backend attached yet → 503 (a route whose modules were never applied serves nothing);
6. the body, when a module reads it (webhookVerification): too large → 413, too slow → 408,
   and the connection is not reused (what is left of the body cannot be told from the next
   request);
7. the route's module chain (ipRestriction, mutualTLS, rateLimit, auth — bcrypt in a thread
   pool —, webhookVerification, then oauth/oidc, then circuitBreaker) → its refusal; a chain
   without modules skips the checks and the view they read;
8. a backend Service that does not exist → 500;
9. the data-plane engine (``interlock/dataplane/``) with the backend Service port's outbound
   policy: its rule (no rule matches → 404), a RequestRedirect's 30x, the weighted backend (a
   missing one → its failure injector's 500);
10. the upstream request's headers: hop-by-hop ones and ``Expect`` dropped, ``Host`` set to the
    client's (one value, whatever the wire: HTTP/2 has ``:authority``), the modules' changes,
    ``X-Forwarded-*``.

The entry points then forward an :class:`Admitted` request (the endpoints — none → 500/503 —,
the rule's timeouts → 504, retries, failure accrual; 502 on failures; the response header
changes of the rule, then of the modules, then compression) or send the :class:`Refusal`.

They are one function, :func:`decide_now`, for every route: it decides a request whose route's
modules need no wait in one call — a route without modules, and one whose checks all answer at
once (ipRestriction, mutualTLS, rateLimit, basicAuth with its answer cached, jwt,
circuitBreaker, headers: ``ModuleChain.checks_at_once``, run by ``ModuleChain.check_fields``) —
and hands a :class:`ModuleSteps` for the others, whose ``run`` awaits steps 6 and 7 (or, when
``check_fields`` stopped at a bcrypt check not cached yet, that check and the checks after it) and
ends in :func:`decide_now` again from step 8 (:func:`decide` does both for an entry point that
awaits anyway).

Why one function: the steps are the edge's security boundary, and two copies of it drifted
(only one set ``Host``, they parsed query strings differently, only one closed the connection
after an oversized body). The mesh listener decides its requests
the same way (``MeshServer._decide``); it has no modules.

The route is read once, at step 4, as one immutable value: a request never mixes two
configurations, which is what makes module swaps atomic (see ``inprocess.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl

from multidict import CIMultiDict, MultiDict, MultiDictProxy

from interlock.dataplane import answers as reasons
from interlock.dataplane.access_log import Exchange
from interlock.dataplane.engine import Engine
from interlock.dataplane.filters import EMPTY_FILTERS
from interlock.dataplane.header_names import (
    EXPECT,
    HOST,
    X_FORWARDED_FOR,
    X_FORWARDED_HOST,
    X_FORWARDED_PROTO,
)
from interlock.dataplane.http1_server import head_as_sent, kept_head
from interlock.dataplane.http2_server import H2BodyTimeout
from interlock.dataplane.plan import (
    NO_DEADLINES,
    Forward,
    RequestInfo,
    multidict_version,
    remember_head,
)
from interlock.dataplane.proxy import (
    CLIENT_ADDRESS_HEADERS,
    MAX_READ_BODY,
    ClientBodyTimeout,
    IPNetwork,
    ResponseHooks,
    set_forwarded_headers,
    without_hop_by_hop,
)
from interlock.dataplane.request_stream import H2Request
from interlock.dataplane.request_target import normalize_host, split_target
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.modules import IdentityReply, ModuleChain, RequestView
from interlock.edge.modules.basic_auth import PasswordCheck
from interlock.edge.modules.client_cert_headers import CLIENT_CERT_HEADERS
from interlock.edge.modules.compression import accepts_gzip
from interlock.edge.modules.headers import HeaderRewrite
from interlock.edge.modules.identity_headers import IDENTITY_HEADERS
from interlock.edge.passwords import PasswordChecker
from interlock.edge.provider import BackendTarget
from interlock.edge.routing import ServedRoute, select_route
from interlock.edge.tls import peer_certificate
from interlock.logs import module_logger

# Not loguru's logger itself: this module is compiled (interlock.logs.module_logger).
logger = module_logger(__name__)

if TYPE_CHECKING:
    from interlock.edge.modules.identity import Admitted as IdentityAdmitted

HELD_BACK: Final = frozenset(
    name.lower()
    for name in (
        *CLIENT_CERT_HEADERS,
        *IDENTITY_HEADERS,
        *CLIENT_ADDRESS_HEADERS,
        X_FORWARDED_FOR,
        X_FORWARDED_PROTO,
        X_FORWARDED_HOST,
    )
)
"""What step 10 removes from a request's headers besides the hop-by-hop ones and ``Expect``, on
a route whose chain :attr:`~interlock.edge.modules.chain.ModuleChain.keeps_sorted_headers` and
with no trusted proxy: the HTTP/1.1 server leaves them out of ``H2Request.forwardable`` as it
parses (``X-Forwarded-*`` are then set anew)."""

NO_PARAMS: Final[MultiDictProxy[str]] = MultiDictProxy(MultiDict())
"""The query parameters of a request without a query (most requests: one value for all)."""

BAD_PATH: Final = (
    "the request path must be absolute, without dot segments hidden from the edge or "
    "characters that backends read differently (see docs/modules.md)"
)


_EDGE_HOSTS_SIZE: Final = 256
"""Most ``Host`` values ``_edge_hosts`` keeps; ``_EDGE_HOST_LENGTH`` the longest."""
_EDGE_HOST_LENGTH: Final = 255
_WHERES_MOST: Final = 16
"""Most routes a :class:`_SeenHost` keeps the log prefix of."""
_FORWARDED_MOST: Final = 1024
"""Most peer addresses a :class:`_SeenHost` keeps lines for, by scheme (emptied when full)."""


class _SeenHost:
    """What the steps keep of one ``Host`` value as sent (``_edge_hosts``): the same few hosts
    come on every request, and the same client names the same host on every request of its
    connection. Looked up once a request; each of its tables is keyed by a string whose hash
    Python keeps (a tuple key, as ``(peer, scheme, host)`` was, hashes its items again on
    every look-up)."""

    __slots__ = ("edge_host", "http", "https", "kept", "wheres")

    def __init__(self, edge_host: str, kept: bool) -> None:
        self.edge_host = edge_host
        """:func:`~interlock.dataplane.request_target.normalize_host`'s edge key for the value
        (normalizing one was a Python call and five string methods)."""
        self.kept = kept
        """Whether it is in ``_edge_hosts``; one that is not (the table full, the value too
        long) is made for one request and fills none of its tables."""
        self.wheres: dict[str, str] = {}
        """Route id -> the log prefix of an HTTP/1.x request to it (``Admitted.where``): an
        f-string a request was ~500 instructions."""
        self.http: dict[str, bytes] = {}
        """Peer address -> the ``X-Forwarded-*`` lines, and the empty line, that end a head
        sent as the client's bytes (``http1_server.head_as_sent``) on plain HTTP: making them
        was six concatenations and an encode a request. ``https``: the same on TLS (a request
        with any other scheme makes them each time)."""
        self.https: dict[str, bytes] = {}


_edge_hosts: Final[dict[str, _SeenHost]] = {}
"""A ``Host`` value as sent -> what the steps keep of it (:class:`_SeenHost`). Keyed by the
exact value, so a host reads as it did; bounded in count and length, so a client sending new
hosts fills it once and then pays the work as before."""


def _seen_host(host: str) -> _SeenHost:
    kept = len(_edge_hosts) < _EDGE_HOSTS_SIZE and len(host) <= _EDGE_HOST_LENGTH
    seen = _SeenHost(normalize_host(host), kept)
    if kept:
        _edge_hosts[host] = seen
    return seen


def _where(seen: _SeenHost, host: str, route_id: str) -> str:
    """The log prefix of an HTTP/1.x request to ``route_id`` by ``host`` (``seen``: what is
    kept of ``host``), kept there when there is room."""
    where = f"edge {host} route {route_id}"
    if seen.kept and len(seen.wheres) < _WHERES_MOST:
        seen.wheres[route_id] = where
    return where


def _forwarded_lines(seen: _SeenHost, peer: str, scheme: str, host: str) -> bytes | None:
    """The ``X-Forwarded-*`` lines of a request from ``peer`` by ``scheme`` to ``host`` (kept
    in ``seen`` for the next); None when a value holds CR or LF (``request_head`` refuses the
    head made of them, as it did)."""
    added = peer + scheme + host
    if "\r" in added or "\n" in added:
        return None
    lines = (
        "X-Forwarded-For: "
        + peer
        + "\r\nX-Forwarded-Proto: "
        + scheme
        + "\r\nX-Forwarded-Host: "
        + host
        + "\r\n\r\n"
    ).encode("utf-8", "surrogateescape")
    if seen.kept:
        kept = seen.http if scheme == "http" else seen.https if scheme == "https" else None
        if kept is not None:
            if len(kept) >= _FORWARDED_MOST:
                kept.clear()
            kept[peer] = lines
    return lines


class EdgeFront:
    """What the steps read: the edge's routes, the engine, basicAuth's password checker, the
    trusted proxies and the body timeout (one per :class:`~interlock.edge.server.EdgeServer`)."""

    __slots__ = ("body_timeout", "edge", "engine", "hosts", "narrows", "passwords", "trusted")

    def __init__(
        self,
        *,
        edge: InProcessEdge,
        engine: Engine,
        passwords: PasswordChecker,
        trusted: Sequence[IPNetwork],
        body_timeout: float,
    ) -> None:
        self.edge = edge
        self.hosts = edge.hosts_served()
        """The edge's routes by host, looked up here (None: ``edge.routes_of_host`` finds
        them): the edge's class is interpreted, a call into it ~800 instructions a request."""
        self.narrows = edge.narrows_routes
        """``edge.narrows_routes``, read once (an interpreted object's attribute)."""
        self.engine = engine
        self.passwords = passwords
        """Runs basicAuth's bcrypt checks off the event loop."""
        self.trusted = trusted
        """Proxies whose ``X-Forwarded-*`` are believed."""
        self.body_timeout = body_timeout


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer the edge makes itself instead of forwarding: the data plane's own
    (``docs/answers.md``) or a module's (its status, body and headers, with the reason
    ``module``)."""

    answer: reasons.Answer
    with_detail: bool = False
    """Whether the body carries the answer's detail (only when it names no cluster object)."""
    module_body: str | None = None
    """A module's refusal: its body (``answer`` holds its status and headers)."""
    close: bool = False
    """The connection must not carry another request (a request body left unread)."""


@dataclass(slots=True)
class Admitted:
    """A request the steps let through, with what forwarding it takes."""

    decision: Forward
    headers: CIMultiDict[str]
    """The upstream request's headers (step 10)."""
    query: str
    """The raw query string."""
    body: bytes | None
    """The body, when a module read it (else it streams from the client)."""
    hooks: ResponseHooks
    """The modules' response changes."""
    protocol: str
    """Which HTTP version goes upstream for an HTTP/2 stream (the policy's, or
    ingress-nginx's ``backend-protocol``)."""
    where: str
    """The log prefix naming the host and route."""

    # The dataclass's __init__ written out (the decorator keeps it): compiled (setup.py), a
    # dataclass's generated methods stay interpreted, and one is made per request.
    def __init__(
        self,
        decision: Forward,
        headers: CIMultiDict[str],
        query: str,
        body: bytes | None,
        hooks: ResponseHooks,
        protocol: str,
        where: str,
    ) -> None:
        self.decision = decision
        self.headers = headers
        self.query = query
        self.body = body
        self.hooks = hooks
        self.protocol = protocol
        self.where = where


def log_answer(decided: reasons.Answer, where: str) -> None:
    """An engine's answer for an internet client: its detail, which names cluster objects,
    goes to the debug log only (a redirect's is its Location)."""
    if decided.reason != reasons.REDIRECT:
        logger.debug("{}: {} {}: {}", where, decided.status, decided.reason, decided.detail)


def _refused(reason: str, *, close: bool = False) -> Refusal:
    return Refusal(reasons.answer(reason), close=close)


def _module_refusal(
    status: int, body: str, headers: Mapping[str, str] | Sequence[tuple[str, str]]
) -> Refusal:
    items = tuple(headers.items()) if isinstance(headers, Mapping) else tuple(headers)
    return Refusal(
        reasons.Answer(status=status, reason=reasons.MODULE, headers=items), module_body=body
    )


async def decide(
    front: EdgeFront, request: H2Request, exchange: Exchange | None
) -> Refusal | Admitted:
    """Steps 1-10 of the module docstring for one request, whatever its wire."""
    decided = decide_now(front, request, exchange)
    if isinstance(decided, ModuleSteps):
        return await decided.run(front, request, exchange)
    return decided


@dataclass(slots=True, eq=False)
class ModuleSteps:
    """A request routed by :func:`decide_now` (steps 1-5) whose route's modules must be awaited
    (steps 6-7: the body read, a check, bcrypt, oauth/oidc): :meth:`run` awaits them, then
    decides the rest (from step 8) in :func:`decide_now` with what they found."""

    route: ServedRoute
    backend: BackendTarget
    chain: ModuleChain
    host: str
    path: str
    forward_path: str
    query: str
    params: MultiDictProxy[str]
    where: str
    body: bytes | None = None
    """The body, when a module read it (step 6)."""
    certificate: bytes | None = None
    """The client's certificate, when mutualTLS checked it (step 7)."""
    admitted: IdentityAdmitted | None = None
    """What oauth/oidc admitted the request as (step 7)."""
    password_check: PasswordCheck | None = None
    """The bcrypt check :func:`decide_now`'s ``check_fields`` stopped at (its checks before it
    done, a rateLimit token taken): :meth:`run` awaits it and the checks after it, no others."""
    view: RequestView | None = None
    """The request as the checks after ``password_check`` read it."""
    when: float = 0.0
    """The time ``check_fields`` checked at, for the checks after ``password_check``."""

    async def run(
        self, front: EdgeFront, request: H2Request, exchange: Exchange | None
    ) -> Refusal | Admitted:
        """Steps 6 and 7, then the rest of :func:`decide_now`."""
        chain, host, path, params = self.chain, self.host, self.path, self.params
        check, view = self.password_check, self.view
        if check is not None and view is not None:
            rejection = await chain.check_password(
                view, check, passwords=front.passwords, now=self.when
            )
            if rejection is not None:
                return _module_refusal(rejection.status, rejection.body, rejection.headers)
        elif chain.needs_body:
            try:
                self.body = await _read_body(request, within=front.body_timeout)
            except (H2BodyTimeout, ClientBodyTimeout):
                return _refused(reasons.BODY_TIMEOUT, close=True)
            if self.body is None:
                return _refused(reasons.BODY_TOO_LARGE, close=True)
        if check is None and not chain.admits_all:
            if chain.needs_peer_certificate:
                self.certificate = peer_certificate(request.transport)
            view = _request_view(request, path, params, host, self.body, self.certificate)
            # oauth/oidc run after the other checks, before the circuit breaker
            # (docs/modules.md).
            rejection = await chain.admit(
                view, breaker=chain.identity is None, passwords=front.passwords
            )
            if rejection is not None:
                return _module_refusal(rejection.status, rejection.body, rejection.headers)
            if chain.identity is not None:
                decided = await chain.identity.handle(
                    view, scheme=request.scheme, route_path=self.route.path
                )
                if isinstance(decided, IdentityReply):
                    return _module_refusal(decided.status, decided.body, decided.headers)
                self.admitted = decided
                rejection = chain.check_breaker()
                if rejection is not None:
                    return _module_refusal(rejection.status, rejection.body, rejection.headers)
        finished = decide_now(front, request, exchange, self)
        assert not isinstance(finished, ModuleSteps)
        return finished


def decide_now(
    front: EdgeFront,
    request: H2Request,
    exchange: Exchange | None,
    checked: ModuleSteps | None = None,
) -> Refusal | Admitted | ModuleSteps:
    """Steps 1-10 without waiting, for a route whose modules need no wait (most: none at
    all) — one function call, no coroutine; the :class:`ModuleSteps` to await for the others,
    which ends here again (``checked``: steps 1-7 done) from step 8."""
    if checked is None:
        if request.method == "CONNECT" and request.version == "2":
            return _refused(reasons.CONNECT_NOT_SERVED)
        host = request.authority
        seen = _edge_hosts.get(host)
        if seen is None:
            seen = _seen_host(host)
        edge_host = seen.edge_host
        hosts = front.hosts  # None: a Gateway's port, whose edge computes a host's routes
        served = hosts.get(edge_host) if hosts is not None else front.edge.routes_of_host(edge_host)
        if served is None:
            return _refused(reasons.UNKNOWN_HOST)
        if exchange is not None:
            exchange.target = edge_host  # an edge's host: configured
        try:
            path, forward_path, query = split_target(request.path)
        except ValueError as exc:
            logger.debug("edge {}: refused: {}", host, exc)
            return Refusal(reasons.answer(reasons.BAD_REQUEST, BAD_PATH), with_detail=True)
        params = (
            MultiDictProxy(MultiDict(parse_qsl(query, keep_blank_values=True)))
            if query
            else NO_PARAMS
        )
        selected = select_route(served, path)
        route: ServedRoute | reasons.Answer | None = selected
        if selected is not None and front.narrows:
            route = front.edge.route_for_request(
                selected,
                method=request.method,
                path=path,
                headers=request.headers,
                query=params,
                transport=request.transport,
            )
        if isinstance(route, reasons.Answer):
            return Refusal(route)
        if route is None:
            return _refused(reasons.NO_ROUTE)
        route_id = route.route_id
        if request.version == "2":
            where = f"edge {host} route {route_id} (HTTP/2)"
        else:
            found_where = seen.wheres.get(route_id)
            where = _where(seen, host, route_id) if found_where is None else found_where
        if exchange is not None:
            exchange.route = route_id
        backend, chain = route.backend, route.chain
        if backend is None or chain is None:
            return _refused(reasons.NO_BACKEND_ATTACHED)
        body = certificate = admitted = None
        if not chain.admits_all:  # (a module that reads the body is one of its checks)
            if not chain.checks_at_once:
                return ModuleSteps(
                    route, backend, chain, host, path, forward_path, query, params, where
                )
            if chain.needs_peer_certificate:
                certificate = peer_certificate(request.transport)
            when = chain.clock()
            found = chain.check_fields(request.headers, request.peer, certificate, now=when)
            if isinstance(found, PasswordCheck):  # bcrypt, off the event loop: awaited
                steps = ModuleSteps(
                    route, backend, chain, host, path, forward_path, query, params, where
                )
                steps.certificate, steps.password_check = certificate, found
                steps.view = _request_view(request, path, params, host, None, certificate)
                steps.when = when
                return steps
            if found is not None:
                return _module_refusal(found.status, found.body, found.headers)
    else:
        route, backend, chain = checked.route, checked.backend, checked.chain
        host, path, forward_path = checked.host, checked.path, checked.forward_path
        query, params, where = checked.query, checked.params, checked.where
        body, certificate, admitted = checked.body, checked.certificate, checked.admitted
        seen = _edge_hosts.get(host)
        if seen is None:
            seen = _seen_host(host)
    nginx = chain.nginx
    if nginx is not None:
        backend = nginx.backend(request.headers, backend)
        forward_path = nginx.forward_path(path, forward_path)
    if not backend.exists:
        return _refused(reasons.BACKEND_NOT_FOUND)
    engine = front.engine
    target = backend.key
    policy = engine.policy_of(target)
    plan = None if policy is None else engine.plan(target, policy)
    if plan is None:
        # unrouted_path, inlined (its call was a frame a request on the edge's usual path).
        decision: Forward | reasons.Answer = Forward(
            target, None, EMPTY_FILTERS, forward_path, NO_DEADLINES, None, None
        )
    else:
        info = RequestInfo(
            request.method,
            path,
            forward_path,
            query,
            params,
            request.headers,
            request.scheme,
            host,
        )
        decision = engine.route_by(plan, target, info)
    if isinstance(decision, reasons.Answer):
        log_answer(decision, where)
        return Refusal(decision)
    hooks: ResponseHooks = chain if admitted is None else admitted.hooks(chain)
    uncompressed = chain.uncompressed
    if (
        uncompressed is not None
        and admitted is None
        and not accepts_gzip(request.headers.get("Accept-Encoding"))
    ):
        hooks = uncompressed  # (should_compress's first refusal, known now)
    protocol: str = "detect" if plan is None else plan.policy.protocol
    if nginx is not None:
        decision.deadlines = nginx.deadlines(decision.deadlines)
        decision.upstream_tls = nginx.upstream_tls
        hooks = nginx.hooks(hooks, request.headers)
        protocol = nginx.protocol or protocol
    forwardable = request.forwardable
    if forwardable is not None and chain.keeps_sorted_headers and not front.trusted:
        # The headers the server sorted while parsing, without the HELD_BACK names: what the
        # general rules below leave of them on such a route.
        changes = chain.headers
        rewrite = None if changes is None else changes.request
        # Without a headers module, or with one whose request change sets nothing
        # set_forwarded_headers removes or sets (it would add these three) and is made on the
        # head's bytes too (request_cut): built in one call.
        if rewrite is None or (
            rewrite.request_cut is not None and rewrite.added.isdisjoint(HELD_BACK)
        ):
            verbatim = head_as_sent(request)
            if verbatim is not None:
                peer, scheme = request.peer, request.scheme
                kept = seen.http if scheme == "http" else seen.https
                added = kept.get(peer) if scheme == "http" or scheme == "https" else None
                if added is None:
                    added = _forwarded_lines(seen, peer, scheme, host)
                if added is not None:
                    # The head request_head would make of these headers, without their
                    # items: the client's lines as it sent them (head_as_sent; with the
                    # module's request change, its lines cut out and its own added: the
                    # change's tail) and the three.
                    # What the connection keeps of its last such request (KeptHead): the
                    # same read (head_as_sent's answer, by identity) and the same lines (the
                    # same peer, scheme and host: _SeenHost's object; the same change: its
                    # tail) make the same headers, every one of them from that read: the
                    # last request's again while nothing changed them (a copy, and freeing
                    # it, was ~1,100 instructions), and no new head.
                    lines = added if rewrite is None else rewrite.request_tail(added)
                    last = kept_head(request)
                    if (
                        last is not None
                        and verbatim is last.head
                        and lines is last.added
                        and multidict_version(last.headers) == last.version  # type: ignore[arg-type]
                    ):
                        headers = last.headers
                        head = last.upstream
                    else:
                        headers = _upstream_fields(forwardable, request, host, rewrite)
                        cut = None if rewrite is None else rewrite.request_cut
                        head = (verbatim if cut is None else cut.edited(verbatim)) + lines
                        if last is not None and verbatim is last.head:
                            last.added, last.upstream, last.headers = lines, head, headers
                            last.version = multidict_version(headers)  # type: ignore[arg-type]
                    remember_head(headers, head, request.method, request.path)
                    return Admitted(decision, headers, query, body, hooks, protocol, where)
            headers = _upstream_fields(forwardable, request, host, rewrite)
            return Admitted(decision, headers, query, body, hooks, protocol, where)
        headers = CIMultiDict(forwardable)
        rewrite.apply(headers)
    else:
        headers = without_hop_by_hop(request.headers)
        headers.popall(EXPECT, None)
        headers[HOST] = host
        chain.upstream_request_headers(headers, peer_certificate=certificate)
        if admitted is not None:
            admitted.apply(headers)
    set_forwarded_headers(
        headers, peer_ip=request.peer, scheme=request.scheme, host=host, trusted=front.trusted
    )
    return Admitted(decision, headers, query, body, hooks, protocol, where)


def _upstream_fields(
    forwardable: Sequence[tuple[str, str]],
    request: H2Request,
    host: str,
    rewrite: HeaderRewrite | None,
) -> CIMultiDict[str]:
    """The upstream request's headers on a route that keeps the sorted headers: the client's
    forwardable ones, the headers module's ``rewrite`` made on them (one that sets none of
    ``HELD_BACK``), and the three ``X-Forwarded-*`` (built in one call without a module)."""
    if rewrite is None:
        return CIMultiDict([*forwardable, *_forwarded_fields(request, host)])
    headers = CIMultiDict(forwardable)
    rewrite.apply(headers)
    headers.extend(_forwarded_fields(request, host))
    return headers


def _forwarded_fields(request: H2Request, host: str) -> tuple[tuple[str, str], ...]:
    """The three ``X-Forwarded-*`` of a request from a client no trusted proxy speaks for."""
    return (
        (X_FORWARDED_FOR, request.peer),
        (X_FORWARDED_PROTO, request.scheme),
        (X_FORWARDED_HOST, host),
    )


def _request_view(
    request: H2Request,
    path: str,
    params: MultiDictProxy[str],
    host: str,
    body: bytes | None,
    certificate: bytes | None,
) -> RequestView:
    """What the modules see of ``request`` (step 7)."""
    return RequestView(  # positional (keywords to a class: a dict a request)
        request.method,
        path,
        params,  # query
        request.headers,
        host,  # authority
        request.peer,  # peer_ip
        body,
        request.scheme,
        request.path,  # raw_target
        certificate,  # peer_certificate
    )


async def _read_body(request: H2Request, *, within: float) -> bytes | None:
    """The whole request body (for webhookVerification), None when it is too large."""
    parts: list[bytes] = []
    size = 0
    async for chunk in request.body.chunks(within=within):
        size += len(chunk)
        if size > MAX_READ_BODY:
            return None
        parts.append(chunk)
    return b"".join(parts)
