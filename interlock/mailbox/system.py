"""The actor system: addresses, mailboxes, supervision, pub/sub with retained values, shutdown.

Why a runtime of our own rather than tasks and queues sprinkled through the controller: the
controller's correctness rests on three properties that are easy to lose one call site at a
time — one message at a time per object (no locks in actors), subscription and snapshot in one
step (no event missed between "read the state" and "start listening"), and a message log that
explains every change. Keeping them in one place makes them testable once.

Scheduling (``workers.py``): an actor with an empty mailbox owns nothing but its ``Cell``. The
first message into an empty mailbox puts the actor in a ready queue, where shared worker tasks
take it; a worker handles up to ``_BATCH`` of its messages before moving on and yields to the
event loop every ``_YIELD_EVERY`` messages, so that no actor starves the others or I/O. 100,000
idle actors therefore cost memory and no scheduling at all, and a publish to 10,000
subscribers costs no task per subscriber.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import random
import time
import traceback
from bisect import bisect_left
from collections import deque
from collections.abc import Awaitable, Callable, Hashable

from loguru import logger

from interlock.mailbox.actor import Actor
from interlock.mailbox.cell import Cell
from interlock.mailbox.config import MailboxConfig, Overflow, SupervisionPolicy
from interlock.mailbox.context import current_envelope
from interlock.mailbox.deadletters import DeadLetterLog
from interlock.mailbox.envelope import EXTERNAL, Envelope, new_envelope
from interlock.mailbox.errors import (
    ActorExists,
    ActorFailed,
    ActorNotFound,
    ActorStopped,
    AskCycle,
    AskTimeout,
    MailboxFull,
    SystemShuttingDown,
)
from interlock.mailbox.messages import STARTED, Published, Unpublished
from interlock.mailbox.statistics import (
    HANDLING_BUCKETS,
    ActorStatistics,
    KindCounters,
    KindStatistics,
    SystemStatistics,
)
from interlock.mailbox.summary import summarize
from interlock.mailbox.timers import Timer
from interlock.mailbox.topics import Topic, Topics
from interlock.mailbox.tracing import Tracer, error_text
from interlock.mailbox.waits import WaitGraph
from interlock.mailbox.workers import Scheduler, Worker

_YIELD_EVERY = 256
_BATCH = 64
_QUICKEST = HANDLING_BUCKETS[0]
_DEFAULT_MAILBOX = MailboxConfig()
_DEFAULT_SUPERVISION = SupervisionPolicy()

# Per message type: does it define ``coalesce_key``? Asked for every message, so cached.
_KEYED: dict[type, bool] = {}


_current = current_envelope.get


def _coalesce_key(message: object) -> Hashable | None:
    cls = type(message)
    keyed = _KEYED.get(cls)
    if keyed is None:
        keyed = _KEYED[cls] = hasattr(cls, "coalesce_key")
    if keyed:
        key: Hashable | None = message.coalesce_key  # type: ignore[attr-defined]
        return key
    return None


class ActorSystem:
    """Spawns actors under unique addresses and carries messages between them.

    Use it from the event loop's thread; the synchronous methods (``spawn``, ``tell``,
    ``publish``, ``stop`` …) are atomic with respect to every other actor because nothing
    awaits inside them.
    """

    def __init__(
        self,
        *,
        tracer: Tracer | None = None,
        clock: Callable[[], float] = time.monotonic,
        timer: Callable[[], float] = time.perf_counter,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        timer_sleep: Callable[[float], Awaitable[None]] | None = None,
        dead_letter_log_interval: float = 10.0,
    ) -> None:
        """``clock`` times the restart window, statistics and when timers are due; ``timer``
        times handlers (the per-kind handling seconds and the trace's durations); ``rng``
        jitters the restart backoff; ``sleep`` waits the backoff, and ``timer_sleep`` (by
        default ``sleep``) waits out ``tell_after`` timers: tests inject them all, and may fire
        timers by hand while restarts take no time."""
        self._tracer = tracer
        self._clock = clock
        self._timer = timer
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        self._timer_sleep = sleep if timer_sleep is None else timer_sleep
        self._timer_tasks: set[asyncio.Task[None]] = set()
        self._cells: dict[str, Cell] = {}
        self._kinds: dict[tuple[str, str], KindCounters] = {}
        """Counters by (address prefix, ``Actor.reconciles``); ``statistics`` sums them up."""
        self._topics = Topics()
        self._scheduler = Scheduler(run=self._run, finish=self._finish, yield_every=_YIELD_EVERY)
        self._ids = itertools.count(1)
        self._waits = WaitGraph()
        self._accepting = True
        self._dead_letters = DeadLetterLog(clock=clock, interval=dead_letter_log_interval)

    async def __aenter__(self) -> ActorSystem:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """``async with ActorSystem() as system:`` shuts it down (default timeout) on exit."""
        await self.shutdown()

    # ----------------------------------------------------------------------------------------
    # Tracing

    @property
    def tracer(self) -> Tracer | None:
        return self._tracer

    def set_tracer(self, tracer: Tracer | None) -> None:
        """Turn tracing on (a tracer) or off (``None``) while running."""
        self._tracer = tracer

    # ----------------------------------------------------------------------------------------
    # Addresses

    def spawn(
        self,
        address: str,
        factory: Callable[[], Actor],
        *,
        mailbox: MailboxConfig = _DEFAULT_MAILBOX,
        supervision: SupervisionPolicy = _DEFAULT_SUPERVISION,
    ) -> str:
        """Create an actor at ``address`` from ``factory()`` and return the address.

        Raises ``ActorExists`` when the address is taken (``spawn_or_get`` returns the existing
        one instead) and ``SystemShuttingDown`` after ``shutdown`` began. Synchronous; when the
        actor defines ``started()`` it runs as the first item of the mailbox.
        """
        if address in self._cells:
            raise ActorExists(address)
        if not self._accepting:
            raise SystemShuttingDown(address)
        actor = factory()
        actor.address = address
        actor.system = self
        kind = self._kind(address, actor.reconciles)
        cell = Cell(address, kind, factory, actor, mailbox, supervision)
        self._cells[address] = cell
        kind.actors += 1
        tracer = self._tracer
        has_started = type(actor).started is not Actor.started
        if has_started or tracer is not None:
            envelope = self._envelope(address, STARTED, current_envelope.get(), None)
            if tracer is not None:
                tracer.spawned(envelope, actor_type=cell.actor_type)
            if has_started:
                cell.queue = deque((envelope,))
                self._scheduler.activate(cell)
        return address

    def spawn_or_get(
        self,
        address: str,
        factory: Callable[[], Actor],
        *,
        mailbox: MailboxConfig = _DEFAULT_MAILBOX,
        supervision: SupervisionPolicy = _DEFAULT_SUPERVISION,
    ) -> str:
        """Like ``spawn``, but an address that is taken is returned as is (factory not called)."""
        if address in self._cells:
            return address
        return self.spawn(address, factory, mailbox=mailbox, supervision=supervision)

    def exists(self, address: str) -> bool:
        """Whether a live (not stopping) actor is at ``address``."""
        return address in self._cells

    def lookup(self, address: str) -> bool:
        """The same as ``exists`` (the name the runtime issue uses)."""
        return address in self._cells

    def addresses(self, prefix: str = "") -> list[str]:
        """Addresses of live actors starting with ``prefix``, in spawn order."""
        if not prefix:
            return list(self._cells)
        return [address for address in self._cells if address.startswith(prefix)]

    def _kind(self, address: str, reconciles: str = "") -> KindCounters:
        key = (address.partition("/")[0], reconciles)
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = KindCounters(*key)
        return kind

    # ----------------------------------------------------------------------------------------
    # Sending

    def _envelope(
        self,
        recipient: str,
        message: object,
        parent: Envelope | None,
        correlation_id: str | None,
        key: Hashable | None = None,
        reply: asyncio.Future[object] | None = None,
    ) -> Envelope:
        envelope_id = next(self._ids)
        if parent is None:
            return new_envelope(
                envelope_id,
                str(envelope_id) if correlation_id is None else correlation_id,
                None,
                EXTERNAL,
                recipient,
                message,
                self._clock(),
                key,
                reply,
            )
        return new_envelope(
            envelope_id,
            parent.correlation_id if correlation_id is None else correlation_id,
            parent.id,
            parent.recipient,
            recipient,
            message,
            self._clock(),
            key,
            reply,
        )

    def tell(self, address: str, message: object, *, correlation_id: str | None = None) -> None:
        """Send ``message`` to ``address`` without waiting.

        Never raises for a missing or stopped actor (the message becomes a dead letter). Raises
        ``MailboxFull`` only for a full ``Overflow.BLOCK`` mailbox (use ``tell_wait``). Outside
        a handler it starts a new correlation (``correlation_id`` if given); inside one it
        inherits the handled message's correlation and names it as the cause.
        """
        # The hot path: everything inline, the envelope's fields stored here (no call into
        # ``new_envelope``), subscripts rather than .get() calls.
        parent = _current()
        cls = type(message)
        try:
            keyed = _KEYED[cls]
        except KeyError:
            keyed = _KEYED[cls] = hasattr(cls, "coalesce_key")
        key = message.coalesce_key if keyed else None  # type: ignore[attr-defined]
        envelope = Envelope()
        envelope.id = envelope_id = next(self._ids)
        envelope.enqueued_at = now = self._clock()
        envelope.recipient = address
        envelope.message = message
        envelope.key = key
        envelope.reply = None
        if parent is None:
            envelope.correlation_id = str(envelope_id) if correlation_id is None else correlation_id
            envelope.causation_id = None
            envelope.sender = EXTERNAL
            if not self._accepting:
                self._dead_letter(envelope, "shutdown")
                return
        else:
            envelope.correlation_id = (
                parent.correlation_id if correlation_id is None else correlation_id
            )
            envelope.causation_id = parent.id
            envelope.sender = parent.recipient
        try:
            cell = self._cells[address]
        except KeyError:
            self._dead_letter(envelope, "unknown" if self._accepting else "shutdown")
            return
        queue = cell.queue
        if queue is None or key is not None or len(queue) >= cell.capacity or cell.stop_reason:
            self._enqueue(cell, envelope, False)
            return
        # The common case of ``_enqueue``, inlined: an un-keyed message into a mailbox with room.
        queue.append(envelope)
        depth = len(queue)
        if depth > cell.max_depth:
            cell.max_depth = depth
        cell.last_message_at = now
        tracer = self._tracer
        if tracer is not None:
            tracer.deliver(envelope, depth=depth, coalesced=None)
        if not cell.active:
            self._scheduler.activate(cell)

    def tell_after(
        self, delay: float, address: str, message: object, *, key: Hashable | None = None
    ) -> Timer:
        """Send ``message`` to ``address`` after ``delay`` seconds (the system's timer sleep).

        The envelope is made now, so the message inherits the correlation of the one being
        handled and names it as its cause, like ``tell``; the trace records ``scheduled`` now
        and ``deliver`` when it fires. The timer belongs to the recipient: it survives the
        recipient's restarts (like its queued messages) and is cancelled when it stops. A
        ``key`` names the timer for that recipient: setting another with the same key cancels
        the first (``cancel_timer(address, key)`` cancels by name). An unknown address makes
        the message a dead letter at once. On firing, a full mailbox is treated as by
        ``publish`` (a timer cannot wait for room).
        """
        parent = current_envelope.get()
        envelope = self._envelope(address, message, parent, None, _coalesce_key(message))
        cell = self._cells.get(address)
        timer = Timer(envelope, key if key is not None else object(), self._clock() + delay)
        if cell is None or (parent is None and not self._accepting):
            self._dead_letter(envelope, "unknown" if self._accepting else "shutdown")
            return timer
        timers = cell.timers
        if timers is None:
            timers = cell.timers = {}
        previous = timers.get(timer.key)
        if previous is not None:
            previous.cancel()
        timers[timer.key] = timer
        task = asyncio.get_running_loop().create_task(
            self._fire(cell, timer, delay), context=contextvars.Context()
        )
        timer.task = task
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_tasks.discard)
        if self._tracer is not None:
            self._tracer.scheduled(envelope, delay=delay)
        return timer

    def cancel_timer(self, address: str, key: Hashable) -> bool:
        """Cancel the timer named ``key`` of ``address``; ``False`` when there was none."""
        cell = self._cells.get(address)
        timers = None if cell is None else cell.timers
        timer = None if timers is None else timers.pop(key, None)
        if timer is None:
            return False
        timer.cancel()
        return True

    def timer(self, address: str, key: Hashable) -> Timer | None:
        """The pending timer named ``key`` of ``address``, if any."""
        cell = self._cells.get(address)
        return None if cell is None or cell.timers is None else cell.timers.get(key)

    async def _fire(self, cell: Cell, timer: Timer, delay: float) -> None:
        await self._timer_sleep(delay)
        if timer.task is None:
            return  # cancelled while the injected sleep did not yield
        timer.task = None
        timers = cell.timers
        if timers is not None and timers.get(timer.key) is timer:
            del timers[timer.key]
        envelope = timer.envelope
        envelope.enqueued_at = self._clock()
        self._enqueue(cell, envelope, True)

    def _cancel_timers(self, cell: Cell) -> None:
        timers, cell.timers = cell.timers, None
        for timer in (timers or {}).values():
            timer.cancel()

    async def tell_wait(
        self, address: str, message: object, *, correlation_id: str | None = None
    ) -> None:
        """Like ``tell``, but waits for room in a full ``Overflow.BLOCK`` mailbox."""
        parent = current_envelope.get()
        key = _coalesce_key(message)
        cell = await self._room(address, key, parent, type(message).__name__)
        envelope = self._envelope(address, message, parent, correlation_id, key)
        if cell is None:
            self._dead_letter(envelope, "unknown" if self._accepting else "shutdown")
        elif parent is None and not self._accepting:
            self._dead_letter(envelope, "shutdown")
        else:
            self._enqueue(cell, envelope, False)

    async def _room(
        self, address: str, key: Hashable | None, parent: Envelope | None, message_type: str
    ) -> Cell | None:
        """Wait until the actor at ``address`` can take a message without ``MailboxFull``."""
        cell = self._cells.get(address)
        while cell is not None and cell.config.overflow is Overflow.BLOCK:
            queue = cell.queue
            if queue is None or len(queue) < cell.config.capacity:
                break
            if key is not None and cell.keys is not None and key in cell.keys:
                break
            if parent is not None and parent.recipient == address:
                # Waiting for our own mailbox to drain while we are the one draining it.
                raise MailboxFull(address, message_type, cell.config.capacity)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if cell.waiters is None:
                cell.waiters = deque()
            cell.waiters.append(waiter)
            await waiter
            cell = self._cells.get(address)
        return cell

    async def ask(
        self,
        address: str,
        message: object,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - the ask contract names its own deadline
        correlation_id: str | None = None,
    ) -> object:
        """Send ``message`` and wait for the value ``receive`` returns.

        Raises ``AskTimeout`` after ``timeout`` seconds, ``AskCycle`` at once when the target
        is (directly or through a chain of asks) waiting on the asker, ``ActorNotFound`` for a
        missing actor, ``ActorStopped`` if it stops first, ``ActorFailed`` if it raises, and
        ``MailboxFull`` if its mailbox refuses the message. Ask messages are never coalesced.
        """
        parent = current_envelope.get()
        message_type = type(message).__name__
        asker = None if parent is None else parent.recipient
        if asker == address:
            raise AskCycle([address, address], message_type)
        cell = await self._room(address, None, parent, message_type)
        if cell is None or (parent is None and not self._accepting):
            reason = "shutdown" if not self._accepting else "unknown"
            self._dead_letter(self._envelope(address, message, parent, correlation_id), reason)
            raise ActorNotFound(address, f"ask {message_type}")
        if asker is not None:
            chain = self._waits.chain(address, asker)
            if chain is not None:
                raise AskCycle([asker, *chain], message_type)
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[object] = loop.create_future()
        self._enqueue(
            cell, self._envelope(address, message, parent, correlation_id, None, reply), False
        )
        if asker is not None:
            self._waits.add(asker, address)
        timer = loop.call_later(timeout, _expire, reply, address, message_type, timeout)
        try:
            return await reply
        finally:
            timer.cancel()
            if asker is not None:
                self._waits.remove(asker, address)

    def _enqueue(self, cell: Cell, envelope: Envelope, from_publish: bool) -> None:
        queue = cell.queue
        if (
            queue is None
            or envelope.key is not None
            or len(queue) >= cell.capacity
            or cell.stop_reason is not None
        ):
            admitted = self._admit(cell, envelope, from_publish)
            if admitted is None:
                return
            queue = admitted
        else:
            queue.append(envelope)
        depth = len(queue)
        if depth > cell.max_depth:
            cell.max_depth = depth
        cell.last_message_at = envelope.enqueued_at
        tracer = self._tracer
        if tracer is not None:
            tracer.deliver(envelope, depth=depth, coalesced=None)
        if not cell.active:
            self._scheduler.activate(cell)

    def _admit(self, cell: Cell, envelope: Envelope, from_publish: bool) -> deque[Envelope] | None:
        """The slow path of ``_enqueue``: a stopped actor, the first message, a keyed message
        or a full mailbox. Returns the queue the envelope was appended to, or ``None`` when it
        was coalesced or dead-lettered."""
        if cell.stop_reason is not None:
            self._dead_letter(envelope, "stopped")
            return None
        queue = cell.queue
        if queue is None:
            queue = cell.queue = deque()
        key = envelope.key
        keys = cell.keys
        if key is not None:
            if keys is None:
                keys = cell.keys = {}
            else:
                queued = keys.get(key)
                if queued is not None:
                    self._coalesce(cell, queued, envelope)
                    return None
        if len(queue) >= cell.capacity:
            overflow = cell.config.overflow
            if overflow is Overflow.BLOCK and not from_publish:
                raise MailboxFull(cell.address, envelope.type, cell.capacity)
            if overflow is Overflow.REJECT or (overflow is Overflow.COALESCE and key is None):
                self._dead_letter(envelope, "overflow")
                return None
        queue.append(envelope)
        if keys is not None and key is not None:
            keys[key] = envelope
        return queue

    def _coalesce(self, cell: Cell, queued: Envelope, newer: Envelope) -> None:
        # In place: the newer message takes the queued one's position, so a key that changes
        # constantly is still handled in its turn instead of moving to the back forever.
        replaced = queued.id
        if queued is cell.replay:
            cell.replay = None  # a newer state of the key: handled as news, not as a replay
        queued.id = newer.id
        queued.correlation_id = newer.correlation_id
        queued.causation_id = newer.causation_id
        queued.sender = newer.sender
        queued.message = newer.message
        queued.enqueued_at = newer.enqueued_at
        if hasattr(queued, "trace_fields"):
            del queued.trace_fields  # rendered for the replaced message
        cell.last_message_at = newer.enqueued_at
        tracer = self._tracer
        if tracer is not None:
            tracer.deliver(queued, depth=cell.depth(), coalesced=replaced)

    # ----------------------------------------------------------------------------------------
    # Handling (run by the scheduler's workers)

    async def _run(self, cell: Cell, worker: Worker) -> int:
        """Handle up to ``_BATCH`` messages of ``cell``; return how many were handled."""
        queue = cell.queue
        set_current = current_envelope.set
        started_marker = STARTED
        batch = _BATCH
        tracer = self._tracer  # read per batch: set_tracer takes effect from the next one
        perf_counter = self._timer
        kind = cell.kind
        buckets = kind.handling_buckets
        quickest = _QUICKEST
        handled = 0
        # Handling time per kind, added once per batch. One clock read per message: a message's
        # time runs from the end of the previous one (taking it from the mailbox included), so
        # the batch's total is the last end minus the first start, less the time spent writing
        # trace records. Most handlers finish within the first bucket: one comparison each, and
        # the first bucket is counted at the end as the messages that went to no other.
        slow = 0
        batch_started_at = started_at = perf_counter()
        tracing_seconds = 0.0
        # Read once per batch: the instance changes only by a restart, which ends the batch.
        actor = cell.actor
        try:
            while queue and cell.stop_reason is None and handled < batch:
                envelope = queue.popleft()
                if envelope.key is not None:
                    keys = cell.keys
                    if keys is not None and keys.get(envelope.key) is envelope:
                        del keys[envelope.key]
                if cell.waiters:
                    _wake_one(cell.waiters)
                set_current(envelope)
                message = envelope.message
                try:
                    if message is started_marker:
                        await actor.started()  # type: ignore[union-attr]
                        result: object = None
                    else:
                        result = await actor.receive(message)  # type: ignore[union-attr]
                except asyncio.CancelledError as error:
                    if worker.task is not None and worker.task.cancelling():
                        # The worker itself is cancelled (shutdown): not a handler error.
                        reply = envelope.reply
                        if reply is not None and not reply.done():
                            reply.set_exception(ActorStopped(cell.address, envelope.type))
                        raise
                    duration = perf_counter() - started_at
                    kind.observe(duration)
                    if worker.check is None:
                        self._scheduler.resumed(worker)
                    await self._failed(cell, envelope, error, duration, worker)
                    return handled
                except Exception as error:
                    duration = perf_counter() - started_at
                    kind.observe(duration)
                    if worker.check is None:
                        self._scheduler.resumed(worker)
                    await self._failed(cell, envelope, error, duration, worker)
                    return handled
                finished_at = perf_counter()
                duration = finished_at - started_at
                if duration > quickest:
                    buckets[bisect_left(HANDLING_BUCKETS, duration)] += 1
                    slow += 1
                if worker.check is None:
                    self._scheduler.resumed(worker)
                reply = envelope.reply
                if reply is not None and not reply.done():
                    reply.set_result(result)
                if cell.poisoned is not None:
                    cell.poisoned.discard(envelope.key)
                if tracer is not None:
                    tracer.handled(envelope, duration=duration, depth=len(queue))
                    started_at = perf_counter()
                    tracing_seconds += started_at - finished_at
                else:
                    started_at = finished_at
                handled += 1
        finally:
            # Counted per batch, not per message: the counters are read rarely.
            cell.processed += handled
            kind.processed += handled
            # A failed message was observed on its own; ``started_at`` is where it began.
            kind.handling_seconds += started_at - batch_started_at - tracing_seconds
            buckets[0] += handled - slow
        if cell.stop_reason is not None:
            await self._end(cell, worker)
        elif queue:
            self._scheduler.requeue(cell)  # more to do: to the back of the line
        else:
            self._scheduler.deactivate(cell)
        return handled

    async def _end(self, cell: Cell, worker: Worker) -> None:
        """A stopping actor's last step: its ``stopped()`` hook, then it is gone."""
        actor, cell.actor = cell.actor, None
        if actor is not None and type(actor).stopped is not Actor.stopped:
            current_envelope.set(None)
            await self._run_stopped_hook(cell, actor)
            if worker.check is None:
                self._scheduler.resumed(worker)
        self._finish(cell)

    # ----------------------------------------------------------------------------------------
    # Supervision

    async def _failed(
        self,
        cell: Cell,
        envelope: Envelope,
        error: BaseException,
        duration: float,
        worker: Worker,
    ) -> None:
        """Log and report the failure, end the failed instance and schedule its replacement."""
        cell.failed += 1
        cell.kind.failed += 1
        error_type = type(error).__name__
        logger.error(
            "actor {}: {} while handling {}: {}\n{}",
            cell.address,
            error_type,
            summarize(envelope.message),
            error_text(error),
            "".join(traceback.format_exception(error)),
        )
        tracer = self._tracer
        if tracer is not None:
            tracer.failed(envelope, duration=duration, error=error)
        reply = envelope.reply
        if reply is not None and not reply.done():
            failure = ActorFailed(cell.address, envelope.type, error_type)
            failure.__cause__ = error
            reply.set_exception(failure)
        if cell.config.durable:
            self._keep_for_replay(cell, envelope)
        actor = cell.actor
        if actor is not None:
            # The instance stays in place while its hook runs, so a stop() meanwhile waits for
            # the hook instead of running it a second time.
            await self._run_stopped_hook(cell, actor)
            if worker.check is None:
                self._scheduler.resumed(worker)
        cell.actor = None
        if cell.stop_reason is not None:
            self._finish(cell)
            return
        # The backoff is waited out in a task of its own, not in the worker.
        cell.task = asyncio.get_running_loop().create_task(
            self._restart(cell, envelope), context=contextvars.Context()
        )

    def _keep_for_replay(self, cell: Cell, failed: Envelope) -> None:
        """Durable mailboxes: keep the failed message for the restarted instance, or, when it
        already was the replay, drop it as poison and ask its owner to resynchronize the key."""
        key = failed.key
        if failed is cell.replay:
            cell.replay = None
            logger.error(
                "actor {}: dropped {} after it crashed the actor again on replay",
                cell.address,
                summarize(failed.message),
            )
            self._dead_letter(failed, "poison")
            self._resync(cell, key)
            return
        replay = cell.replay
        if replay is not None and replay not in (cell.queue or ()):
            cell.replay = None  # an earlier replay, handled since
        if key is None or failed.reply is not None or failed.message is STARTED:
            return
        if cell.keys is not None and key in cell.keys:
            return  # a newer state of the key is queued: it supersedes the lost one
        cell.replay = new_envelope(
            next(self._ids),
            failed.correlation_id,
            failed.id,
            failed.sender,
            cell.address,
            failed.message,
            self._clock(),
            key,
        )

    def _resync(self, cell: Cell, key: Hashable) -> None:
        resync = cell.config.resync
        if resync is None:
            return
        poisoned = cell.poisoned
        if poisoned is None:
            poisoned = cell.poisoned = set()
        if key in poisoned:
            logger.error(
                "actor {}: {!r} crashed again after a resync; left until it changes",
                cell.address,
                key,
            )
            return
        poisoned.add(key)
        try:
            resync(key)
        except Exception as error:
            logger.error(
                "actor {}: resync of {!r} raised {}: {}",
                cell.address,
                key,
                type(error).__name__,
                error_text(error),
            )

    async def _restart(self, cell: Cell, cause: Envelope) -> None:
        try:
            while await self._backoff(cell, cause):
                try:
                    actor = cell.factory()
                except Exception as error:
                    cell.failed += 1
                    cell.kind.failed += 1
                    logger.error(
                        "actor {}: factory raised {} on restart: {}",
                        cell.address,
                        type(error).__name__,
                        error_text(error),
                    )
                    continue
                actor.address = cell.address
                actor.system = self
                cell.actor = actor
                self._restarted(cell, actor, cause)
                return
        finally:
            cell.task = None
            if cell.stop_reason is not None:
                self._finish(cell)
            elif cell.actor is not None:
                if cell.queue:
                    self._scheduler.requeue(cell)
                else:
                    self._scheduler.deactivate(cell)

    async def _backoff(self, cell: Cell, cause: Envelope) -> bool:
        """Wait before the next restart; ``False`` if the actor must stop instead."""
        if cell.stop_reason is not None:
            return False
        policy = cell.supervision
        times = cell.restart_times
        if times is None:
            times = cell.restart_times = deque()
        now = self._clock()
        while times and times[0] <= now - policy.within:
            times.popleft()
        if len(times) >= policy.max_restarts:
            logger.error(
                "actor {}: stopped after {} restarts within {:g} s (restart intensity)",
                cell.address,
                len(times),
                policy.within,
            )
            self._stop_cell(cell, "restart intensity")
            return False
        attempt = len(times)
        times.append(now)
        delay = policy.backoff.delay(attempt, self._rng)
        cell.restarts += 1
        cell.kind.restarts += 1
        tracer = self._tracer
        if tracer is not None:
            tracer.restart(cause, attempt=attempt, delay=delay)
        await self._sleep(delay)
        return cell.stop_reason is None

    def _restarted(self, cell: Cell, actor: Actor, cause: Envelope) -> None:
        queue = cell.queue
        if queue is None:
            queue = cell.queue = deque()
        replay = cell.replay
        if replay is not None and replay not in queue:
            # First in line (after Started): it was the first when the predecessor crashed.
            queue.appendleft(replay)
            if cell.keys is None:
                cell.keys = {}
            cell.keys[replay.key] = replay
            if self._tracer is not None:
                self._tracer.deliver(replay, depth=len(queue), coalesced=None)
        if type(actor).started is not Actor.started:
            started = self._envelope(cell.address, STARTED, cause, None)
            queue.appendleft(started)
            if self._tracer is not None:
                self._tracer.deliver(started, depth=len(queue), coalesced=None)
        # The fresh instance has none of its predecessor's state: re-deliver every retained
        # value of every topic it is subscribed to (coalescing with what is already queued).
        for topic_name in sorted(cell.topics or ()):
            topic = self._topics.get(topic_name)
            if topic is not None:
                self._deliver_retained(cell, topic_name, topic, cause)

    async def _run_stopped_hook(self, cell: Cell, actor: Actor) -> None:
        if type(actor).stopped is Actor.stopped:
            return
        try:
            await actor.stopped()
        except Exception as error:
            logger.error(
                "actor {}: stopped() raised {}: {}",
                cell.address,
                type(error).__name__,
                error_text(error),
            )

    # ----------------------------------------------------------------------------------------
    # Stopping

    def stop(self, address: str) -> None:
        """Stop the actor at ``address``: it finishes its current message, ``stopped()`` runs,
        its subscriptions end and its queued messages become dead letters. The address is free
        for a new ``spawn`` at once. Unknown addresses are ignored."""
        cell = self._cells.get(address)
        if cell is not None:
            self._stop_cell(cell, "requested")

    async def stop_and_wait(self, address: str) -> None:
        """``stop`` and wait until ``stopped()`` has run."""
        cell = self._cells.get(address)
        if cell is None:
            return
        self._stop_cell(cell, "requested")
        await self._wait_finished(cell)

    async def _wait_finished(self, cell: Cell) -> None:
        if cell.finished:
            return
        if cell.done is None:
            cell.done = asyncio.get_running_loop().create_future()
        await asyncio.shield(cell.done)

    def _stop_cell(self, cell: Cell, reason: str) -> None:
        if cell.stop_reason is not None:
            return
        cell.stop_reason = reason
        if self._cells.get(cell.address) is cell:
            del self._cells[cell.address]
            cell.kind.actors -= 1
        self._topics.remove_all(cell)
        queue = cell.queue
        if queue:
            pending = list(queue)
            queue.clear()
            for envelope in pending:
                self._dead_letter(envelope, "stopped")
        cell.keys = None
        self._cancel_timers(cell)
        waiters = cell.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        if cell.task is not None:
            # In restart backoff: nothing is being handled, so do not wait out the delay (unless
            # the backoff task itself is stopping the actor: the restart intensity was reached).
            if cell.task is not asyncio.current_task():
                cell.task.cancel()
        elif not cell.active:
            actor = cell.actor
            if actor is not None and type(actor).stopped is not Actor.stopped:
                self._scheduler.activate(cell)  # a worker runs the hook
            else:
                self._finish(cell)
        # Otherwise a worker has the actor (ready or handling): it ends it after this message.

    def _finish(self, cell: Cell) -> None:
        if cell.finished:
            return
        cell.finished = True
        cell.actor = None
        cell.queue = None
        cell.keys = None
        cell.replay = None
        self._scheduler.forget(cell)
        if cell.done is not None and not cell.done.done():
            cell.done.set_result(None)
        tracer = self._tracer
        if tracer is not None:
            tracer.stopped(
                cell.address, reason=cell.stop_reason or "requested", actor_type=cell.actor_type
            )

    # ----------------------------------------------------------------------------------------
    # Pub/sub

    def subscribe(self, topic: str, address: str) -> dict[str, object]:
        """Subscribe the actor at ``address`` to ``topic`` and, in the same step, queue a
        ``Published`` for every retained key of the topic; return those retained values (a
        copy), so that the subscriber may use them at once instead of waiting for the queued
        notifications, which then carry the same objects. Subscribing again re-delivers the
        retained values. Raises ``ActorNotFound`` for a missing actor."""
        cell = self._cells.get(address)
        if cell is None:
            raise ActorNotFound(address, f"subscribe to {topic}")
        state = self._topics.add_subscriber(topic, cell)
        self._deliver_retained(cell, topic, state, current_envelope.get())
        return dict(state.retained)

    def _deliver_retained(
        self, cell: Cell, topic: str, state: Topic, parent: Envelope | None
    ) -> None:
        for key, value in list(state.retained.items()):
            self._enqueue(
                cell,
                self._envelope(
                    cell.address, Published(topic, key, value), parent, None, (topic, key)
                ),
                True,
            )

    def unsubscribe(self, topic: str, address: str) -> None:
        """End the subscription; notifications of ``topic`` still queued for the actor are
        dropped, so none arrives after this returns."""
        cell = self._cells.get(address)
        if cell is None or not self._topics.remove_subscriber(topic, cell):
            return
        queue = cell.queue
        if not queue:
            return
        kept = [
            envelope
            for envelope in queue
            if not (
                isinstance(envelope.message, Published | Unpublished)
                and envelope.message.topic == topic
            )
        ]
        if len(kept) != len(queue):
            queue.clear()
            queue.extend(kept)
            if cell.keys is not None:
                cell.keys = {env.key: env for env in kept if env.key is not None}

    def publish(self, topic: str, key: str, value: object) -> None:
        """Retain ``value`` under ``key`` on ``topic`` and queue ``Published`` to every
        subscriber (coalesced with a pending notification of the same key)."""
        state = self._topics.setdefault(topic)
        state.retain(key, value)
        if state.subscribers:
            self._fan_out(state, Published(topic, key, value), (topic, key))

    def unpublish(self, topic: str, key: str) -> None:
        """Remove the retained value of ``key`` and queue ``Unpublished`` to every subscriber.
        A key with no retained value is ignored."""
        state = self._topics.get(topic)
        if state is None or key not in state.retained:
            return
        del state.retained[key]
        if state.subscribers:
            self._fan_out(state, Unpublished(topic, key), (topic, key))
        self._topics.forget_if_unused(topic, state)

    def _fan_out(self, state: Topic, message: Published | Unpublished, key: Hashable) -> None:
        parent = current_envelope.get()
        for cell in list(state.subscribers.values()):
            self._enqueue(cell, self._envelope(cell.address, message, parent, None, key), True)

    def mail_waiting(self, address: str) -> int:
        """How many messages wait in ``address``'s mailbox (not counting the one being handled):
        an actor may let a burst of inputs pile up and compute its output once, after the last
        (see ``RouteActor``)."""
        cell = self._cells.get(address)
        return 0 if cell is None else cell.depth()

    def retained(self, topic: str) -> dict[str, object]:
        """A copy of the retained values of ``topic`` by key."""
        state = self._topics.get(topic)
        return {} if state is None else dict(state.retained)

    def subscribers(self, topic: str) -> list[str]:
        """Addresses subscribed to ``topic``, in subscription order."""
        state = self._topics.get(topic)
        return [] if state is None else list(state.subscribers)

    # ----------------------------------------------------------------------------------------
    # Dead letters

    def _dead_letter(self, envelope: Envelope, reason: str) -> None:
        self._kind(envelope.recipient).dead_letters += 1
        reply = envelope.reply
        if reply is not None and not reply.done():
            cell = self._cells.get(envelope.recipient)
            if reason == "overflow" and cell is not None:
                reply.set_exception(MailboxFull(cell.address, envelope.type, cell.capacity))
            else:
                reply.set_exception(ActorStopped(envelope.recipient, envelope.type))
        tracer = self._tracer
        if tracer is not None:
            tracer.dead_letter(envelope, reason=reason)
        self._dead_letters.record(
            message_type=envelope.type, recipient=envelope.recipient, reason=reason
        )

    # ----------------------------------------------------------------------------------------
    # Shutdown

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a drain budget
        """Stop the system within ``timeout`` seconds.

        1. Refuse external messages and spawns (messages sent by handlers are still delivered,
           so chains in flight complete); actors waiting out a restart backoff stop at once.
        2. Let mailboxes drain for up to 80% of ``timeout``.
        3. Stop every actor: queued messages become dead letters and ``stopped()`` hooks run,
           until ``timeout`` has passed.
        4. Cancel whatever is still running and wait for it to end.
        """
        loop = asyncio.get_running_loop()
        start = loop.time()
        self._accepting = False
        for cell in list(self._cells.values()):
            if cell.actor is None:
                self._stop_cell(cell, "shutdown")
        await self._wait_idle_until(start + 0.8 * timeout)
        for cell in list(self._cells.values()):
            self._stop_cell(cell, "shutdown")
        await self._wait_idle_until(start + timeout)
        busy = self._scheduler.busy
        await self._scheduler.cancel(
            also=[cell.task for cell in busy if cell.task is not None] + list(self._timer_tasks)
        )
        for cell in list(busy):
            self._finish(cell)  # stopping actors no worker reached before the cancellation
        self._dead_letters.flush()

    async def _wait_idle_until(self, deadline: float) -> None:
        try:
            async with asyncio.timeout_at(deadline):
                await self._scheduler.wait_idle()
        except TimeoutError:
            return

    # ----------------------------------------------------------------------------------------
    # Idle

    async def wait_idle(self) -> None:
        """Wait until no actor has work: every mailbox empty, no handler running, no actor in
        restart backoff or stopping. Returns at once when that is already so.

        An event, not a poll: waiters wake the moment the last busy actor finishes. Timers
        waiting to fire are not work (a retry due in a minute does not keep the system busy),
        nor is anything outside the system (an informer about to deliver). Bound the wait with
        ``asyncio.timeout`` where the caller needs a deadline.
        """
        await self._scheduler.wait_idle()

    # ----------------------------------------------------------------------------------------
    # Statistics

    def statistics(self) -> SystemStatistics:
        """Totals for the system and per kind; costs O(kinds + busy actors)."""
        depth_by_kind: dict[tuple[str, str], int] = {}
        for cell in self._scheduler.busy:
            key = (cell.kind.name, cell.kind.reconciles)
            depth_by_kind[key] = depth_by_kind.get(key, 0) + cell.depth()
        kinds: dict[str, KindStatistics] = {}
        reconciles: dict[str, KindStatistics] = {}
        for kind in self._kinds.values():
            depth = depth_by_kind.get((kind.name, kind.reconciles), 0)
            _add_kind(kinds, kind.name, kind, depth)
            if kind.reconciles:
                _add_kind(reconciles, kind.reconciles, kind, depth)
        return SystemStatistics(
            actors=len(self._cells),
            busy=len(self._scheduler.busy),
            depth=sum(depth_by_kind.values()),
            processed=sum(kind.processed for kind in kinds.values()),
            failed=sum(kind.failed for kind in kinds.values()),
            restarts=sum(kind.restarts for kind in kinds.values()),
            dead_letters=self._dead_letters.total,
            kinds=kinds,
            reconciles=reconciles,
        )

    def actor_statistics(self, address: str) -> ActorStatistics:
        """A snapshot of the actor at ``address``; raises ``ActorNotFound`` if there is none."""
        cell = self._cells.get(address)
        if cell is None:
            raise ActorNotFound(address, "statistics")
        return ActorStatistics(
            address=cell.address,
            kind=cell.kind.name,
            actor_type=cell.actor_type,
            state=cell.state(),
            depth=cell.depth(),
            max_depth=cell.max_depth,
            capacity=cell.config.capacity,
            processed=cell.processed,
            failed=cell.failed,
            restarts=cell.restarts,
            last_message_at=cell.last_message_at,
            waiting_senders=len(cell.waiters) if cell.waiters else 0,
        )


def _wake_one(waiters: deque[asyncio.Future[None]]) -> None:
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


def _expire(reply: asyncio.Future[object], address: str, message_type: str, timeout: float) -> None:
    if not reply.done():
        reply.set_exception(AskTimeout(address, message_type, timeout))


def _add_kind(totals: dict[str, KindStatistics], name: str, kind: KindCounters, depth: int) -> None:
    """Add ``kind``'s counters to ``totals[name]`` (several counters share a name: the same
    address prefix reconciling different things, or several prefixes reconciling one)."""
    buckets = tuple(kind.handling_buckets)
    # A name seen for the first time adds to zeros.
    found = totals.get(name) or KindStatistics(0, 0, 0, 0, 0, 0, 0.0, (0,) * len(buckets))
    totals[name] = KindStatistics(
        actors=found.actors + kind.actors,
        depth=found.depth + depth,
        processed=found.processed + kind.processed,
        failed=found.failed + kind.failed,
        restarts=found.restarts + kind.restarts,
        dead_letters=found.dead_letters + kind.dead_letters,
        handling_seconds=found.handling_seconds + kind.handling_seconds,
        handling_buckets=tuple(a + b for a, b in zip(found.handling_buckets, buckets, strict=True)),
    )
