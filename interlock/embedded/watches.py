"""Open watches: what each one sees of the stream of committed changes.

Every write becomes an :class:`Event` offered to the open watches of its kind. A watch filters
it (namespace, label and field selectors; an object moving out of a selector is a DELETED for
that watch, as on a real server) and queues it for its own connection, so a slow reader never
delays a write or another reader.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlock.embedded.objects import JsonObject, StoredObject
from interlock.embedded.registry import ResourceType
from interlock.embedded.selectors import Predicate

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True, slots=True)
class Event:
    """A committed change: what a watch from an older resourceVersion must be told."""

    type: str
    key: tuple[str, str]
    stored: StoredObject
    previous: JsonObject | None = dataclasses.field(repr=False)
    """The state before a MODIFIED write (never in reprs: it may be a Secret)."""

    @property
    def rv(self) -> int:
        return self.stored.rv


class WatchClosed(Exception):
    """Raised by :meth:`Watch.next` when the watch was closed by the server."""


@dataclass(frozen=True, slots=True)
class WatchFilter:
    """Which objects of a kind a watch (or list) sees."""

    namespace: str | None = None
    label_selector: Predicate | None = None
    field_selector: Predicate | None = None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        if self.label_selector is not None and not self.label_selector(obj):
            return False
        return self.field_selector is None or self.field_selector(obj)


class Watch:
    """One open watch: a filter and a private queue of (event type, object) deliveries.

    The queue is a deque plus one waiter future rather than an ``asyncio.Queue``: an event is
    offered to every watch of its kind on every write, so the offer path must be cheap.
    """

    def __init__(self, *, rtype: ResourceType, where: WatchFilter, backlog_limit: int) -> None:
        self.rtype = rtype
        self.where = where
        self._queue: deque[tuple[str, StoredObject]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._backlog_limit = backlog_limit
        self.closed = False
        self.abrupt = False
        """True when the server wants the connection dropped rather than ended cleanly."""
        self.expired = False
        """True when the server ends the watch with a 410 Expired ERROR event."""

    def offer(self, event: Event) -> None:
        """Deliver an event, translated for the filter (an object leaving it is DELETED)."""
        if self.closed:
            return
        matches_now = self.where.matches(event.stored.obj)
        if event.type == MODIFIED and event.previous is not None:
            matched_before = self.where.matches(event.previous)
            if matches_now and not matched_before:
                self._put((ADDED, event.stored))
            elif matched_before and not matches_now:
                self._put((DELETED, event.stored))
            elif matches_now:
                self._put((MODIFIED, event.stored))
        elif matches_now:
            self._put((event.type, event.stored))

    def _put(self, item: tuple[str, StoredObject]) -> None:
        if len(self._queue) >= self._backlog_limit:
            # A watcher that does not read is cut off, as kube-apiserver does; it relists.
            self.close(abrupt=True)
            return
        self._queue.append(item)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> int:
        return len(self._queue)

    def statistics(self) -> dict[str, int | bool]:
        """Queue use, as every queue-like thing in interlock reports it."""
        return {"pending": len(self._queue), "limit": self._backlog_limit, "closed": self.closed}

    async def next(self) -> tuple[str, StoredObject]:
        """The next delivery; raises :class:`WatchClosed` once closed (abrupt: at once)."""
        while not self._queue or self._cut_short():
            if self.closed:
                raise WatchClosed
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._queue.popleft()

    def next_nowait(self) -> tuple[str, StoredObject] | None:
        """The next delivery if one is already queued (to batch writes), else None."""
        if not self._queue or self._cut_short():
            return None
        return self._queue.popleft()

    def _cut_short(self) -> bool:
        """A dropped or expired watch delivers nothing more, not even what is queued."""
        return self.closed and (self.abrupt or self.expired)

    def close(self, *, abrupt: bool = False, expired: bool = False) -> None:
        if not self.closed:
            self.closed = True
            self.abrupt = abrupt
            self.expired = expired
            self._wake()
