"""The edge's requests: the steps of ``server.py`` for an HTTP/1.1 request or an HTTP/2 stream.

The edge's listeners serve HTTP/1.1 (``http1_server.py``) and HTTP/2 (h2c with prior knowledge
on the plain port, h2 by ALPN on the TLS port: ``dataplane.http2_server.SniffingProtocol``).
Both hand each request here as an :class:`~interlock.dataplane.request_stream.H2Request` with a
responder for its wire, and it is decided by the steps of ``server.py``'s module docstring, in
that order: the edge by ``Host``/``:authority`` (404), the path (400), the route (404), its
backend attached (503), its modules — ipRestriction, mutualTLS, rateLimit, auth,
webhookVerification, circuitBreaker, identity — (their refusal; fail closed: a route without
its modules applied has no backend), a backend that does not exist (500), then the engine with
the backend Service port's policy. The request is forwarded by
:class:`~interlock.dataplane.streams.StreamForwarder` (h2c to gRPC and h2c backends, HTTP/1.1
to the others), and the modules' request and response header changes and compression apply.

Why one handler for both versions, below the wire: the steps are the security boundary, and two
copies drift. Only a request that upgrades its connection still takes ``server.py``'s aiohttp
handler (its upgrade relay is built on aiohttp's objects).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from loguru import logger
from multidict import MultiDict, MultiDictProxy

from interlock.dataplane import answers as reasons
from interlock.dataplane.access_log import Exchange, begin
from interlock.dataplane.header_names import EXPECT, HOST
from interlock.dataplane.http2_server import H2BodyTimeout
from interlock.dataplane.plan import Forward, RequestInfo, unrouted_path
from interlock.dataplane.proxy import (
    MAX_READ_BODY,
    ClientBodyTimeout,
    ResponseHooks,
    set_forwarded_headers,
    without_hop_by_hop,
)
from interlock.dataplane.request_stream import H2Request, Responder
from interlock.dataplane.request_target import normalize_host, split_target
from interlock.dataplane.streams import StreamForwarder, send_answer, send_plain
from interlock.edge.modules import IdentityReply, RequestView
from interlock.edge.modules.ingress_nginx import holding
from interlock.edge.routing import select_route
from interlock.edge.tls import peer_certificate

if TYPE_CHECKING:
    from interlock.edge.inprocess import ServedRoute
    from interlock.edge.server import EdgeServer

NO_PARAMS: MultiDictProxy[str] = MultiDictProxy(MultiDict())
"""The query parameters of a request without a query (most requests: one value for all)."""

BAD_PATH = (
    "the request path must be absolute, without dot segments hidden from the edge or "
    "characters that backends read differently (see docs/modules.md)"
)


class EdgeStreams:
    """Serves the edge's HTTP/2 streams (see the module docstring)."""

    def __init__(self, server: EdgeServer, *, forwarder: StreamForwarder) -> None:
        # The server's HTTP/2 half: it reads the server's edge, engine, modules' password
        # checker, traffic counters and limits, as its HTTP/1.1 handler does.
        self._server = server
        self.forwarder = forwarder

    async def handle(self, request: H2Request, responder: Responder) -> None:
        """One client stream, counted (and logged) as one exchange once answered."""
        exchange = begin(
            "edge",
            host=request.authority,
            method=request.method,
            path=request.path.partition("?")[0],
            clock=self._server.traffic.clock,
        )
        with holding():  # the limit-connections slot a route's ingressNginx module took
            reason = await self._handle(request, responder, exchange)
        self._server.traffic.record(
            exchange, status=responder.status or 0, sent=responder.bytes, reason=reason
        )

    async def _handle(self, request: H2Request, responder: Responder, exchange: Exchange) -> str:
        """The reason of the answer the edge made itself, or '' when the upstream's was
        relayed."""
        host = request.authority
        server = self._server
        if request.method == "CONNECT":  # only HTTP/2's comes here (HTTP/1.1's upgrades)
            return await _say(responder, reasons.CONNECT_NOT_SERVED)
        edge_host = normalize_host(host)
        routes = server._edge.routes_of_host(edge_host)
        if routes is None:
            return await _say(responder, reasons.UNKNOWN_HOST)
        exchange.target = edge_host  # an edge's host: configured
        try:
            path, forward_path, query = split_target(request.path)
        except ValueError as exc:
            logger.debug("edge {}: refused: {}", host, exc)
            return await _say(responder, reasons.BAD_REQUEST, BAD_PATH)
        params = (
            MultiDictProxy(MultiDict(parse_qsl(query, keep_blank_values=True)))
            if query
            else NO_PARAMS
        )
        selected = select_route(routes.values(), path)
        route: ServedRoute | reasons.Answer | None = selected
        if selected is not None:
            route = server._edge.route_for_request(
                selected,
                method=request.method,
                path=path,
                headers=request.headers,
                query=params,
                transport=request.transport,
            )
        if isinstance(route, reasons.Answer):
            return await _say(responder, route.reason)
        if route is None:
            return await _say(responder, reasons.NO_ROUTE)
        where = f"edge {host} route {route.route_id}"
        if request.version == "2":
            where += " (HTTP/2)"
        exchange.route = route.route_id
        backend, chain = route.backend, route.chain
        if backend is None or chain is None:
            return await _say(responder, reasons.NO_BACKEND_ATTACHED)
        body = None
        if chain.needs_body:
            try:
                body = await self._read_body(request)
            except (H2BodyTimeout, ClientBodyTimeout):
                return await _say(responder, reasons.BODY_TIMEOUT)
            if body is None:
                return await _say(responder, reasons.BODY_TOO_LARGE)
        certificate = None
        admitted = None
        if not chain.admits_all:
            if chain.needs_peer_certificate:
                certificate = peer_certificate(request.transport)
            view = RequestView(
                method=request.method,
                path=path,
                headers=request.headers,
                authority=host,
                query=params,
                body=body,
                peer_ip=request.peer,
                peer_certificate=certificate,
                scheme=request.scheme,
                raw_target=request.path,
            )
            # oauth/oidc after the other checks, before the circuit breaker, as for HTTP/1.1.
            breaker = chain.identity is None
            rejection = await chain.admit(view, breaker=breaker, passwords=server.passwords)
            if rejection is not None:
                return await _refuse(responder, rejection.status, rejection.body, rejection.headers)
            if chain.identity is not None:
                decided = await chain.identity.handle(
                    view, scheme=request.scheme, route_path=route.path
                )
                if isinstance(decided, IdentityReply):
                    return await _refuse(responder, decided.status, decided.body, decided.headers)
                admitted = decided
                rejection = chain.check_breaker()
                if rejection is not None:
                    return await _refuse(
                        responder, rejection.status, rejection.body, rejection.headers
                    )
        nginx = chain.nginx
        if nginx is not None:
            backend = nginx.backend(request.headers, backend)
            forward_path = nginx.forward_path(path, forward_path)
        if not backend.exists:
            return await _say(responder, reasons.BACKEND_NOT_FOUND)
        target = backend.key
        plan = server.engine.plan(target)
        if plan is None:
            decision: Forward | reasons.Answer = unrouted_path(target, forward_path)
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
            decision = server.engine.route_by(plan, target, info)
        if isinstance(decision, reasons.Answer):
            return await self._answer(responder, decision, where)
        hooks: ResponseHooks = chain if admitted is None else admitted.hooks(chain)
        protocol = None
        if nginx is not None:
            decision.deadlines = nginx.deadlines(decision.deadlines)
            decision.upstream_tls = nginx.upstream_tls
            hooks = nginx.hooks(hooks, request.headers)
            protocol = nginx.protocol
        headers = without_hop_by_hop(request.headers)
        headers.popall(EXPECT, None)
        headers[HOST] = host
        chain.upstream_request_headers(headers, peer_certificate=certificate)
        if admitted is not None:
            admitted.apply(headers)
        set_forwarded_headers(
            headers, peer_ip=request.peer, scheme=request.scheme, host=host, trusted=server._trusted
        )
        failed = await self.forwarder.forward(
            request,
            responder,
            decision,
            headers=headers,
            query=query,
            protocol=protocol or ("detect" if plan is None else plan.policy.protocol),
            body=body,
            hooks=hooks,
            where=where,
        )
        if failed is None:
            return ""
        return await self._answer(responder, failed, where)

    async def _read_body(self, request: H2Request) -> bytes | None:
        """The whole request body (for webhookVerification), None when it is too large."""
        parts: list[bytes] = []
        size = 0
        async for chunk in request.body.chunks(within=self._server._limits.body_timeout):
            size += len(chunk)
            if size > MAX_READ_BODY:
                return None
            parts.append(chunk)
        return b"".join(parts)

    @staticmethod
    async def _answer(responder: Responder, decided: reasons.Answer, where: str) -> str:
        """An engine's answer for an internet client: the detail, which names cluster objects,
        goes to the debug log only (as for HTTP/1.1)."""
        if decided.reason != reasons.REDIRECT:
            logger.debug("{}: {} {}: {}", where, decided.status, decided.reason, decided.detail)
        return await send_answer(responder, decided, with_detail=False)


async def _say(responder: Responder, reason: str, detail: str = "") -> str:
    """An answer the edge makes itself (``docs/answers.md``); ``detail`` only when it names no
    cluster object."""
    return await send_answer(responder, reasons.answer(reason, detail), with_detail=bool(detail))


async def _refuse(
    responder: Responder,
    status: int,
    body: str,
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
) -> str:
    """A module's refusal (its status, headers and body), with the edge's reason header."""
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    await send_plain(
        responder, status, body.encode(), [*items, (reasons.REASON_HEADER, reasons.MODULE)]
    )
    return reasons.MODULE
