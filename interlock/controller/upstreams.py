"""The upstream index: where a front door's requests for a Service port really go.

A front door knows a request's Service port (a route's backend at the edge, the authority a mesh
client named). Where the request goes is controller state: that Service port's outbound policy
(HTTPRoutes attached to it split the traffic by weight; a backendRef to a Service that does not
exist answers 500) and the ready endpoints of the backend the policy chooses (none ready → 503).
:class:`UpstreamIndex` keeps both in local tables, so that :meth:`~UpstreamIndex.policy` and
:meth:`~UpstreamIndex.addresses`, asked on every request by the data-plane engine, are a dict
read and never await:

* **policies** come from :class:`~interlock.actors.service_port_watch.ServicePortWatches`, the
  watches the policy API serves (so both always agree): one per followed Service port, as the
  index's client namespace sees it, read by a task that copies each new policy in;
* **endpoints** come from the controller's one
  :class:`~interlock.actors.upstream_cache.UpstreamCache`, asked to follow every backend
  Service a followed policy names; a policy counts as ready once the cache has read those
  Services' retained values (the double ask in :meth:`UpstreamIndex._track`).

Two instances run over the one cache, each under its own follower name:

* the **edge**'s (``client_namespace=None``: a Service port as its own namespace sees it,
  producer routes, as an Ingress backend always is) follows a Service port when an EdgeActor
  attaches it as a backend (``edge_half.TrackingProvider``) and, as a safety net, on its first
  request, and keeps it while the controller runs (a handful per Ingress backend). Until its
  policy is ready a request goes where it would go without any HTTPRoute: to the Service
  itself;
* the **mesh listener**'s (``--mesh-client-namespace``: a consumer route in that namespace is
  what its clients see, GEP-1294) learns a Service port only from a request, so the request
  waits for it, bounded (:meth:`UpstreamIndex.ready`). It releases a Service port no request
  named for ``idle_release`` seconds (a sweep every quarter of that, on the injected sleep and
  clock) or whose Service was deleted: its watch closes (after the watch's grace period) and
  the cache stops following the backends no other followed policy names; the next request
  follows it again. At most ``max_targets`` are followed at once (a client naming random
  Services would otherwise make the controller build a watch for each).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType

from loguru import logger

from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.upstream_cache import (
    UPSTREAM_CACHE,
    TrackService,
    UntrackService,
    UpstreamCache,
    UpstreamTables,
)
from interlock.dataplane.source import Address, UpstreamError
from interlock.mailbox import ActorSystem
from interlock.mailbox.slot import LatestValueSlot, SlotClosed
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy, service_exists
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.service import ServicePortKey

DEFAULT_MAX_TARGETS = 10_000
"""The mesh listener's bound on Service ports followed at once."""

DEFAULT_IDLE_RELEASE = 600.0
"""Seconds without a request after which the mesh listener releases a Service port."""


@dataclass(eq=False)
class SharedUpstreamCache:
    """The controller's one :class:`UpstreamCache` and its tables, shared by every index:
    spawned by the first index that starts, found by the others."""

    system: ActorSystem
    tables: UpstreamTables = field(default_factory=UpstreamTables)

    def start(self) -> None:
        """Spawn the cache unless it runs (idempotent)."""
        if not self.system.exists(UPSTREAM_CACHE):
            self.system.spawn(UPSTREAM_CACHE, lambda: UpstreamCache(tables=self.tables))


@dataclass(eq=False, slots=True)
class _Followed:
    used: float
    """When a request last named it (the injected clock)."""
    policy: OutboundPolicy | None = None
    """None until ready: the policy and its backends' endpoints are known."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


@dataclass(kw_only=True, eq=False)
class UpstreamIndex:
    """Policies and endpoints of the Service ports one front door follows; see the module
    docstring. The engine's :class:`~interlock.dataplane.source.PolicySource`."""

    cache: SharedUpstreamCache
    """The controller's one endpoint cache."""
    watches: ServicePortWatches
    """The policy watches, shared with the policy API."""
    follower: str
    """This index's name at the cache and in its answers (``"edge"``, ``"mesh listener"``)."""
    client_namespace: str | None = None
    """Which namespace's consumer routes apply; None: each Service port's own namespace."""
    max_targets: int | None = None
    """At most this many Service ports followed at once; None: no bound."""
    idle_release: float | None = None
    """Seconds without a request after which a Service port is released (and one whose Service
    was deleted at once); None: nothing is released while the controller runs."""
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """The injected clock and sleep of the idle sweep."""
    tables: UpstreamTables = field(init=False)
    """The endpoints, as the cache keeps them for every index (an attribute, not a property:
    :meth:`addresses` reads it on every request)."""
    _policies: dict[ServicePortKey, OutboundPolicy] = field(default_factory=dict, init=False)
    """The ready policies: what :meth:`policy` reads on every request."""
    _followed: dict[ServicePortKey, _Followed] = field(default_factory=dict, init=False)
    _tracked: set[ObjectKey] = field(default_factory=set, init=False)
    """Services whose endpoints this index asked the cache to follow."""
    _sweeper: asyncio.Task[None] | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)
    listeners: list[Callable[[ServicePortKey | ObjectKey], None]] = field(
        default_factory=list, init=False
    )
    """Told each row of this index that changed (the edge workers' table pusher): a Service
    port whose ready policy was set or removed, a Service it started or stopped following (the
    endpoints of one it follows change at the cache: ``tables.listeners``)."""

    def __post_init__(self) -> None:
        self.tables = self.cache.tables

    @property
    def system(self) -> ActorSystem:
        return self.cache.system

    def start(self) -> None:
        """Start the cache unless it runs, and the idle sweep with :attr:`idle_release` (call
        once, in the event loop, before requests arrive)."""
        self.cache.start()
        if self.idle_release is not None:
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep(), name=f"{self.follower}: idle Service ports"
            )

    def follow(self, target: ServicePortKey) -> _Followed | UpstreamError:
        """Follow ``target``'s policy and its backends' endpoints (idempotent); refused while
        stopping or beyond :attr:`max_targets`."""
        followed = self._followed.get(target)
        if followed is not None:
            return followed
        if self._closed:
            return UpstreamError(503, f"the {self.follower} is stopping")
        if self.max_targets is not None and len(self._followed) >= self.max_targets:
            return UpstreamError(
                503,
                f"Service {target}: the {self.follower} already follows {self.max_targets} "
                "Service ports",
            )
        self.endpoints(target.service_key())
        followed = self._followed[target] = _Followed(used=self.clock())
        followed.task = asyncio.get_running_loop().create_task(
            self._follow(target, followed), name=f"{self.follower} policy {target}"
        )
        return followed

    @property
    def ready_policies(self) -> Mapping[ServicePortKey, OutboundPolicy]:
        """The ready policy of every followed Service port (read-only)."""
        return MappingProxyType(self._policies)

    @property
    def tracked(self) -> AbstractSet[ObjectKey]:
        """The Services whose endpoints this index follows (read-only)."""
        return self._tracked

    def endpoints(self, key: ObjectKey) -> None:
        """Follow a Service's endpoints without a policy (a Gateway route sends to its backend
        Services directly), so that the first request finds them."""
        if key not in self._tracked:
            self._tracked.add(key)
            self._changed(key)
            self.system.tell(UPSTREAM_CACHE, TrackService(key, self.follower))

    def _changed(self, key: ServicePortKey | ObjectKey) -> None:
        for listener in self.listeners:
            listener(key)

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        """The policy of ``target``; None until ready (following starts on the first ask)."""
        policy = self._policies.get(target)
        if policy is None:
            self.follow(target)
        return policy

    async def ready(
        self, target: ServicePortKey, *, within: float
    ) -> OutboundPolicy | UpstreamError:
        """The policy of ``target`` once it and its backends' endpoints are known; the first
        time waits at most ``within`` seconds."""
        followed = self.follow(target)
        if isinstance(followed, UpstreamError):
            return followed
        followed.used = self.clock()
        if followed.policy is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(followed.ready.wait(), within)
            if followed.policy is None:
                return UpstreamError(503, f"Service {target}: its policy is not known yet")
        return followed.policy

    def addresses(self, target: ServicePortKey) -> list[Address] | UpstreamError:
        """The ready addresses of a backend Service port, or why there are none."""
        addresses = self.tables.addresses.get(target)
        if addresses:
            return addresses
        # The slow path: why there is none (building keys and messages costs time).
        self.endpoints(target.service_key())
        return self.tables.unavailable(target)

    async def _follow(self, target: ServicePortKey, followed: _Followed) -> None:
        client_namespace = self.client_namespace or target.namespace
        watch = WatchTarget(target, client_namespace=client_namespace)
        slot: LatestValueSlot[PolicyUpdate] = self.watches.open_watch(watch)
        version = 0
        try:
            while True:
                version, update = await slot.next(after=version)
                for key in sorted(_backend_keys(update.policy), key=str):
                    if key not in self._tracked or key not in self.tables.known:
                        await self._track(key)
                existed = followed.policy is not None and service_exists(followed.policy)
                followed.policy = self._policies[target] = update.policy
                followed.ready.set()
                self._changed(target)
                if self.idle_release is not None and existed and not service_exists(update.policy):
                    self.release(target)  # deleted: the next request follows it again
                    return
        except SlotClosed:
            return
        finally:
            self.watches.close_watch(watch, slot)

    async def _track(self, key: ObjectKey) -> None:
        # The first ask subscribes (the retained values land in the cache's mailbox, then its
        # ServiceTracked); the second is handled after both: the tables hold the Service.
        if key not in self._tracked:
            self._tracked.add(key)
            self._changed(key)
        try:
            for _ in range(2):
                await self.system.ask(
                    UPSTREAM_CACHE, TrackService(key, self.follower), timeout=30.0
                )
        except Exception as error:  # the cache restarts; later requests find the endpoints
            logger.warning(
                "{}: cannot follow the endpoints of Service {}: {!r}", self.follower, key, error
            )

    def release(self, target: ServicePortKey) -> None:
        """Stop following ``target``: its watch, and the endpoints only it needed."""
        followed = self._followed.pop(target, None)
        if followed is None:
            return
        if self._policies.pop(target, None) is not None:
            self._changed(target)
        if followed.task is not None and followed.task is not asyncio.current_task():
            followed.task.cancel()  # its finally closes the watch
        logger.debug("{}: Service port {} released", self.follower, target)
        needed = {key for f in self._followed.values() for key in _backend_keys(f.policy)}
        for key in self._tracked - needed:
            self._tracked.discard(key)
            self._changed(key)
            self.system.tell(UPSTREAM_CACHE, UntrackService(key, self.follower))

    def release_idle(self) -> list[ServicePortKey]:
        """Release the Service ports no request named for :attr:`idle_release` seconds."""
        if self.idle_release is None:
            return []
        now = self.clock()
        idle = [t for t, f in self._followed.items() if now - f.used >= self.idle_release]
        for target in idle:
            self.release(target)
        return idle

    async def _sweep(self) -> None:
        assert self.idle_release is not None
        while True:
            await self.sleep(self.idle_release / 4)
            self.release_idle()

    async def close(self) -> None:
        """Stop following (the controller is stopping)."""
        self._closed = True
        tasks = [f.task for f in self._followed.values() if f.task is not None]
        if self._sweeper is not None:
            tasks.append(self._sweeper)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def debug(self) -> list[dict[str, object]]:
        """One line per followed Service port, for ``/debug/edges`` and ``/debug/mesh``."""
        return [
            {
                "service": str(target),
                "routes": None if followed.policy is None else len(followed.policy.routes),
                "addresses": len(self.tables.addresses.get(target, [])),
            }
            for target, followed in sorted(self._followed.items(), key=lambda item: item[0])
        ]


def _backend_keys(policy: OutboundPolicy | None) -> set[ObjectKey]:
    """The Services whose endpoints ``policy`` can send to."""
    if policy is None:
        return set()
    return {
        backend.key
        for route in policy.routes
        for rule in route.rules
        for backend in rule.backends
        if backend.exists
    }
