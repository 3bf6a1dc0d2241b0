"""The data plane of interlock's Gateways: one listening socket per Gateway address and port.

Several Gateways may list the same port and overlapping hostnames (the conformance suite makes
many, all on port 80); they are told apart by the **local address** a connection arrives on —
each Gateway has its own address from the pool (``--gateway-addresses``) — and then by the
``Host`` header (or TLS server name) among that Gateway's listeners on that port.

Each socket is an ordinary :class:`~interlock.edge.server.EdgeServer` (HTTP/1.1, h2c, h2 by
ALPN, WebSocket and other upgrades, every answer of ``docs/answers.md``) whose *edge* is a
:class:`GatewayPortEdge`: for a request's host it finds the listener (most specific hostname
first) and the virtual host among that listener's routes, and offers one route whose backend
is a synthetic Service port. :class:`GatewayPolicies` answers the engine's policy question for
that port with the virtual host's :class:`~interlock.model.outbound.OutboundPolicy` — the
routes attached there, decided by the same engine as the edge and the mesh — and every other
question (endpoints of the real backends) through the controller's upstreams. An HTTPS port
chooses its certificate by the ClientHello's server name among its listeners' hostnames.

The table a socket serves is replaced whole on every change (a request reads it once), so a
request never mixes two configurations.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import Mapping, Sequence

from loguru import logger

from interlock.dataplane.metrics import Traffic
from interlock.dataplane.source import Address, PolicySource, ServicePortRef, UpstreamError
from interlock.edge.inprocess import InProcessEdge, ServedRoute
from interlock.edge.limits import EdgeLimits
from interlock.edge.modules import compile_modules
from interlock.edge.routing import normalize_host
from interlock.edge.server import EdgeServer
from interlock.edge.tls import TlsConfigError, load_certificate
from interlock.model.edge_plan import BackendTarget
from interlock.model.gateway_routes import GatewayServing, ListenerServing, PortServing
from interlock.model.moduleset import Modules
from interlock.model.outbound import OutboundPolicy

GATEWAY_ROUTE_ID = "gateway"


def _synthetic_target(
    serving: GatewayServing, port: int, listener: str, host: str | None
) -> BackendTarget:
    # Service names hold no "/": this can never name a real Service port.
    return BackendTarget(
        namespace=serving.gateway.namespace,
        service=f"gateway/{serving.gateway.name}/{listener}/{host or '*'}",
        port=port,
    )


class ListenerCertificates:
    """An HTTPS port's certificates by listener hostname (``context_for`` of the TLS listener)."""

    def __init__(self) -> None:
        self._listeners: tuple[tuple[str | None, ssl.SSLContext], ...] = ()
        self._refuse = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)

    def update(self, port: PortServing) -> None:
        contexts: list[tuple[str | None, ssl.SSLContext]] = []
        for listener in port.listeners:
            if not listener.certificates:
                continue
            cert, key = listener.certificates[0]
            try:
                context = load_certificate(
                    host=listener.hostname or "*", cert_pem=cert, key_pem=key
                )
            except TlsConfigError as error:
                logger.warning("Gateway listener {}: {}", listener.name, error)
                continue
            context.set_alpn_protocols(["h2", "http/1.1"])
            contexts.append((listener.hostname, context))
        self._listeners = tuple(contexts)

    def context_for(self, server_name: str | None) -> ssl.SSLContext:
        from interlock.model.gateway_conditions import hostname_matches

        name = normalize_host(server_name or "")
        for hostname, context in self._listeners:
            if not name and hostname is None:
                return context
            if name and hostname_matches(hostname, name):
                return context
        if not name and self._listeners:
            return self._listeners[0][1]
        return self._refuse


class GatewayPortEdge(InProcessEdge):
    """The routes of one Gateway port as the edge server reads them; see the module docstring."""

    def __init__(self, *, trusted_proxies: Sequence[str] = ()) -> None:
        super().__init__(trusted_proxies=trusted_proxies)
        self._port: PortServing | None = None
        self._served: dict[tuple[str, str | None], Mapping[str, ServedRoute]] = {}
        self.gateway_certificates = ListenerCertificates()
        self.certificates = self.gateway_certificates  # type: ignore[assignment]

    def update(
        self, serving: GatewayServing, port: PortServing
    ) -> dict[BackendTarget, OutboundPolicy]:
        """Serve ``port`` of ``serving``; the synthetic targets' policies to publish."""
        chain = compile_modules(Modules(), {})
        policies: dict[BackendTarget, OutboundPolicy] = {}
        served: dict[tuple[str, str | None], Mapping[str, ServedRoute]] = {}
        for listener in port.listeners:
            for virtual in listener.virtual_hosts:
                target = _synthetic_target(serving, port.port, listener.name, virtual.hostname)
                policies[target] = virtual.policy
                served[(listener.name, virtual.hostname)] = {
                    GATEWAY_ROUTE_ID: ServedRoute(
                        route_id=f"{listener.name}/{virtual.hostname or '*'}",
                        path="/",
                        path_type="Prefix",
                        chain=chain,
                        backend=target,
                        modules=Modules(),
                        secrets={},
                    )
                }
        self._served = served
        self._port = port
        if port.protocol == "HTTPS":
            self.gateway_certificates.update(port)
        return policies

    def routes_of(self, host_header: str) -> Mapping[str, ServedRoute] | None:
        return self.routes_of_host(normalize_host(host_header))

    def routes_of_host(self, host: str) -> Mapping[str, ServedRoute] | None:
        port = self._port
        if port is None:
            return None
        listener: ListenerServing | None = port.listener(host)
        if listener is None:
            return None
        virtual = listener.virtual_host(host)
        if virtual is None:
            return None
        return self._served.get((listener.name, virtual.hostname))


class GatewayPolicies:
    """The engine's :class:`PolicySource` on Gateway ports: the synthetic targets' policies,
    and the controller's upstreams for everything else."""

    def __init__(self, upstreams: PolicySource) -> None:
        self._upstreams = upstreams
        self.policies: dict[ServicePortRef, OutboundPolicy] = {}

    def policy(self, target: ServicePortRef) -> OutboundPolicy | None:
        found = self.policies.get(target)
        if found is not None or target.service.startswith("gateway/"):
            return found
        return self._upstreams.policy(target)

    def addresses(self, target: ServicePortRef) -> Sequence[Address] | UpstreamError:
        return self._upstreams.addresses(target)


class GatewayPorts:
    """Every Gateway socket of this process: opened, reprogrammed and closed as Gateways change."""

    def __init__(
        self,
        *,
        upstreams: PolicySource,
        limits: EdgeLimits,
        trusted_proxies: Sequence[str] = (),
        rng: random.Random | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self._policies = GatewayPolicies(upstreams)
        self._limits = limits
        self._trusted = tuple(trusted_proxies)
        self._rng = rng
        self._traffic = traffic
        self._servers: dict[tuple[str, int], tuple[EdgeServer, GatewayPortEdge]] = {}
        self._owners: dict[str, set[tuple[str, int]]] = {}
        self._targets: dict[str, set[ServicePortRef]] = {}

    @property
    def sockets(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self._servers))

    async def apply(self, key: str, serving: GatewayServing) -> dict[int, str]:
        """Serve ``serving`` (the Gateway ``key``); the ports that could not be opened, with why."""
        failures: dict[int, str] = {}
        wanted = {(serving.address, port.port) for port in serving.ports}
        for socket in sorted(self._owners.get(key, set()) - wanted):
            await self._close(socket)
        targets: set[ServicePortRef] = set()
        for port in serving.ports:
            socket = (serving.address, port.port)
            entry = self._servers.get(socket)
            if entry is None:
                edge = GatewayPortEdge(trusted_proxies=self._trusted)
                server = EdgeServer(
                    edge=edge,
                    upstreams=self._policies,
                    trusted_proxies=self._trusted,
                    limits=self._limits,
                    rng=self._rng,
                    traffic=self._traffic,
                )
                policies = edge.update(serving, port)
                self._install(targets, policies)
                address = f"{_bracketed(serving.address)}:{port.port}"
                try:
                    if port.protocol == "HTTPS":
                        await server.start(
                            addr=f"{_bracketed(serving.address)}:0", tls_addr=address
                        )
                    else:
                        await server.start(addr=address)
                except OSError as error:
                    failures[port.port] = f"cannot listen on {address}: {error.strerror or error}"
                    logger.warning("Gateway {}: {}", key, failures[port.port])
                    continue
                self._servers[socket] = (server, edge)
                logger.info("Gateway {} serving {} on {}", key, port.protocol, address)
            else:
                policies = entry[1].update(serving, port)
                self._install(targets, policies)
        for stale in self._targets.get(key, set()) - targets:
            self._policies.policies.pop(stale, None)
        self._targets[key] = targets
        self._owners[key] = wanted - {(serving.address, p) for p in failures}
        return failures

    def _install(
        self, targets: set[ServicePortRef], policies: Mapping[BackendTarget, OutboundPolicy]
    ) -> None:
        for backend, policy in policies.items():
            ref = ServicePortRef(backend.namespace, backend.service, backend.port)
            self._policies.policies[ref] = policy
            targets.add(ref)

    async def remove(self, key: str) -> None:
        """Stop serving the Gateway ``key``."""
        for socket in sorted(self._owners.pop(key, set())):
            await self._close(socket)
        for stale in self._targets.pop(key, set()):
            self._policies.policies.pop(stale, None)

    async def _close(self, socket: tuple[str, int]) -> None:
        entry = self._servers.pop(socket, None)
        if entry is not None:
            await entry[0].stop()

    async def close(self) -> None:
        for socket in sorted(self._servers):
            await self._close(socket)
        self._owners.clear()
        self._targets.clear()
        self._policies.policies.clear()


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address
