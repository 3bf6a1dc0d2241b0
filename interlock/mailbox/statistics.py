"""Counters of the runtime, cheap enough to scrape as metrics.

Per-kind counters (the kind is the address prefix before the first ``/``) are kept up to date
as messages flow, so ``ActorSystem.statistics()`` costs one pass over the kinds and the busy
actors, never over all actors.
"""

from __future__ import annotations

from dataclasses import dataclass


class KindCounters:
    """Running totals for every actor of one kind (mutable, internal)."""

    __slots__ = ("actors", "dead_letters", "failed", "name", "processed", "restarts")

    def __init__(self, name: str) -> None:
        self.name = name
        self.actors = 0
        self.processed = 0
        self.failed = 0
        self.restarts = 0
        self.dead_letters = 0


@dataclass(frozen=True, slots=True)
class ActorStatistics:
    """A snapshot of one actor."""

    address: str
    kind: str
    actor_type: str
    state: str
    """``idle`` (nothing to do), ``running`` (messages waiting or being handled),
    ``restarting`` (in backoff after a failure) or ``stopping``."""
    depth: int
    """Messages waiting in the mailbox now."""
    max_depth: int
    """The most messages that ever waited at once."""
    capacity: int
    processed: int
    """Messages handled without error (``started()`` included)."""
    failed: int
    restarts: int
    last_message_at: float | None
    """System-clock time the latest message arrived, or ``None`` if none has."""
    waiting_senders: int
    """Senders blocked in ``tell_wait`` on this (full, ``Overflow.BLOCK``) mailbox."""


@dataclass(frozen=True, slots=True)
class KindStatistics:
    """Totals over the actors of one kind (address prefix before the first ``/``)."""

    actors: int
    depth: int
    processed: int
    failed: int
    restarts: int
    dead_letters: int


@dataclass(frozen=True, slots=True)
class SystemStatistics:
    """A snapshot of the whole actor system."""

    actors: int
    busy: int
    """Actors with work right now: messages waiting or being handled, restarting, stopping."""
    depth: int
    """Messages waiting over all mailboxes."""
    processed: int
    failed: int
    restarts: int
    dead_letters: int
    kinds: dict[str, KindStatistics]
