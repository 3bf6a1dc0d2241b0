"""The mesh listener: an outbound HTTP proxy for cluster clients that have no sidecar.

A client sends its request here, naming the Service it wants in the authority (``Host:
web.shop.svc:8080``, or ``GET http://web.shop.svc:8080/cart`` as an ``HTTP_PROXY`` client
does), and the listener routes it by that Service port's outbound policy as the listener's
client namespace sees it — the policy a Linkerd proxy would enforce in that namespace. Each
request is decided in one fixed order, every refusal before an upstream is contacted:

1. the authority (:func:`~interlock.model.authority.mesh_target`) — names no Service → 404;
2. the path the backend will act on (``edge.routing.clean_path``) — ambiguous → 400;
3. the Service port's policy (:class:`~interlock.mesh.upstreams.MeshUpstreams`; the first
   request of a Service port waits for it, bounded) — a Service that does not exist has the
   Default route whose backend's failure injector answers 500, as the Gateway API requires;
4. the route rule by method, path, headers and query — none → 404;
5. the backend by weight; its failure injector's status and message when it cannot be used;
6. its ready endpoints (EndpointSlices) — none → 503;
7. the proxy (the edge's :class:`~interlock.edge.proxy.Forwarder`: hop-by-hop headers dropped,
   bodies streamed both ways, 504 on upstream timeouts, 502 on failures).

No edge module runs here: modules belong to Ingresses, and a mesh request has none. Answers the
listener makes itself name their reason in ``X-Interlock-Reason`` and the body (``<reason>:
<detail>``, the data plane's answer format); mesh clients are inside the cluster, so the detail
names the Service and the route.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from aiohttp import web
from loguru import logger
from multidict import CIMultiDict

from interlock.edge.connections import GuardedServer
from interlock.edge.limits import DEFAULT_LIMITS, EdgeLimits
from interlock.edge.proxy import DEFAULT_TIMEOUTS, Forwarder, ProxyTimeouts, without_hop_by_hop
from interlock.edge.routing import clean_path
from interlock.edge.server import parse_host_port
from interlock.edge.upstreams import UpstreamError
from interlock.mesh.upstreams import MeshUpstreams
from interlock.model.authority import DEFAULT_CLUSTER_DOMAIN, NotAService, mesh_target
from interlock.model.outbound import Backend, pick_backend, select_route

REASON_HEADER = "X-Interlock-Reason"

POLICY_WAIT = 10.0
"""Seconds the first request of a Service port waits for its policy and endpoints."""


class _NoHooks:
    """The module chain's hooks around the upstream exchange: a mesh request has no modules."""

    def should_compress(self, request_headers: object, response_headers: object) -> bool:
        return False

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        return None

    def response_headers(self, headers: CIMultiDict[str]) -> None:
        return None


_NO_HOOKS = _NoHooks()


@dataclass(frozen=True, slots=True)
class MeshSettings:
    """How the mesh listener reads authorities and talks to upstreams."""

    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    """The cluster's DNS domain (``NAME.NAMESPACE.svc.<this>``), canonical form."""
    limits: EdgeLimits = DEFAULT_LIMITS
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
    ) -> None:
        self._upstreams = upstreams
        self._settings = settings
        self._rng = rng or random.Random()
        self._forwarder = Forwarder(timeouts=settings.timeouts, limits=settings.limits)
        self._round_robin: dict[tuple[str, str, int], itertools.count[int]] = {}
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
        try:
            site = web.TCPSite(runner, host, port, reuse_address=True)
            await site.start()
        except BaseException:
            await self.stop()
            raise
        bound = runner.addresses[0]
        self.address = (str(bound[0]), int(bound[1]))
        logger.info("mesh listener on {}", self.address)
        return self.address

    async def stop(self) -> None:
        """Stop accepting, drain requests in flight (bounded), close upstream connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._forwarder.close()
        self.address = None

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        target = mesh_target(
            request.raw_path,
            host=request.headers.get("Host"),
            cluster_domain=self._settings.cluster_domain,
        )
        authority = target.authority
        if isinstance(authority, NotAService):
            return answer(404, "unknown-host", authority.reason)
        raw_path, _, query = target.target.partition("?")
        try:
            if "#" in query:
                raise ValueError("a request-target never carries a #fragment")
            path, forward_path = clean_path(raw_path)
        except ValueError as exc:
            return answer(400, "bad-request", f"Service {authority}: {exc}")
        policy = await self._upstreams.policy(authority, within=self._settings.policy_wait)
        if isinstance(policy, UpstreamError):
            return answer(policy.status, "policy-unknown", policy.message)
        selected = select_route(
            policy, method=request.method, path=path, headers=request.headers, query=request.query
        )
        if selected is None:
            return answer(
                404,
                "no-route",
                f"Service {authority}: no route of its policy matches {request.method} {path}",
            )
        route, rule = selected
        where = f"mesh Service {authority} route {route.kind} {route.namespace}/{route.name}"
        backend = pick_backend(rule, self._rng.random())
        if backend is None:
            return answer(500, "no-backend-weight", f"{where}: every backend has weight 0")
        refused = _unusable(backend, where)
        if refused is not None:
            return refused
        assert backend.port is not None
        addresses = self._upstreams.addresses(
            namespace=backend.namespace, service=backend.name, port=backend.port
        )
        if isinstance(addresses, UpstreamError):
            reason = "no-ready-endpoints" if addresses.status == 503 else "backend-not-found"
            return answer(addresses.status, reason, f"{where}: {addresses.message}")
        headers = without_hop_by_hop(request.headers)
        headers.popall("Expect", None)
        headers["Host"] = _host_header(authority.name, authority.namespace, request)
        key = (backend.namespace, backend.name, backend.port)
        counter = self._round_robin.setdefault(key, itertools.count())
        return await self._forwarder.forward(
            request,
            path=forward_path,
            query=query,
            addresses=addresses,
            first=next(counter) % len(addresses),
            headers=headers,
            body=None,
            hooks=_NO_HOOKS,
            where=where,
        )


def _unusable(backend: Backend, where: str) -> web.Response | None:
    """The failure injector's answer of a backend that cannot be used, else ``None``."""
    if backend.exists and backend.port is not None:
        return None
    injector = backend.failure_injector
    if injector is not None:
        return answer(injector.status, "backend-not-found", f"{where}: {injector.message}")
    return answer(
        500,
        "backend-not-found",
        f"{where}: backend {backend.namespace}/{backend.name} cannot be used",
    )


def _host_header(name: str, namespace: str, request: web.BaseRequest) -> str:
    """The ``Host`` the upstream gets: the client's, or for an absolute-form request the
    target's authority (which the client's ``Host`` must not contradict upstream)."""
    if request.raw_path.startswith("/"):
        return request.headers.get("Host", f"{name}.{namespace}")
    return request.url.raw_authority


def answer(status: int, reason: str, detail: str) -> web.Response:
    """An answer the mesh listener makes itself, in the data plane's answer format."""
    response = web.Response(status=status, text=f"{reason}: {detail}\n")
    response.headers[REASON_HEADER] = reason
    return response
