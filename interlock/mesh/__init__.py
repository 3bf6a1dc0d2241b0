"""The mesh listener (``--mesh-addr``): the data plane's second front door, for cluster clients.

The edge serves Ingress traffic by host and path and runs a route's modules; the mesh listener
serves a cluster client calling a Service by its DNS name, routed by that Service port's
outbound policy as ``--mesh-client-namespace`` sees it — what a sidecar would do, without one.
``docs/mesh.md`` says how to point clients at it. The mesh half of a running controller (what
spawns and wires this package) is :mod:`interlock.controller.mesh_half`.
"""

from interlock.mesh.server import MeshServer, MeshSettings
from interlock.mesh.upstreams import MeshUpstreams

__all__ = ["MeshServer", "MeshSettings", "MeshUpstreams"]
