"""UpstreamCache: the ready addresses of every Service port the data plane forwards to.

The edge and the mesh listener answer on every request and must never await, so they read
:class:`UpstreamTables`; this actor, one per controller, writes them. It subscribes to the
``service:`` and ``endpoints:`` topics of each Service someone follows and recomputes that
Service's ready addresses per port when either changes. One cache serves both front doors
(each through its own :class:`~interlock.controller.upstreams.UpstreamIndex`): an EndpointSlice
is held once, however many of them send to it.

Each follower (``"edge"``, ``"mesh"``) follows and releases Services on its own; a Service is
subscribed while one follower still follows it. Who follows what lives in the tables, not in
the actor, so that a restart keeps it; the subscriptions are kept by the runtime across a
restart, and their retained values re-delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from interlock.actors.topics import (
    ENDPOINTS,
    SERVICE,
)
from interlock.dataplane.source import no_address
from interlock.dataplane.upstreams import Address, UpstreamError
from interlock.mailbox import Actor, Published, Unpublished
from interlock.model.meta import ObjectKey
from interlock.model.service import EndpointSlice, Service, ServicePortKey, ready_addresses

UPSTREAM_CACHE = "upstreams"
"""The address of the controller's one cache."""


@dataclass(slots=True)
class UpstreamTables:
    """What the indexes read; written only by the :class:`UpstreamCache` actor."""

    followers: dict[ObjectKey, tuple[str, ...]] = field(default_factory=dict)
    """Who follows each Service (never empty: the last to leave removes the row). A tuple of
    one or two names costs a quarter of a set's memory, per Service followed."""
    known: set[ObjectKey] = field(default_factory=set)
    """Services whose topics were subscribed and whose retained values have been read."""
    services: dict[ObjectKey, Service] = field(default_factory=dict)
    slices: dict[ObjectKey, dict[str, EndpointSlice]] = field(default_factory=dict)
    addresses: dict[ServicePortKey, list[Address]] = field(default_factory=dict)
    """Ready addresses per Service port that exists (an empty list: none ready)."""
    listeners: list[Callable[[ObjectKey], None]] = field(default_factory=list)
    """Told each Service whose rows changed (the edge workers' table pusher): a call, not a
    message, so that it costs nothing when nobody listens."""

    def changed(self, key: ObjectKey) -> None:
        """Tell the listeners that ``key``'s rows changed."""
        for listener in self.listeners:
            listener(key)

    def unavailable(self, target: ServicePortKey) -> UpstreamError:
        """Why a Service port has no ready address: endpoints not known yet (503), the Service
        or its port does not exist (500), or no endpoint is ready (503). The indexes' slow
        path, once their fast ``addresses`` lookup found nothing."""
        key = target.service_key()
        return no_address(
            target,
            known=key in self.known,
            exists=key in self.services,
            has_port=target in self.addresses,
        )


@dataclass(frozen=True, slots=True)
class TrackService:
    """``follower`` follows a Service and its EndpointSlices."""

    key: ObjectKey
    follower: str

    @property
    def coalesce_key(self) -> tuple[str, str, str, str]:
        return ("track", self.follower, self.key.namespace, self.key.name)


@dataclass(frozen=True, slots=True)
class UntrackService:
    """``follower`` no longer follows a Service (its rows leave the tables with the last)."""

    key: ObjectKey
    follower: str

    @property
    def coalesce_key(self) -> tuple[str, str, str, str]:
        return ("track", self.follower, self.key.namespace, self.key.name)  # the latest wins


@dataclass(frozen=True, slots=True)
class ServiceTracked:
    """Sent by the cache to itself after subscribing: the retained values are in before it."""

    key: ObjectKey


class UpstreamCache(Actor):
    """Keeps :class:`UpstreamTables` current from the service and endpoints topics."""

    def __init__(self, *, tables: UpstreamTables) -> None:
        self._tables = tables
        self._untracked: set[ObjectKey] = set()

    async def receive(self, message: object) -> object | None:
        if isinstance(message, TrackService):
            self._track(message.key, message.follower)
        elif isinstance(message, UntrackService):
            self._untrack(message.key, message.follower)
        elif isinstance(message, ServiceTracked):
            if message.key in self._tables.followers:
                self._tables.known.add(message.key)
                self._tables.changed(message.key)
        elif isinstance(message, Published | Unpublished):
            self._take(message)
        return None

    def _track(self, key: ObjectKey, follower: str) -> None:
        followers = self._tables.followers.get(key)
        if followers is not None:
            if follower not in followers:
                self._tables.followers[key] = (*followers, follower)
            return
        self._tables.followers[key] = (follower,)
        self._untracked.discard(key)
        self.subscribe(SERVICE.topic(key))
        self.subscribe(ENDPOINTS.topic(key))
        self.tell(self.address, ServiceTracked(key))

    def _untrack(self, key: ObjectKey, follower: str) -> None:
        tables = self._tables
        followers = tables.followers.get(key)
        if followers is None or follower not in followers:
            return
        if len(followers) > 1:  # another follower still needs it
            tables.followers[key] = tuple(name for name in followers if name != follower)
            return
        del tables.followers[key]
        self._untracked.add(key)
        self.unsubscribe(SERVICE.topic(key))
        self.unsubscribe(ENDPOINTS.topic(key))
        tables.known.discard(key)
        before = tables.services.pop(key, None)
        tables.slices.pop(key, None)
        self._recompute(key, before)

    def _take(self, message: Published | Unpublished) -> None:
        value = message.value if isinstance(message, Published) else None
        tables = self._tables
        if (key := SERVICE.key_of(message.topic)) is not None:
            if key in self._untracked:
                return  # queued before the Service was untracked
            if isinstance(value, Service):
                before = tables.services.get(key)
                tables.services[key] = value
            else:
                before = tables.services.pop(key, None)
        elif (key := ENDPOINTS.key_of(message.topic)) is not None:
            if key in self._untracked:
                return
            before = tables.services.get(key)
            slices = tables.slices.setdefault(key, {})
            if isinstance(value, EndpointSlice):
                slices[message.key] = value
            else:
                slices.pop(message.key, None)
        else:
            return
        self._recompute(key, before)

    def _recompute(self, key: ObjectKey, before: Service | None) -> None:
        """Rewrite ``key``'s rows of :attr:`UpstreamTables.addresses`: those of the ports of
        ``before`` (the Service they were written for) go, those of its current ports are
        written, in O(its ports) however many Services the tables hold."""
        tables = self._tables
        if before is not None:
            for service_port in before.spec.ports:
                tables.addresses.pop(
                    ServicePortKey(key.namespace, key.name, service_port.port), None
                )
        service = tables.services.get(key)
        if service is not None:
            slices = list(tables.slices.get(key, {}).values())
            for service_port in service.spec.ports:
                target = ServicePortKey(key.namespace, key.name, service_port.port)
                tables.addresses[target] = ready_addresses(slices, service_port.name)
        tables.changed(key)
