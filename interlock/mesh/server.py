"""The mesh listener: an outbound HTTP proxy for cluster clients that have no sidecar.

A client sends its request here, naming the Service it wants in the authority (``Host:
web.shop.svc:8080``, or ``GET http://web.shop.svc:8080/cart`` as an ``HTTP_PROXY`` client
does), and the listener routes it by that Service port's outbound policy as the listener's
client namespace sees it — the policy a Linkerd proxy would enforce in that namespace. Each
request is decided in one fixed order, every refusal before an upstream is contacted:

1. the authority (:func:`~interlock.model.authority.mesh_target`) — names no Service → 404;
2. the path the backend will act on (``dataplane.request_target.clean_path``) — ambiguous → 400;
3. the Service port's policy (:class:`~interlock.mesh.upstreams.MeshUpstreams`; the first
   request of a Service port waits for it, bounded) — a Service that does not exist has the
   Default route whose backend's failure injector answers 500, as the Gateway API requires;
4. the data-plane engine (``interlock/dataplane/``, shared with the edge): the route rule by
   method, path, headers and query (none → 404), redirects, the backend by weight (its failure
   injector's status and message when it cannot be used), its ready endpoints (EndpointSlices;
   none → 503), filters, timeouts (504), retries and failure accrual, over the data plane's
   :class:`~interlock.dataplane.proxy.Forwarder` (hop-by-hop headers dropped, bodies streamed both
   ways, 502 on failures).

The port speaks HTTP/1.1 and h2c (gRPC): an HTTP/2 stream is decided by the same steps and sent
upstream over h2c (``dataplane.http2_client``; :meth:`MeshServer.handle_h2`). A ``CONNECT``
request opens a byte tunnel routed by the port's TCPRoute or TLSRoute instead
(:class:`~interlock.mesh.tunnels.MeshTunnels`).

No edge module runs here: modules belong to Ingresses, and a mesh request has none. Answers the
listener makes itself name their reason in ``X-Interlock-Reason`` and the body (``<reason>:
<detail>``, the data plane's answer format); mesh clients are inside the cluster, so the detail
names the Service and the route.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from aiohttp import web
from loguru import logger
from multidict import CIMultiDict, MultiDict, MultiDictProxy

from interlock.dataplane import Answer, Forward, RequestInfo
from interlock.dataplane.access_log import Exchange, begin
from interlock.dataplane.access_log import current as current_exchange
from interlock.dataplane.answers import (
    BAD_REQUEST,
    CONNECT_NOT_SERVED,
    UNKNOWN_HOST,
)
from interlock.dataplane.answers import answer as answer_of
from interlock.dataplane.connections import GuardedServer
from interlock.dataplane.engine import Engine
from interlock.dataplane.http2_server import H2ServerProtocol, ResetBudget, SniffingProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.listen import parse_host_port
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.proxy import DEFAULT_TIMEOUTS, Forwarder, ProxyTimeouts, without_hop_by_hop
from interlock.dataplane.request_stream import H2Request, Responder
from interlock.dataplane.request_target import split_target
from interlock.dataplane.source import Address
from interlock.dataplane.streams import StreamForwarder, send_answer
from interlock.dataplane.upstreams import UpstreamError
from interlock.dataplane.websocket import Upgrades, upgrade_limits, wants_upgrade
from interlock.dataplane.wire import answer_response
from interlock.mesh.tunnels import MeshTunnels, TunnelSettings
from interlock.mesh.upstreams import MeshUpstreams
from interlock.model.authority import (
    DEFAULT_CLUSTER_DOMAIN,
    NotAService,
    mesh_target,
)
from interlock.model.outbound import OutboundPolicy, service_exists
from interlock.model.service import ServicePortKey

POLICY_WAIT = 10.0
"""Seconds the first request of a Service port waits for its policy and endpoints."""


@dataclass(frozen=True, slots=True)
class MeshSettings:
    """How the mesh listener reads authorities and talks to upstreams."""

    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    """The cluster's DNS domain (``NAME.NAMESPACE.svc.<this>``), canonical form."""
    limits: ProxyLimits = DEFAULT_LIMITS
    """Per-upstream connections and client timeouts, as for the edge."""
    timeouts: ProxyTimeouts = DEFAULT_TIMEOUTS
    """Upstream connect and read timeouts."""
    policy_wait: float = POLICY_WAIT
    """Seconds the first request of a Service port waits for its policy."""


class MeshServer:
    """Serves mesh clients on one address; see the module docstring."""

    def __init__(
        self,
        *,
        upstreams: MeshUpstreams,
        settings: MeshSettings = MeshSettings(),
        rng: random.Random | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self._upstreams = upstreams
        self.traffic = traffic or Traffic()
        """Where finished requests are counted (and logged, with ``--access-log``)."""
        self._settings = settings
        self._rng = rng or random.Random()
        self._forwarder = Forwarder(timeouts=settings.timeouts, limits=settings.limits)
        self._engine = Engine(
            source=_MeshSource(upstreams),
            forwarder=self._forwarder,
            body_timeout=settings.limits.body_timeout,
            rng=self._rng,
        )
        self._upgrades = Upgrades(
            upgrade_limits(settings.limits), traffic=self.traffic, front="mesh"
        )
        self._streams = StreamForwarder(
            engine=self._engine,
            forwarder=self._forwarder,
            connect_timeout=settings.timeouts.connect,
        )
        self._tunnels = MeshTunnels(
            upstreams=upstreams,
            engine=self._engine,
            traffic=self.traffic,
            settings=TunnelSettings(
                cluster_domain=settings.cluster_domain,
                policy_wait=settings.policy_wait,
                connect_timeout=settings.timeouts.connect,
                hello_timeout=settings.limits.header_timeout,
            ),
            rng=self._rng,
        )
        self._h2_connections: set[H2ServerProtocol] = set()
        self._listener: asyncio.Server | None = None
        self._runner: web.ServerRunner | None = None
        self.address: tuple[str, int] | None = None
        """Where it listens once started (port 0 resolved)."""

    async def start(self, *, addr: str) -> tuple[str, int]:
        """Listen on ``addr`` (``HOST:PORT``; port 0 picks a free one)."""
        await self._forwarder.start()
        limits = self._settings.limits
        server = GuardedServer(
            self.handle,
            access_log=None,
            handler_cancellation=True,
            auto_decompress=False,
            keepalive_timeout=limits.idle_timeout,
            header_timeout=limits.header_timeout,
        )
        runner = web.ServerRunner(
            server, access_log=None, handle_signals=False, shutdown_timeout=limits.drain_timeout
        )
        await runner.setup()
        self._runner = runner
        host, port = parse_host_port(addr)

        def http2() -> H2ServerProtocol:
            protocol = H2ServerProtocol(
                self.handle_h2,
                scheme="http",
                closed=self._h2_connections.discard,
                idle_timeout=limits.idle_timeout,
                resets=ResetBudget(limits.http2_resets, limits.http2_reset_window),
            )
            self._h2_connections.add(protocol)
            return protocol

        try:
            # One port for both versions: each connection's first bytes say which (h2c with
            # prior knowledge, as gRPC clients send it, or HTTP/1.1 for aiohttp's handler).
            self._listener = await asyncio.get_running_loop().create_server(
                lambda: SniffingProtocol(
                    http1=server, http2=http2, choose_within=limits.header_timeout
                ),
                host,
                port,
                reuse_address=True,
            )
        except BaseException:
            await self.stop()
            raise
        bound = self._listener.sockets[0].getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        logger.info("mesh listener on {} (HTTP/1.1 and h2c)", self.address)
        return self.address

    async def stop(self) -> None:
        """Stop accepting, drain requests in flight (bounded), close upstream connections."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for connection in list(self._h2_connections):
            await connection.close(within=self._settings.limits.drain_timeout)
        await self._streams.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._forwarder.close()
        await self._upgrades.close()
        self.address = None

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method == "CONNECT":
            return await self._tunnels.handle(request)
        return await self.traffic.observe("mesh", request, self._handle)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        exchange = current_exchange()
        assert exchange is not None, "handle() runs every request as an exchange"
        if not request.raw_path.startswith("/"):
            exchange.host = request.url.raw_authority
        decided = await self._decide(
            method=request.method,
            request_target=request.raw_path,
            host=request.headers.get("Host"),
            headers=request.headers,
            query_params=request.query,
            scheme=request.scheme,
            exchange=exchange,
        )
        if isinstance(decided, Answer):
            return answer_response(decided, with_detail=True)
        decision, authority, query, where, _ = decided
        headers = without_hop_by_hop(request.headers)
        headers.popall("Expect", None)
        headers["Host"] = _host_header(authority.name, authority.namespace, request)
        if wants_upgrade(request.method, request.headers):
            return await self._upgrade(request, decision, query=query, headers=headers, where=where)
        result = await self._engine.forward(
            request, decision, query=query, headers=headers, body=None, where=where
        )
        if isinstance(result, Answer):
            return answer_response(result, with_detail=True)
        return result

    async def _decide(
        self,
        *,
        method: str,
        request_target: str,
        host: str | None,
        headers: Mapping[str, str],
        query_params: Mapping[str, str] | None,
        scheme: str,
        exchange: Exchange,
    ) -> tuple[Forward, ServicePortKey, str, str, str] | Answer:
        """Steps 1-5 of the module docstring, for either protocol: the engine's decision,
        the Service named, the raw query, the log prefix and the policy's ``protocol`` — or the
        answer to give."""
        target = mesh_target(
            request_target, host=host, cluster_domain=self._settings.cluster_domain
        )
        authority = target.authority
        if isinstance(authority, NotAService):
            return Answer(status=404, reason=UNKNOWN_HOST, detail=authority.reason)
        try:
            path, forward_path, query = split_target(target.target)
        except ValueError as exc:
            return Answer(status=400, reason=BAD_REQUEST, detail=f"Service {authority}: {exc}")
        policy = await self._upstreams.ready(authority, within=self._settings.policy_wait)
        if isinstance(policy, UpstreamError):
            return Answer(status=policy.status, reason="policy-unknown", detail=policy.message)
        if query_params is None:
            query_params = MultiDictProxy(MultiDict(parse_qsl(query, keep_blank_values=True)))
        decision = self._engine.route(
            authority,
            RequestInfo(
                method=method,
                path=path,
                forward_path=forward_path,
                query=query,
                query_params=query_params,
                headers=headers,
                scheme=scheme,
                host=host or str(authority),
            ),
            policy=policy,
        )
        if service_exists(policy):
            # A label value from the cluster, not from the client (docs/mesh.md).
            exchange.target = str(authority)
        if isinstance(decision, Answer):
            return decision
        if decision.rule is not None:
            exchange.route = decision.rule.name
        where = f"mesh Service {authority} {exchange.route}".rstrip()
        return decision, authority, query, where, policy.protocol

    async def handle_h2(self, request: H2Request, responder: Responder) -> None:
        """One HTTP/2 stream (a gRPC call, say): decided as an HTTP/1.1 request is, then sent
        upstream over h2c and relayed frame by frame (``interlock.dataplane.http2_client``)."""
        exchange = begin(
            "mesh",
            host=request.authority,
            method=request.method,
            path=request.path.partition("?")[0],
            clock=self.traffic.clock,
        )
        decided: tuple[Forward, ServicePortKey, str, str, str] | Answer
        if request.method == "CONNECT":  # tunnels are HTTP/1.1 (docs/mesh.md)
            decided = answer_of(CONNECT_NOT_SERVED)
        else:
            decided = await self._decide(
                method=request.method,
                request_target=request.path,
                host=request.authority,
                headers=request.headers,
                query_params=None,
                scheme=request.scheme,
                exchange=exchange,
            )
        if isinstance(decided, Answer):
            reason = await send_answer(responder, decided, with_detail=True)
        else:
            reason = await self._forward_h2(request, responder, *decided)
        self.traffic.record(
            exchange, status=responder.status or 0, sent=responder.bytes, reason=reason
        )

    async def _forward_h2(
        self,
        request: H2Request,
        responder: Responder,
        decision: Forward,
        authority: ServicePortKey,
        query: str,
        where: str,
        protocol: str,
    ) -> str:
        """The reason of the answer the listener made itself, or '' when relayed."""
        failed = await self._streams.forward(
            request, responder, decision, query=query, protocol=protocol, where=where
        )
        if failed is None:
            return ""
        return await send_answer(responder, failed, with_detail=True)

    async def _upgrade(
        self,
        request: web.BaseRequest,
        decision: Forward,
        *,
        query: str,
        headers: CIMultiDict[str],
        where: str,
    ) -> web.StreamResponse:
        relayed = await self._upgrades.relay_decision(
            request,
            decision,
            addresses=self._upstreams.addresses(decision.target),
            query=query,
            headers=headers,
            handshake_timeout=self._settings.timeouts.connect,
            where=where,
            client=request.remote or "",
        )
        return (
            answer_response(relayed, with_detail=True) if isinstance(relayed, Answer) else relayed
        )


class _MeshSource:
    """The engine's :class:`~interlock.dataplane.source.PolicySource`: the listener passes the
    policy it waited for with each request, so only endpoints are asked here."""

    def __init__(self, upstreams: MeshUpstreams) -> None:
        self._upstreams = upstreams

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        return None

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        return self._upstreams.addresses(target)


def _host_header(name: str, namespace: str, request: web.BaseRequest) -> str:
    """The ``Host`` the upstream gets: the client's, or for an absolute-form request the
    target's authority (which the client's ``Host`` must not contradict upstream)."""
    if request.raw_path.startswith("/"):
        return request.headers.get("Host", f"{name}.{namespace}")
    return request.url.raw_authority


def answer(status: int, reason: str, detail: str) -> web.Response:
    """An answer the mesh listener makes itself, in the data plane's answer format."""
    return answer_response(Answer(status=status, reason=reason, detail=detail), with_detail=True)
