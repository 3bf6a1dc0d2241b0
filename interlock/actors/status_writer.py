"""StatusWriter: the single place where HTTPRoute ``status.parents`` reach the API server.

Every replica computes every route's desired status, but only the holder of the Lease writes,
and only when the content changed (timestamps aside): two writers would fight, and rewriting an
unchanged status bumps resourceVersions and wakes every watcher for nothing. Keeping this in one
actor gives one queue of writes, one retry schedule, and one answer to "what is pending".

It remembers the latest desired status per route whether leading or not, so that on gaining
leadership it writes everything that differs at once. A write that fails transiently (no
connection, 5xx, 429) stays pending and is retried with exponential backoff and jitter; a
rejected one (4xx) is logged and dropped until the route's inputs change.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger

from interlock.actors.messages import DesiredRouteStatus, LeadershipChanged, RetryStatusWrites
from interlock.mailbox import Actor, BackoffPolicy
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


@dataclass(slots=True)
class _RouteState:
    desired: list[dict[str, Any]]
    stored: list[dict[str, Any]]
    written: list[dict[str, Any]] | None = None
    """What this replica last wrote while leading (None: nothing since it became leader)."""


@dataclass(frozen=True, slots=True)
class StatusWriterStatistics:
    leading: bool
    routes: int
    pending: int
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
        rng: random.Random | None = None,
        call_later: Callable[[float, Callable[[], None]], object] | None = None,
    ) -> None:
        self.sink = sink
        self.is_leader = is_leader
        self.backoff = backoff
        self.rng = rng or random.Random()
        self.call_later = call_later
        self.routes: dict[RouteKey, _RouteState] = {}
        self.pending: set[RouteKey] = set()
        self.attempt = 0
        self.retry_scheduled = False
        self.writes = 0
        self.skipped = 0
        self.failures = 0
        self.rejected = 0

    async def receive(self, message: object) -> object | None:
        if isinstance(message, DesiredRouteStatus):
            key = (message.namespace, message.name)
            if message.parents is None:
                self.routes.pop(key, None)
                self.pending.discard(key)
                return None
            state = self.routes.get(key)
            if state is None:
                self.routes[key] = _RouteState(desired=message.parents, stored=message.stored)
            else:
                state.desired = message.parents
                state.stored = message.stored
            self.pending.add(key)
            await self._flush()
        elif isinstance(message, LeadershipChanged):
            # Another replica may have written meanwhile: what this one wrote before proves
            # nothing any more, so re-check every route against its stored status.
            for state in self.routes.values():
                state.written = None
            self.pending = set(self.routes)
            if message.leading:
                await self._flush()
        elif isinstance(message, RetryStatusWrites):
            self.retry_scheduled = False
            await self._flush()
        return None

    def _needs_write(self, state: _RouteState) -> bool:
        reference = state.written if state.written is not None else state.stored
        return not status_equal_ignoring_timestamps(state.desired, reference)

    async def _flush(self) -> None:
        if not self.is_leader():
            return
        for key in sorted(self.pending):
            if not self.is_leader():
                return  # leadership lost mid-flush: the rest stays pending for the next leader
            state = self.routes.get(key)
            if state is None:
                self.pending.discard(key)
                continue
            if not self._needs_write(state):
                self.pending.discard(key)
                self.skipped += 1
                continue
            try:
                ok = await self.sink.write_route_status(
                    namespace=key[0], name=key[1], parents=state.desired
                )
            except TransientStatusError as error:
                self.failures += 1
                logger.warning(
                    "HTTPRoute {}/{}: status write failed, will retry: {}", key[0], key[1], error
                )
                self._schedule_retry()
                return
            self.attempt = 0
            self.pending.discard(key)
            if ok:
                self.writes += 1
                state.written = state.desired
            else:
                self.rejected += 1

    def _schedule_retry(self) -> None:
        if self.retry_scheduled:
            return
        self.retry_scheduled = True
        delay = self.backoff.delay(self.attempt, self.rng)
        self.attempt += 1
        system, address = self.system, self.address

        def retry() -> None:
            system.tell(address, RetryStatusWrites())

        if self.call_later is not None:
            self.call_later(delay, retry)
        else:
            asyncio.get_running_loop().call_later(delay, retry)

    def statistics(self) -> StatusWriterStatistics:
        return StatusWriterStatistics(
            leading=self.is_leader(),
            routes=len(self.routes),
            pending=len(self.pending),
            writes=self.writes,
            skipped=self.skipped,
            failures=self.failures,
            rejected=self.rejected,
        )
