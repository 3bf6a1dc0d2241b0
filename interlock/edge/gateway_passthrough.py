"""Gateway listeners of ``protocol: TLS`` in ``tls.mode`` Passthrough: TLSRoutes at the edge.

Such a port never terminates TLS: it holds no certificate, and the client verifies the
backend's. For each connection the socket reads the client's first TLS record (its
ClientHello, within the header timeout), takes the server name (SNI) from it, chooses the
listener (most specific hostname first) and the virtual host among that listener's TLSRoutes,
and lets the engine decide as for a mesh tunnel (``dataplane/tunnel_plan.py``): the TLSRoute
with the most specific hostname matching the name, one of its weighted backendRefs, an
endpoint of it (round robin, failure accrual). The ClientHello is then forwarded unchanged and
bytes are spliced both ways (``dataplane/splice.py``) until both sides closed.

A connection that cannot be routed — no ClientHello in time, not TLS, no server name, a name
no listener or TLSRoute takes, no usable backend or endpoint — is closed before any byte
reaches a backend (there is no protocol to answer in); the access log says why (its
``reason``). Each connection is one access log line (``method`` ``TLS``, the server name as
its host, ``status`` 200 once spliced, else the refusal's status).

The table is replaced whole on :meth:`PassthroughPort.update`; a connection reads it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

from loguru import logger

from interlock.dataplane.access_log import begin
from interlock.dataplane.answers import NO_SNI_MATCH, Answer, answer
from interlock.dataplane.engine import Engine
from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.proxy import Forwarder, ProxyTimeouts
from interlock.dataplane.source import PolicySource
from interlock.dataplane.splice import CHUNK, Spliced, splice
from interlock.dataplane.stream_open import Streams, open_stream, read_server_name
from interlock.dataplane.tunnel_plan import decide_tunnel
from interlock.model.gateway_routes import GatewayServing, PortServing
from interlock.model.service import ServicePortKey


class PassthroughPort:
    """One TLS Passthrough socket of a Gateway; see the module docstring."""

    def __init__(
        self,
        *,
        upstreams: PolicySource,
        limits: ProxyLimits,
        timeouts: ProxyTimeouts,
        rng: random.Random | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self._rng = rng or random.Random()
        self._limits = limits
        self._connect_timeout = timeouts.connect
        self._engine = Engine(
            source=upstreams,
            forwarder=Forwarder(timeouts=timeouts, limits=limits),
            body_timeout=limits.body_timeout,
            rng=self._rng,
        )
        self._traffic = traffic or Traffic()
        self._table: tuple[GatewayServing, PortServing] | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def update(self, serving: GatewayServing, port: PortServing) -> None:
        """Serve ``port`` of ``serving`` from now on (a connection reads the table once)."""
        self._table = (serving, port)

    async def start(self, address: str, port: int) -> None:
        """Listen on ``address``:``port``; raises :class:`OSError` when it cannot."""
        self._server = await asyncio.start_server(
            self._accepted, address, port, limit=CHUNK, reuse_address=True
        )

    async def stop(self) -> None:
        """Stop listening and end the connections being spliced."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        for task in tuple(self._connections):
            task.cancel()
        for task in tuple(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve((reader, writer))
        finally:
            self._connections.discard(task)

    async def _serve(self, client: Streams) -> None:
        table = self._table
        exchange = begin("edge", host="", method="TLS", path="", clock=self._traffic.clock)
        exchange.tunnel = True
        counts = Spliced()
        status, reason = 200, ""
        upstream: Streams | None = None
        where = "Gateway TLS passthrough"
        try:
            with self._traffic.holding("edge", "tls-passthrough"):
                if table is None:
                    return
                serving, port = table
                where = f"Gateway {serving.gateway} port {port.port}"
                chosen = await self._route(client[0], serving, port, where)
                if isinstance(chosen, Answer):
                    logger.debug("{}: closed: {}", where, chosen.detail)
                    status, reason = chosen.status, chosen.reason
                    return
                upstream, hello, name = chosen
                exchange.host = name
                upstream[1].write(hello)
                counts.to_upstream += len(hello)
                await splice(client, upstream, counts)
        finally:
            client[1].close()
            if upstream is not None:
                upstream[1].close()
            exchange.received = counts.to_upstream
            self._traffic.record(exchange, status=status, sent=counts.to_client, reason=reason)

    async def _route(
        self, client: asyncio.StreamReader, serving: GatewayServing, port: PortServing, where: str
    ) -> tuple[Streams, bytes, str] | Answer:
        """Read the ClientHello; connect where its server name says."""
        read = await read_server_name(client, within=self._limits.header_timeout, where=where)
        if isinstance(read, Answer):
            return read
        hello, name = read
        if not name:
            return answer(NO_SNI_MATCH, f"{where}: the ClientHello names no server (SNI)")
        name = name.lower().removesuffix(".")
        listener = port.listener(name)
        virtual = None if listener is None else listener.virtual_host(name)
        if listener is None or virtual is None:
            return answer(NO_SNI_MATCH, f"{where}: no listener or TLSRoute takes {name!r}")
        target = ServicePortKey(
            serving.gateway.namespace,
            f"gateway/{serving.gateway.name}/{listener.name}/{virtual.hostname or '*'}",
            port.port,
        )
        plan = self._engine.plan(target, virtual.policy)
        assert plan is not None, "a policy was given"
        decision = decide_tunnel(plan, server_name=name, rng_value=self._rng.random())
        if isinstance(decision, Answer):
            return decision
        where = f"{where} {decision.rule.name if decision.rule is not None else ''}".rstrip()
        opened = await open_stream(
            self._engine, decision, where=where, connect_timeout=self._connect_timeout
        )
        return opened if isinstance(opened, Answer) else (opened, hello, name)
