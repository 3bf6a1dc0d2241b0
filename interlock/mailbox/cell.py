"""The runtime's record of one spawned actor: its mailbox, counters and supervision state.

It is separate from :class:`Actor` because the actor *instance* is replaced on every restart
while the address, mailbox, subscriptions and counters must survive it. Everything that an idle
actor does not need (the queue, the coalescing index, blocked senders, restart times) is
created on first use and dropped again when the mailbox empties, so an idle actor costs one
small object.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable

from interlock.mailbox.actor import Actor
from interlock.mailbox.config import MailboxConfig, SupervisionPolicy
from interlock.mailbox.envelope import Envelope
from interlock.mailbox.statistics import KindCounters
from interlock.mailbox.timers import Timer


class Cell:
    """One actor's mailbox and lifecycle (internal to the system)."""

    __slots__ = (
        "active",
        "actor",
        "actor_type",
        "address",
        "capacity",
        "config",
        "done",
        "factory",
        "failed",
        "finished",
        "keys",
        "kind",
        "last_message_at",
        "max_depth",
        "poisoned",
        "processed",
        "queue",
        "replay",
        "restart_times",
        "restarts",
        "stop_reason",
        "supervision",
        "task",
        "timers",
        "topics",
        "waiters",
    )

    def __init__(
        self,
        address: str,
        kind: KindCounters,
        factory: Callable[[], Actor],
        actor: Actor,
        config: MailboxConfig,
        supervision: SupervisionPolicy,
    ) -> None:
        self.address = address
        self.kind = kind
        self.factory = factory
        self.actor: Actor | None = actor
        """``None`` between a failure and the restart that replaces the instance."""
        self.actor_type = type(actor).__name__
        self.config = config
        self.capacity = config.capacity
        self.supervision = supervision
        self.queue: deque[Envelope] | None = None
        self.keys: dict[Hashable, Envelope] | None = None
        """Queued envelopes by coalesce key."""
        self.topics: dict[str, None] | None = None
        """The topics it subscribes to (a dict as an ordered set: a set of five names, a route
        actor's usual count, takes 728 bytes, a dict 224)."""
        self.replay: Envelope | None = None
        """Durable mailboxes: the message lost with a crash, re-delivered (this envelope) to the
        restarted instance; if the handler raises on it again it is a poison message."""
        self.poisoned: set[Hashable] | None = None
        """Keys whose poison message was handed to ``resync``, until one of them is handled."""
        self.timers: dict[Hashable, Timer] | None = None
        """Pending ``tell_after`` timers by key; they survive a restart and end with a stop."""
        self.active = False
        """Has work: in the ready queue, being handled, in restart backoff or stopping."""
        self.task: asyncio.Task[None] | None = None
        """The restart backoff, while one runs."""
        self.waiters: deque[asyncio.Future[None]] | None = None
        """Senders blocked in ``tell_wait``."""
        self.restart_times: deque[float] | None = None
        self.stop_reason: str | None = None
        self.finished = False
        self.done: asyncio.Future[None] | None = None
        self.processed = 0
        self.failed = 0
        self.restarts = 0
        self.max_depth = 0
        self.last_message_at: float | None = None

    def depth(self) -> int:
        queue = self.queue
        return 0 if queue is None else len(queue)

    def state(self) -> str:
        if self.stop_reason is not None:
            return "stopping"
        if self.actor is None:
            return "restarting"
        return "running" if self.active else "idle"

    def __repr__(self) -> str:
        return f"Cell({self.address}, {self.actor_type}, {self.state()}, depth={self.depth()})"
