"""An outbound policy pushed to an edge worker comes back equal, whatever it holds."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from interlock.model.backend_tls import BackendTLS
from interlock.model.outbound import OutboundPolicy
from interlock.model.policy_codec import decode_policy, encode_policy
from tests.kit.grpc_policies import policy_of

SERVICE_ANNOTATIONS = {
    "retry.linkerd.io/http": "5xx",
    "retry.linkerd.io/limit": "2",
    "timeout.linkerd.io/request": "3s",
    "balancer.linkerd.io/failure-accrual": "consecutive",
    "balancer.linkerd.io/failure-accrual-consecutive-max-failures": "4",
    "balancer.linkerd.io/failure-accrual-consecutive-min-penalty": "1500ms",
}


def service(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }


def http_route() -> dict[str, Any]:
    return {
        "kind": "HTTPRoute",
        "metadata": {
            "name": "split",
            "namespace": "default",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"timeout.linkerd.io/response": "2s"},
        },
        "spec": {
            "parentRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80}],
            "rules": [
                {
                    "matches": [
                        {
                            "path": {"type": "PathPrefix", "value": "/api"},
                            "headers": [{"name": "x-canary", "value": "yes"}],
                            "queryParams": [{"name": "v", "value": "2"}],
                            "method": "GET",
                        }
                    ],
                    "filters": [
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"set": [{"name": "x-a", "value": "b"}]},
                        },
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        },
                    ],
                    "timeouts": {"request": "5s", "backendRequest": "1s"},
                    "retry": {"codes": [503], "attempts": 3, "backoff": "100ms"},
                    "backendRefs": [
                        {"name": "blue", "port": 80, "weight": 3},
                        {"name": "ghost", "port": 80, "weight": 1},
                        {
                            "name": "green",
                            "port": 80,
                            "weight": 0,
                            "filters": [
                                {
                                    "type": "ResponseHeaderModifier",
                                    "responseHeaderModifier": {"remove": ["server"]},
                                }
                            ],
                        },
                    ],
                },
                {"backendRefs": [{"name": "blue", "port": 80}]},
            ],
        },
    }


def grpc_route() -> dict[str, Any]:
    return {
        "kind": "GRPCRoute",
        "metadata": {"name": "calls", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80}],
            "rules": [
                {
                    "matches": [{"method": {"service": "shop.Cart", "method": "Add"}}],
                    "backendRefs": [{"name": "blue", "port": 80}],
                }
            ],
        },
    }


def pushed(policy: OutboundPolicy) -> OutboundPolicy:
    """Through the wire: JSON text, as the admin API carries it."""
    return decode_policy(json.loads(json.dumps(encode_policy(policy))))


@pytest.mark.parametrize(
    "policy",
    [
        policy_of(
            service("web", SERVICE_ANNOTATIONS),
            routes=(http_route(),),
            services=(service("blue"), service("green")),
        ),
        policy_of(service("web"), routes=(grpc_route(),), services=(service("blue"),)),
        policy_of(service("web")),
        policy_of(None),
    ],
    ids=["http-split", "grpc", "default", "missing-service"],
)
def test_a_policy_comes_back_equal(policy: OutboundPolicy) -> None:
    assert pushed(policy) == policy


def test_the_split_policy_holds_what_only_a_data_plane_reads() -> None:
    policy = policy_of(
        service("web", SERVICE_ANNOTATIONS),
        routes=(http_route(),),
        services=(service("blue"), service("green")),
    )
    back = pushed(policy)
    rule = back.routes[0].rules[0]
    assert [b.weight for b in rule.backends] == [3, 1, 0]
    assert [b.exists for b in rule.backends] == [True, False, True]
    assert rule.backends[1].failure_injector is not None
    assert rule.annotated_retry is not None and rule.annotated_timeouts
    assert back.failure_accrual is not None and back.failure_accrual.max_failures == 4
    assert back.routes[0].creation_timestamp == policy.routes[0].creation_timestamp


def test_a_gateway_backend_s_tls_settings_are_never_written() -> None:
    policy = policy_of(service("web"))
    rule = policy.routes[0].rules[0]
    tls = BackendTLS(hostname="web.example", ca_bundle=None)
    backend = replace(rule.backends[0], tls=tls)
    with_tls = replace(
        policy,
        routes=(replace(policy.routes[0], rules=(replace(rule, backends=(backend,)),)),),
    )
    with pytest.raises(TypeError, match="BackendTLS"):
        encode_policy(with_tls)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"$": "os.system", "command": "true"}, "unknown type 'os.system'"),
        ({"$": "Backend", "kind": "Service"}, "Backend cannot be read"),
        ({"$": "StatusRange", "min": 500, "max": 599}, "an OutboundPolicy object is required"),
        ([1, 2], "an OutboundPolicy object is required"),
    ],
)
def test_only_the_policy_s_own_types_are_read_back(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_policy(data)
