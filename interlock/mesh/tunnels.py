"""CONNECT tunnels through the mesh listener: TCPRoutes and TLSRoutes on the wire.

An ``HTTPS_PROXY`` client, or any client that wants a raw byte stream to a Service (a database
driver behind a proxy), sends ``CONNECT NAME.NAMESPACE[.svc[.DOMAIN]]:PORT`` and, once answered
``200``, speaks its own protocol through the connection. The Service port's policy as the
listener's client namespace sees it chooses where the bytes go
(:func:`~interlock.dataplane.tunnel_plan.decide_tunnel`); this module does the I/O, in the order
a client can tell apart (``docs/mesh.md``, "Tunnels"):

* before the ``200``, answered in the data plane's format (``X-Interlock-Reason``): an
  authority that names no Service (404), a policy not known in time (503), HTTP routes on the
  port (405), and for a TCPRoute or the Default route everything else too — a backend that
  cannot be used (its failure injector's 500; ``refuseConnection``), no ready endpoint (503),
  no endpoint accepting a connection (502). The upstream connection is open before the
  ``200`` is sent, so a ``200`` means the bytes reach a backend;
* for TLSRoutes the route depends on the server name of the client's ClientHello, which the
  client sends only after the ``200``: the listener reads that first record (bounded by the
  header timeout), chooses the route and backend, connects and forwards the record unchanged —
  it never terminates TLS. When that fails (no route matches the name, the backend cannot be
  used, no endpoint) the connection is closed before any byte reaches a backend, as Linkerd's
  proxy does; the client sees its TLS handshake end without an answer.

Then bytes flow both ways (``interlock.dataplane.splice``) until both sides closed; a
half-closed side is passed on. Each tunnel is one access log line and counted in the traffic
metrics (``method: CONNECT``; ``bytes`` to the client, ``bytesReceived`` from it, the whole
tunnel's duration, the upstream address); connection failures count as upstream connect
errors. Endpoints, round robin and failure accrual are the engine's (:class:`Engine`).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from aiohttp import web
from loguru import logger

from interlock.dataplane.access_log import Exchange, begin
from interlock.dataplane.answers import (
    UNKNOWN_HOST,
    Answer,
    answer,
)
from interlock.dataplane.engine import Engine
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.plan import Forward, PolicyPlan
from interlock.dataplane.source import UpstreamError
from interlock.dataplane.splice import Spliced, splice, take_over
from interlock.dataplane.stream_open import Streams, open_stream, read_server_name
from interlock.dataplane.tunnel_plan import decide_tunnel, needs_server_name
from interlock.dataplane.wire import TunnelEstablished, answer_response
from interlock.mesh.upstreams import MeshUpstreams
from interlock.model.authority import NotAService, connect_target
from interlock.model.outbound import service_exists


@dataclass(frozen=True, slots=True, kw_only=True)
class TunnelSettings:
    """How tunnels read their target and bound their waits (from the listener's settings)."""

    cluster_domain: str
    """The cluster's DNS domain (``NAME.NAMESPACE.svc.<this>``), canonical form."""
    policy_wait: float
    """Seconds the first tunnel of a Service port waits for its policy."""
    connect_timeout: float
    """Seconds to open a connection to an endpoint (then the next one is tried)."""
    hello_timeout: float
    """Seconds the client has to send its ClientHello on a TLSRoute port."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshTunnels:
    """Serves the mesh listener's CONNECT requests; see the module docstring."""

    upstreams: MeshUpstreams
    """The Service ports the listener follows: their policies, by authority."""
    engine: Engine
    """The data plane's engine: plans, endpoints, round robin and failure accrual."""
    traffic: Traffic
    """The access log and metrics each tunnel is recorded in."""
    settings: TunnelSettings
    rng: random.Random
    """Weighted backend choice (injected so tests can fix it)."""

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """One CONNECT request: refused with an answer, or a tunnel until both sides closed."""
        exchange = begin(
            "mesh", host=request.raw_path, method="CONNECT", path="", clock=self.traffic.clock
        )
        exchange.tunnel = True
        decided = await self._decide(request.raw_path, exchange)
        if isinstance(decided, Answer):
            return await self._refuse(request, exchange, decided)
        plan, where = decided
        if needs_server_name(plan.policy):
            return await self._established(request, exchange, plan=plan, where=where)
        decision = decide_tunnel(plan, server_name=None, rng_value=self.rng.random())
        if isinstance(decision, Answer):
            return await self._refuse(request, exchange, decision)
        where = _note_route(exchange, decision, where)
        opened = await self._open(decision, where)
        if isinstance(opened, Answer):
            return await self._refuse(request, exchange, opened)
        return await self._established(request, exchange, upstream=opened, where=where)

    async def _decide(self, target: str, exchange: Exchange) -> tuple[PolicyPlan, str] | Answer:
        """The compiled policy of the Service port ``target`` names, or the answer to give."""
        authority = connect_target(target, cluster_domain=self.settings.cluster_domain)
        if isinstance(authority, NotAService):
            return answer(UNKNOWN_HOST, authority.reason)
        policy = await self.upstreams.ready(authority, within=self.settings.policy_wait)
        if isinstance(policy, UpstreamError):
            return Answer(status=policy.status, reason="policy-unknown", detail=policy.message)
        if service_exists(policy):
            # A label value from the cluster, not from the client (docs/mesh.md).
            exchange.target = str(authority)
        plan = self.engine.plan(authority, policy)
        assert plan is not None, "a policy was given"
        return plan, f"mesh tunnel to Service {authority}"

    async def _refuse(
        self, request: web.BaseRequest, exchange: Exchange, refusal: Answer
    ) -> web.StreamResponse:
        """Answer the CONNECT with ``refusal`` (and close: the client asked for a tunnel)."""
        logger.debug("{}: {} {}", exchange.host, refusal.status, refusal.detail)
        response = answer_response(refusal, with_detail=True)
        response.force_close()
        await self.traffic.finish(exchange, request, response)
        return response

    async def _established(
        self,
        request: web.BaseRequest,
        exchange: Exchange,
        *,
        where: str,
        upstream: Streams | None = None,
        plan: PolicyPlan | None = None,
    ) -> web.StreamResponse:
        """Answer 200, then splice the client to ``upstream`` — or, without one, to the
        backend the server name of the client's ClientHello chooses by ``plan``."""
        response = TunnelEstablished()
        counts = Spliced()
        reason = ""
        client: Streams | None = None
        try:
            await response.prepare(request)
            client = take_over(request)
            with self.traffic.holding("mesh", "connect"):
                if upstream is None:
                    assert plan is not None
                    chosen = await self._by_server_name(client[0], exchange, plan, where)
                    if isinstance(chosen, Answer):
                        logger.debug("{}: closed: {}", where, chosen.detail)
                        reason = chosen.reason
                        return response
                    upstream, hello = chosen
                    upstream[1].write(hello)
                    counts.to_upstream += len(hello)
                await splice(client, upstream, counts)
        finally:
            if client is not None:
                client[1].close()
            if upstream is not None:
                upstream[1].close()
            request.protocol.force_close()
            exchange.received = counts.to_upstream
            self.traffic.record(exchange, status=200, sent=counts.to_client, reason=reason)
        return response

    async def _by_server_name(
        self, client: asyncio.StreamReader, exchange: Exchange, plan: PolicyPlan, where: str
    ) -> tuple[Streams, bytes] | Answer:
        """Read the client's first TLS record; connect where its server name says."""
        read = await read_server_name(client, within=self.settings.hello_timeout, where=where)
        if isinstance(read, Answer):
            return read
        hello, name = read
        decision = decide_tunnel(plan, server_name=name, rng_value=self.rng.random())
        if isinstance(decision, Answer):
            return decision
        where = _note_route(exchange, decision, where)
        opened = await self._open(decision, where)
        return opened if isinstance(opened, Answer) else (opened, hello)

    async def _open(self, decision: Forward, where: str) -> Streams | Answer:
        return await open_stream(
            self.engine, decision, where=where, connect_timeout=self.settings.connect_timeout
        )


def _note_route(exchange: Exchange, decision: Forward, where: str) -> str:
    """Name the decision's route in the exchange; the log prefix with it."""
    if decision.rule is not None:
        exchange.route = decision.rule.name
    return f"{where} {exchange.route}".rstrip()
