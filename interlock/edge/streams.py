"""The edge's HTTP/2 streams: the steps of ``server.py`` for a client that speaks h2.

The edge's listeners serve HTTP/2 as well as HTTP/1.1 (h2c with prior knowledge on the plain
port, h2 by ALPN on the TLS port: ``interlock.dataplane.http2.SniffingProtocol``). A stream is
decided by the same steps, in the same order, as an HTTP/1.1 request (``server.py``'s module
docstring): the edge by ``:authority`` (404), the path (400), the route (404), its backend
attached (503), its modules — ipRestriction, mutualTLS, rateLimit, auth, webhookVerification,
circuitBreaker, identity — (their refusal; fail closed: a route without its modules applied has
no backend), a backend that does not exist (500), then the engine with the backend Service
port's policy. Only the wire differs: the stream is forwarded by
:class:`~interlock.dataplane.streams.StreamForwarder` (h2c to gRPC and h2c backends, HTTP/1.1
to the others), and the modules' request and response header changes and compression apply.

Why a module of its own and not branches in ``server.py``'s handler: that handler is the
HTTP/1.1 hot path, shaped around aiohttp's request and response objects; an HTTP/2 stream has
neither. What both share is below them: the routes, the module chain, the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import parse_qsl

from loguru import logger
from multidict import MultiDict, MultiDictProxy

from interlock.dataplane.access_log import Exchange, begin
from interlock.dataplane.answers import (
    BACKEND_NOT_FOUND,
    BAD_REQUEST,
    BODY_TIMEOUT,
    BODY_TOO_LARGE,
    MODULE,
    NO_BACKEND_ATTACHED,
    NO_ROUTE,
    REASON_HEADER,
    REDIRECT,
    UNKNOWN_HOST,
    Answer,
    answer,
)
from interlock.dataplane.engine import Engine
from interlock.dataplane.http2 import H2BodyTimeout, H2Request, H2Responder
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.plan import RequestInfo
from interlock.dataplane.source import ServicePortRef
from interlock.dataplane.streams import StreamForwarder, send_answer, send_plain, upstream_http2
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.modules import IdentityReply, RequestView
from interlock.edge.passwords import PasswordChecker
from interlock.edge.proxy import (
    MAX_READ_BODY,
    Forwarder,
    IPNetwork,
    set_forwarded_headers,
    without_hop_by_hop,
)
from interlock.edge.routing import clean_path, normalize_host, select_route
from interlock.edge.tls import peer_certificate

BAD_PATH = (
    "the request path must be absolute, without dot segments hidden from the edge or "
    "characters that backends read differently (see docs/modules.md)"
)


class EdgeStreams:
    """Serves the edge's HTTP/2 streams (see the module docstring)."""

    def __init__(
        self,
        *,
        edge: InProcessEdge,
        engine: Engine,
        forwarder: Forwarder,
        passwords: PasswordChecker,
        trusted: Sequence[IPNetwork],
        traffic: Traffic,
        connect_timeout: float,
        body_timeout: float,
    ) -> None:
        self._edge = edge
        self._engine = engine
        self._passwords = passwords
        self._trusted = tuple(trusted)
        self._traffic = traffic
        self._body_timeout = body_timeout
        self.forwarder = StreamForwarder(
            engine=engine, forwarder=forwarder, connect_timeout=connect_timeout
        )

    async def handle(self, request: H2Request, responder: H2Responder) -> None:
        """One client stream, counted (and logged) as one exchange once answered."""
        exchange = begin(
            "edge",
            host=request.authority,
            method=request.method,
            path=request.path.partition("?")[0],
            clock=self._traffic.clock,
        )
        reason = await self._handle(request, responder, exchange)
        self._traffic.record(
            exchange, status=responder.status or 0, sent=responder.bytes, reason=reason
        )

    async def _handle(self, request: H2Request, responder: H2Responder, exchange: Exchange) -> str:
        """The reason of the answer the edge made itself, or '' when the upstream's was
        relayed."""
        host = request.authority
        routes = self._edge.routes_of(host)
        if routes is None:
            return await send_answer(responder, answer(UNKNOWN_HOST), with_detail=False)
        exchange.target = normalize_host(host)  # an edge's host: configured
        raw_path, _, query = request.path.partition("?")
        try:
            if "#" in query:
                raise ValueError("a request-target never carries a #fragment")
            path, forward_path = clean_path(raw_path)
        except ValueError as exc:
            logger.debug("edge {}: refused: {}", host, exc)
            return await send_answer(responder, answer(BAD_REQUEST, BAD_PATH), with_detail=True)
        route = select_route(routes.values(), path)
        if route is None:
            return await send_answer(responder, answer(NO_ROUTE), with_detail=False)
        where = f"edge {host} route {route.route_id} (HTTP/2)"
        exchange.route = route.route_id
        backend, chain = route.backend, route.chain
        if backend is None or chain is None:
            return await send_answer(responder, answer(NO_BACKEND_ATTACHED), with_detail=False)
        body = None
        if chain.needs_body:
            try:
                body = await self._read_body(request)
            except H2BodyTimeout:
                return await send_answer(responder, answer(BODY_TIMEOUT), with_detail=False)
            if body is None:
                return await send_answer(responder, answer(BODY_TOO_LARGE), with_detail=False)
        query_params = MultiDictProxy(MultiDict(parse_qsl(query, keep_blank_values=True)))
        view = RequestView(
            method=request.method,
            path=path,
            query=query_params,
            headers=request.headers,
            peer_ip=request.peer,
            body=body,
            peer_certificate=(
                peer_certificate(request.transport) if chain.needs_peer_certificate else None
            ),
        )
        rejection = await chain.admit(
            view, passwords=self._passwords, breaker=chain.identity is None
        )
        if rejection is not None:
            return await _refuse(responder, rejection.status, rejection.body, rejection.headers)
        admitted = None
        if chain.identity is not None:
            decided = await chain.identity.handle(
                view, scheme=request.scheme, route_path=route.path
            )
            if isinstance(decided, IdentityReply):
                return await _refuse(responder, decided.status, decided.body, decided.headers)
            admitted = decided
            rejection = chain.check_breaker()
            if rejection is not None:
                return await _refuse(responder, rejection.status, rejection.body, rejection.headers)
        if not backend.exists:
            return await send_answer(responder, answer(BACKEND_NOT_FOUND), with_detail=False)
        target = ServicePortRef(backend.namespace, backend.service, backend.port)
        decision = self._engine.route(
            target,
            RequestInfo(
                method=request.method,
                path=path,
                forward_path=forward_path,
                query=query,
                query_params=query_params,
                headers=request.headers,
                scheme=request.scheme,
                host=host,
            ),
        )
        if isinstance(decision, Answer):
            return await self._answer(responder, decision, where)
        headers = without_hop_by_hop(request.headers)
        headers.popall("Expect", None)
        headers["Host"] = host
        chain.upstream_request_headers(headers, peer_certificate=view.peer_certificate)
        if admitted is not None:
            admitted.apply(headers)
        set_forwarded_headers(
            headers, peer_ip=request.peer, scheme=request.scheme, host=host, trusted=self._trusted
        )
        plan = self._engine.plan(target)
        protocol = "detect" if plan is None else plan.policy.protocol
        failed = await self.forwarder.forward(
            request,
            responder,
            decision,
            headers=headers,
            query=query,
            http2=upstream_http2(request.headers, protocol),
            body=body,
            hooks=chain if admitted is None else admitted.hooks(chain),
            where=where,
        )
        if failed is None:
            return ""
        return await self._answer(responder, failed, where)

    async def _read_body(self, request: H2Request) -> bytes | None:
        """The whole request body (for webhookVerification), None when it is too large."""
        parts: list[bytes] = []
        size = 0
        async for chunk in request.body.chunks(within=self._body_timeout):
            size += len(chunk)
            if size > MAX_READ_BODY:
                return None
            parts.append(chunk)
        return b"".join(parts)

    @staticmethod
    async def _answer(responder: H2Responder, decided: Answer, where: str) -> str:
        """An engine's answer for an internet client: the detail, which names cluster objects,
        goes to the debug log only (as for HTTP/1.1)."""
        if decided.reason != REDIRECT:
            logger.debug("{}: {} {}: {}", where, decided.status, decided.reason, decided.detail)
        return await send_answer(responder, decided, with_detail=False)


async def _refuse(
    responder: H2Responder,
    status: int,
    body: str,
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
) -> str:
    """A module's refusal (its status, headers and body), with the edge's reason header."""
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    await send_plain(responder, status, body.encode(), [*items, (REASON_HEADER, MODULE)])
    return MODULE
