"""Per-actor settings: how big the mailbox is, what happens when it is full, how restarts work.

They are frozen dataclasses passed at ``spawn`` so that two actors of one kind can differ (a
policy stream may block its sender, a route actor coalesces state) without subclassing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from interlock.mailbox.backoff import BackoffPolicy


class Overflow(enum.Enum):
    """What a full mailbox does with a message that cannot be coalesced.

    Whatever the policy, a message with a ``coalesce_key`` equal to that of a queued message
    replaces the queued one in place (latest wins) and needs no room. ``Published`` and
    ``Unpublished`` are keyed by ``(topic, key)``.
    """

    COALESCE = "coalesce"
    """Keyed messages are always admitted (their number is bounded by the number of distinct
    keys, so the latest state is never lost); an un-keyed message is dead-lettered with a
    warning."""
    BLOCK = "block"
    """``tell_wait`` waits for room; a synchronous ``tell`` raises ``MailboxFull`` (never a
    silent drop); ``publish`` cannot wait and admits its keyed message beyond capacity."""
    REJECT = "reject"
    """The new message is dead-lettered with a warning (keyed messages too)."""


@dataclass(frozen=True, slots=True)
class MailboxConfig:
    """The bounds of one actor's mailbox."""

    capacity: int = 1000
    """Messages that may wait; coalescing replaces in place and needs no room."""
    overflow: Overflow = Overflow.COALESCE
    """What happens to a message that finds the mailbox full."""
    durable: bool = False
    """Keyed messages survive a crash of their handler: the message being handled when the
    actor raised is re-delivered to the restarted instance, first in line (unless a newer
    message of its key is already queued: latest wins). One that crashes its own replay is a
    poison message: dropped as a dead letter (reason ``poison``) and the key is handed to
    ``resync``. For actors fed by ``tell`` with whole states (an informer's events): nothing
    else would ever send the lost one again. Un-keyed messages and asks are not re-delivered."""
    resync: Callable[[Hashable], None] | None = None
    """Called with the key of a poison message so that its owner sends the key's current state
    again (for informer-fed actors: the object as the API server has it now), and no gap
    stays open until the object changes. Asked once per key until a message of that key is
    handled: a state that crashes every time is then left alone (logged), not looped."""

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"MailboxConfig: capacity must be at least 1, got {self.capacity}")


@dataclass(frozen=True, slots=True)
class SupervisionPolicy:
    """How an actor whose handler raised is restarted (OTP-style restart intensity)."""

    backoff: BackoffPolicy = field(
        default_factory=lambda: BackoffPolicy(initial=0.01, maximum=10.0)
    )
    """Delay before each restart; the attempt number counts restarts within ``within``."""
    max_restarts: int = 5
    """Restarts allowed within ``within`` seconds; one more failure stops the actor."""
    within: float = 60.0
    """The sliding window of the restart intensity, in seconds of the system clock."""

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError(
                f"SupervisionPolicy: max_restarts must be >= 0, got {self.max_restarts}"
            )
        if self.within <= 0:
            raise ValueError(f"SupervisionPolicy: within must be positive, got {self.within}")
