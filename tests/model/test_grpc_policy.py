"""GRPCRoute on Service parents: the policy serves it in gRPC terms.

Method and header matches (with their HTTP equivalent that ``select_route`` uses), filters,
weighted backends, a missing or unpermitted backend kept with a failure injector that answers
gRPC UNAVAILABLE, ``protocol: grpc``, and GRPCRoutes winning over HTTPRoutes on one port.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from interlock.api.policy_json import policy_json
from interlock.api.policy_schema import OUTBOUND_POLICY_SCHEMA
from interlock.dataplane.matching import select_route
from interlock.model.gateway import parse_http_route
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, parse_service

VALIDATOR = Draft202012Validator(OUTBOUND_POLICY_SCHEMA)
PARENT = {"group": "core", "kind": "Service", "name": "users"}


def svc(name: str, port: int = 50051) -> Service:
    return parse_service(
        {"metadata": {"name": name, "namespace": "shop"}, "spec": {"ports": [{"port": port}]}}
    )


def grpc_route(rules: list[dict[str, Any]], name: str = "g") -> Any:
    return parse_grpc_route(
        {
            "metadata": {
                "name": name,
                "namespace": "shop",
                "creationTimestamp": "2024-01-02T00:00:00Z",
            },
            "spec": {"parentRefs": [PARENT], "rules": rules},
        }
    )


def policy(*routes: Any, present: tuple[Service, ...] = ()) -> OutboundPolicy:
    known = {s.key: s for s in (svc("users"), *present)}
    resolved = [resolve_route(r, known, []) for r in routes]
    built = build_outbound_policy(
        known[ObjectKey(namespace="shop", name="users")], "shop", "users", 50051, "shop", resolved
    )
    VALIDATOR.validate(policy_json(built))
    return built


RULE = {
    "name": "get",
    "matches": [
        {
            "method": {"service": "shop.v1.Users", "method": "Get"},
            "headers": [{"name": "x-tenant", "value": "a"}],
        }
    ],
    "filters": [
        {
            "type": "RequestHeaderModifier",
            "requestHeaderModifier": {"add": [{"name": "x", "value": "1"}]},
        }
    ],
    "backendRefs": [
        {"name": "users-v1", "port": 50051, "weight": 9},
        {"name": "users-v2", "port": 50051, "weight": 1},
    ],
}


def test_grpc_route_is_served_in_grpc_terms() -> None:
    built = policy(grpc_route([RULE]), present=(svc("users-v1"),))
    document = policy_json(built)
    assert document["protocol"] == "grpc"
    (route,) = document["routes"]
    assert (route["kind"], route["name"]) == ("GRPCRoute", "g")
    (rule,) = route["rules"]
    assert rule["name"] == "get"
    assert rule["grpcMatches"] == [
        {
            "method": {"type": "Exact", "service": "shop.v1.Users", "method": "Get"},
            "headers": [{"type": "Exact", "name": "x-tenant", "value": "a"}],
        }
    ]
    assert rule["matches"][0]["path"] == {"type": "Exact", "value": "/shop.v1.Users/Get"}
    assert rule["matches"][0]["method"] == "POST"
    assert rule["filters"][0]["type"] == "RequestHeaderModifier"
    assert [(b["name"], b["weight"], b["exists"]) for b in rule["backends"]] == [
        ("users-v1", 9, True),
        ("users-v2", 1, False),
    ]
    assert rule["backends"][1]["failureInjector"] == {
        "status": 500,
        "message": "backend Service shop/users-v2 does not exist",
        "grpcStatus": 14,
    }


def test_grpc_calls_select_by_service_and_method() -> None:
    service_only = {"matches": [{"method": {"service": "shop.v1.Orders"}}], "backendRefs": []}
    built = policy(grpc_route([RULE, service_only]), present=(svc("users-v1"),))

    def rule_for(path: str, headers: dict[str, str]) -> str | None:
        found = select_route(built, method="POST", path=path, headers=headers, query={})
        return None if found is None else found[1].name

    assert rule_for("/shop.v1.Users/Get", {"x-tenant": "a"}) == "get"
    assert rule_for("/shop.v1.Users/Get", {"x-tenant": "b"}) is None
    assert rule_for("/shop.v1.Orders/List", {}) is None  # unnamed rule: matched, name None
    found = select_route(built, method="POST", path="/shop.v1.Orders/List", headers={}, query={})
    assert found is not None
    assert found[1].grpc_matches is not None
    assert found[1].grpc_matches[0].method is not None
    assert found[1].grpc_matches[0].method.service == "shop.v1.Orders"
    assert (
        select_route(built, method="POST", path="/shop.v1.Other/Get", headers={}, query={}) is None
    )


def test_grpc_routes_win_over_http_routes_on_one_port() -> None:
    http = parse_http_route(
        {
            "metadata": {
                "name": "h",
                "namespace": "shop",
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {"parentRefs": [PARENT], "rules": [{}]},
        }
    )
    built = policy(http, grpc_route([RULE]))
    assert [(r.kind, r.name) for r in built.routes] == [("GRPCRoute", "g")]
    assert policy_json(policy(http))["protocol"] == "detect"
