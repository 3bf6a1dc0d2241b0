"""The embedded edge data plane: an HTTP(S) server that routes by host and path, runs a route's
modules, and proxies to its backend.

Each request is decided in one fixed order, and every refusal happens before the upstream is
contacted:

1. the edge, by ``Host`` (port stripped, case-insensitive) — unknown host → 404;
2. the path the backend will act on (``routing.clean_path``) — ambiguous → 400;
3. the route, by that path (Exact, then the longest Prefix by whole segments) — none → 404;
4. no backend attached yet → 503 (a route whose modules were never applied serves nothing);
5. the route's module chain (ipRestriction, rateLimit, auth — bcrypt in a thread pool —,
   webhookVerification, circuitBreaker) → its rejection;
6. a backend Service that does not exist → 500; the upstream resolver's error (500/503);
7. request header changes, client-address headers, the proxy (504 on timeouts, 502 on failures
   and on a 101 nobody asked for; the request body streamed byte for byte, 408 if it stalls);
8. response header changes, then compression.

The route is read once, at step 3, as one immutable value: a request never mixes two
configurations, which is what makes module swaps atomic (see ``inprocess.py``). What one client
may hold — connections per upstream, time to send headers and body, idle connections, the
drain on stop — is bounded by :class:`~interlock.edge.limits.EdgeLimits`.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web
from loguru import logger
from multidict import CIMultiDict

from interlock.edge.connections import GuardedServer
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.limits import DEFAULT_LIMITS, EdgeLimits
from interlock.edge.modules import IdentityReply, RequestView
from interlock.edge.passwords import PasswordChecker
from interlock.edge.provider import BackendTarget
from interlock.edge.proxy import (
    DEFAULT_TIMEOUTS,
    MAX_READ_BODY,
    ClientBody,
    ClientBodyTimeout,
    Forwarder,
    ProxyTimeouts,
    body_timed_out,
    parse_trusted_proxies,
    set_forwarded_headers,
    without_hop_by_hop,
)
from interlock.edge.routing import clean_path, select_route
from interlock.edge.upstreams import UpstreamError, UpstreamResolver


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) → (host, port); raises ValueError naming it."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {value!r}: HOST:PORT is required")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {value!r}: port {port} is out of range")
    return host, port


@dataclass(frozen=True, slots=True)
class EdgeAddresses:
    """Where the data plane listens (ports as bound, so port 0 shows the chosen one)."""

    http: tuple[str, int]
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
        limits: EdgeLimits = DEFAULT_LIMITS,
    ) -> None:
        self._edge = edge
        self._upstreams = upstreams
        self._trusted = parse_trusted_proxies(trusted_proxies)
        self._limits = limits
        self._forwarder = Forwarder(timeouts=timeouts, limits=limits)
        self.passwords = PasswordChecker(
            workers=limits.password_workers, max_pending=limits.password_checks
        )
        """Runs basicAuth's bcrypt checks off the event loop (a test may replace it before
        :meth:`start`)."""
        self._round_robin: dict[BackendTarget, itertools.count[int]] = {}
        self._runner: web.ServerRunner | None = None
        self._addresses: EdgeAddresses | None = None

    @property
    def addresses(self) -> EdgeAddresses:
        if self._addresses is None:
            raise RuntimeError("the edge server is not started")
        return self._addresses

    async def start(self, *, addr: str, tls_addr: str | None = None) -> EdgeAddresses:
        """Listen on ``addr`` (and ``tls_addr`` for HTTPS); port 0 picks a free port."""
        await self._forwarder.start()
        server = GuardedServer(
            self.handle,
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
        try:
            http = await _listen(runner, addr, ssl_context=None)
            https = None
            if tls_addr is not None:
                https = await _listen(
                    runner, tls_addr, ssl_context=self._edge.certificates.server_context
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
        if self._runner is not None:
            server = self._runner.server
            open_connections = 0 if server is None else len(server.connections)
            logger.info(
                "edge data plane stopping: no new connections; draining {} open connection(s) "
                "for at most {:g} s",
                open_connections,
                self._limits.drain_timeout,
            )
            await self._runner.cleanup()
            self._runner = None
        await self._forwarder.close()
        self.passwords.close()
        self._addresses = None

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        host_header = request.headers.get("Host", "")
        routes = self._edge.routes_of(host_header)
        if routes is None:
            return _plain(404, "no edge serves this host")
        raw_path, _, query = request.raw_path.partition("?")
        try:
            if "#" in query:
                raise ValueError("a request-target never carries a #fragment")
            path, forward_path = clean_path(raw_path)
        except ValueError as exc:
            logger.debug("edge {}: refused: {}", host_header, exc)
            return _plain(
                400,
                "the request path must be absolute, without dot segments hidden from the edge "
                "or characters that backends read differently (see docs/modules.md)",
            )
        route = select_route(routes.values(), path)
        if route is None:
            return _plain(404, "no route of this edge matches the path")
        where = f"edge {host_header} route {route.route_id}"
        backend, chain = route.backend, route.chain
        if backend is None or chain is None:
            return _plain(503, "this route has no backend attached")
        body = None
        if chain.needs_body:
            try:
                body = await ClientBody(request, timeout=self._limits.body_timeout).read(
                    max_size=MAX_READ_BODY
                )
            except ClientBodyTimeout:
                return body_timed_out()
            if body is None:
                response = _plain(413, "the request body is too large for this route")
                response.force_close()
                return response
        view = RequestView(
            method=request.method,
            path=path,
            query=request.query,
            headers=request.headers,
            peer_ip=request.remote or "",
            body=body,
        )
        # oauth/oidc run after the other checks, before the circuit breaker (docs/modules.md).
        rejection = await chain.admit(
            view, passwords=self.passwords, breaker=chain.identity is None
        )
        if rejection is not None:
            response = web.Response(status=rejection.status, text=rejection.body)
            response.headers.update(rejection.headers)
            return response
        admitted = None
        if chain.identity is not None:
            decided = await chain.identity.handle(
                view, scheme=request.scheme, route_path=route.path
            )
            if isinstance(decided, IdentityReply):
                return web.Response(
                    status=decided.status,
                    body=decided.body.encode(),
                    headers=CIMultiDict(decided.headers),
                )
            admitted = decided
            rejection = chain.check_breaker()
            if rejection is not None:
                response = web.Response(status=rejection.status, text=rejection.body)
                response.headers.update(rejection.headers)
                return response
        if not backend.exists:
            return _plain(500, "the backend Service of this route does not exist")
        addresses = self._upstreams.resolve(
            namespace=backend.namespace,
            service=backend.service,
            port=backend.port,
            method=request.method,
            path=path,
            headers=request.headers,
            query=request.query,
        )
        if isinstance(addresses, UpstreamError):
            logger.debug("{}: {}", where, addresses.message)
            return _plain(addresses.status, "the backend cannot serve this request")
        if not addresses:
            return _plain(503, "the backend has no ready endpoint")
        headers = without_hop_by_hop(request.headers)
        headers.popall("Expect", None)
        chain.upstream_request_headers(headers)
        if admitted is not None:
            admitted.apply(headers)
        set_forwarded_headers(
            headers,
            peer_ip=request.remote or "",
            scheme=request.scheme,
            host=host_header,
            trusted=self._trusted,
        )
        counter = self._round_robin.setdefault(backend, itertools.count())
        return await self._forwarder.forward(
            request,
            path=forward_path,
            query=query,
            addresses=addresses,
            first=next(counter) % len(addresses),
            headers=headers,
            body=body,
            hooks=chain if admitted is None else admitted.hooks(chain),
            where=where,
        )


async def _listen(
    runner: web.ServerRunner, addr: str, *, ssl_context: ssl.SSLContext | None
) -> tuple[str, int]:
    host, port = parse_host_port(addr)
    before = set(map(tuple, runner.addresses))
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_address=True)
    await site.start()
    bound = [a for a in map(tuple, runner.addresses) if a not in before]
    return str(bound[0][0]), int(bound[0][1])


def _plain(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=f"{text}\n")
