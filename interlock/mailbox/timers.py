"""Timers: a message due to an actor later, kept by the runtime rather than by the actor.

Without them every actor that retries or expires something made its own: a task that sleeps
and then tells, a ``loop.call_later`` closure, a handle kept beside the state so that it can be
cancelled — four copies, each with its own answer to "what if the actor stops first" and none
in the trace. Here the envelope is made when the timer is set, so the trace shows who set it
and which message caused it (``scheduled``), and the message is delivered like any other when
it fires; the wait goes through the system's injected sleep, so tests fire timers without
waiting; and the timers of an actor end with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from interlock.mailbox.envelope import Envelope


class Timer:
    """One message due to one actor after a delay; returned by ``tell_after``."""

    __slots__ = ("due", "envelope", "key", "task")

    def __init__(self, envelope: Envelope, key: Hashable, due: float) -> None:
        self.envelope = envelope
        self.key = key
        """The name the timer is kept under for its recipient: a second timer with the same
        key replaces it. An unnamed timer is kept under itself."""
        self.due = due
        """When it fires, on the system's clock."""
        self.task: asyncio.Task[None] | None = None

    @property
    def pending(self) -> bool:
        """Not fired and not cancelled."""
        return self.task is not None

    def cancel(self) -> None:
        """Withdraw the message if it has not been delivered yet (idempotent)."""
        task, self.task = self.task, None
        if task is not None:
            task.cancel()

    def __repr__(self) -> str:
        state = "pending" if self.pending else "done"
        return f"Timer({self.envelope.type} to {self.envelope.recipient}, {state})"
