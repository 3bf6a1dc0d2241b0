"""The grants directory: ReferenceGrants, published per namespace for the routes that need them.

A cross-namespace backend is usable only while a ReferenceGrant in the backend's namespace
permits it. Route actors subscribe to ``grants:<ns>`` for exactly the namespaces their backends
live in (``route_grant_namespaces``), so a grant change wakes only those routes. Each grant is a
retained value keyed by its name; an unchanged grant (a label edit) is not re-published.
"""

from __future__ import annotations

from interlock.actors.messages import (
    GrantDeleted,
    GrantUpserted,
)
from interlock.actors.topics import (
    GRANTS,
)
from interlock.mailbox import Actor
from interlock.model.gateway import ReferenceGrant


class GrantsDirectory(Actor):
    """Receives :class:`GrantUpserted` / :class:`GrantDeleted`; publishes ``grants:<ns>``."""

    reconciles = "ReferenceGrant"

    async def receive(self, message: object) -> object | None:
        if isinstance(message, GrantUpserted):
            grant = message.grant
            topic = GRANTS.topic(grant.metadata.namespace)
            previous = self.system.retained(topic).get(grant.metadata.name)
            if not (isinstance(previous, ReferenceGrant) and previous.spec == grant.spec):
                self.publish(topic, grant.metadata.name, grant)
        elif isinstance(message, GrantDeleted):
            self.unpublish(GRANTS.topic(message.key.namespace), message.key.name)
        return None
