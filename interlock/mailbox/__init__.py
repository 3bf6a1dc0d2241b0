"""The actor runtime: actors, mailboxes, supervision, pub/sub with retained values, tracing.

Everything other layers use is re-exported here; import from ``interlock.mailbox``.
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
from interlock.mailbox.statistics import ActorStatistics, KindStatistics, SystemStatistics
from interlock.mailbox.summary import summarize
from interlock.mailbox.system import ActorSystem
from interlock.mailbox.tracing import Record, Tracer

__all__ = [
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
    "Envelope",
    "KindStatistics",
    "MailboxConfig",
    "MailboxError",
    "MailboxFull",
    "Overflow",
    "Published",
    "Record",
    "SupervisionPolicy",
    "SystemShuttingDown",
    "SystemStatistics",
    "Tracer",
    "Unpublished",
    "summarize",
]
