"""Redelivery of state messages lost with a crash: nothing else would ever send them again.

The router and the directories are fed by ``tell``: an informer event, then "this Service is
now X". When a handler raises, the supervisor restarts the actor and the message it was handling
is gone — and unlike a topic subscriber, nothing re-delivers it: the Service's policy would stay
stale until that Service changed again. So senders also *record* each such message here, keyed
like the mailbox coalesces it (one entry per object: the latest state), and the receiver marks
it handled when done. A restarted instance replays what is still recorded.

Replays are safe because these messages carry whole states, not deltas: handling one twice is
the same as once, and the entry kept per key is always the newest, so a replay can never put an
older state over a newer one. A message that crashes its handler again after being replayed is
dropped with an error (a bug in handling that object must not crash-loop the actor).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from loguru import logger

from interlock.mailbox import ActorSystem


class KeyedMessage(Protocol):
    """A state message: the mailbox keeps at most one per key, and so does the journal."""

    @property
    def coalesce_key(self) -> Hashable: ...


class Redelivery:
    """The state messages sent to some actors and not yet handled, kept outside those actors."""

    __slots__ = ("_pending", "_replayed", "_started")

    def __init__(self) -> None:
        self._pending: dict[tuple[str, Hashable], tuple[KeyedMessage, str | None]] = {}
        self._replayed: set[tuple[str, Hashable]] = set()
        self._started: set[str] = set()

    def send(
        self,
        system: ActorSystem,
        address: str,
        message: KeyedMessage,
        *,
        correlation_id: str | None = None,
    ) -> None:
        """Record ``message`` for ``address`` and tell it."""
        key = (address, message.coalesce_key)
        self._pending[key] = (message, correlation_id)
        self._replayed.discard(key)
        system.tell(address, message, correlation_id=correlation_id)

    def handled(self, address: str, message: KeyedMessage) -> None:
        """``address`` is done with ``message`` (a newer message of the same key stays)."""
        key = (address, message.coalesce_key)
        entry = self._pending.get(key)
        if entry is not None and entry[0] is message:
            del self._pending[key]
            self._replayed.discard(key)

    def started(self, system: ActorSystem, address: str) -> int:
        """Call from the receiver's ``started()``: after a restart, replay what it did not
        handle; the first start replays nothing. Returns the number of messages replayed."""
        if address not in self._started:
            self._started.add(address)
            return 0
        replayed = 0
        for key, (message, correlation_id) in list(self._pending.items()):
            if key[0] != address:
                continue
            if key in self._replayed:
                del self._pending[key]
                self._replayed.discard(key)
                logger.error(
                    "{}: dropped {} after it crashed the actor again on replay",
                    address,
                    type(message).__name__,
                )
                continue
            self._replayed.add(key)
            system.tell(address, message, correlation_id=correlation_id)
            replayed += 1
        if replayed:
            logger.warning("{}: restarted, replaying {} unhandled message(s)", address, replayed)
        return replayed

    def pending(self, address: str) -> int:
        """Messages recorded for ``address`` and not handled yet."""
        return sum(1 for key in self._pending if key[0] == address)
