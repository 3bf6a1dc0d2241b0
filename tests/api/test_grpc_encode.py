"""Each policy field in Linkerd's proxy API encoding (``interlock/api/grpc/encode.py``), from
policies the model builds out of raw objects, read back through the generated messages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from interlock.api.grpc.encode import egress_fallback, encode_policy, undefined_port
from tests.kit.grpc_policies import policy_of
from tests.kit.outbound_objects import service

GATEWAY = "gateway.networking.k8s.io"


def web(**port: Any) -> dict[str, Any]:
    raw = service("web")
    raw["spec"]["ports"][0].update(port)
    return raw


def annotated(annotations: dict[str, str], **port: Any) -> dict[str, Any]:
    raw = web(**port)
    raw["metadata"]["annotations"] = annotations
    return raw


def route(kind: str = "HTTPRoute", name: str = "r", **rule: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parentRefs": [{"group": "core", "kind": "Service", "name": "web", "port": 80}],
        "rules": [{"backendRefs": [{"name": "api", "port": 80}], **rule}],
    }
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


API = service("api")


def first_rule(policy: Any) -> Any:
    kind = policy.protocol.WhichOneof("kind")
    holder = getattr(policy.protocol, kind)
    routes = holder.http1.routes if kind == "detect" else holder.routes
    return routes[0].rules[0]


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        (web(), "detect"),
        (web(appProtocol="http"), "http1"),
        (web(appProtocol="kubernetes.io/h2c"), "http2"),
        (web(appProtocol="linkerd.io/opaque"), "opaque"),
        (annotated({"config.linkerd.io/opaque-ports": "80"}), "opaque"),
    ],
    ids=["none", "http", "h2c", "opaque-app-protocol", "opaque-ports"],
)
def test_the_protocol_follows_app_protocol_and_opaque_ports(parent, expected):
    encoded = encode_policy(policy_of(parent, routes=(route(),), services=(API,)))
    assert encoded.protocol.WhichOneof("kind") == expected
    if expected == "opaque":
        # Linkerd: an opaque port is never parsed as HTTP, whatever HTTPRoute attaches.
        [opaque] = encoded.protocol.opaque.routes
        assert opaque.metadata.default == "opaq"
    if expected == "detect":
        detect = encoded.protocol.detect
        assert detect.timeout.ToTimedelta() == timedelta(seconds=10)
        assert detect.opaque.routes[0].metadata.default == "opaq"
        assert detect.http1.routes == detect.http2.routes


def test_a_port_without_routes_gets_linkerds_default_route_to_its_service():
    encoded = encode_policy(policy_of(web()))
    resource = encoded.metadata.resource
    assert (resource.kind, resource.name, resource.port) == ("Service", "web", 80)
    [route_] = encoded.protocol.detect.http1.routes
    assert route_.metadata.default == "http"
    [rule] = route_.rules
    assert rule.matches[0].path.prefix == "/"
    [only] = rule.backends.first_available.backends
    assert only.backend.balancer.discovery.dst.path == "web.default.svc.cluster.local:80"
    assert only.backend.queue.capacity == 100


def test_a_service_that_does_not_exist_is_still_resolved_by_its_name():
    # Asked by authority before the Service exists: Linkerd's proxy resolves the name itself.
    encoded = encode_policy(policy_of(None))
    [rule] = encoded.protocol.detect.http1.routes[0].rules
    [only] = rule.backends.first_available.backends
    assert only.backend.balancer.discovery.dst.path == "web.default.svc.cluster.local:80"
    assert list(only.filters) == []


def test_route_backends_are_weighted_balancers_or_failure_injectors():
    raw = route()
    raw["spec"]["rules"][0]["backendRefs"] = [
        {"name": "api", "port": 80, "weight": 3},
        {"name": "gone", "port": 80, "weight": 1},
    ]
    encoded = encode_policy(policy_of(web(), routes=(raw,), services=(API,)))
    resource = encoded.protocol.detect.http1.routes[0].metadata.resource
    assert (resource.group, resource.kind, resource.namespace, resource.name) == (
        GATEWAY,
        "HTTPRoute",
        "default",
        "r",
    )
    api, gone = first_rule(encoded).backends.random_available.backends
    assert api.weight == 3
    assert api.backend.backend.balancer.discovery.dst.path == "api.default.svc.cluster.local:80"
    assert api.backend.backend.metadata.resource.name == "api"
    assert gone.weight == 1
    assert gone.backend.backend.metadata.default == "invalid"
    assert gone.backend.backend.WhichOneof("kind") is None
    injector = gone.backend.filters[0].failure_injector
    assert injector.status == 500
    assert "default/gone does not exist" in injector.message


def test_matches_filters_timeouts_and_retries():
    raw = route(
        matches=[
            {
                "path": {"type": "Exact", "value": "/a"},
                "headers": [{"name": "x-v", "value": "2"}],
                "queryParams": [{"type": "RegularExpression", "name": "q", "value": "[0-9]+"}],
                "method": "POST",
            }
        ],
        filters=[
            {
                "type": "RequestHeaderModifier",
                "requestHeaderModifier": {
                    "add": [{"name": "x-a", "value": "1"}],
                    "remove": ["x-r"],
                },
            },
            {"type": "URLRewrite", "urlRewrite": {"hostname": "elsewhere"}},
        ],
        timeouts={"request": "5s", "backendRequest": "1s"},
        retry={"codes": [503], "attempts": 2, "backoff": "100ms"},
    )
    raw["metadata"]["annotations"] = {"timeout.linkerd.io/idle": "30s"}
    raw["spec"]["hostnames"] = ["*.example.com", "shop.example.com"]
    encoded = encode_policy(policy_of(web(), routes=(raw,), services=(API,)))
    [host_suffix, host_exact] = encoded.protocol.detect.http1.routes[0].hosts
    assert list(host_suffix.suffix.reverse_labels) == ["com", "example"]
    assert host_exact.exact == "shop.example.com"
    rule = first_rule(encoded)
    [match] = rule.matches
    assert match.path.exact == "/a"
    assert (match.headers[0].name, match.headers[0].exact) == ("x-v", b"2")
    assert (match.query_params[0].name, match.query_params[0].regex) == ("q", "[0-9]+")
    assert match.method.registered == match.method.POST
    # URLRewrite has no filter in Linkerd's proxy API: left out (docs/policy-api.md).
    [modifier] = rule.filters
    assert modifier.request_header_modifier.add.headers[0].value == b"1"
    assert list(modifier.request_header_modifier.remove) == ["x-r"]
    assert rule.timeouts.request.ToTimedelta() == timedelta(seconds=5)
    assert rule.timeouts.idle.ToTimedelta() == timedelta(seconds=30)
    assert rule.requestTimeout.ToTimedelta() == timedelta(seconds=5)
    retry = rule.retry
    assert (retry.max_retries, retry.max_request_bytes) == (2, 64 * 1024)
    assert [(r.start, r.end) for r in retry.conditions.status_ranges] == [(503, 503)]
    assert retry.backoff.min_backoff.ToTimedelta() == timedelta(milliseconds=100)


def test_a_redirect_is_carried():
    raw = route(
        filters=[
            {
                "type": "RequestRedirect",
                "requestRedirect": {
                    "scheme": "https",
                    "hostname": "new.example.com",
                    "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"},
                    "statusCode": 301,
                },
            }
        ]
    )
    raw["spec"]["rules"][0].pop("backendRefs")
    redirect = first_rule(encode_policy(policy_of(web(), routes=(raw,)))).filters[0].redirect
    assert (redirect.host, redirect.path.prefix, redirect.status) == ("new.example.com", "/v2", 301)
    assert redirect.scheme.registered == redirect.scheme.HTTPS


def test_failure_accrual_is_consecutive_failures_with_its_backoff():
    parent = annotated(
        {
            "balancer.linkerd.io/failure-accrual": "consecutive",
            "balancer.linkerd.io/failure-accrual-consecutive-max-failures": "3",
            "balancer.linkerd.io/failure-accrual-consecutive-min-penalty": "2s",
        }
    )
    accrual = encode_policy(policy_of(parent)).protocol.detect.http1.failure_accrual
    consecutive = accrual.consecutive_failures
    assert consecutive.max_failures == 3
    assert consecutive.backoff.min_backoff.ToTimedelta() == timedelta(seconds=2)
    assert consecutive.backoff.max_backoff.ToTimedelta() == timedelta(minutes=1)


def test_grpc_routes_carry_rpc_matches_and_a_grpc_failure_for_a_missing_backend():
    raw = route(
        "GRPCRoute",
        matches=[{"method": {"service": "shop.v1.Users", "method": "Get"}}],
    )
    raw["spec"]["rules"][0]["backendRefs"].append({"name": "gone", "port": 80})
    raw["metadata"]["annotations"] = {"retry.linkerd.io/grpc": "unavailable"}
    encoded = encode_policy(policy_of(web(), routes=(raw,), services=(API,)))
    assert encoded.protocol.WhichOneof("kind") == "grpc"
    rule = encoded.protocol.grpc.routes[0].rules[0]
    assert (rule.matches[0].rpc.service, rule.matches[0].rpc.method) == ("shop.v1.Users", "Get")
    _, gone = rule.backends.random_available.backends
    # A gRPC status (UNAVAILABLE), not Linkerd's HTTP 500 in a field documented as a gRPC code.
    assert gone.backend.filters[0].failure_injector.code == 14
    assert rule.retry.conditions.unavailable and not rule.retry.conditions.internal


@pytest.mark.parametrize(("kind", "variant"), [("TLSRoute", "tls"), ("TCPRoute", "opaque")])
def test_tls_and_tcp_routes_refuse_a_missing_backend_with_an_invalid_filter(kind, variant):
    raw = route(kind)
    raw["spec"]["rules"][0]["backendRefs"].append({"name": "gone", "port": 80})
    if kind == "TLSRoute":
        raw["spec"]["hostnames"] = ["*.db.example.com"]
    encoded = encode_policy(policy_of(web(), routes=(raw,), services=(API,)))
    [route_] = getattr(encoded.protocol, variant).routes
    api, gone = route_.rules[0].backends.random_available.backends
    assert api.backend.backend.balancer.discovery.dst.path == "api.default.svc.cluster.local:80"
    assert "does not exist" in gone.backend.filters[0].invalid.message
    if kind == "TLSRoute":
        assert list(route_.snis[0].suffix.reverse_labels) == ["com", "example", "db"]


def test_answers_for_what_is_no_service_port():
    fallback = egress_fallback("2001:db8::1", 443)
    forward = fallback.protocol.detect.http1.routes[0].rules[0].backends.first_available
    assert forward.backends[0].backend.forward.addr.port == 443
    forbidden = undefined_port("default", "web", 9)
    assert forbidden.protocol.opaque.routes[0].rules[0].filters[0].HasField("forbidden")


def test_a_grpc_rule_whose_matches_the_proto_cannot_carry_is_left_out():
    # A regular-expression method match has no field: served without it, the rule would match
    # every call; it is left out instead, and the rule after it still matches its own calls.
    raw = route("GRPCRoute", matches=[{"method": {"type": "RegularExpression", "method": "Get.*"}}])
    raw["spec"]["rules"].append(
        {
            "matches": [{"method": {"service": "shop.v1.Users", "method": "List"}}],
            "backendRefs": [{"name": "api", "port": 80}],
        }
    )
    encoded = encode_policy(policy_of(web(), routes=(raw,), services=(API,)))
    [rule] = encoded.protocol.grpc.routes[0].rules
    assert rule.matches[0].rpc.method == "List"
