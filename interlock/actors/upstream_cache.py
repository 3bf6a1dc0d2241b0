"""UpstreamCache: the ready addresses of every Service port the edge forwards to, kept current.

The edge's upstream resolver (``interlock.controller.upstreams.ControllerUpstreams``) answers
on every request and must never await; it reads :class:`UpstreamTables`. This actor writes them: it
subscribes to the ``service:`` and ``endpoints:`` topics of each Service it is asked to track
and recomputes that Service's ready addresses per port when either changes. Subscriptions are
kept by the runtime across a restart, and their retained values re-delivered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from interlock.actors.edge_messages import endpoints_topic
from interlock.actors.messages import AboutObject, service_topic
from interlock.dataplane.upstreams import Address, UpstreamError
from interlock.mailbox import Actor, Published, Unpublished
from interlock.model.meta import ObjectKey
from interlock.model.service import EndpointSlice, Service, ServicePortKey, ready_addresses

UPSTREAM_CACHE = "edge-upstreams"


@dataclass(slots=True)
class UpstreamTables:
    """What the resolver reads; written only by the :class:`UpstreamCache` actor."""

    known: set[ObjectKey] = field(default_factory=set)
    """Services whose topics were subscribed and whose retained values have been read."""
    services: dict[ObjectKey, Service] = field(default_factory=dict)
    slices: dict[ObjectKey, dict[str, EndpointSlice]] = field(default_factory=dict)
    addresses: dict[ServicePortKey, list[Address]] = field(default_factory=dict)
    """Ready addresses per Service port that exists (an empty list: none ready)."""

    def unavailable(self, target: ServicePortKey) -> UpstreamError:
        """Why a Service port has no ready address: endpoints not known yet (503), the Service
        or its port does not exist (500), or no endpoint is ready (503). The resolvers' slow
        path, once their fast ``addresses`` lookup found nothing."""
        key = target.service_key()
        where = target.describe()
        if target not in self.addresses:
            if key not in self.known:
                return UpstreamError(503, f"{where}: endpoints not known yet")
            if key not in self.services:
                return UpstreamError(500, f"Service {key} does not exist")
            return UpstreamError(500, f"{where} does not exist")
        return UpstreamError(503, f"{where} has no ready endpoint")


@dataclass(frozen=True, slots=True)
class TrackService(AboutObject):
    """Ask the cache to follow a Service and its EndpointSlices."""

    coalesce_prefix = "track"


@dataclass(frozen=True, slots=True)
class UntrackService(AboutObject):
    """Ask the cache to stop following a Service (its rows leave the tables)."""

    coalesce_prefix = "track"  # the latest of track/untrack wins


@dataclass(frozen=True, slots=True)
class ServiceTracked:
    """Sent by the cache to itself after subscribing: the retained values are in before it."""

    key: ObjectKey


class UpstreamCache(Actor):
    """Keeps :class:`UpstreamTables` current from the service and endpoints topics."""

    def __init__(self, *, tables: UpstreamTables) -> None:
        self._tables = tables
        self._followed: set[ObjectKey] = set()
        self._untracked: set[ObjectKey] = set()

    async def started(self) -> None:
        # After a restart the subscriptions are kept by the system and their retained values
        # re-delivered; the set of followed Services is rebuilt from the tables.
        self._followed = set(self._tables.known)

    async def receive(self, message: object) -> object | None:
        if isinstance(message, TrackService):
            key = message.key
            self._untracked.discard(key)
            if key not in self._followed:
                self._followed.add(key)
                self.subscribe(service_topic(key.namespace, key.name))
                self.subscribe(endpoints_topic(key.namespace, key.name))
                self.tell(self.address, ServiceTracked(key))
        elif isinstance(message, UntrackService):
            key = message.key
            if key in self._followed:
                self._followed.discard(key)
                self._untracked.add(key)
                self.unsubscribe(service_topic(key.namespace, key.name))
                self.unsubscribe(endpoints_topic(key.namespace, key.name))
                tables = self._tables
                tables.known.discard(key)
                tables.services.pop(key, None)
                tables.slices.pop(key, None)
                self._recompute(key)
        elif isinstance(message, ServiceTracked):
            if message.key not in self._untracked:
                self._tables.known.add(message.key)
        elif isinstance(message, Published | Unpublished):
            self._take(message)
        return None

    def _take(self, message: Published | Unpublished) -> None:
        kind, _, rest = message.topic.partition(":")
        namespace, _, name = rest.partition("/")
        key = ObjectKey(namespace=namespace, name=name)
        if key in self._untracked:
            return  # queued before the Service was untracked
        value = message.value if isinstance(message, Published) else None
        tables = self._tables
        if kind == "service":
            if isinstance(value, Service):
                tables.services[key] = value
            else:
                tables.services.pop(key, None)
        elif kind == "endpoints":
            slices = tables.slices.setdefault(key, {})
            if isinstance(value, EndpointSlice):
                slices[message.key] = value
            else:
                slices.pop(message.key, None)
        else:
            return
        self._recompute(key)

    def _recompute(self, key: ObjectKey) -> None:
        tables = self._tables
        for port in [p for p in tables.addresses if p.service_key() == key]:
            del tables.addresses[port]
        service = tables.services.get(key)
        if service is None:
            return
        slices = list(tables.slices.get(key, {}).values())
        for service_port in service.spec.ports:
            tables.addresses[ServicePortKey(key.namespace, key.name, service_port.port)] = (
                ready_addresses(slices, service_port.name)
            )
