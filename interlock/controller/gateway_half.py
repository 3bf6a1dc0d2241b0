"""The Gateway API north-south half: GatewayClasses, Gateways and their listeners.

Added to a controller that runs an in-process edge (``--edge-addr``) and given addresses
(``--gateway-addresses``). It brings:

* the kinds table's rows (``controller/kinds.py``) for GatewayClass, Gateway, ListenerSet and
  BackendTLSPolicy (watched only if the cluster serves them), whose changes go, parsed, to the
  one :class:`~interlock.actors.gateways.GatewayController`, as do — beside their usual
  handling — Namespaces (their labels) and the HTTPRoutes and GRPCRoutes that
  :meth:`GatewayHalf.follows` (naming a Gateway or ListenerSet); and ConfigMaps, to the
  :class:`~interlock.actors.ca_bundles.CABundleDirectory`;
* the :class:`~interlock.actors.gateways.GatewayDataPlane` actor and the sockets it drives
  (:class:`~interlock.edge.gateway_ports.GatewayPorts`, sharing the edge's upstreams: the
  backends' endpoints are tracked as soon as a Gateway serves a route to them).

Gateway status, GatewayClass status and route parent entries go through the controller's one
StatusWriter (see ``actors/gateway_messages.py``); each Gateway's Service
(``model/gateway_infrastructure.py``) through the
:class:`~interlock.actors.gateway_services.GatewayServiceWriter`, told of the Lease by
:meth:`GatewayHalf.leadership_changed`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient

from interlock.actors.ca_bundles import CABundleDirectory
from interlock.actors.durable import ResyncObject, durable_mailbox
from interlock.actors.gateway_messages import (
    CA_BUNDLE_DIRECTORY,
    GATEWAY_CONTROLLER,
    GATEWAY_DATA_PLANE,
    GATEWAY_SERVICE_WRITER,
)
from interlock.actors.gateway_services import GatewayServiceWriter
from interlock.actors.gateways import GatewayController, GatewayDataPlane, GatewayTables
from interlock.actors.messages import LeadershipChanged, ObjectChanged
from interlock.config import ControllerConfig
from interlock.controller.gateway_service_sink import KubeGatewayServiceSink
from interlock.controller.upstreams import UpstreamIndex
from interlock.dataplane.metrics import Traffic
from interlock.edge.gateway_ports import Applied, GatewayPorts
from interlock.mailbox import ActorSystem
from interlock.model.backend_tls import backend_tls_debug
from interlock.model.gateway_route_input import names_a_gateway
from interlock.model.gateway_routes import GatewayServing
from interlock.model.meta import ObjectKey


class TrackingPorts:
    """:class:`GatewayPorts` that first tracks the endpoints of every backend it will serve."""

    def __init__(self, ports: GatewayPorts, upstreams: UpstreamIndex) -> None:
        self.ports = ports
        self._upstreams = upstreams

    async def apply(self, key: str, serving: GatewayServing) -> Applied:
        for port in serving.ports:
            for listener in port.listeners:
                for virtual in listener.virtual_hosts:
                    for route in virtual.policy.routes:
                        for rule in route.rules:
                            for backend in rule.backends:
                                if backend.exists:
                                    self._upstreams.endpoints(backend.key)
        return await self.ports.apply(key, serving)

    async def remove(self, key: str) -> None:
        await self.ports.remove(key)


class GatewayHalf:
    """Everything Gateways add to a controller; see the module docstring."""

    def __init__(
        self,
        *,
        config: ControllerConfig,
        system: ActorSystem,
        upstreams: UpstreamIndex,
        rng: random.Random | None = None,
        traffic: Traffic | None = None,
        resync_object: ResyncObject | None = None,
    ) -> None:
        """``resync_object``: how a directory's durable mailbox re-reads an object it was
        handling when it crashed (None: the directory's mailbox is an ordinary one)."""
        self._config = config
        self._directory_mailbox = None if resync_object is None else durable_mailbox(resync_object)
        self._system = system
        self.tables = GatewayTables()
        """The controller's inputs and outputs, kept across its restarts."""
        self.ports = GatewayPorts(
            upstreams=upstreams,
            limits=config.edge.limits,
            trusted_proxies=config.edge.trusted_proxies,
            rng=rng,
            traffic=traffic,
        )
        self._front_doors = TrackingPorts(self.ports, upstreams)
        self._told_routes: set[tuple[str, ObjectKey]] = set()

    def follows(self, change: ObjectChanged) -> bool:
        """Whether the GatewayController is told this HTTPRoute or GRPCRoute change (the kinds
        table's ``follows`` rows): a route that names a Gateway or a ListenerSet, or named one
        when it was last told (so that it learns the route left)."""
        key = (change.kind, ObjectKey(namespace=change.namespace, name=change.name))
        if not change.deleted and names_a_gateway(change.obj):
            self._told_routes.add(key)
            return True
        if key in self._told_routes:
            self._told_routes.discard(key)
            return True
        return False

    def start(self, *, api: ApiClient, is_leader: Callable[[], bool]) -> None:
        """Spawn the controller, data-plane and Service-writing actors (before the informers
        run). The Gateways' Services are written through ``api`` while ``is_leader``."""
        tables = self.tables
        pool = self._config.gateways.addresses
        sink = KubeGatewayServiceSink(api)
        self._system.spawn(
            GATEWAY_SERVICE_WRITER,
            lambda: GatewayServiceWriter(sink=sink, is_leader=is_leader),
        )
        self._system.spawn(
            GATEWAY_CONTROLLER,
            lambda: GatewayController(address_pool=pool, tables=tables),
        )
        self._system.spawn(
            GATEWAY_DATA_PLANE, lambda: GatewayDataPlane(front_doors=self._front_doors)
        )
        if self._directory_mailbox is None:
            self._system.spawn(CA_BUNDLE_DIRECTORY, CABundleDirectory)
        else:
            self._system.spawn(
                CA_BUNDLE_DIRECTORY, CABundleDirectory, mailbox=self._directory_mailbox
            )

    def leadership_changed(self, *, leading: bool) -> None:
        """This replica gained or lost the Lease: the Service writer writes only while leading
        (and writes everything again on gaining it)."""
        self._system.tell(GATEWAY_SERVICE_WRITER, LeadershipChanged(leading))

    async def stop(self) -> None:
        await self.ports.close()

    def debug(self) -> dict[str, Any]:
        """``/debug/gateways``: each Gateway's address and ports, the sockets open, and each
        BackendTLSPolicy's verdict and the Service ports it applies to (names, never a CA or a
        key)."""
        tables = self.tables
        return {
            "gateways": {
                str(key): {"address": served.address, "ports": [p.port for p in served.ports]}
                for key, served in sorted(tables.serving.items(), key=lambda i: str(i[0]))
            },
            "sockets": [f"{host}:{port}" for host, port in self.ports.sockets],
            "routes": len(tables.routes),
            "backendTLSPolicies": backend_tls_debug(
                tables.backend_tls_policies.values(),
                services=tables.services,
                ca_bundles=tables.ca_bundles,
            ),
        }
