"""A mesh listener in front of one Service, for the tests that speak to it on the wire
(``tests/security``): every Service port it is asked for is ``default/upload:80``, served by one
address the test gives, with the policy a Service with no routes has."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from interlock.dataplane.source import Address, UpstreamError
from interlock.mesh.server import MeshServer, MeshSettings
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.service import ServicePortKey, parse_service

AUTHORITY = "upload.default.svc.cluster.local"
"""What a client names the Service by."""


class _OneService:
    """The mesh's upstreams: every Service port named is ``default/upload:80`` at one address."""

    def __init__(self) -> None:
        self.address: Address = ("127.0.0.1", 9)
        service = parse_service(
            {
                "metadata": {"name": "upload", "namespace": "default"},
                "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80}]},
            }
        )
        self._policy = build_outbound_policy(service, "default", "upload", 80, "default", [])

    async def ready(
        self, target: ServicePortKey, *, within: float
    ) -> OutboundPolicy | UpstreamError:
        return self._policy

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        return [self.address]


@contextlib.asynccontextmanager
async def running_mesh(backend: Address) -> AsyncIterator[tuple[str, int]]:
    """A mesh listener on a free loopback port (its address) whose one Service is served by
    ``backend``."""
    upstreams = _OneService()
    upstreams.address = backend
    server = MeshServer(upstreams=upstreams, settings=MeshSettings(policy_wait=1.0))
    address = await server.start(addr="127.0.0.1:0")
    try:
        yield address
    finally:
        await server.stop()
