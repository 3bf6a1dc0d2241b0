"""The edge data plane and the :class:`EdgeProvider` boundary edge actors program.

Only the light, dependency-free surface is re-exported here (the provider protocol, its errors
and snapshot types, the upstream resolver protocol), so that actors importing the boundary do not
pull in the HTTP server. The server lives in ``interlock.edge.server``, the in-process provider in
``interlock.edge.inprocess``, the remote one in ``interlock.edge.http_provider``.
"""

from interlock.dataplane.upstreams import Address, UpstreamError, UpstreamResolver
from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    EdgeError,
    EdgeProvider,
    EdgeSnapshot,
    HostSnapshot,
    PathType,
    PermanentEdgeError,
    RouteSnapshot,
    TransientEdgeError,
)

__all__ = [
    "Address",
    "ApplyModules",
    "BackendTarget",
    "EdgeError",
    "EdgeProvider",
    "EdgeSnapshot",
    "HostSnapshot",
    "PathType",
    "PermanentEdgeError",
    "RouteSnapshot",
    "TransientEdgeError",
    "UpstreamError",
    "UpstreamResolver",
]
