"""Messages the runtime itself delivers to actors: pub/sub notifications.

They are keyed by ``(topic, key)`` so that a mailbox holds at most one pending notification per
publisher key: a burst of changes costs the subscriber one handling of the newest value, and an
``Unpublished`` replaces a pending ``Published`` of the same key (and vice versa).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Published:
    """The retained value of ``key`` on ``topic`` is now ``value``."""

    topic: str
    key: str
    value: object

    @property
    def coalesce_key(self) -> tuple[str, str]:
        return (self.topic, self.key)


@dataclass(frozen=True, slots=True)
class Unpublished:
    """``key`` on ``topic`` no longer has a retained value."""

    topic: str
    key: str

    @property
    def coalesce_key(self) -> tuple[str, str]:
        return (self.topic, self.key)


@dataclass(frozen=True, slots=True)
class Started:
    """The marker queued as an actor's first mailbox item; handling it runs ``started()``.

    It is never passed to ``receive``; it exists so that ``started()`` runs in order with the
    messages, in the trace as type ``Started``, and with a causation like any other message.
    """


STARTED = Started()
