"""The mailbox of every actor fed with informer events: durable, and resynchronized from the
API server after a poison message.

The router and the directories learn each object through ``tell`` ("this Service is now X").
If a handler raises, the message it was handling would be gone, and unlike a topic subscriber
nothing would ever send it again: the Service's policy would stay stale until that Service
changed. The runtime's durable mailbox re-delivers it to the restarted actor (see
``MailboxConfig.durable``); one that crashes its own replay is dropped as poison, and then the
runtime hands its key to ``resync``, which reads the object's current state from the API
server (the informers keep identities, not objects) and tells it to the router again, so no gap
stays open until the object next changes.

Replays are safe because these messages carry whole states, not deltas: handling one twice is
the same as once, and the mailbox keeps one message per key (the newest).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from interlock.mailbox import MailboxConfig

ResyncObject = Callable[[str, str, str], None]
"""Send the router the current state of the object ``(kind, namespace, name)``: as the API
server has it now, or its deletion when the server no longer has it."""

_KEY_KINDS = {"service": "Service", "grant": "ReferenceGrant"}
"""Directory messages keyed by something other than the object change: the kind they carry."""


def informer_object(key: Hashable) -> tuple[str, str, str] | None:
    """The ``(kind, namespace, name)`` an informer-fed actor's message key is about, if any.

    ``ObjectChanged`` is keyed ``("object", kind, namespace, name)``; the ServiceDirectory's
    and the GrantsDirectory's messages ``("service" | "grant", namespace, name)``.
    """
    if not isinstance(key, tuple):
        return None
    if len(key) == 4 and key[0] == "object":
        return (str(key[1]), str(key[2]), str(key[3]))
    if len(key) == 3 and key[0] in _KEY_KINDS:
        return (_KEY_KINDS[key[0]], str(key[1]), str(key[2]))
    return None


def durable_mailbox(resync_object: ResyncObject | None = None) -> MailboxConfig:
    """A durable mailbox whose poison messages are resynchronized through ``resync_object``
    (none: dropped, and the gap stays until the object changes)."""
    if resync_object is None:
        return MailboxConfig(durable=True)
    resync = resync_object

    def resync_key(key: Hashable) -> None:
        target = informer_object(key)
        if target is not None:
            resync(*target)

    return MailboxConfig(durable=True, resync=resync_key)
