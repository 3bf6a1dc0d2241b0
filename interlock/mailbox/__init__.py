"""The actor runtime: actors, mailboxes, supervision, pub/sub with retained values, tracing.

Everything other layers use is re-exported here; import from ``interlock.mailbox``.

The contract in brief (details in each docstring):

- ``spawn`` raises ``ActorExists`` for a taken address; ``spawn_or_get`` returns it instead.
  ``started()`` runs as the first mailbox item. ``stop`` frees the address at once; the actor
  finishes its current message, ``stopped()`` runs, its subscriptions end, and its queued
  messages become dead letters.
- ``tell`` never raises for a missing or stopped actor (dead letter, counted and logged at most
  once per interval); it raises ``MailboxFull`` only into a full ``Overflow.BLOCK`` mailbox,
  where ``tell_wait`` waits instead. ``ask`` raises ``AskTimeout``, ``AskCycle`` (at once, for an
  ask that would wait on itself through a chain of asks), ``ActorNotFound``, ``ActorStopped``,
  ``ActorFailed`` or ``MailboxFull``.
- A message with a ``coalesce_key`` replaces a queued message with the same key, in its place
  (``Published``/``Unpublished`` use ``(topic, key)``). A full mailbox: ``COALESCE`` (default)
  admits keyed messages beyond capacity and dead-letters un-keyed ones; ``BLOCK`` makes the
  sender wait (``publish`` cannot wait and admits); ``REJECT`` dead-letters. Every drop is a
  logged, counted, traced dead letter: never silent.
- A handler that raises: the error is logged with the message summary, ``stopped()`` runs on the
  failed instance, and after the backoff a fresh instance from the factory takes over (the
  failed message is not retried; queued messages stay queued). The system keeps the actor's
  subscriptions and re-delivers every retained value of its topics to the fresh instance, so
  state built from subscriptions is rebuilt without the actor re-subscribing. More than
  ``max_restarts`` failures within ``within`` seconds stop the actor.
- ``subscribe`` registers and queues the retained values in one step; ``unsubscribe`` also
  drops that topic's notifications still queued.
- ``tell_after(delay, address, message, key=...)`` sets a timer: the envelope is made (and
  traced as ``scheduled``) at once, delivered when the system's timer sleep returns. A key
  names the timer per recipient (a new one replaces it); an actor's timers survive its restarts
  and are cancelled when it stops. ``wait_idle()`` waits until no actor has work (pending
  timers are not work).
- ``Reconciler`` is the actor kind for keeping keys up to date: ``reconcile(key)`` returns
  ``Done`` or ``RequeueAfter`` or raises ``TransientError`` (retried with per-key backoff and
  jitter) or ``TerminalError`` (not retried until the key is requested again); ``request(key)``
  supersedes a pending retry. The runtime owns the timers (``reconciler.py``).
- Messages are values: never mutate one after sending it (it may be queued, coalesced, shared
  by every subscriber of a publish, and summarized for the trace once).
"""

from interlock.mailbox.actor import Actor
from interlock.mailbox.backoff import BackoffPolicy
from interlock.mailbox.config import MailboxConfig, Overflow, SupervisionPolicy
from interlock.mailbox.envelope import EXTERNAL, Envelope
from interlock.mailbox.errors import (
    ActorExists,
    ActorFailed,
    ActorNotFound,
    ActorStopped,
    AskCycle,
    AskTimeout,
    MailboxError,
    MailboxFull,
    SystemShuttingDown,
)
from interlock.mailbox.messages import Published, Unpublished
from interlock.mailbox.reconciler import (
    DONE,
    Done,
    KeyRetry,
    ReconcileError,
    Reconciler,
    RequeueAfter,
    TerminalError,
    TransientError,
)
from interlock.mailbox.slot import LatestValueSlot, SlotClosed
from interlock.mailbox.statistics import ActorStatistics, KindStatistics, SystemStatistics
from interlock.mailbox.summary import summarize
from interlock.mailbox.system import ActorSystem
from interlock.mailbox.timers import Timer
from interlock.mailbox.tracing import Record, Tracer

__all__ = [
    "DONE",
    "EXTERNAL",
    "Actor",
    "ActorExists",
    "ActorFailed",
    "ActorNotFound",
    "ActorStatistics",
    "ActorStopped",
    "ActorSystem",
    "AskCycle",
    "AskTimeout",
    "BackoffPolicy",
    "Done",
    "Envelope",
    "KeyRetry",
    "KindStatistics",
    "LatestValueSlot",
    "MailboxConfig",
    "MailboxError",
    "MailboxFull",
    "Overflow",
    "Published",
    "ReconcileError",
    "Reconciler",
    "Record",
    "RequeueAfter",
    "SlotClosed",
    "SupervisionPolicy",
    "SystemShuttingDown",
    "SystemStatistics",
    "TerminalError",
    "Timer",
    "Tracer",
    "TransientError",
    "Unpublished",
    "summarize",
]
