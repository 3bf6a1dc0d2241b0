"""StatusWriter: the single place where status and Events reach the API server.

Every replica computes every object's desired status, but only the holder of the Lease writes,
and only when the content changed: two writers would fight, and rewriting an unchanged status
bumps resourceVersions and wakes every watcher for nothing. Keeping this in one actor gives one
queue of writes, one set of rules for every kind, and one answer to "what is pending".

What it writes, keyed by ``(kind, namespace, name)``: route ``status.parents`` (HTTPRoute,
GRPCRoute, TLSRoute, TCPRoute, from the RouteActors, on ``status:route``), Ingress
``status.loadBalancer`` (``status:ingress``), ModuleSet ``status.conditions``
(``status:moduleset``) and Gateway and GatewayClass status (``status:gateway``). It remembers
the latest desired status of each object whether leading or not, so that on gaining
leadership it writes everything that differs at once. The desired statuses are retained
values, not told messages: a handler that raises restarts this actor empty, and the runtime
then re-delivers every retained value, so no pending status is lost (what was already written
is skipped again, by the comparison with the stored status and by the patcher's cache).

The writer is a :class:`~interlock.mailbox.Reconciler` keyed by object: a changed desired
status requests its object, and reconciling an object writes its status if it needs one. The
reconciles run as a few concurrent tasks (at most one per object, so they cannot overtake each
other); the actor itself never waits on the API server, so a new leader with thousands of
objects to write stays responsive, and the controller's readiness does not wait for them. A
write that fails transiently (no connection, 5xx, 429) is retried by the runtime with
exponential backoff and jitter, per object; a rejected one (4xx) is a terminal failure, logged
and not retried until the object's desired status changes.

A write once sent cannot be taken back: the API server may apply it after this replica has
written a newer status (found by the harness on the real server: a StatusWriter crashed with a
write held by a slow request; its restarted successor wrote the right status; then the held one
landed and stayed for good, the successor believing its own write). So a stopping instance lets
its writes run to the end, and their outcome reaches the successor at the same address
(``reconciled_elsewhere``), which then stops trusting what it wrote to that object and checks
it again. A stored
status that changed and differs from this replica's last write (another writer's, landed after
it: a predecessor's, or an old leader's after a Lease handover) is trusted over that write.

Events go the same way: recorded only while leading, in order, by one task. The few raised
while not leading are kept for ``event_grace`` seconds and recorded if this replica gains the
Lease by then — at start-up the first reconciles usually finish before the Lease is acquired,
and a "ModulesFailed" lost there would never be reported. Older ones are dropped: the replica
that was leading then has reported them.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from loguru import logger

from interlock.actors.edge_messages import (
    DesiredIngressStatus,
    DesiredModuleSetStatus,
    EventType,
    RecordEvent,
)
from interlock.actors.gateway_messages import (
    DesiredGatewayStatus,
)
from interlock.actors.messages import (
    DesiredRouteStatus,
    LeadershipChanged,
)
from interlock.actors.topics import (
    GATEWAY_STATUS_TOPIC,
    INGRESS_STATUS_TOPIC,
    MODULESET_STATUS_TOPIC,
    ROUTE_STATUS_TOPIC,
)
from interlock.mailbox import (
    DONE,
    BackoffPolicy,
    Published,
    ReconcileError,
    Reconciler,
    TerminalError,
    TransientError,
    Unpublished,
)
from interlock.mailbox.reconciler import Result
from interlock.model.gateway_conditions import without_timestamps
from interlock.model.route_status import status_equal_ignoring_timestamps

StatusKind = Literal[
    "HTTPRoute",
    "GRPCRoute",
    "TLSRoute",
    "TCPRoute",
    "Ingress",
    "ModuleSet",
    "Gateway",
    "GatewayClass",
    "ListenerSet",
    "BackendTLSPolicy",
]
ROUTE_STATUS_KINDS: tuple[StatusKind, ...] = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute")
StatusKey = tuple[StatusKind, str, str]
"""``(kind, namespace, name)`` of an object whose status is written."""

STATUS_TOPICS: tuple[str, ...] = (
    ROUTE_STATUS_TOPIC,
    INGRESS_STATUS_TOPIC,
    MODULESET_STATUS_TOPIC,
    GATEWAY_STATUS_TOPIC,
)


class StatusSink(Protocol):
    """The writer's boundary to Kubernetes (``controller/status_sink.KubeStatusSink``)."""

    async def write_status(
        self, *, kind: StatusKind, namespace: str, name: str, status: dict[str, Any], uid: str
    ) -> bool:
        """Merge-patch ``status`` of the object (``uid``: which one, '' when unknown); True
        when written (or the object is gone), False when rejected for good. Raises
        :class:`TransientStatusError` to be retried later."""
        ...

    async def record_event(
        self, *, regarding: Mapping[str, str], type: EventType, reason: str, message: str
    ) -> None:
        """Record an Event; never raises."""
        ...

    def forget(self, *, kind: StatusKind, namespace: str, name: str) -> None:
        """The writer no longer wants a status for the object (it was deleted, or its stored
        status is already the desired one): drop what is remembered of it, so that a
        controller whose objects come and go under fresh names does not grow."""
        ...


class TransientStatusError(Exception):
    """The write could not be made now (no connection, 5xx, 429); retry later."""


@dataclass(slots=True)
class _Desired:
    status: dict[str, Any]
    stored: dict[str, Any] | None
    """The status the object has in the API server as its actor last saw it (None: unknown,
    so it is written whenever it changes)."""
    written: dict[str, Any] | None = None
    """What this replica last wrote (in its current term as leader, when ``stored`` is known)."""
    uid: str = ""
    """The object's uid when the publisher knows it (Ingress, ModuleSet): what was written to
    an object deleted and created again under the same name says nothing about the new one."""


@dataclass(frozen=True, slots=True)
class StatusWriterStatistics:
    leading: bool
    objects: int
    pending: int
    in_flight: int
    to_write: int
    """Objects whose desired status differs from the one stored (or last written): what this
    replica would write now if it led; 0 on a follower that agrees with the leader's writes."""
    writes: int
    skipped: int
    failures: int
    rejected: int
    events: int
    events_held: int
    """Events raised while not leading, kept in case this replica gains the Lease soon."""
    events_skipped: int
    """Events dropped because this replica was not leading within their grace period."""


class StatusWriter(Reconciler[StatusKey]):
    """Writes desired statuses and records Events while this replica leads, each change once."""

    def __init__(
        self,
        *,
        sink: StatusSink,
        is_leader: Callable[[], bool],
        backoff: BackoffPolicy,
        concurrency: int = 8,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        event_grace: float = 30.0,
        max_held_events: int = 256,
    ) -> None:
        """``event_grace``: how long an Event raised while not leading is kept in case this
        replica gains the Lease (at most ``max_held_events`` of them, the newest); ``concurrency``:
        how many writes may be in flight (at least one)."""
        super().__init__(backoff=backoff, rng=rng, concurrency=max(1, concurrency))
        self.sink = sink
        self.is_leader = is_leader
        self.clock = clock
        self.event_grace = event_grace
        self.objects: dict[StatusKey, _Desired] = {}
        self.identities: dict[tuple[str, str], StatusKey] = {}
        self.differing: set[StatusKey] = set()
        """Objects whose desired status differs from the stored (or last written) one, kept
        as they change so that :meth:`statistics` stays O(1) with 10,000 objects."""
        """(topic, key) of a desired status → its object, to forget it when unpublished."""
        self.events: deque[tuple[float, RecordEvent]] = deque()
        """Events to record now, in order (while leading)."""
        self.held: deque[tuple[float, RecordEvent]] = deque(maxlen=max_held_events)
        self.event_task: asyncio.Task[None] | None = None
        self.writes = 0
        """Statuses written."""
        self.skipped = 0
        """Desired statuses not written: the object already had them."""
        self.failures = 0
        """Writes that failed transiently (retried)."""
        self.rejected = 0
        """Writes the sink rejected for good (not retried)."""
        self.events_recorded = 0
        """Events recorded while leading."""
        self.events_skipped = 0
        """Events dropped: this replica did not lead within their grace period."""

    async def started(self) -> None:
        for topic in STATUS_TOPICS:
            self.subscribe(topic)

    async def handle(self, message: object) -> object | None:
        if isinstance(message, Published):
            desired = _desired(message.value)
            if desired is None:
                return None
            key, status, stored, uid = desired
            self.identities[(message.topic, message.key)] = key
            entry = self.objects.get(key)
            if entry is None:
                self.objects[key] = _Desired(status=status, stored=stored, uid=uid)
            else:
                if entry.uid != uid or self._overwritten(key, entry, stored):
                    self._distrust(key, entry)
                    entry.uid = uid
                entry.status = status
                entry.stored = stored
            self._check(key)
        elif isinstance(message, Unpublished):
            gone = self.identities.pop((message.topic, message.key), None)
            if gone is not None:
                self.objects.pop(gone, None)
                self.differing.discard(gone)
                self.forget(gone)
                kind, namespace, name = gone
                self.sink.forget(kind=kind, namespace=namespace, name=name)
            return None
        elif isinstance(message, RecordEvent):
            self.held.append((self.clock(), message))
        elif isinstance(message, LeadershipChanged):
            if not message.leading:
                # Another replica may write from now on: what this one wrote proves nothing
                # about the objects any more, so the next term re-checks every object whose
                # stored status is known (the others are written when they change).
                for entry in self.objects.values():
                    if entry.stored is not None:
                        entry.written = None
            for key in self.objects:
                self._check(key)
        else:
            return None
        if self.is_leader():
            self._release_events()
        return None

    async def stopped(self) -> None:
        # The status writes in flight are left to finish (the runtime does not cancel them, see
        # the module docstring): cancelling one would not stop the API server applying it, only
        # hide from the successor when.
        if self.event_task is not None:
            self.event_task.cancel()

    # --- status -------------------------------------------------------------------------------

    def _needs_write(self, key: StatusKey, entry: _Desired) -> bool:
        reference = entry.written if entry.written is not None else entry.stored
        if reference is None:
            return True
        return not _same_status(key, entry.status, reference)

    def _overwritten(self, key: StatusKey, entry: _Desired, stored: dict[str, Any] | None) -> bool:
        """The object's stored status changed to one this replica did not last write: someone
        wrote after it (or a write of its own landed late), so ``written`` proves nothing."""
        if entry.written is None or stored is None:
            return False
        if entry.stored is not None and _same_status(key, stored, entry.stored):
            return False
        return not _same_status(key, stored, entry.written)

    def _distrust(self, key: StatusKey, entry: _Desired) -> None:
        """Forget what this replica wrote to the object (here and in the sink's cache), so the
        next check compares the desired status with the stored one, or writes it."""
        entry.written = None
        kind, namespace, name = key
        self.sink.forget(kind=kind, namespace=namespace, name=name)

    def _check(self, key: StatusKey) -> None:
        """Have the object's status checked (and written if it must be) while leading; a
        follower checks every object when it gains the Lease."""
        self._track(key)
        if self.is_leader():
            self.request(key)

    def _track(self, key: StatusKey) -> None:
        entry = self.objects.get(key)
        if entry is not None and self._needs_write(key, entry):
            self.differing.add(key)
        else:
            self.differing.discard(key)

    async def reconcile(self, key: StatusKey) -> Result:
        """Write the object's desired status if it needs writing (a task beside the mailbox:
        it reads the object's entry when it starts and records only what it wrote)."""
        entry = self.objects.get(key)
        # Checked before each write: the Lease may be lost meanwhile (a stopping replica
        # releases it before its actors drain), and a status checked now may be older than what
        # the new leader has already written.
        if entry is None or not self.is_leader():
            return DONE
        if not self._needs_write(key, entry):
            self.skipped += 1
            return DONE
        kind, namespace, name = key
        status = entry.status
        try:
            ok = await self.sink.write_status(
                kind=kind, namespace=namespace, name=name, status=status, uid=entry.uid
            )
        except TransientStatusError as error:
            self.failures += 1
            raise TransientError(str(error)) from error
        except Exception as error:
            # Not foreseen (a bug, an answer nobody expected): the object must not stay "in
            # flight" forever, so it is retried like a transient failure, and logged.
            logger.exception("{} {}/{}: status write raised", kind, namespace, name)
            self.failures += 1
            raise TransientError(f"{type(error).__name__}: {error}") from error
        if not ok:
            self.rejected += 1
            raise TerminalError("rejected by the API server")
        self.writes += 1
        current = self.objects.get(key)
        if current is not None:
            current.written = status
            self._track(key)
        return DONE

    def reconcile_failed(
        self, key: StatusKey, error: ReconcileError, *, attempt: int, retry_in: float | None
    ) -> None:
        kind, namespace, name = key
        if retry_in is None:
            logger.warning(
                "{} {}/{}: status write {}; not retried until the status changes",
                kind,
                namespace,
                name,
                error.message,
            )
        else:
            logger.warning(
                "{} {}/{}: status write failed (attempt {}), retrying in {:.2f} s: {}",
                kind,
                namespace,
                name,
                attempt,
                retry_in,
                error.message,
            )

    def reconciled_elsewhere(self, key: StatusKey) -> None:
        # A predecessor's write, ended now: whatever this instance wrote to the object before
        # may have been overwritten by it, so the object is checked again.
        entry = self.objects.get(key)
        if entry is not None:
            self._distrust(key, entry)
            self._check(key)

    # --- Events -------------------------------------------------------------------------------

    def _release_events(self) -> None:
        """Leading: queue the held Events still within their grace period, in order, for the
        recording task (started if it is not running)."""
        oldest = self.clock() - self.event_grace
        while self.held:
            at, event = self.held.popleft()
            if at >= oldest:
                self.events.append((at, event))
            else:
                self.events_skipped += 1
        if self.events and self.event_task is None:
            self.event_task = asyncio.get_running_loop().create_task(self._record_events())

    async def _record_events(self) -> None:
        try:
            while self.events:
                if not self.is_leader():
                    # Lost the Lease meanwhile: keep them, as if raised while following.
                    self.held.extendleft(reversed(self.events))
                    self.events.clear()
                    return
                _at, event = self.events.popleft()
                await self.sink.record_event(
                    regarding=event.regarding,
                    type=event.type,
                    reason=event.reason,
                    message=event.message,
                )
                self.events_recorded += 1
        finally:
            self.event_task = None

    def statistics(self) -> StatusWriterStatistics:
        return StatusWriterStatistics(
            leading=self.is_leader(),
            objects=len(self.objects),
            pending=self.requested(),
            in_flight=len(self.reconciling()),
            to_write=len(self.differing),
            writes=self.writes,
            skipped=self.skipped,
            failures=self.failures,
            rejected=self.rejected,
            events=self.events_recorded,
            events_held=len(self.held),
            events_skipped=self.events_skipped,
        )


def _same_status(key: StatusKey, a: dict[str, Any], b: dict[str, Any]) -> bool:
    if key[0] in ROUTE_STATUS_KINDS:
        return status_equal_ignoring_timestamps(a.get("parents", []), b.get("parents", []))
    if key[0] in ("Gateway", "GatewayClass", "ListenerSet", "BackendTLSPolicy"):
        return bool(without_timestamps(a) == without_timestamps(b))
    return a == b


def _desired(
    value: object,
) -> tuple[StatusKey, dict[str, Any], dict[str, Any] | None, str] | None:
    """The object, desired status, stored status (if known) and the object's uid (if known) a
    published value asks for."""
    if isinstance(value, DesiredRouteStatus):
        kind: StatusKind = next((k for k in ROUTE_STATUS_KINDS if k == value.kind), "HTTPRoute")
        key: StatusKey = (kind, value.namespace, value.name)
        return key, {"parents": value.parents}, {"parents": value.stored}, value.uid
    if isinstance(value, DesiredIngressStatus):
        key = ("Ingress", value.key.namespace, value.key.name)
        stored = None if value.stored is None else {"loadBalancer": value.stored}
        return key, {"loadBalancer": value.load_balancer}, stored, value.uid
    if isinstance(value, DesiredGatewayStatus):
        gateway_kind: StatusKind = next(
            (k for k in ("GatewayClass", "ListenerSet", "BackendTLSPolicy") if k == value.kind),
            "Gateway",
        )
        key = (gateway_kind, value.key.namespace, value.key.name)
        return key, value.status, value.stored, value.uid
    if isinstance(value, DesiredModuleSetStatus):
        key = ("ModuleSet", value.key.namespace, value.key.name)
        return key, {"conditions": value.conditions}, None, value.uid
    return None
