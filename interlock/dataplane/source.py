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


def no_address(
    target: ServicePortKey, *, known: bool, exists: bool, has_port: bool
) -> UpstreamError:
    """Why a Service port has no ready address: its Service's endpoints are not known yet (503),
    the Service or its port does not exist (500), or no endpoint is ready (503). One wording
    for every table a data plane reads (the controller's, an edge worker's copy of it)."""
    where = target.describe()
    if not has_port:
        if not known:
            return UpstreamError(503, f"{where}: endpoints not known yet")
        if not exists:
            return UpstreamError(500, f"Service {target.service_key()} does not exist")
        return UpstreamError(500, f"{where} does not exist")
    return UpstreamError(503, f"{where} has no ready endpoint")
