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
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable

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


class Scheduler:
    """The ready queue, the set of actors with work, and the workers that serve them.

    What handling an actor's messages means is the actor system's business: it passes ``run``
    (handle some messages of one actor, then hand it back with :meth:`requeue`,
    :meth:`deactivate` or its own ``finish``) and ``finish`` (end an actor that was stopping
    when its worker was cancelled).
    """

    def __init__(
        self,
        *,
        run: Callable[[Cell, Worker], Awaitable[int]],
        finish: Callable[[Cell], None],
        yield_every: int,
    ) -> None:
        self._run = run
        self._finish = finish
        self._yield_every = yield_every
        self.busy: set[Cell] = set()
        """Actors with work: ready, being handled, in restart backoff, or stopping."""
        self._ready: deque[Cell] = deque()
        self._workers: set[Worker] = set()
        self._free = 0
        """Workers not known to be waiting inside a handler."""
        self._idle: list[asyncio.Future[None]] = []
        """``wait_idle`` callers, woken together the moment ``busy`` empties."""

    def activate(self, cell: Cell) -> None:
        """An idle actor has work: queue it for a worker."""
        cell.active = True
        self.busy.add(cell)
        self.requeue(cell)

    def requeue(self, cell: Cell) -> None:
        """Queue an active actor (again) for a worker."""
        self._ready.append(cell)
        if self._free == 0:
            self._start_worker()

    def deactivate(self, cell: Cell) -> None:
        """The actor has no work left: it goes back to owning nothing."""
        cell.active = False
        self.busy.discard(cell)
        if cell.queue is not None and not cell.queue:
            cell.queue = None
            cell.keys = None
        if not self.busy and self._idle:
            self._wake_idle()

    def resumed(self, worker: Worker) -> None:
        """Call when a handler or hook returned to a worker whose check has run (its
        ``check`` is ``None``): the worker is free again and the check is re-armed."""
        if worker.blocked:
            worker.blocked = False
            self._free += 1
        worker.check = asyncio.get_running_loop().call_soon(self._check, worker)

    def _check(self, worker: Worker) -> None:
        # Runs only when the worker gave the loop control: if it is inside a handler, that
        # handler is waiting for something, and the ready actors need another worker.
        worker.check = None
        if worker.cell is not None and not worker.blocked:
            worker.blocked = True
            self._free -= 1
            if self._ready:
                self._start_worker()

    def _start_worker(self) -> None:
        worker = Worker()
        self._workers.add(worker)
        self._free += 1
        worker.task = asyncio.get_running_loop().create_task(
            self._work(worker), context=contextvars.Context()
        )

    async def _work(self, worker: Worker) -> None:
        ready = self._ready
        since_yield = 0
        self.resumed(worker)
        try:
            while ready:
                cell = ready.popleft()
                worker.cell = cell
                since_yield += await self._run(cell, worker)
                worker.cell = None
                if since_yield >= self._yield_every:
                    since_yield = 0
                    await asyncio.sleep(0)
                    if worker.check is None:
                        self.resumed(worker)
        finally:
            cell_in_hand = worker.cell
            if cell_in_hand is not None and cell_in_hand.stop_reason is not None:
                self._finish(cell_in_hand)  # cancelled at shutdown in the middle of a handler
            self._workers.discard(worker)
            if not worker.blocked:
                self._free -= 1
            if worker.check is not None:
                worker.check.cancel()

    async def wait_idle(self) -> None:
        """Wait until no actor has work (checked again on waking: an actor may have been
        given work between the moment it emptied and this waiter running)."""
        while self.busy:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._idle:  # cancelled (a caller's timeout): do not keep it
                    self._idle.remove(waiter)

    def _wake_idle(self) -> None:
        waiters, self._idle = self._idle, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def cancel(self, *, also: list[asyncio.Task[None]]) -> None:
        """Cancel every worker (and the tasks in ``also``) and wait for them to end."""
        tasks = [worker.task for worker in self._workers if worker.task is not None] + also
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._ready.clear()

    def forget(self, cell: Cell) -> None:
        """The actor has ended: it has no work any more."""
        cell.active = False
        self.busy.discard(cell)
        if not self.busy and self._idle:
            self._wake_idle()
