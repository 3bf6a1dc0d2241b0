"""Policies for data-plane tests: HTTPRoutes on ``shop/web:80`` resolved as the controller does."""

from __future__ import annotations

from typing import Any

from interlock.dataplane import RequestInfo
from interlock.model.gateway import parse_http_route
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, parse_service


def service(name: str, annotations: dict[str, str] | None = None) -> Service:
    return parse_service(
        {
            "metadata": {"name": name, "namespace": "shop", "annotations": annotations or {}},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }
    )


def policy(
    *rules: dict[str, Any],
    services: tuple[str, ...] = ("web", "v1", "v2"),
    annotations: dict[str, str] | None = None,
) -> OutboundPolicy:
    """The policy of ``shop/web:80`` with one HTTPRoute holding ``rules``."""
    known = {s.key: s for s in (service(n, annotations if n == "web" else None) for n in services)}
    route = parse_http_route(
        {
            "metadata": {
                "name": "r",
                "namespace": "shop",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {
                "parentRefs": [{"group": "", "kind": "Service", "name": "web"}],
                "rules": list(rules),
            },
        }
    )
    web = known.get(service("web").key)
    return build_outbound_policy(web, "shop", "web", 80, "shop", [resolve_route(route, known, [])])


def request(
    path: str = "/",
    *,
    method: str = "GET",
    query: str = "",
    headers: dict[str, str] | None = None,
    scheme: str = "http",
    host: str = "web.example",
) -> RequestInfo:
    params = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
    return RequestInfo(
        method=method,
        path=path,
        forward_path=path,
        query=query,
        query_params=params,
        headers={k.lower(): v for k, v in (headers or {}).items()},
        scheme=scheme,
        host=host,
    )
