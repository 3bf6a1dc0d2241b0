"""A latest-value slot: the hand-off between an actor and a consumer that may be slow.

A service-port watch pushes each new policy to its subscribers. If it awaited an HTTP client
(or queued every version for it), one slow reader would stall the actor or grow without bound.
A slot instead keeps only the newest value and a version number: ``put`` never blocks and never
grows, and a reader that fell behind simply skips to the latest policy — which is all a policy
consumer needs, since each policy is complete on its own.

A slot has one reader (one per HTTP request, or per edge subscription). It holds a future only
while that reader waits — 10,000 idle watch streams should not cost 10,000 ``asyncio.Event``s.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")


class SlotClosed(Exception):
    """The producer went away (controller shutting down); the reader should end its stream."""


class LatestValueSlot(Generic[T]):
    """Holds the latest value; its reader waits for a version newer than the one it has."""

    __slots__ = ("_closed", "_value", "_version", "_waiter")

    def __init__(self) -> None:
        self._value: T | None = None
        self._version = 0
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None

    @property
    def version(self) -> int:
        """0 before the first value; increases by one on every ``put``."""
        return self._version

    @property
    def latest(self) -> T | None:
        """The newest value, without waiting (None before the first ``put``)."""
        return self._value

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, value: T) -> None:
        """Replace the value (an older, unread one is dropped on purpose) and wake the reader."""
        if self._closed:
            return
        self._value = value
        self._version += 1
        self._wake()

    def close(self) -> None:
        """Wake the reader with :class:`SlotClosed`; later ``put`` calls are ignored."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wait(self, *, after: int) -> asyncio.Future[None]:
        """A future done once there is a version above ``after`` or the slot is closed.

        A plain future rather than a coroutine, so a reader that idles in a long-lived frame of
        its own (a watch stream) holds no frame of the slot's while it waits.
        """
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        if self._closed or (self._version > after and self._value is not None):
            self._wake()
        return waiter

    async def next(self, *, after: int) -> tuple[int, T]:
        """The latest ``(version, value)`` with a version above ``after``, waiting if needed.

        Raises :class:`SlotClosed` once the slot is closed.
        """
        while True:
            if self._closed:
                raise SlotClosed
            if self._version > after and self._value is not None:
                return self._version, self._value
            await self.wait(after=after)
