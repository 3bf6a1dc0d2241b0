"""The engine's boundary to controller state: which policy, which endpoints (:class:`PolicySource`).

The engine must not know where policies and endpoints come from — the controller's
ServicePortWatches and EndpointSlices for the edge and the mesh listener, a table in tests, DNS
for the standalone edge — and it must not wait for them: both questions are asked on every
request, so implementations answer from tables kept current elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey

Address = tuple[str, int]
"""An endpoint: host (an IP address or a name the connector resolves) and port."""


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """No endpoint can be used; the data plane answers ``status`` (500: no such Service or
    port, 503: none ready or not known yet); ``message`` names the Service port."""

    status: int
    message: str


class PolicySource(Protocol):
    """Which policy and which endpoints; neither call may await (see the module doc)."""

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        """The target's policy as this front door's clients see it; None while unknown (the
        request then goes to the Service port itself, as with no route attached)."""
        ...

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        """The ready endpoints of a Service port, or why there are none."""
        ...
