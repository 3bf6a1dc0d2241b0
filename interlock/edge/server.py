"""The embedded edge data plane: an HTTP(S) server that routes by host and path, runs a route's
modules, and proxies to its backend.

Each request is decided in one fixed order, and every refusal happens before the upstream is
contacted:

1. the edge, by ``Host`` (port stripped, case-insensitive) — unknown host → 404;
2. the path the backend will act on (``request_target.clean_path``) — ambiguous → 400;
3. the route, by that path (Exact, then the longest Prefix by whole segments) — none → 404;
4. no backend attached yet → 503 (a route whose modules were never applied serves nothing);
5. the route's module chain (ipRestriction, mutualTLS, rateLimit, auth — bcrypt in a thread pool —,
   webhookVerification, circuitBreaker) → its rejection;
6. a backend Service that does not exist → 500;
7. the data-plane engine (``interlock/dataplane/``) with the backend Service port's outbound
   policy: its rule (no rule matches → 404), a RequestRedirect's 30x, the weighted backend (a
   missing one → its failure injector's 500), the endpoints (none → 500/503);
8. request header changes (modules, client-address headers, then the rule's filters and URL
   rewrite), the proxy (the rule's timeouts → 504, retries, failure accrual; 502 on failures
   and on a 101 nobody asked for; the request body streamed byte for byte, 408 if it stalls);
9. response header changes (the rule's, then the modules'), then compression.

Both listeners speak HTTP/1.1 and HTTP/2 (h2c with prior knowledge on the plain port, h2 by ALPN
on the TLS port). An HTTP/1.1 request (``http1_server.py``, httptools) and an HTTP/2 stream take
these steps in one handler, ``streams.py``; an HTTP/2 connection without a stream in flight
closes after the idle timeout. A request that upgrades its connection (WebSocket, another
protocol) is handed with its connection to aiohttp's server and takes the same steps in
:meth:`EdgeServer.handle`, which relays the upgrade (``interlock/dataplane/websocket.py``).

Every answer the edge makes itself has the format of ``docs/answers.md`` (an
``X-Interlock-Reason`` header and a ``<reason>: <sentence>`` body) and no ``Server`` banner.

The route is read once, at step 3, as one immutable value: a request never mixes two
configurations, which is what makes module swaps atomic (see ``inprocess.py``). What one client
may hold — connections per upstream, time to send headers and body, idle connections, the
drain on stop — is bounded by :class:`~interlock.dataplane.limits.ProxyLimits`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from loguru import logger
from multidict import CIMultiDict

from interlock.dataplane.access_log import current as current_exchange
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
    UPSTREAM_FAILED,
    Answer,
    answer,
)
from interlock.dataplane.connections import GuardedServer
from interlock.dataplane.engine import Engine
from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.http2_server import H2ServerProtocol, ResetBudget, SniffingProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.listen import parse_host_port
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.plan import RequestInfo
from interlock.dataplane.proxy import (
    DEFAULT_TIMEOUTS,
    MAX_READ_BODY,
    ClientBody,
    ClientBodyTimeout,
    Forwarder,
    ProxyTimeouts,
    ResponseHooks,
    body_timed_out,
    parse_trusted_proxies,
    set_forwarded_headers,
    without_hop_by_hop,
)
from interlock.dataplane.request_target import clean_path, normalize_host
from interlock.dataplane.streams import StreamForwarder
from interlock.dataplane.upstreams import UpstreamResolver
from interlock.dataplane.websocket import Upgrades, upgrade_limits, wants_upgrade
from interlock.dataplane.wire import PlainResponse, answer_response, plain_response
from interlock.edge.inprocess import InProcessEdge, ServedRoute
from interlock.edge.modules import IdentityReply, RequestView
from interlock.edge.modules.addresses import TrustedProxies
from interlock.edge.modules.ingress_nginx import holding
from interlock.edge.passwords import PasswordChecker
from interlock.edge.routing import select_route
from interlock.edge.streams import EdgeStreams
from interlock.edge.tls import peer_certificate
from interlock.edge.tls_listener import TlsListener


@dataclass(frozen=True, slots=True)
class EdgeAddresses:
    """Where the data plane listens (ports as bound, so port 0 shows the chosen one)."""

    http: tuple[str, int] | None
    """None when only HTTPS was asked for (a Gateway's HTTPS port)."""
    https: tuple[str, int] | None


class EdgeServer:
    """Serves an :class:`InProcessEdge` over HTTP, and over HTTPS with SNI when asked to."""

    def __init__(
        self,
        *,
        edge: InProcessEdge,
        upstreams: UpstreamResolver,
        trusted_proxies: Sequence[str] = (),
        timeouts: ProxyTimeouts = DEFAULT_TIMEOUTS,
        limits: ProxyLimits = DEFAULT_LIMITS,
        rng: random.Random | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self._edge = edge
        self.traffic = traffic or Traffic()
        """Where finished requests are counted (and logged, with ``--access-log``)."""
        self._upgrades = Upgrades(upgrade_limits(limits), traffic=self.traffic, front="edge")
        self._upstreams = upstreams
        self._trusted = parse_trusted_proxies(trusted_proxies)
        self._proxies = TrustedProxies(trusted_proxies)
        self._limits = limits
        self._forwarder = Forwarder(timeouts=timeouts, limits=limits)
        self._connect_timeout = timeouts.connect
        self.engine = Engine(
            source=upstreams, forwarder=self._forwarder, body_timeout=limits.body_timeout, rng=rng
        )
        """Applies the backend Service port's policy (``interlock/dataplane/``)."""
        self.passwords = PasswordChecker(
            workers=limits.password_workers, max_pending=limits.password_checks
        )
        """Runs basicAuth's bcrypt checks off the event loop (a test may replace it before
        :meth:`start`)."""
        self._streams: EdgeStreams | None = None
        self._h2_connections: set[H2ServerProtocol] = set()
        self._http1_connections: set[Http1ServerProtocol] = set()
        self._listener: asyncio.Server | None = None
        self._runner: web.ServerRunner | None = None
        self._tls_listener: TlsListener | None = None
        self._addresses: EdgeAddresses | None = None

    @property
    def addresses(self) -> EdgeAddresses:
        if self._addresses is None:
            raise RuntimeError("the edge server is not started")
        return self._addresses

    async def start(self, *, addr: str | None, tls_addr: str | None = None) -> EdgeAddresses:
        """Listen on ``addr`` (and ``tls_addr`` for HTTPS); port 0 picks a free port."""
        await self._forwarder.start()
        server = GuardedServer(
            self._observed,
            access_log=None,
            # A client that leaves cancels its request, and so its upstream exchange.
            handler_cancellation=True,
            # Request bodies go upstream byte for byte: decoding them here corrupted uploads
            # (forwarded with the client's Content-Encoding and Content-Length) and inflated
            # gzip bombs toward the backend. Decoding is the backend's business.
            auto_decompress=False,
            keepalive_timeout=self._limits.idle_timeout,
            header_timeout=self._limits.header_timeout,
        )
        runner = web.ServerRunner(
            server,
            access_log=None,
            handle_signals=False,
            # Stopping closes the listeners at once, then waits at most this long for requests
            # in flight before cancelling them (aiohttp's default was 60 s, past Kubernetes'
            # 30 s grace period).
            shutdown_timeout=self._limits.drain_timeout,
        )
        await runner.setup()
        self._runner = runner
        forwarder = StreamForwarder(
            engine=self.engine, forwarder=self._forwarder, connect_timeout=self._connect_timeout
        )
        streams = self._streams = EdgeStreams(self, forwarder=forwarder)
        resets = ResetBudget(self._limits.http2_resets, self._limits.http2_reset_window)

        def either(scheme: str) -> Callable[[], SniffingProtocol]:
            """HTTP/1.1 (``http1_server.py``; aiohttp's handler once a request upgrades) or
            HTTP/2, as each connection's first bytes (or its ALPN) say:
            ``interlock.dataplane.http2_server.SniffingProtocol``."""

            def http1() -> Http1ServerProtocol:
                protocol = Http1ServerProtocol(
                    streams.handle,
                    scheme=scheme,
                    limits=self._limits,
                    upgrade=server,
                    closed=self._http1_connections.discard,
                )
                self._http1_connections.add(protocol)
                return protocol

            def http2() -> H2ServerProtocol:
                protocol = H2ServerProtocol(
                    streams.handle,
                    scheme=scheme,
                    closed=self._h2_connections.discard,
                    idle_timeout=self._limits.idle_timeout,
                    resets=resets,
                    underscores_in_headers=self._limits.underscores_in_headers,
                )
                self._h2_connections.add(protocol)
                return protocol

            return lambda: SniffingProtocol(
                http1=http1, http2=http2, choose_within=self._limits.header_timeout
            )

        try:
            http = None
            if addr is not None:
                host, port = parse_host_port(addr)
                self._listener = await asyncio.get_running_loop().create_server(
                    either("http"), host, port, reuse_address=True
                )
                bound = self._listener.sockets[0].getsockname()
                http = (str(bound[0]), int(bound[1]))
            https = None
            if tls_addr is not None:
                # Its own accept loop: each host's TLS context is chosen from the ClientHello
                # (see tls_listener.py), which one ssl_context on a TCPSite cannot do.
                self._tls_listener = TlsListener(
                    protocol_factory=either("https"),
                    context_for=self._edge.certificates.context_for,
                    timeout=self._limits.header_timeout,
                )
                https = await self._tls_listener.start(*parse_host_port(tls_addr))
        except BaseException:
            await self.stop()
            raise
        self._addresses = EdgeAddresses(http=http, https=https)
        logger.info("edge data plane listening on {} (TLS: {})", http, https)
        return self._addresses

    async def stop(self) -> None:
        """Stop accepting, drain requests in flight for at most ``drain_timeout`` s (then cancel
        them), close the upstream connections."""
        if self._tls_listener is not None:
            await self._tls_listener.close()
            self._tls_listener = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        open_connections: list[Http1ServerProtocol | H2ServerProtocol] = [
            *self._http1_connections,
            *self._h2_connections,
        ]
        if open_connections:
            logger.info(
                "edge data plane stopping: no new connections; draining {} open connection(s) "
                "for at most {:g} s",
                len(open_connections),
                self._limits.drain_timeout,
            )
            await asyncio.gather(
                *(c.close(within=self._limits.drain_timeout) for c in open_connections)
            )
        if self._streams is not None:
            await self._streams.forwarder.close()
            self._streams = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._forwarder.close()
        await self._upgrades.close()
        self.passwords.close()
        self._addresses = None

    async def _observed(self, request: web.BaseRequest) -> web.StreamResponse:
        with holding():  # the limit-connections slot a route's ingressNginx module took
            return await self.traffic.observe("edge", request, self.handle)

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        host_header = request.headers.get("Host", "")
        routes = self._edge.routes_of(host_header)
        if routes is None:
            return answer_response(answer(UNKNOWN_HOST))
        exchange = current_exchange()
        if exchange is not None:
            exchange.target = normalize_host(host_header)  # an edge's host: configured
        raw_path, _, query = request.raw_path.partition("?")
        try:
            if "#" in query:
                raise ValueError("a request-target never carries a #fragment")
            path, forward_path = clean_path(raw_path)
        except ValueError as exc:
            logger.debug("edge {}: refused: {}", host_header, exc)
            return answer_response(
                answer(
                    BAD_REQUEST,
                    "the request path must be absolute, without dot segments hidden from the "
                    "edge or characters that backends read differently (see docs/modules.md)",
                ),
                with_detail=True,
            )
        selected = select_route(routes.values(), path)
        route: ServedRoute | Answer | None = selected
        if selected is not None:
            route = self._edge.route_for_request(
                selected,
                method=request.method,
                path=path,
                headers=request.headers,
                query=request.query,
                transport=request.transport,
            )
        if isinstance(route, Answer):
            return answer_response(route)
        if route is None:
            return answer_response(answer(NO_ROUTE))
        where = f"edge {host_header} route {route.route_id}"
        if exchange is not None:
            exchange.route = route.route_id
        backend, chain = route.backend, route.chain
        if backend is None or chain is None:
            return answer_response(answer(NO_BACKEND_ATTACHED))
        body = None
        if chain.needs_body:
            try:
                body = await ClientBody(request, timeout=self._limits.body_timeout).read(
                    max_size=MAX_READ_BODY
                )
            except ClientBodyTimeout:
                return body_timed_out()
            if body is None:
                response = answer_response(answer(BODY_TOO_LARGE))
                response.force_close()
                return response
        view = RequestView(
            method=request.method,
            path=path,
            query=request.query,
            headers=request.headers,
            authority=host_header,
            peer_ip=request.remote or "",
            body=body,
            peer_certificate=(
                peer_certificate(request.transport) if chain.needs_peer_certificate else None
            ),
            scheme=request.scheme,
            raw_target=request.raw_path,
        )
        # oauth/oidc run after the other checks, before the circuit breaker (docs/modules.md).
        rejection = await chain.admit(
            view, passwords=self.passwords, breaker=chain.identity is None
        )
        if rejection is not None:
            return plain_response(
                rejection.status, rejection.body, reason=MODULE, headers=rejection.headers
            )
        admitted = None
        if chain.identity is not None:
            decided = await chain.identity.handle(
                view, scheme=request.scheme, route_path=route.path
            )
            if isinstance(decided, IdentityReply):
                reply = PlainResponse(
                    status=decided.status,
                    body=decided.body.encode(),
                    headers=CIMultiDict(decided.headers),
                )
                reply.headers[REASON_HEADER] = MODULE
                return reply
            admitted = decided
            rejection = chain.check_breaker()
            if rejection is not None:
                return plain_response(
                    rejection.status, rejection.body, reason=MODULE, headers=rejection.headers
                )
        nginx = chain.nginx
        if nginx is not None:
            backend = nginx.backend(request.headers, backend)
            forward_path = nginx.forward_path(path, forward_path)
        if not backend.exists:
            return answer_response(answer(BACKEND_NOT_FOUND))
        target = backend.key
        decision = self.engine.route(
            target,
            RequestInfo(
                method=request.method,
                path=path,
                forward_path=forward_path,
                query=query,
                query_params=request.query,
                headers=request.headers,
                scheme=request.scheme,
                host=host_header,
            ),
        )
        if isinstance(decision, Answer):
            return self._answer(decision, where)
        hooks: ResponseHooks = chain if admitted is None else admitted.hooks(chain)
        if nginx is not None:
            decision.deadlines = nginx.deadlines(decision.deadlines)
            decision.upstream_tls = nginx.upstream_tls
            hooks = nginx.hooks(hooks, request.headers)
        headers = without_hop_by_hop(request.headers)
        headers.popall("Expect", None)
        chain.upstream_request_headers(headers, peer_certificate=view.peer_certificate)
        if admitted is not None:
            admitted.apply(headers)
        set_forwarded_headers(
            headers,
            peer_ip=request.remote or "",
            scheme=request.scheme,
            host=host_header,
            trusted=self._trusted,
        )
        if wants_upgrade(request.method, request.headers):
            if decision.upstream_tls:
                # The upgrade relay speaks plain TCP upstream: refused rather than sent in clear.
                return self._answer(
                    answer(UPSTREAM_FAILED, f"{where}: upgrades to a TLS upstream are not served"),
                    where,
                )
            relayed = await self._upgrades.relay_decision(
                request,
                decision,
                addresses=self._upstreams.addresses(decision.target),
                query=query,
                headers=headers,
                handshake_timeout=self._connect_timeout,
                where=where,
                client=self._client_of(request),
            )
            return self._answer(relayed, where) if isinstance(relayed, Answer) else relayed
        result = await self.engine.forward(
            request,
            decision,
            query=query,
            headers=headers,
            body=body,
            hooks=hooks,
            where=where,
        )
        if isinstance(result, Answer):
            return self._answer(result, where)
        return result

    def _client_of(self, request: web.BaseRequest) -> str:
        """The client's address: the peer's, or the one a trusted proxy forwarded."""
        peer = request.remote or ""
        if not self._trusted:
            return peer
        address = self._proxies.client_address(peer_ip=peer, headers=request.headers)
        return peer if address is None else str(address)

    @staticmethod
    def _answer(decided: Answer, where: str) -> web.Response:
        """An engine's answer for an internet client: its reason and sentence (a redirect's
        Location); the detail, which names cluster objects, goes to the debug log."""
        if decided.reason != REDIRECT:
            logger.debug("{}: {} {}: {}", where, decided.status, decided.reason, decided.detail)
        response = answer_response(decided)
        if decided.reason == BODY_TIMEOUT:
            response.force_close()
        return response
