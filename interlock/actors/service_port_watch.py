"""ServicePortWatch: the policy of one (Service, port, client namespace), for whoever watches it.

Each watch subscribes to ``parent:<ns>/<svc>`` (the resolved routes attached to the Service)
and ``service:<ns>/<svc>`` (the Service itself), builds the policy with
:func:`~interlock.model.outbound_policy.build_outbound_policy` and pushes it to its subscribers only
when it changed. Subscribers are latest-value slots, so a slow reader (an HTTP stream) never
blocks the actor and only ever skips to the newest policy.

Watches exist only while somebody watches: :class:`ServicePortWatches` spawns one on the first
subscriber and stops it a grace period after the last one left (Linkerd keeps them forever).
The registry and the actor share a small :class:`WatchEntry` (the slots and the latest policy):
adding a reader is then synchronous — it gets the current policy at once, no round trip — and
the slots survive an actor restart, because they belong to the entry, not to the instance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from interlock.actors.messages import (
    SERVICE_KEY,
    watch_address,
)
from interlock.actors.topics import (
    PARENT,
    SERVICE,
)
from interlock.mailbox import Actor, ActorSystem, LatestValueSlot, Published, Timer, Unpublished
from interlock.model.outbound import OutboundPolicy, ResolvedRoute
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.service import Service

PolicyEncoder = Callable[[OutboundPolicy], bytes]
"""A policy's body as its readers are sent it (:func:`interlock.api.policy_json.policy_body`, which
the composition root hands in: ``actors/`` does not import ``api/``)."""


@dataclass(eq=False, slots=True)
class WatchEntry:
    """What the registry and the watch actor share: the readers and the latest policy."""

    target: WatchTarget
    slots: set[LatestValueSlot[PolicyUpdate]] = field(default_factory=set)
    latest: PolicyUpdate | None = None
    stop_timer: Timer | None = None
    """The grace period after the last reader left: a timer of the watch actor."""
    changes: int = 0
    """Policies pushed (the first one included)."""


@dataclass(frozen=True, slots=True)
class GraceExpired:
    """The grace period after a watch's last reader left is over (a timer's message)."""


def target_address(target: WatchTarget) -> str:
    """The address of the :class:`ServicePortWatch` of ``target``."""
    key = target.key
    return watch_address(
        namespace=key.namespace,
        service=key.name,
        port=key.port,
        client_namespace=target.client_namespace,
    )


class ServicePortWatch(Actor):
    """Builds one Service port's policy for one client namespace; pushes it when it changes."""

    def __init__(
        self, entry: WatchEntry, *, expire: Callable[[WatchEntry], None], encode: PolicyEncoder
    ) -> None:
        self.entry = entry
        self._expire = expire
        self._encode = encode
        self.service: Service | None = None
        self.routes: dict[str, ResolvedRoute] = {}

    async def started(self) -> None:
        target = self.entry.target.key.service_key()
        # Build from the snapshot now so the first reader gets a complete policy at once; the
        # notifications the subscriptions queued carry the same objects and change nothing.
        service = self.subscribe(SERVICE.topic(target)).get(SERVICE_KEY)
        self.service = service if isinstance(service, Service) else None
        self.routes = {
            key: route
            for key, route in self.subscribe(PARENT.topic(target)).items()
            if isinstance(route, ResolvedRoute)
        }
        self._rebuild()

    async def receive(self, message: object) -> object | None:
        if isinstance(message, GraceExpired):
            self._expire(self.entry)
        elif isinstance(message, Published):
            if message.topic in SERVICE:
                if self.service is message.value or not isinstance(message.value, Service):
                    return None
                self.service = message.value
            elif isinstance(message.value, ResolvedRoute):
                if self.routes.get(message.key) is message.value:
                    return None
                self.routes[message.key] = message.value
            self._rebuild()
        elif isinstance(message, Unpublished):
            if message.topic in SERVICE:
                self.service = None
            elif self.routes.pop(message.key, None) is None:
                return None
            self._rebuild()
        return None

    def _rebuild(self) -> None:
        target = self.entry.target
        policy: OutboundPolicy = build_outbound_policy(
            self.service,
            target.key.namespace,
            target.key.name,
            target.key.port,
            target.client_namespace,
            self.routes.values(),
        )
        latest = self.entry.latest
        if latest is not None and latest.policy == policy:
            return
        update = PolicyUpdate(policy=policy, body=self._encode(policy))
        self.entry.latest = update
        self.entry.changes += 1
        for slot in self.entry.slots:
            slot.put(update)


class ServicePortWatches:
    """Spawns a :class:`ServicePortWatch` on a target's first reader, stops it after the last.

    This is the policy API's ``PolicySource`` (and what the edge data plane reads policies
    from): ``open_watch`` returns a slot that holds the current policy (when already built) and
    receives every change; ``close_watch`` releases it.
    """

    def __init__(self, system: ActorSystem, *, grace: float, encode: PolicyEncoder) -> None:
        self._system = system
        self._grace = grace
        self._encode = encode
        self._entries: dict[WatchTarget, WatchEntry] = {}
        self._closed = False

    def open_watch(self, target: WatchTarget) -> LatestValueSlot[PolicyUpdate]:
        slot: LatestValueSlot[PolicyUpdate] = LatestValueSlot()
        if self._closed:
            slot.close()
            return slot
        entry = self._entries.get(target)
        if entry is None:
            entry = self._entries[target] = WatchEntry(target=target)
        if entry.stop_timer is not None:
            entry.stop_timer.cancel()
            entry.stop_timer = None
        entry.slots.add(slot)
        if entry.latest is not None:
            slot.put(entry.latest)
        if not self._system.exists(target_address(target)):
            # Its started() builds the policy and puts it into every slot of the entry.
            self._system.spawn(
                target_address(target),
                lambda: ServicePortWatch(entry, expire=self._expire, encode=self._encode),
            )
        return slot

    def close_watch(self, target: WatchTarget, slot: LatestValueSlot[PolicyUpdate]) -> None:
        entry = self._entries.get(target)
        if entry is None:
            return
        entry.slots.discard(slot)
        if not entry.slots and entry.stop_timer is None and not self._closed:
            if not self._system.exists(target_address(target)):
                self._expire(entry)  # its actor is gone (restart intensity): nothing to wait for
                return
            entry.stop_timer = self._system.tell_after(
                self._grace, target_address(target), GraceExpired(), key=GraceExpired
            )

    def _expire(self, entry: WatchEntry) -> None:
        entry.stop_timer = None
        if entry.slots or self._entries.get(entry.target) is not entry:
            return
        del self._entries[entry.target]
        self._system.stop(target_address(entry.target))

    def close(self) -> None:
        """End every reader's stream and cancel pending stops (the controller is stopping)."""
        self._closed = True
        for entry in self._entries.values():
            if entry.stop_timer is not None:
                entry.stop_timer.cancel()
                entry.stop_timer = None
            for slot in list(entry.slots):
                slot.close()

    def targets(self) -> list[WatchTarget]:
        """Targets with a live watch (readers, or within the grace period)."""
        return list(self._entries)

    def readers(self, target: WatchTarget) -> int:
        entry = self._entries.get(target)
        return 0 if entry is None else len(entry.slots)

    def debug(self) -> list[dict[str, object]]:
        """One line per watch for ``/debug/watches``."""
        return [
            {
                "target": str(entry.target),
                "readers": len(entry.slots),
                "changes": entry.changes,
                "stopping": entry.stop_timer is not None,
            }
            for entry in self._entries.values()
        ]
