"""What the mesh listener asks of the controller about a Service port (:class:`MeshUpstreams`).

The edge learns a backend's policy before its first request (an EdgeActor attaches the backend
first); the mesh listener learns which Service a client wants only when the request arrives.
So the first request of a Service port waits — bounded — until its policy and its backends'
endpoints are known: it is answered as the policy says, not with a "not known yet" the client
cannot act on. Later requests read local tables and never wait.

The controller's implementation is its :class:`~interlock.controller.upstreams.UpstreamIndex`
for the mesh listener (``--mesh-client-namespace``'s view, released when idle), over the same
endpoint cache as the edge's; the listener names only this boundary, as the engine names
:class:`~interlock.dataplane.source.PolicySource`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from interlock.dataplane.source import Address, UpstreamError
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey


class MeshUpstreams(Protocol):
    """The policies and endpoints of the Service ports mesh clients name."""

    async def ready(
        self, target: ServicePortKey, *, within: float
    ) -> OutboundPolicy | UpstreamError:
        """The policy of ``target`` as the listener's client namespace sees it, once its
        backends' endpoints are known too; the first time waits at most ``within`` seconds."""
        ...

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        """The ready addresses of a backend Service port, or why there are none."""
        ...
