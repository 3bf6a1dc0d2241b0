"""The controller's :class:`~interlock.dataplane.source.PolicySource`: policies + endpoints.

The edge data plane knows a route's backend as a Service port. Where a request really goes is
controller state: the backend Service port's outbound policy (HTTPRoutes attached to it split
the traffic by weight; a backendRef to a Service that does not exist answers 500) and the ready
endpoints of the chosen backend's EndpointSlices (none ready → 503). This module keeps both in
local tables so that :meth:`ControllerUpstreams.policy` and :meth:`ControllerUpstreams.addresses`,
called on every request by the data-plane engine (``interlock/dataplane/``, which applies the
policy), are a few dictionary reads and never await:

* **policies** come from :class:`~interlock.actors.service_port_watch.ServicePortWatches`, the
  same watches the policy API serves: one latest-value slot per tracked Service port (client
  namespace = the Service's own namespace, as an Ingress backend always is), read by a small
  task that copies each new policy into the table;
* **Services and endpoints** come from the ``service:`` and ``endpoints:`` topics through the
  :class:`~interlock.actors.upstream_cache.UpstreamCache` actor, which subscribes per
  tracked Service and recomputes that Service's ready addresses per port when either changes.

Tracking starts when an EdgeActor attaches a backend (:class:`TrackingProvider`) and, as a
safety net, on the first request for a Service port. Until a Service port's policy has arrived
the request is sent as the policy would send it without any HTTPRoute: to the Service itself.
Tracked Service ports are kept while the controller runs (a handful per Ingress backend).
"""

from __future__ import annotations

import asyncio
import contextlib

from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.upstream_cache import (
    UPSTREAM_CACHE,
    TrackService,
    UpstreamCache,
    UpstreamTables,
)
from interlock.dataplane.source import Address, UpstreamError
from interlock.edge.provider import EdgeCall, EdgeProvider, ForwardingEdge
from interlock.mailbox import ActorSystem
from interlock.mailbox.slot import LatestValueSlot, SlotClosed
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.service import ServicePortKey


class ControllerUpstreams:
    """Resolves a route's backend Service port to addresses; see the module docstring."""

    def __init__(
        self,
        *,
        system: ActorSystem,
        watches: ServicePortWatches,
    ) -> None:
        self._system = system
        self._watches = watches
        self.tables = UpstreamTables()
        self._policies: dict[ServicePortKey, OutboundPolicy] = {}
        self._followers: dict[ServicePortKey, asyncio.Task[None]] = {}
        self._requested: set[ObjectKey] = set()
        self._closed = False

    def start(self) -> None:
        """Spawn the cache actor (call once, before requests arrive)."""
        self._system.spawn(UPSTREAM_CACHE, lambda: UpstreamCache(tables=self.tables))

    def track(self, target: ServicePortKey) -> None:
        """Follow this Service port's policy and its Service's endpoints (idempotent)."""
        self._track_service(target.service_key())
        if target in self._followers or self._closed:
            return
        watch = WatchTarget(target, client_namespace=target.namespace)
        slot = self._watches.open_watch(watch)
        self._followers[target] = asyncio.get_running_loop().create_task(
            self._follow(target, watch, slot), name=f"upstream policy {target}"
        )

    def track_endpoints(self, key: ObjectKey) -> None:
        """Follow a Service's endpoints (not its policy: a Gateway route sends to the backend
        Service's endpoints directly), so that the first request finds them."""
        self._track_service(key)

    def _track_service(self, key: ObjectKey) -> None:
        if key not in self._requested:
            self._requested.add(key)
            self._system.tell(UPSTREAM_CACHE, TrackService(key))

    async def _follow(
        self, target: ServicePortKey, watch: WatchTarget, slot: LatestValueSlot[PolicyUpdate]
    ) -> None:
        version = 0
        try:
            while True:
                version, update = await slot.next(after=version)
                self._policies[target] = update.policy
                for route in update.policy.routes:
                    for rule in route.rules:
                        for backend in rule.backends:
                            if backend.exists:
                                self._track_service(backend.key)
        except SlotClosed:
            return
        finally:
            self._watches.close_watch(watch, slot)

    async def close(self) -> None:
        """Stop following policies (the controller is stopping)."""
        self._closed = True
        tasks = list(self._followers.values())
        self._followers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        """The policy of ``target`` as its own namespace sees it; None until it arrived (and
        tracking starts on the first ask)."""
        policy = self._policies.get(target)
        if policy is None:
            self.track(target)
        return policy

    def addresses(self, target: ServicePortKey) -> list[Address] | UpstreamError:
        addresses = self.tables.addresses.get(target)
        if addresses:
            return addresses
        # The slow path: why there is no address (building keys and messages costs time).
        self._track_service(target.service_key())
        return self.tables.unavailable(target)

    def debug(self) -> list[dict[str, object]]:
        """One line per tracked Service port, for ``/debug/edges``."""
        lines: list[dict[str, object]] = []
        for target in sorted(self._followers):
            policy = self._policies.get(target)
            lines.append(
                {
                    "service": str(target),
                    "routes": None if policy is None else len(policy.routes),
                    "addresses": len(self.tables.addresses.get(target, [])),
                }
            )
        return lines


class TrackingProvider(ForwardingEdge):
    """An :class:`EdgeProvider` that starts tracking a backend before attaching it.

    By the time a route forwards, its backend's policy and endpoints are (almost always)
    already in the tables, so the first requests do not see "endpoints not known yet".
    """

    def __init__(self, inner: EdgeProvider, *, upstreams: ControllerUpstreams) -> None:
        super().__init__(inner)
        self._upstreams = upstreams

    async def before(self, call: EdgeCall) -> None:
        backend = call.backend
        if backend is not None and backend.exists:
            self._upstreams.track(backend.key)
