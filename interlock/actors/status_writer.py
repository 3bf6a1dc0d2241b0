"""StatusWriter: the single place where HTTPRoute ``status.parents`` reach the API server.

Every replica computes every route's desired status, but only the holder of the Lease writes,
and only when the content changed (timestamps aside): two writers would fight, and rewriting an
unchanged status bumps resourceVersions and wakes every watcher for nothing. Keeping this in one
actor gives one queue of writes, one retry schedule, and one answer to "what is pending".

It remembers the latest desired status per route whether leading or not, so that on gaining
leadership it writes everything that differs at once. The desired statuses come as retained
values of ``status:httproute`` (published by the RouteActors), not as told messages: a handler
that raises restarts this actor empty, and the runtime then re-delivers every retained value,
so no pending status is lost (what was already written is skipped again, by the comparison with
the stored status and by the patcher's cache). Writes run as a few concurrent tasks
(at most one per route, so they cannot overtake each other); the actor itself never waits on
the API server, so a new leader with thousands of routes to write stays responsive, and the
controller's readiness does not wait for them. Each finished write comes back as a message. A
write that fails transiently (no connection, 5xx, 429) stays pending and is retried with
exponential backoff and jitter; a rejected one (4xx) is logged and dropped until the route's
inputs change.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from loguru import logger

from interlock.actors.messages import (
    ROUTE_STATUS_TOPIC,
    DesiredRouteStatus,
    LeadershipChanged,
    RetryStatusWrites,
)
from interlock.mailbox import Actor, BackoffPolicy, Published, Unpublished
from interlock.model.route_status import status_equal_ignoring_timestamps

RouteKey = tuple[str, str]


class StatusSink(Protocol):
    """Writes one route's ``status.parents``; ``kube.status.StatusPatcher`` adapted by app.py."""

    async def write_route_status(
        self, *, namespace: str, name: str, parents: list[dict[str, Any]]
    ) -> bool:
        """Write it; True when written (or the route is gone), False when rejected for good.

        Raises :class:`TransientStatusError` when the write should be retried later.
        """
        ...


class TransientStatusError(Exception):
    """The write could not be made now (no connection, 5xx, 429); retry later."""


@dataclass(frozen=True, slots=True)
class WriteFinished:
    """A status write task ended (at most one per route is in flight, hence the key)."""

    namespace: str
    name: str
    parents: list[dict[str, Any]]
    outcome: Literal["written", "rejected", "transient"]
    error: str = ""

    @property
    def coalesce_key(self) -> tuple[str, str, str]:
        return ("write-finished", self.namespace, self.name)

    def trace_summary(self) -> str:
        return f"WriteFinished HTTPRoute {self.namespace}/{self.name} {self.outcome}"


@dataclass(slots=True)
class _RouteState:
    desired: list[dict[str, Any]]
    stored: list[dict[str, Any]]
    written: list[dict[str, Any]] | None = None
    """What this replica last wrote in its current term as leader (None: nothing)."""


@dataclass(frozen=True, slots=True)
class StatusWriterStatistics:
    leading: bool
    routes: int
    pending: int
    in_flight: int
    writes: int
    skipped: int
    failures: int
    rejected: int


class StatusWriter(Actor):
    """Writes desired route statuses while this replica leads, each change once."""

    def __init__(
        self,
        *,
        sink: StatusSink,
        is_leader: Callable[[], bool],
        backoff: BackoffPolicy,
        concurrency: int = 8,
        rng: random.Random | None = None,
    ) -> None:
        self.sink = sink
        self.is_leader = is_leader
        self.backoff = backoff
        self.concurrency = concurrency
        self.rng = rng or random.Random()
        self.routes: dict[RouteKey, _RouteState] = {}
        self.identities: dict[str, RouteKey] = {}
        """Route identity (the topic key) → route, to forget a route when it is unpublished."""
        # Routes to (re)check, in arrival order: a deque to pop from and a set for membership
        # (a route dropped from the set is skipped when its stale deque entry comes up). Each
        # message costs O(1) however many routes wait, even on a follower holding all of them.
        self.queue: deque[RouteKey] = deque()
        self.pending: set[RouteKey] = set()
        self.recheck: set[RouteKey] = set()
        """Routes that changed while their write was in flight: re-checked when it ends."""
        self.in_flight: dict[RouteKey, asyncio.Task[None]] = {}
        self.attempt = 0
        self.retry_scheduled = False
        self.writes = 0
        self.skipped = 0
        self.failures = 0
        self.rejected = 0

    async def started(self) -> None:
        self.subscribe(ROUTE_STATUS_TOPIC)

    async def receive(self, message: object) -> object | None:
        if isinstance(message, Published) and isinstance(message.value, DesiredRouteStatus):
            desired = message.value
            key = (desired.namespace, desired.name)
            self.identities[message.key] = key
            state = self.routes.get(key)
            if state is None:
                self.routes[key] = _RouteState(desired=desired.parents, stored=desired.stored)
            else:
                state.desired = desired.parents
                state.stored = desired.stored
            self._enqueue(key)
        elif isinstance(message, Unpublished):
            gone = self.identities.pop(message.key, None)
            if gone is not None:
                self.routes.pop(gone, None)
                self.pending.discard(gone)
                self.recheck.discard(gone)
            return None
        elif isinstance(message, WriteFinished):
            self._finished(message)
        elif isinstance(message, LeadershipChanged):
            if not message.leading:
                # Another replica may write from now on: what this one wrote proves nothing
                # about the objects any more, so the next term re-checks every route.
                for state in self.routes.values():
                    state.written = None
            for key in self.routes:
                self._enqueue(key)
        elif isinstance(message, RetryStatusWrites):
            self.retry_scheduled = False
        self._flush()
        return None

    async def stopped(self) -> None:
        for task in self.in_flight.values():
            task.cancel()

    def _needs_write(self, state: _RouteState) -> bool:
        reference = state.written if state.written is not None else state.stored
        return not status_equal_ignoring_timestamps(state.desired, reference)

    def _enqueue(self, key: RouteKey) -> None:
        if key in self.in_flight:
            self.recheck.add(key)
        elif key not in self.pending:
            self.pending.add(key)
            self.queue.append(key)

    def _flush(self) -> None:
        """Start writes of pending routes, up to ``concurrency`` in flight, while leading."""
        while self.queue and len(self.in_flight) < self.concurrency:
            if self.retry_scheduled or not self.is_leader():
                return
            key = self.queue.popleft()
            if key not in self.pending:
                continue  # dropped (deleted route) after it was queued
            self.pending.discard(key)
            state = self.routes.get(key)
            if state is None:
                continue
            if not self._needs_write(state):
                self.skipped += 1
                continue
            self.in_flight[key] = asyncio.get_running_loop().create_task(
                self._write(key, state.desired)
            )

    async def _write(self, key: RouteKey, parents: list[dict[str, Any]]) -> None:
        outcome: Literal["written", "rejected", "transient"]
        error = ""
        try:
            ok = await self.sink.write_route_status(namespace=key[0], name=key[1], parents=parents)
            outcome = "written" if ok else "rejected"
        except TransientStatusError as exc:
            outcome, error = "transient", str(exc)
        except Exception as exc:
            # Not foreseen (a bug, an answer nobody expected): the route must not stay "in
            # flight" forever, so it is retried like a transient failure, and logged.
            logger.exception("HTTPRoute {}/{}: status write raised", key[0], key[1])
            outcome, error = "transient", f"{type(exc).__name__}: {exc}"
        self.system.tell(self.address, WriteFinished(key[0], key[1], parents, outcome, error))

    def _finished(self, message: WriteFinished) -> None:
        key = (message.namespace, message.name)
        self.in_flight.pop(key, None)
        if key in self.recheck:
            self.recheck.discard(key)
            self._enqueue(key)
        state = self.routes.get(key)
        if message.outcome == "transient":
            self.failures += 1
            logger.warning(
                "HTTPRoute {}/{}: status write failed, will retry: {}",
                key[0],
                key[1],
                message.error,
            )
            if state is not None:
                self._enqueue(key)
            self._schedule_retry()
            return
        self.attempt = 0
        if message.outcome == "written":
            self.writes += 1
            if state is not None:
                state.written = message.parents
        else:
            self.rejected += 1

    def _schedule_retry(self) -> None:
        if self.retry_scheduled:
            return
        self.retry_scheduled = True
        delay = self.backoff.delay(self.attempt, self.rng)
        self.attempt += 1
        self.tell_after(delay, RetryStatusWrites(), key="retry")

    def statistics(self) -> StatusWriterStatistics:
        return StatusWriterStatistics(
            leading=self.is_leader(),
            routes=len(self.routes),
            pending=len(self.pending),
            in_flight=len(self.in_flight),
            writes=self.writes,
            skipped=self.skipped,
            failures=self.failures,
            rejected=self.rejected,
        )
