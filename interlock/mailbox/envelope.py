"""The envelope around every message: who sent it, what caused it, which external event it
belongs to.

Without the envelope the trace could say *that* an actor handled a message but not *why* it was
sent; ``correlation_id`` and ``causation_id`` turn the message log into a causal tree per
external event (an informer event, an HTTP request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

EXTERNAL = "external"
"""The ``sender`` of a message sent from outside any actor's handler."""


class Envelope:
    """One message on its way to (or being handled by) one actor.

    Ids are integers unique within one ``ActorSystem``; a new correlation that was not given an
    id by the caller uses the decimal id of its first envelope, so the root of a causal tree is
    the envelope whose ``id`` equals the ``correlation_id``.
    """

    __slots__ = (
        "causation_id",
        "correlation_id",
        "enqueued_at",
        "id",
        "key",
        "message",
        "recipient",
        "reply",
        "sender",
        "summary",
        "type",
    )

    id: int
    correlation_id: str
    causation_id: int | None
    sender: str
    recipient: str
    message: object
    type: str
    enqueued_at: float
    key: Hashable | None
    """The coalesce key while the envelope is queued (``None``: never coalesced)."""
    reply: asyncio.Future[object] | None
    """Where the reply goes when the message came through ``ask``."""
    summary: str | None
    """The redacted one-line summary, computed at most once and only when tracing."""

    def __init__(
        self,
        id: int,
        correlation_id: str,
        causation_id: int | None,
        sender: str,
        recipient: str,
        message: object,
        enqueued_at: float,
        key: Hashable | None = None,
        reply: asyncio.Future[object] | None = None,
    ) -> None:
        # Positional on purpose: this runs for every message and keywords cost time here.
        self.id = id
        self.correlation_id = correlation_id
        self.causation_id = causation_id
        self.sender = sender
        self.recipient = recipient
        self.message = message
        self.type = type(message).__name__
        self.enqueued_at = enqueued_at
        self.key = key
        self.reply = reply
        self.summary = None

    def __repr__(self) -> str:
        # Never the payload: it may hold Secret data.
        return (
            f"Envelope(id={self.id}, type={self.type}, sender={self.sender}, "
            f"recipient={self.recipient}, correlation_id={self.correlation_id}, "
            f"causation_id={self.causation_id})"
        )
