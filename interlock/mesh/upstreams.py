"""What the mesh listener knows of a Service port: its policy as the client namespace sees it,
and the ready endpoints of every backend that policy can choose.

The edge learns a backend's policy before its first request (an EdgeActor attaches the backend
first); the mesh listener learns which Service a client wants only when the request arrives.
So :class:`MeshUpstreams` starts following a Service port on its first request and lets that
request wait — bounded — until the policy and the backends' endpoints are known: the first
request is answered as the policy says, not with a "not known yet" the client cannot act on.
Later requests read two local tables and never wait.

* **policies**: one :class:`~interlock.actors.service_port_watch.ServicePortWatches` watch per
  Service port, with the listener's client namespace (``--mesh-client-namespace``): a consumer
  HTTPRoute in that namespace is what its clients see (GEP-1294), a producer route what every
  other client sees — the same watches the policy API serves, so both always agree;
* **endpoints**: an :class:`~interlock.actors.upstream_cache.UpstreamCache` actor of the mesh's
  own (:data:`MESH_UPSTREAM_CACHE`), asked to follow every backend Service a policy names. The
  double ask in :meth:`MeshUpstreams._track` returns once the cache has read the Service's
  retained values, which the subscription put in its mailbox before the second ask.

A Service port a client names is followed until it is no longer needed: no request for
:attr:`MeshUpstreams.idle_release` seconds (10 minutes by default; a sweep runs every quarter
of that, on the injected sleep and clock), or its Service was deleted (the policy update that
says so). Releasing closes its policy watch (the watch stops after its grace period) and stops
following the endpoints of the backends no other followed policy names; the next request
follows it again, as the first did. At most :attr:`MeshUpstreams.max_targets` are followed at
once (a client naming random Services would otherwise make the controller build a watch for
each).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from loguru import logger

from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.upstream_cache import (
    TrackService,
    UntrackService,
    UpstreamCache,
    UpstreamTables,
)
from interlock.dataplane.upstreams import Address, UpstreamError
from interlock.mailbox import ActorSystem
from interlock.mailbox.slot import LatestValueSlot, SlotClosed
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.service import ServicePortKey

MESH_UPSTREAM_CACHE = "mesh-upstreams"
"""The address of the mesh listener's endpoint cache (the edge has its own)."""

DEFAULT_MAX_TARGETS = 10_000

DEFAULT_IDLE_RELEASE = 600.0
"""Seconds without a request after which a followed Service port is released."""


@dataclass(eq=False, slots=True)
class _Followed:
    used: float
    """When a request last named it (the injected clock)."""
    policy: OutboundPolicy | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


@dataclass(kw_only=True, eq=False)
class MeshUpstreams:
    """Policies and endpoints of the Service ports mesh clients name; see the module docstring."""

    system: ActorSystem
    """Where the endpoint cache (:data:`MESH_UPSTREAM_CACHE`) is spawned."""
    watches: ServicePortWatches
    """The policy watches, shared with the policy API."""
    client_namespace: str
    """The namespace the listener's clients are in (``--mesh-client-namespace``): which
    consumer routes apply."""
    max_targets: int = DEFAULT_MAX_TARGETS
    """At most this many Service ports followed at once."""
    idle_release: float = DEFAULT_IDLE_RELEASE
    """Seconds without a request after which a Service port is no longer followed."""
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """The injected clock and sleep of the idle sweep."""
    tables: UpstreamTables = field(default_factory=UpstreamTables, init=False)
    """The endpoints of the backends followed, as the endpoint cache keeps them."""
    _followed: dict[ServicePortKey, _Followed] = field(default_factory=dict, init=False)
    _tracked: set[ObjectKey] = field(default_factory=set, init=False)
    _sweeper: asyncio.Task[None] | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)

    def start(self) -> None:
        """Spawn the endpoint cache (once, before requests arrive) and start the sweep."""
        self.system.spawn(MESH_UPSTREAM_CACHE, lambda: UpstreamCache(tables=self.tables))
        self._sweeper = asyncio.get_running_loop().create_task(
            self._sweep(), name="mesh idle Service ports"
        )

    async def _sweep(self) -> None:
        while True:
            await self.sleep(self.idle_release / 4)
            self.release_idle()

    def release_idle(self) -> list[ServicePortKey]:
        """Release the Service ports no request named for :attr:`idle_release` seconds."""
        now = self.clock()
        idle = [t for t, f in self._followed.items() if now - f.used >= self.idle_release]
        for target in idle:
            self._release(target)
        return idle

    def _release(self, target: ServicePortKey) -> None:
        """Stop following ``target``: its watch, and the endpoints only it needed."""
        followed = self._followed.pop(target, None)
        if followed is None:
            return
        if followed.task is not None and followed.task is not asyncio.current_task():
            followed.task.cancel()  # its finally closes the watch
        logger.debug("mesh: Service port {} released", target)
        needed = {key for f in self._followed.values() for key in _backend_keys(f.policy)}
        for key in self._tracked - needed:
            self._tracked.discard(key)
            self.system.tell(MESH_UPSTREAM_CACHE, UntrackService(key))

    async def policy(
        self, target: ServicePortKey, *, within: float
    ) -> OutboundPolicy | UpstreamError:
        """The policy of ``target`` as the client namespace sees it, once its backends'
        endpoints are known too; waits at most ``within`` seconds the first time."""
        followed = self._followed.get(target)
        if followed is None:
            if self._closed:
                return UpstreamError(503, "the mesh listener is stopping")
            if len(self._followed) >= self.max_targets:
                return UpstreamError(
                    503,
                    f"Service {target}: the mesh listener already follows {self.max_targets} "
                    "Service ports",
                )
            followed = self._followed[target] = _Followed(used=self.clock())
            followed.task = asyncio.get_running_loop().create_task(
                self._follow(target, followed), name=f"mesh policy {target}"
            )
        followed.used = self.clock()
        if followed.policy is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(followed.ready.wait(), within)
            if followed.policy is None:
                return UpstreamError(503, f"Service {target}: its policy is not known yet")
        return followed.policy

    async def _follow(self, target: ServicePortKey, followed: _Followed) -> None:
        watch = WatchTarget(
            ServicePortKey(target.namespace, target.name, target.port),
            client_namespace=self.client_namespace,
        )
        slot: LatestValueSlot[PolicyUpdate] = self.watches.open_watch(watch)
        version = 0
        try:
            while True:
                version, update = await slot.next(after=version)
                await self._track_backends(update.policy)
                existed = followed.policy is not None and service_exists(followed.policy)
                followed.policy = update.policy
                followed.ready.set()
                if existed and not service_exists(update.policy):
                    self._release(target)  # deleted: the next request follows it again
                    return
        except SlotClosed:
            return
        finally:
            self.watches.close_watch(watch, slot)

    async def _track_backends(self, policy: OutboundPolicy) -> None:
        keys = _backend_keys(policy)
        for key in sorted(keys - self._tracked, key=lambda k: (k.namespace, k.name)):
            self._tracked.add(key)
            await self._track(key)

    async def _track(self, key: ObjectKey) -> None:
        # The first ask subscribes (the retained values land in the cache's mailbox, then its
        # ServiceTracked); the second is handled after both: the tables hold the Service.
        try:
            for _ in range(2):
                await self.system.ask(MESH_UPSTREAM_CACHE, TrackService(key), timeout=30.0)
        except Exception as error:  # the cache restarts; later requests find the endpoints
            logger.warning("mesh: cannot follow the endpoints of Service {}: {!r}", key, error)

    def addresses(self, target: ServicePortKey) -> list[Address] | UpstreamError:
        """The ready addresses of a backend Service port, or why there are none."""
        addresses = self.tables.addresses.get(target)
        if addresses:
            return addresses
        return self.tables.unavailable(target)

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
        """One line per followed Service port, for ``/debug/mesh``."""
        return [
            {
                "service": str(target),
                "clientNamespace": self.client_namespace,
                "routes": None if followed.policy is None else len(followed.policy.routes),
            }
            for target, followed in sorted(self._followed.items(), key=lambda i: str(i[0]))
        ]


def service_exists(policy: OutboundPolicy) -> bool:
    """Whether the policy's Service exists: only a missing one has a Default route whose
    backend (the Service itself) does not exist."""
    routes = policy.routes
    if len(routes) != 1 or routes[0].kind != "Default":
        return True
    return all(b.exists for rule in routes[0].rules for b in rule.backends)


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
