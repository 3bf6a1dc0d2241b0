"""The mesh half of a running controller (``--mesh-addr``), added to the Controller in one piece.

The mesh listener needs the outbound half (policies) and EndpointSlices. The edge half already
runs the EndpointSlice informer and its directory when there is an edge; without one, the mesh
half runs them itself, so that ``--mesh-addr`` works with or without ``--edge-addr``:

* the EndpointSlice row of the kinds table (``controller/kinds.py``: watched, its changes to
  the endpoints directory), only when the edge half does not provide them;
* :meth:`MeshHalf.start` — spawn what it needs and listen; :meth:`MeshHalf.stop`;
* :meth:`MeshHalf.describe` and :meth:`MeshHalf.debug` (``/debug/mesh``).
"""

from __future__ import annotations

import random
from typing import Any

from interlock.actors.directories import EndpointsDirectory
from interlock.actors.durable import ResyncObject, durable_mailbox
from interlock.actors.edge_messages import ENDPOINTS_DIRECTORY
from interlock.actors.service_port_watch import ServicePortWatches
from interlock.config import Address, ControllerConfig
from interlock.controller.upstreams import (
    DEFAULT_IDLE_RELEASE,
    DEFAULT_MAX_TARGETS,
    SharedUpstreamCache,
    UpstreamIndex,
)
from interlock.dataplane.metrics import Traffic
from interlock.mailbox import ActorSystem
from interlock.mesh.server import MeshServer, MeshSettings


class MeshHalf:
    """Everything ``--mesh-addr`` adds to a controller; see the module docstring."""

    def __init__(
        self,
        *,
        config: ControllerConfig,
        system: ActorSystem,
        watches: ServicePortWatches,
        upstream_cache: SharedUpstreamCache,
        endpoints_from_edge: bool,
        traffic: Traffic,
        resync_object: ResyncObject | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if config.mesh.addr is None:
            raise ValueError("MeshHalf: config.mesh.addr is required to run the mesh listener")
        self._config = config
        self._system = system
        self._endpoints_from_edge = endpoints_from_edge
        self._mailbox = durable_mailbox(resync_object)
        self.upstreams = UpstreamIndex(
            cache=upstream_cache,
            watches=watches,
            follower="mesh listener",
            client_namespace=config.mesh.client_namespace,
            max_targets=DEFAULT_MAX_TARGETS,
            idle_release=DEFAULT_IDLE_RELEASE,
        )
        self.server = MeshServer(
            upstreams=self.upstreams,
            settings=MeshSettings(cluster_domain=config.cluster.domain, limits=config.edge.limits),
            rng=rng,
            traffic=traffic,
        )
        self.address: Address | None = None
        """Where the listener listens once started (port 0 resolved)."""

    async def start(self) -> None:
        """Spawn the endpoints directory (without an edge), start the upstream index (and the
        controller's one upstream cache unless the edge started it) and listen (before the
        informers run)."""
        if not self._endpoints_from_edge:
            self._system.spawn(ENDPOINTS_DIRECTORY, EndpointsDirectory, mailbox=self._mailbox)
        self.upstreams.start()
        addr = self._config.mesh.addr
        assert addr is not None
        _, port = await self.server.start(addr=str(addr))
        self.address = Address(host=addr.host, port=port)

    async def stop(self) -> None:
        """Stop listening and following policies (before the actor system shuts down)."""
        await self.server.stop()
        await self.upstreams.close()

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the listener: what mesh clients set as ``HTTP_PROXY``."""
        if self.address is None:
            raise RuntimeError("the mesh listener is not started")
        host = "127.0.0.1" if self.address.host in ("0.0.0.0", "::", "") else self.address.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.address.port}"

    def describe(self) -> list[str]:
        if self.address is None:
            return []
        return [
            f"mesh listener on {self.url} (client namespace {self._config.mesh.client_namespace})"
        ]

    def debug(self) -> dict[str, Any]:
        """``/debug/mesh``: every Service port clients named, and its policy's route count."""
        return {
            "clientNamespace": self._config.mesh.client_namespace,
            "services": self.upstreams.debug(),
        }
