"""The base class of every actor: one message at a time, state in attributes, no locks.

The convenience methods forward to the system; the system reads the envelope being handled
from a contextvar, so anything sent from a handler (or from ``started()``) inherits its
correlation and names it as the cause.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interlock.mailbox.system import ActorSystem
    from interlock.mailbox.timers import Timer


class Actor(abc.ABC):
    """Subclass and implement :meth:`receive`.

    ``address`` and ``system`` are set by the system before ``started()`` runs; do not use them
    in ``__init__``. After a handler raises, the actor is replaced by a fresh instance from its
    factory (see ``SupervisionPolicy``), so state that must survive a restart has to be rebuilt
    from messages: the system keeps the actor's subscriptions and re-delivers every retained
    value of its topics to the fresh instance.
    """

    __slots__ = ("address", "system")

    address: str
    system: ActorSystem
    reconciles: str = ""
    """What this actor keeps up to date, for metrics (``HTTPRoute``, ``Ingress`` …): the
    system counts its messages under this name beside its address prefix. Read once, at spawn."""

    @abc.abstractmethod
    async def receive(self, message: object) -> object | None:
        """Handle one message; the return value is the reply when it came through ``ask``."""

    async def started(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Runs as the first item of the mailbox, after spawn and after every restart."""

    async def stopped(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Runs once when this instance ends: stop, shutdown, or before a restart replaces it."""

    def tell(self, address: str, message: object) -> None:
        """Send ``message`` to ``address`` (caused by the message being handled)."""
        self.system.tell(address, message)

    def tell_after(self, delay: float, message: object, *, key: Hashable | None = None) -> Timer:
        """Send ``message`` to this actor after ``delay`` seconds (see ``ActorSystem.tell_after``:
        traced, cancelled when the actor stops; ``key`` names it, replacing a pending one)."""
        return self.system.tell_after(delay, self.address, message, key=key)

    def cancel_timer(self, key: Hashable) -> bool:
        """Cancel this actor's timer named ``key``; ``False`` when none was pending."""
        return self.system.cancel_timer(self.address, key)

    async def ask(
        self,
        address: str,
        message: object,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - the ask contract names its own deadline
    ) -> object:
        """Send ``message`` to ``address`` and wait for its reply (see ``ActorSystem.ask``)."""
        return await self.system.ask(address, message, timeout=timeout)

    def mail_waiting(self) -> int:
        """How many messages wait in this actor's mailbox after the one being handled."""
        return self.system.mail_waiting(self.address)

    def publish(self, topic: str, key: str, value: object) -> None:
        """Retain ``value`` under ``key`` on ``topic`` and send it to every subscriber."""
        self.system.publish(topic, key, value)

    def unpublish(self, topic: str, key: str) -> None:
        """Remove the retained value of ``key`` on ``topic`` and tell every subscriber."""
        self.system.unpublish(topic, key)

    def subscribe(self, topic: str) -> dict[str, object]:
        """Subscribe this actor to ``topic``; every retained value arrives as ``Published``,
        and is returned now too (the one way to read a topic's current value on subscribe:
        use it at once, and take the queued notifications of the same objects as no change)."""
        return self.system.subscribe(topic, self.address)

    def unsubscribe(self, topic: str) -> None:
        """End this actor's subscription to ``topic`` (pending notifications are dropped)."""
        self.system.unsubscribe(topic, self.address)

    def stop_self(self) -> None:
        """Stop this actor after the current message (queued messages become dead letters)."""
        self.system.stop(self.address)
