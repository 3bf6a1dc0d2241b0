"""What the policy API and the edge read from the outbound half: a watch target and the policies
pushed to its readers.

They live in ``model/`` because both sides use them: the actors build and push policies, the
HTTP layer (``api/``) and the edge's upstream resolver read them, and ``api/`` may not import
the actors (the layers in ``docs/design.md``). The hand-off itself, a latest-value slot,
is the runtime's (``interlock.mailbox.LatestValueSlot``).
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey


@dataclass(frozen=True, slots=True)
class WatchTarget:
    """A Service port as seen from a client namespace."""

    key: ServicePortKey
    client_namespace: str

    def __str__(self) -> str:
        return f"{self.key} (client {self.client_namespace})"


@dataclass(frozen=True, slots=True)
class PolicyUpdate:
    """A policy as pushed to a watch's subscribers: the model object and its JSON body.

    The body is serialized once per change and shared by every reader of that policy.
    """

    policy: OutboundPolicy
    body: bytes

    def trace_summary(self) -> str:
        p = self.policy
        return f"PolicyUpdate {p.namespace}/{p.service}:{p.port} routes={len(p.routes)}"
