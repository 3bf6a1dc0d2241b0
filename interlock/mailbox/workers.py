"""The tasks that run handlers: a few shared workers instead of one task per busy actor.

Creating an asyncio task costs several microseconds, more than handling a typical message. A
publish to 10,000 subscribers would pay it 10,000 times if each busy actor had its own task. So
actors with waiting messages go into one ready queue, and a worker task takes them in turn.

A worker may get stuck in a handler that awaits I/O (or an ``ask``). Before running handlers a
worker arms a ``call_soon`` check; the check runs only if the worker gave control back to the
event loop, and if at that moment the worker is inside a handler, it is counted as blocked and
another worker is started for the actors still waiting. So an actor waiting for I/O never
holds up the others, and in the common case (handlers that finish without suspending) one
worker serves everything. Workers end when the ready queue is empty: an idle system owns no
task at all.

Handlers run inside the worker's task, so ``asyncio.timeout`` and ``current_task()`` behave as
in any task. Handlers of different actors share a worker's context: a handler that sets a
contextvar must reset it (the runtime sets its own, the envelope being handled, per message).
"""

from __future__ import annotations

import asyncio

from interlock.mailbox.cell import Cell


class Worker:
    """One worker task's state, read by the system's scheduling."""

    __slots__ = ("blocked", "cell", "check", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.cell: Cell | None = None
        """The actor whose handler (or hook) this worker is running, if any."""
        self.check: asyncio.Handle | None = None
        """The armed suspension check (``None`` once it ran: re-arm after a suspension)."""
        self.blocked = False
        """Seen suspended inside a handler: not counted as free until the handler returns."""
