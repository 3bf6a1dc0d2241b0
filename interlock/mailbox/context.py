"""The envelope being handled in the current task, so that sends inherit causation.

A contextvar (not an argument) because handlers call ``tell``/``publish``/``ask`` through many
layers of ordinary code. Workers set it before each message they hand to an actor, and each
worker runs in its own task and context, so concurrent handlers never see each other's
envelope. ``None`` means "outside any handler": a send starts a
new correlation.
"""

from __future__ import annotations

from contextvars import ContextVar

from interlock.mailbox.envelope import Envelope

current_envelope: ContextVar[Envelope | None] = ContextVar(
    "interlock_current_envelope", default=None
)
