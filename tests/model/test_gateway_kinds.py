"""Gateway API v1.6.1 parsers: GRPCRoute, TLSRoute, TCPRoute, and the HTTPRoute fields added.

A valid object parses with every field kept; an invalid one is refused naming the field as the
CRD (or its CEL rule) would; a valid feature interlock does not implement is refused saying so.
"""

from __future__ import annotations

from typing import Any

import pytest

from interlock.model.gateway import parse_http_route
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import InvalidObject
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route

META = {"name": "r", "namespace": "shop"}
WEB = {"group": "core", "kind": "Service", "name": "web", "port": 50051}


def obj(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": META,
        "spec": spec,
    }


FULL_GRPC = {
    "parentRefs": [WEB],
    "hostnames": ["grpc.shop"],
    "rules": [
        {
            "name": "get-user",
            "matches": [
                {
                    "method": {"service": "shop.v1.Users", "method": "Get"},
                    "headers": [{"name": "x-tenant", "value": "a"}],
                },
                {"method": {"type": "RegularExpression", "service": "shop\\..*"}},
            ],
            "filters": [
                {
                    "type": "RequestHeaderModifier",
                    "requestHeaderModifier": {"set": [{"name": "x-route", "value": "grpc"}]},
                }
            ],
            "backendRefs": [
                {"name": "users-v1", "port": 50051, "weight": 90},
                {
                    "name": "users-v2",
                    "port": 50051,
                    "weight": 10,
                    "filters": [
                        {
                            "type": "ResponseHeaderModifier",
                            "responseHeaderModifier": {"remove": ["x-internal"]},
                        }
                    ],
                },
            ],
        }
    ],
}


def test_full_grpc_route_is_read() -> None:
    route = parse_grpc_route(obj("GRPCRoute", FULL_GRPC))
    (rule,) = route.spec.rules
    assert rule.name == "get-user"
    first, second = rule.matches
    assert first.method is not None
    assert (first.method.type, first.method.service, first.method.method) == (
        "Exact",
        "shop.v1.Users",
        "Get",
    )
    assert [h.name for h in first.headers] == ["x-tenant"]
    assert second.method is not None and second.method.type == "RegularExpression"
    assert [b.weight for b in rule.backend_refs] == [90, 10]
    assert rule.backend_refs[1].filters[0].type == "ResponseHeaderModifier"
    assert route.spec.parent_refs[0].is_service


def _grpc_rule(rule: dict[str, Any]) -> dict[str, Any]:
    return obj("GRPCRoute", {"parentRefs": [WEB], "rules": [rule]})


@pytest.mark.parametrize(
    ("rule", "field", "reason"),
    [
        pytest.param(
            {"matches": [{"method": {"type": "Exact"}}]},
            "spec.rules[0].matches[0].method",
            "one or both of 'service' or 'method' must be specified",
            id="method-match-empty",
        ),
        pytest.param(
            {"matches": [{"method": {"service": "shop/Users"}}]},
            "spec.rules[0].matches[0].method",
            "is not a gRPC service name",
            id="bad-service-name",
        ),
        pytest.param(
            {"matches": [{"method": {"type": "RegularExpression", "method": "("}}]},
            "spec.rules[0].matches[0].method",
            "invalid regular expression",
            id="bad-regex",
        ),
        pytest.param(
            {
                "filters": [
                    {
                        "type": "RequestMirror",
                        "requestMirror": {"backendRef": {"name": "shadow", "port": 1}},
                    }
                ]
            },
            "spec.rules[0].filters[0]",
            "filter type RequestMirror is valid but not implemented by interlock; supported: "
            "RequestHeaderModifier, ResponseHeaderModifier",
            id="mirror-unimplemented",
        ),
        pytest.param(
            {"filters": [{"type": "RequestRedirect"}]},
            "spec.rules[0].filters[0].type",
            "must be 'ResponseHeaderModifier'",
            id="http-only-filter",
        ),
        pytest.param(
            {
                "filters": [
                    {
                        "type": "RequestHeaderModifier",
                        "requestHeaderModifier": {"remove": ["a"]},
                        "responseHeaderModifier": {"remove": ["b"]},
                    }
                ]
            },
            "spec.rules[0].filters[0]",
            "responseHeaderModifier must not be set unless the filter type is "
            "ResponseHeaderModifier",
            id="two-configs",
        ),
        pytest.param(
            {"sessionPersistence": {"sessionName": "s"}},
            "spec.rules[0].sessionPersistence",
            "sessionPersistence is valid but not implemented by interlock",
            id="session-persistence",
        ),
    ],
)
def test_grpc_route_errors_name_the_field(rule: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_grpc_route(_grpc_rule(rule))
    assert caught.value.field == field
    assert reason in caught.value.reason


def test_tls_route_needs_hostnames_that_are_names() -> None:
    good = {
        "parentRefs": [WEB],
        "hostnames": ["*.shop.example", "db.shop"],
        "rules": [{"name": "tls", "backendRefs": [{"name": "db", "port": 5432, "weight": 3}]}],
    }
    route = parse_tls_route(obj("TLSRoute", good))
    assert route.spec.hostnames == ("*.shop.example", "db.shop")
    assert route.spec.rules[0].backend_refs[0].weight == 3
    for hostnames, reason in (
        ([], "must have at least 1 item"),
        (["10.0.0.1"], "cannot be IP addresses"),
    ):
        with pytest.raises(InvalidObject) as caught:
            parse_tls_route(obj("TLSRoute", {**good, "hostnames": hostnames}))
        assert caught.value.field == "spec.hostnames"
        assert reason in caught.value.reason


def test_tcp_route_has_exactly_one_rule_with_backends() -> None:
    rule = {"backendRefs": [{"name": "db", "port": 5432}]}
    route = parse_tcp_route(obj("TCPRoute", {"parentRefs": [WEB], "rules": [rule]}))
    assert route.spec.rules[0].backend_refs[0].name == "db"
    for rules, field in (
        ([rule, rule], "spec.rules"),
        ([{"backendRefs": []}], "spec.rules[0].backendRefs"),
    ):
        with pytest.raises(InvalidObject) as caught:
            parse_tcp_route(obj("TCPRoute", {"parentRefs": [WEB], "rules": rules}))
        assert caught.value.field == field


def _http(spec: dict[str, Any]) -> dict[str, Any]:
    return obj("HTTPRoute", {"parentRefs": [WEB], **spec})


def test_http_route_retry_and_cors_are_read() -> None:
    cors = {
        "allowOrigins": ["https://shop.example"],
        "allowMethods": ["GET", "POST"],
        "allowHeaders": ["x-token"],
        "allowCredentials": True,
        "maxAge": 60,
    }
    route = parse_http_route(
        _http(
            {
                "rules": [
                    {
                        "retry": {"codes": [503, 504], "attempts": 3, "backoff": "100ms"},
                        "filters": [{"type": "CORS", "cors": cors}],
                    }
                ]
            }
        )
    )
    (rule,) = route.spec.rules
    assert rule.retry is not None
    assert (rule.retry.codes, rule.retry.attempts, rule.retry.backoff) == ((503, 504), 3, "100ms")
    assert rule.filters[0].cors is not None
    assert rule.filters[0].cors.max_age == 60


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        pytest.param(
            {"rules": [{"retry": {"codes": [302]}}]},
            "spec.rules[0].retry.codes",
            "retry code 302 must be in 400..599",
            id="retry-code",
        ),
        pytest.param(
            {"rules": [{"retry": {"backoff": "soon"}}]},
            "spec.rules[0].retry.backoff",
            "invalid duration 'soon'",
            id="retry-backoff",
        ),
        pytest.param(
            {"rules": [{"name": "Not_A_Name"}]},
            "spec.rules[0].name",
            "must match the pattern",
            id="rule-name",
        ),
        pytest.param(
            {"rules": [{"matches": [{"path": {"value": "/a b"}}]}]},
            "spec.rules[0].matches[0].path",
            "holds characters a URL path cannot hold",
            id="path-characters",
        ),
        # A trailing newline: `^…$` with re.match accepted it (`$` matches before a final \n).
        pytest.param(
            {"rules": [{"matches": [{"path": {"value": "/a\n"}}]}]},
            "spec.rules[0].matches[0].path",
            "holds characters a URL path cannot hold",
            id="path-trailing-newline",
        ),
        pytest.param(
            {"hostnames": ["a.example\n"]},
            "spec.hostnames",
            "is not a valid hostname",
            id="hostname-trailing-newline",
        ),
        pytest.param(
            {
                "rules": [
                    {
                        "filters": [
                            {
                                "type": "RequestHeaderModifier",
                                "requestHeaderModifier": {"set": [{"name": "X-A\n", "value": "v"}]},
                            }
                        ]
                    }
                ]
            },
            "spec.rules[0].filters[0].requestHeaderModifier.set[0].name",
            "is not a valid HTTP header name",
            id="header-name-trailing-newline",
        ),
        pytest.param(
            {"rules": [{"matches": [{"path": {"value": "/"}}] * 64}] * 2},
            "spec.rules",
            "fewer than 128 matches",
            id="too-many-matches",
        ),
        pytest.param(
            {"parentRefs": [WEB, {**WEB, "port": 80}]},
            "spec.parentRefs",
            "sectionName must be specified",
            id="same-parent-twice",
        ),
        pytest.param(
            {
                "rules": [
                    {"filters": [{"type": "CORS", "cors": {"allowOrigins": ["*", "https://a"]}}]}
                ]
            },
            "spec.rules[0].filters[0].cors.allowOrigins",
            "cannot contain '*' alongside other values",
            id="cors-wildcard",
        ),
    ],
)
def test_http_route_v161_checks(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_http_route(_http(spec))
    assert caught.value.field == field
    assert reason in caught.value.reason
