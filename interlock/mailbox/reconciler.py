"""Reconciler: an actor kind that keeps keys up to date, with retries owned by the runtime.

Without it every actor that talks to something that can fail kept its own retry bookkeeping:
the EdgeActor a failure record, an attempt count, a "waiting" flag and a timer per step slot;
the StatusWriter one global attempt count and a retry flag that held every write back. Two
vocabularies for one idea, each with its own answer to "what does a newer input do to a
pending retry". controller-runtime answers it once (``Reconcile(key) -> Result{RequeueAfter}``
or an error, a terminal error not retried, the backoff kept by the work queue per key), and so
does this module.

A subclass implements :meth:`Reconciler.reconcile` and :meth:`Reconciler.handle` (its other
messages) and calls :meth:`Reconciler.request` when a key's inputs changed. The runtime then:

- reconciles each requested key once per message of its own (a ``ReconcileNext`` reminder at
  the back of the mailbox), so newer inputs queued meanwhile are taken before the next key;
- on :class:`Done` forgets the key's failures; on :class:`RequeueAfter` looks at it again
  after that delay;
- on :class:`TransientError` retries it after the :class:`BackoffPolicy` delay for its number
  of consecutive failures (with jitter from the injected ``rng``), or after the error's own
  ``retry_after``;
- on :class:`TerminalError` does not retry it until it is requested again;
- lets a :meth:`request` supersede a pending retry or requeue: the key is reconciled at once
  (its attempts still count, so a key that keeps failing keeps backing off);
- reports every failure through :meth:`Reconciler.reconcile_failed` (a terminal one once).

Timers are the runtime's ``tell_after`` (named ``("reconcile", key)``), so tests fire them
through the system's injected timer sleep; the delays come from the actor's ``rng``.

Two ways to run a reconcile. With ``concurrency=0`` (the default) it runs inside the actor's
handler: one at a time, and it may read and change the actor's state like any handler. With
``concurrency=N`` up to N reconciles of different keys run as tasks beside the mailbox (at most
one per key; a key requested while it runs is reconciled again after), and the actor keeps
handling messages meanwhile: a reconcile then reads the state of its key when it starts and
writes back only what belongs to its key. Such a task is not cancelled when the actor stops
(a write once sent cannot be taken back): its outcome reaches the successor at the same
address, which hears of it through :meth:`Reconciler.reconciled_elsewhere`. An unforeseen
exception of a task is logged and retried as transient (nothing would restart the actor for
it); inside the handler it fails the actor like any handler's.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
import random
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from loguru import logger

from interlock.mailbox.actor import Actor
from interlock.mailbox.backoff import BackoffPolicy

K = TypeVar("K", bound=Hashable)

DEFAULT_RECONCILE_BACKOFF = BackoffPolicy(initial=0.5, maximum=60.0, jitter=0.5)
"""0.5 s doubling to 60 s, plus up to 50 %."""

_INSTANCES = itertools.count(1)
"""Numbers reconciler instances: a successor tells its predecessor's outcomes from its own."""


@dataclass(frozen=True, slots=True)
class Done:
    """The key is as desired: its failures are forgotten."""


DONE = Done()


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    """The key is as desired for now; look at it again after ``seconds``."""

    seconds: float


Result = Done | RequeueAfter


class ReconcileError(Exception):
    """A reconcile that did not bring its key to the desired state; ``message`` says why (it
    reaches logs and Events: never a Secret value)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TransientError(ReconcileError):
    """Worth retrying (a timeout, a 5xx, a 429): after the backoff, or after ``retry_after``
    seconds when the other side said when."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TerminalError(ReconcileError):
    """Not worth retrying until the key's inputs change (invalid configuration, a 4xx)."""


@dataclass(slots=True)
class KeyRetry:
    """What the runtime keeps of one key that is not simply done (read it, do not change it)."""

    attempts: int = 0
    """Consecutive transient failures; 0 after a success."""
    terminal: bool = False
    """Failed for good: not retried until requested again."""
    error: str | None = None
    """The message of the last failure, until a success."""
    due: float | None = None
    """When the pending retry or requeue fires, on the actor system's clock."""
    token: int = 0
    running: bool = False
    again: bool = False
    """Requested while its reconcile ran: reconciled again after it."""


@dataclass(frozen=True, slots=True)
class ReconcileNext:
    """A reconciler's reminder to reconcile its next requested key (queued behind newer input)."""

    @property
    def coalesce_key(self) -> str:
        return "reconcile-next"


@dataclass(frozen=True, slots=True)
class RetryDue:
    """A key's retry (or requeue) timer fired; ``token`` names the timer it was armed as."""

    key: Hashable
    token: int

    @property
    def coalesce_key(self) -> tuple[str, Hashable]:
        return ("retry-due", self.key)


@dataclass(frozen=True, slots=True)
class ReconcileFinished:
    """A reconcile that ran as a task ended (``concurrency`` > 0); ``instance`` started it."""

    key: Hashable
    outcome: Done | RequeueAfter | ReconcileError
    instance: int

    def trace_summary(self) -> str:
        outcome = type(self.outcome).__name__
        return f"ReconcileFinished {self.key!r} {outcome}"


class Reconciler(Actor, Generic[K]):
    """An actor that reconciles keys; see the module docstring."""

    def __init__(
        self,
        *,
        backoff: BackoffPolicy = DEFAULT_RECONCILE_BACKOFF,
        rng: random.Random | None = None,
        concurrency: int = 0,
    ) -> None:
        self.backoff = backoff
        self.rng = rng if rng is not None else random.Random()
        self.concurrency = concurrency
        self._instance = next(_INSTANCES)
        self._requested: OrderedDict[K, None] = OrderedDict()
        self._keys: dict[K, KeyRetry] = {}
        self._running: dict[K, asyncio.Task[None] | None] = {}
        self._next_queued = False

    # --- what a subclass implements ------------------------------------------------------------

    @abc.abstractmethod
    async def reconcile(self, key: K) -> Result:
        """Bring ``key`` towards its desired state; raise :class:`TransientError` or
        :class:`TerminalError` when that failed. Requesting the key from inside (more to do)
        reconciles it again next, before the other requested keys."""

    @abc.abstractmethod
    async def handle(self, message: object) -> object | None:
        """Handle a message that is not the runtime's (inputs, asks); the reply of an ask."""

    def reconcile_failed(
        self, key: K, error: ReconcileError, *, attempt: int, retry_in: float | None
    ) -> None:
        """A reconcile of ``key`` failed: ``attempt`` consecutive transient failures so far,
        retried in ``retry_in`` seconds (0: at once, it was requested meanwhile; None: a
        terminal failure, not retried until requested). Logs a warning; override to report it
        elsewhere too."""
        if retry_in is None:
            logger.warning("{} {!r}: {}", self.address, key, error.message)
        else:
            logger.warning(
                "{} {!r}: failed (attempt {}), retrying in {:.2f} s: {}",
                self.address,
                key,
                attempt,
                retry_in,
                error.message,
            )

    def reconciled_elsewhere(self, key: K) -> None:
        """A predecessor's reconcile of ``key`` (a task that outlived it) has ended: what it
        did is unknown here, so the key is reconciled again. Override to forget more."""
        self.request(key)

    # --- what a subclass calls -----------------------------------------------------------------

    def request(self, key: K) -> None:
        """``key``'s inputs changed: reconcile it soon, superseding a pending retry (and a
        terminal failure)."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = KeyRetry()
        state.terminal = False
        if state.due is not None:
            state.due = None
            self.cancel_timer(("reconcile", key))
        if state.running:
            state.again = True
            return
        self._requested[key] = None
        self._remind()

    def forget(self, key: K) -> None:
        """Drop ``key``: no retry, no record (a reconcile running now still ends, unheard)."""
        state = self._keys.pop(key, None)
        self._requested.pop(key, None)
        if state is not None and state.due is not None:
            self.cancel_timer(("reconcile", key))

    def retry_state(self, key: K) -> KeyRetry | None:
        """What is kept of ``key``: None when it is done (or was never requested)."""
        return self._keys.get(key)

    def requested(self) -> int:
        """How many keys wait for a reconcile (not counting the running ones)."""
        return len(self._requested)

    def reconciling(self) -> list[K]:
        """The keys whose reconcile runs now."""
        return list(self._running)

    # --- the runtime ---------------------------------------------------------------------------

    async def receive(self, message: object) -> object | None:
        if isinstance(message, ReconcileNext):
            self._next_queued = False
            await self._reconcile_next()
            return None
        if isinstance(message, RetryDue):
            self._retry_due(message)
            return None
        if isinstance(message, ReconcileFinished):
            self._task_finished(message)
            return None
        return await self.handle(message)

    def _remind(self) -> None:
        if self._next_queued or not self._requested:
            return
        if self.concurrency and len(self._running) >= self.concurrency:
            return
        self._next_queued = True
        self.tell(self.address, ReconcileNext())

    async def _reconcile_next(self) -> None:
        if not self.concurrency:
            key = self._pop()
            if key is not None:
                await self._reconcile_inline(key)
            self._remind()
            return
        while len(self._running) < self.concurrency:
            key = self._pop()
            if key is None:
                break
            self._keys[key].running = True
            self._running[key] = asyncio.get_running_loop().create_task(self._reconcile_task(key))

    def _pop(self) -> K | None:
        while self._requested:
            key, _ = self._requested.popitem(last=False)
            if key in self._keys and key not in self._running:
                return key
        return None

    async def _reconcile_inline(self, key: K) -> None:
        state = self._keys[key]
        state.running = True
        self._running[key] = None
        try:
            outcome: Result | ReconcileError = await self.reconcile(key)
        except ReconcileError as error:
            outcome = error
        finally:
            state.running = False
            self._running.pop(key, None)
        self._settle(key, outcome)

    async def _reconcile_task(self, key: K) -> None:
        outcome: Result | ReconcileError
        try:
            outcome = await self.reconcile(key)
        except ReconcileError as error:
            outcome = error
        except Exception as error:
            logger.exception("{} {!r}: reconcile raised", self.address, key)
            outcome = TransientError(f"{type(error).__name__}: {error}")
        self.system.tell(self.address, ReconcileFinished(key, outcome, self._instance))

    def _task_finished(self, message: ReconcileFinished) -> None:
        key: K = message.key  # type: ignore[assignment]
        if message.instance != self._instance:
            self.reconciled_elsewhere(key)
            return
        self._running.pop(key, None)
        state = self._keys.get(key)
        if state is not None:
            state.running = False
            self._settle(key, message.outcome)
        self._remind()

    def _settle(self, key: K, outcome: Result | ReconcileError) -> None:
        state = self._keys.get(key)
        if state is None:
            return  # forgotten while it ran
        again, state.again = state.again, False
        if isinstance(outcome, Done | RequeueAfter):
            state.attempts, state.error = 0, None
            if again:
                self._request_first(key)
            elif isinstance(outcome, RequeueAfter):
                self._arm(key, state, outcome.seconds)
            else:
                del self._keys[key]
            return
        retry_in: float | None = None
        if isinstance(outcome, TransientError):
            state.attempts += 1
            retry_in = outcome.retry_after
            if retry_in is None:
                retry_in = self.backoff.delay(state.attempts - 1, self.rng)
        else:
            state.terminal = True
        state.error = outcome.message
        if again:
            retry_in = None if state.terminal else 0.0
            self._request_first(key)
        elif retry_in is not None:
            self._arm(key, state, retry_in)
        self.reconcile_failed(key, outcome, attempt=state.attempts, retry_in=retry_in)

    def _request_first(self, key: K) -> None:
        state = self._keys[key]
        state.terminal = False
        self._requested[key] = None
        self._requested.move_to_end(key, last=False)
        self._remind()

    def _arm(self, key: K, state: KeyRetry, delay: float) -> None:
        state.token += 1
        timer = self.tell_after(delay, RetryDue(key, state.token), key=("reconcile", key))
        state.due = timer.due

    def _retry_due(self, message: RetryDue) -> None:
        key: K = message.key  # type: ignore[assignment]
        state = self._keys.get(key)
        if state is None:
            # A predecessor's timer (timers outlive restarts): look at the key once more.
            self.request(key)
            return
        if state.token != message.token or state.due is None:
            return  # superseded by a request, or a newer timer
        state.due = None
        self._requested[key] = None
        self._remind()
