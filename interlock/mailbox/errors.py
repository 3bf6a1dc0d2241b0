"""Errors raised by the actor runtime.

Each error names the actor address (and, where there is one, the message type) so that a log
line is enough to find the culprit. None of them carries message payloads: payloads may hold
Secret data and errors end up in logs.
"""

from __future__ import annotations


class MailboxError(Exception):
    """Base class of every error the runtime raises."""


class ActorExists(MailboxError):
    """``spawn`` was called with an address that is already taken (use ``spawn_or_get``)."""

    def __init__(self, address: str) -> None:
        super().__init__(
            f"actor {address}: address is already taken; stop it first or use spawn_or_get"
        )
        self.address = address


class ActorNotFound(MailboxError):
    """``ask`` or ``subscribe`` named an address with no live actor (never spawned, or stopped).

    ``tell`` never raises this: a tell to a missing actor becomes a dead letter.
    """

    def __init__(self, address: str, action: str) -> None:
        super().__init__(f"actor {address}: no such actor ({action})")
        self.address = address
        self.action = action


class ActorStopped(MailboxError):
    """The actor stopped before it handled the ``ask`` (the message became a dead letter)."""

    def __init__(self, address: str, message_type: str) -> None:
        super().__init__(f"actor {address}: stopped before it handled {message_type}")
        self.address = address
        self.message_type = message_type


class ActorFailed(MailboxError):
    """The actor raised while handling the ``ask``; the cause is chained as ``__cause__``."""

    def __init__(self, address: str, message_type: str, error_type: str) -> None:
        super().__init__(f"actor {address}: {error_type} while handling {message_type}")
        self.address = address
        self.message_type = message_type
        self.error_type = error_type


class AskTimeout(MailboxError, TimeoutError):
    """No reply arrived within the ``ask`` timeout."""

    def __init__(self, address: str, message_type: str, timeout: float) -> None:
        super().__init__(f"actor {address}: no reply to {message_type} within {timeout:g} s")
        self.address = address
        self.message_type = message_type
        self.timeout = timeout


class AskCycle(MailboxError):
    """The ``ask`` would wait on itself, directly or through a chain of waiting asks."""

    def __init__(self, chain: list[str], message_type: str) -> None:
        path = " -> ".join(chain)
        super().__init__(
            f"actor {chain[0]}: ask {message_type} would deadlock, waiting on itself ({path})"
        )
        self.chain = chain
        self.message_type = message_type


class MailboxFull(MailboxError):
    """A synchronous ``tell`` to a full ``Overflow.BLOCK`` mailbox; use ``tell_wait`` to wait."""

    def __init__(self, address: str, message_type: str, capacity: int) -> None:
        super().__init__(
            f"actor {address}: mailbox full ({capacity} messages), {message_type} not sent; "
            "use tell_wait to wait for room"
        )
        self.address = address
        self.message_type = message_type
        self.capacity = capacity


class SystemShuttingDown(MailboxError):
    """``spawn`` after ``shutdown`` began."""

    def __init__(self, address: str) -> None:
        super().__init__(f"actor {address}: not spawned, the actor system is shutting down")
        self.address = address
