"""The embedded edge data plane: an HTTP(S) server that routes by host and path, runs a route's
modules, and proxies to its backend.

Both listeners speak HTTP/1.1 and HTTP/2 (h2c with prior knowledge on the plain port, h2 by ALPN
on the TLS port, ``dataplane/http2_server.py``'s ``SniffingProtocol``). An HTTP/1.1 request
(``dataplane/http1_server.py``, httptools) and an HTTP/2 stream are served by ``streams.py``; an
HTTP/2 connection without a stream in flight closes after the idle timeout. A request that
upgrades its connection (WebSocket, another protocol) is handed with its connection to
aiohttp's server and served by :meth:`EdgeServer.handle`, which relays the upgrade
(``interlock/dataplane/websocket.py``). Every one of them is decided by the same steps, in the
same order — host, path, route, modules, backend, the engine's rule — in one function,
:func:`interlock.edge.steps.decide`, whose docstring lists them.

Every answer the edge makes itself has the format of ``docs/answers.md`` (an
``X-Interlock-Reason`` header and a ``<reason>: <sentence>`` body) and no ``Server`` banner.
What one client may hold — connections per upstream, time to send headers and body, idle
connections, the drain on stop — is bounded by :class:`~interlock.dataplane.limits.ProxyLimits`.
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
from interlock.dataplane.answers import BODY_TIMEOUT, REASON_HEADER, UPSTREAM_FAILED, Answer, answer
from interlock.dataplane.connections import GuardedServer
from interlock.dataplane.engine import Engine
from interlock.dataplane.header_names import CONTENT_TYPE_LOWER, HOST
from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.http2_server import H2ServerProtocol, ResetBudget, SniffingProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.listen import parse_host_port
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.proxy import (
    DEFAULT_TIMEOUTS,
    ClientBody,
    Forwarder,
    ProxyTimeouts,
    parse_trusted_proxies,
)
from interlock.dataplane.request_stream import H2Request
from interlock.dataplane.streams import StreamForwarder
from interlock.dataplane.upstreams import UpstreamResolver
from interlock.dataplane.websocket import Upgrades, upgrade_limits, wants_upgrade
from interlock.dataplane.wire import PlainResponse, answer_response
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.modules.addresses import TrustedProxies
from interlock.edge.modules.ingress_nginx import holding
from interlock.edge.passwords import PasswordChecker
from interlock.edge.steps import HELD_BACK, Admitted, EdgeFront, Refusal, decide, log_answer
from interlock.edge.streams import EdgeStreams
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
        self.front = EdgeFront(
            edge=edge,
            engine=self.engine,
            passwords=PasswordChecker(
                workers=limits.password_workers, max_pending=limits.password_checks
            ),
            trusted=self._trusted,
            body_timeout=limits.body_timeout,
        )
        """What the edge's steps (``steps.py``) read."""
        self._streams: EdgeStreams | None = None
        self._h2_connections: set[H2ServerProtocol] = set()
        self._http1_connections: set[Http1ServerProtocol] = set()
        self._listener: asyncio.Server | None = None
        self._runner: web.ServerRunner | None = None
        self._tls_listener: TlsListener | None = None
        self._addresses: EdgeAddresses | None = None

    @property
    def passwords(self) -> PasswordChecker:
        """Runs basicAuth's bcrypt checks off the event loop (a test may replace it)."""
        return self.front.passwords

    @passwords.setter
    def passwords(self, checker: PasswordChecker) -> None:
        self.front.passwords = checker

    @property
    def addresses(self) -> EdgeAddresses:
        if self._addresses is None:
            raise RuntimeError("the edge server is not started")
        return self._addresses

    async def start(
        self, *, addr: str | None, tls_addr: str | None = None, reuse_port: bool = False
    ) -> EdgeAddresses:
        """Listen on ``addr`` (and ``tls_addr`` for HTTPS); port 0 picks a free port. With
        ``reuse_port`` other processes may listen on the same ports (``--edge-workers``)."""
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
        streams = self._streams = EdgeStreams(self.front, forwarder=forwarder, traffic=self.traffic)
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
                    held_back=HELD_BACK,
                    express=streams.express,
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
                    either("http"), host, port, reuse_address=True, reuse_port=reuse_port or None
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
                https = await self._tls_listener.start(
                    *parse_host_port(tls_addr), reuse_port=reuse_port
                )
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
        """A request on a connection handed to aiohttp (one that asks to upgrade, and any
        after it on that connection): the edge's steps, then the upgrade relay (or the
        engine, for a request that does not upgrade)."""
        decided = await decide(
            self.front,
            H2Request(
                method=request.method,
                scheme=request.scheme,
                authority=request.headers.get(HOST, ""),
                path=request.raw_path,
                headers=CIMultiDict(request.headers),
                peer=request.remote or "",
                body=ClientBody(request, timeout=self._limits.body_timeout),
                transport=request.transport,
                version=f"{request.version.major}.{request.version.minor}",
            ),
            current_exchange(),
        )
        if not isinstance(decided, Admitted):
            return refusal_response(decided)
        decision, where = decided.decision, decided.where
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
                query=decided.query,
                headers=decided.headers,
                handshake_timeout=self._connect_timeout,
                where=where,
                client=self._client_of(request),
            )
            return self._answer(relayed, where) if isinstance(relayed, Answer) else relayed
        result = await self.engine.forward(
            request,
            decision,
            query=decided.query,
            headers=decided.headers,
            body=decided.body,
            hooks=decided.hooks,
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
        log_answer(decided, where)
        return refusal_response(Refusal(decided, close=decided.reason == BODY_TIMEOUT))


def refusal_response(refusal: Refusal) -> web.Response:
    """The edge's refusal as an aiohttp response (``streams.refuse`` sends it on a stream)."""
    decided = refusal.answer
    if refusal.module_body is None:
        response = answer_response(decided, with_detail=refusal.with_detail)
    else:
        headers: CIMultiDict[str] = CIMultiDict(decided.headers)
        if CONTENT_TYPE_LOWER not in headers:
            headers[CONTENT_TYPE_LOWER] = "text/plain; charset=utf-8"
        headers[REASON_HEADER] = decided.reason
        response = PlainResponse(
            status=decided.status, body=refusal.module_body.encode(), headers=headers
        )
    if refusal.close:
        response.force_close()
    return response
