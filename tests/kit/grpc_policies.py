"""Policies for the gRPC API's tests, built by the model from raw objects as the controller
builds them (``tests/api/test_grpc_*.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlock.model.gateway import parse_http_route
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import ObjectKey
from interlock.model.outbound import MeshRoute, OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, parse_service
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route

PARSERS: dict[str, Callable[[dict[str, Any]], MeshRoute]] = {
    "HTTPRoute": parse_http_route,
    "GRPCRoute": parse_grpc_route,
    "TLSRoute": parse_tls_route,
    "TCPRoute": parse_tcp_route,
}


def policy_of(
    parent: dict[str, Any] | None,
    *,
    routes: tuple[dict[str, Any], ...] = (),
    services: tuple[dict[str, Any], ...] = (),
    namespace: str = "default",
    name: str = "web",
    port: int = 80,
    client_namespace: str | None = None,
) -> OutboundPolicy:
    """The policy of ``namespace/name:port`` with ``parent`` (its Service; None: it does not
    exist), the other ``services`` and the ``routes``, as ``client_namespace`` sees it."""
    known: dict[ObjectKey, Service] = {}
    for raw in (*services, *([parent] if parent is not None else [])):
        parsed = parse_service(raw)
        known[parsed.key] = parsed
    resolved = [resolve_route(PARSERS[r["kind"]](r), known, ()) for r in routes]
    return build_outbound_policy(
        known.get(ObjectKey(namespace=namespace, name=name)),
        namespace,
        name,
        port,
        client_namespace or namespace,
        resolved,
    )
