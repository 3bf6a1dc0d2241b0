"""EdgeStatusWriter: where the edge half's status and Events reach the API server.

Every replica computes the edges, but only the holder of the Lease may tell users about them:
two writers would fight over ``status`` and double every Event. This actor keeps the latest
desired ``status`` of each Ingress (``loadBalancer``) and ModuleSet (``conditions``) whether
leading or not, writes what changed while leading, writes everything pending the moment it gains
leadership, and retries transient failures with backoff and jitter. The desired statuses are
retained values of ``status:ingress`` and ``status:moduleset`` that it subscribes to, not told
messages: a handler that raises restarts this actor empty, and the runtime then re-delivers
every retained value, so no pending status is lost (the patcher's cache skips those already
written). Events are recorded while
leading; the few raised while not leading are kept for ``event_grace`` seconds and recorded if
this replica gains the Lease by then — at start-up the first reconciles usually finish before the
Lease is acquired, and a "ModulesFailed" lost there would never be reported. Older ones are
dropped: the replica that was leading then has reported them.

It is separate from the route StatusWriter because the edge half writes other kinds and Events;
both follow the same rules.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from loguru import logger

from interlock.actors.edge_messages import (
    INGRESS_STATUS_TOPIC,
    MODULESET_STATUS_TOPIC,
    DesiredIngressStatus,
    DesiredModuleSetStatus,
    EventType,
    RecordEvent,
)
from interlock.actors.messages import LeadershipChanged, RetryStatusWrites
from interlock.mailbox import Actor, BackoffPolicy, Published, Unpublished

StatusKind = Literal["Ingress", "ModuleSet"]
_KINDS: Mapping[str, StatusKind] = {
    INGRESS_STATUS_TOPIC: "Ingress",
    MODULESET_STATUS_TOPIC: "ModuleSet",
}


class TransientEdgeStatusError(Exception):
    """A status write could not be made now (no connection, 5xx, 429); retry later."""


class EdgeStatusSink(Protocol):
    """The writer's boundary to Kubernetes (``edge_wiring`` adapts the patcher and recorder)."""

    async def patch_status(
        self, *, kind: StatusKind, namespace: str, name: str, status: dict[str, Any]
    ) -> bool:
        """Merge-patch ``status``; True when written (or the object is gone), False when
        rejected for good. Raises :class:`TransientEdgeStatusError` to be retried."""
        ...

    async def record_event(
        self, *, regarding: Mapping[str, str], type: EventType, reason: str, message: str
    ) -> None:
        """Record an Event; never raises."""
        ...


@dataclass(frozen=True, slots=True)
class EdgeStatusStatistics:
    leading: bool
    pending: int
    writes: int
    failures: int
    rejected: int
    events: int
    events_held: int
    """Events raised while not leading, kept in case this replica gains the Lease soon."""
    events_skipped: int
    """Events dropped because this replica was not leading within their grace period."""


class EdgeStatusWriter(Actor):
    """Writes Ingress and ModuleSet status and records Events while this replica leads."""

    def __init__(
        self,
        *,
        sink: EdgeStatusSink,
        is_leader: Callable[[], bool],
        backoff: BackoffPolicy,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        event_grace: float = 30.0,
        max_held_events: int = 256,
    ) -> None:
        """``event_grace``: how long an Event raised while not leading is kept in case this
        replica gains the Lease (at most ``max_held_events`` of them, the newest)."""
        self._sink = sink
        self._is_leader = is_leader
        self._backoff = backoff
        self._rng = rng or random.Random()
        self._pending: dict[tuple[StatusKind, str, str], dict[str, Any]] = {}
        self._attempt = 0
        self._retry_armed = False
        self._writes = 0
        self._failures = 0
        self._rejected = 0
        self._events = 0
        self._events_skipped = 0
        self._clock = clock
        self._event_grace = event_grace
        self._held: deque[tuple[float, RecordEvent]] = deque(maxlen=max_held_events)

    async def started(self) -> None:
        for topic in _KINDS:
            self.subscribe(topic)

    async def receive(self, message: object) -> object | None:
        if isinstance(message, RecordEvent):
            if self._is_leader():
                await self._record_held()
                await self._record(message)
            else:
                self._held.append((self._clock(), message))
            return None
        if isinstance(message, Published | Unpublished):
            kind = _KINDS.get(message.topic)
            if kind is None:
                return None
            namespace, _, name = message.key.partition("/")
            self._want((kind, namespace, name), _status(message))
        elif isinstance(message, RetryStatusWrites):
            self._retry_armed = False
        elif not isinstance(message, LeadershipChanged):
            return None
        if self._is_leader():
            await self._record_held()
            await self._flush()
        return None

    def _want(self, key: tuple[StatusKind, str, str], status: dict[str, Any] | None) -> None:
        """Remember ``status`` to be written, or forget the object (None: nothing to write)."""
        if status is None:
            self._pending.pop(key, None)
        else:
            self._pending[key] = status

    async def _record_held(self) -> None:
        oldest = self._clock() - self._event_grace
        while self._held:
            at, event = self._held.popleft()
            if at >= oldest:
                await self._record(event)
            else:
                self._events_skipped += 1

    async def _record(self, event: RecordEvent) -> None:
        await self._sink.record_event(
            regarding=event.regarding, type=event.type, reason=event.reason, message=event.message
        )
        self._events += 1

    async def _flush(self) -> None:
        for key in list(self._pending):
            # Each write awaits the API server, and the Lease may be lost meanwhile (a stopping
            # replica releases it before its actors drain): a status queued here may be older
            # than what the new leader has already written, so it must not be written now.
            if not self._is_leader():
                return
            status = self._pending.get(key)
            if status is None:
                continue
            kind, namespace, name = key
            try:
                written = await self._sink.patch_status(
                    kind=kind, namespace=namespace, name=name, status=status
                )
            except TransientEdgeStatusError as error:
                self._failures += 1
                delay = self._backoff.delay(self._attempt, self._rng)
                self._attempt += 1
                logger.warning(
                    "{} {}/{}: status not written ({}); retrying in {:.2f} s",
                    kind,
                    namespace,
                    name,
                    error,
                    delay,
                )
                self._schedule_retry(delay)
                return
            # Written, gone or rejected: nothing more to do until it changes again.
            if self._pending.get(key) is status:
                del self._pending[key]
            if written:
                self._writes += 1
            else:
                self._rejected += 1
        self._attempt = 0

    def _schedule_retry(self, delay: float) -> None:
        if self._retry_armed:
            return
        self._retry_armed = True
        self.tell_after(delay, RetryStatusWrites(), key="retry")

    def statistics(self) -> EdgeStatusStatistics:
        return EdgeStatusStatistics(
            leading=self._is_leader(),
            pending=len(self._pending),
            writes=self._writes,
            failures=self._failures,
            rejected=self._rejected,
            events=self._events,
            events_held=len(self._held),
            events_skipped=self._events_skipped,
        )


def _status(message: Published | Unpublished) -> dict[str, Any] | None:
    """The ``status`` a notification asks for; None when it was unpublished."""
    value = message.value if isinstance(message, Published) else None
    if isinstance(value, DesiredIngressStatus):
        return {"loadBalancer": value.load_balancer}
    if isinstance(value, DesiredModuleSetStatus):
        return {"conditions": value.conditions}
    return None
