"""TLSRoute and TCPRoute on Service parents: what the policy serves for them.

SNI hostnames, weighted backends, a missing or unpermitted backend kept with a failure injector
that refuses the connection (Linkerd's InvalidBackendError: no response carries a status), the
protocol the winning kind implies, one TCPRoute per port (the oldest), and the precedence between
kinds on one port (GRPCRoute > HTTPRoute > TLSRoute > TCPRoute).
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from interlock.api.policy_json import policy_json
from interlock.api.policy_schema import OUTBOUND_POLICY_SCHEMA
from interlock.model.gateway import parse_http_route
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.outbound import MeshRoute, OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_dependencies import route_grant_namespaces, route_service_dependencies
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, parse_service
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route

VALIDATOR = Draft202012Validator(OUTBOUND_POLICY_SCHEMA)
PARENT = {"group": "core", "kind": "Service", "name": "db", "port": 5432}


def svc(name: str, port: int = 5432, namespace: str = "shop", **port_fields: Any) -> Service:
    return parse_service(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": port, **port_fields}]},
        }
    )


def meta(name: str, created: str, namespace: str = "shop") -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "creationTimestamp": created}


def tcp(name: str = "t", created: str = "2024-01-02T00:00:00Z", **spec: Any) -> Any:
    rules = spec.pop("rules", [{"backendRefs": [{"name": "db-v2", "port": 5432}]}])
    return parse_tcp_route(
        {"metadata": meta(name, created), "spec": {"parentRefs": [PARENT], "rules": rules, **spec}}
    )


def tls(name: str = "s", created: str = "2024-01-02T00:00:00Z", **spec: Any) -> Any:
    rules = spec.pop("rules", [{"backendRefs": [{"name": "db-v2", "port": 5432}]}])
    hostnames = spec.pop("hostnames", ["db.example.com", "*.db.example.com"])
    return parse_tls_route(
        {
            "metadata": meta(name, created),
            "spec": {"parentRefs": [PARENT], "hostnames": hostnames, "rules": rules, **spec},
        }
    )


def http(name: str = "h", created: str = "2024-01-03T00:00:00Z") -> Any:
    return parse_http_route(
        {"metadata": meta(name, created), "spec": {"parentRefs": [PARENT], "rules": [{}]}}
    )


def grpc(name: str = "g", created: str = "2024-01-04T00:00:00Z") -> Any:
    return parse_grpc_route(
        {"metadata": meta(name, created), "spec": {"parentRefs": [PARENT], "rules": [{}]}}
    )


def policy(
    *routes: MeshRoute, present: tuple[Service, ...] = (), parent: Service | None = None
) -> OutboundPolicy:
    parent = parent or svc("db")
    known = {s.key: s for s in (parent, *present)}
    resolved = [resolve_route(r, known, []) for r in routes]
    built = build_outbound_policy(
        known[ObjectKey(namespace="shop", name="db")], "shop", "db", 5432, "shop", resolved
    )
    VALIDATOR.validate(policy_json(built))
    return built


WEIGHTED = [
    {
        "backendRefs": [
            {"name": "db-v1", "port": 5432, "weight": 9},
            {"name": "db-v2", "port": 5432, "weight": 1},
        ]
    }
]


def test_tcp_route_serves_weighted_backends_and_refuses_connections_to_a_missing_one() -> None:
    document = policy_json(policy(tcp(rules=WEIGHTED), present=(svc("db-v1"),)))
    assert document["protocol"] == "opaque"
    (route,) = document["routes"]
    assert (route["kind"], route["name"], route["hostnames"]) == ("TCPRoute", "t", [])
    (rule,) = route["rules"]
    assert (rule["filters"], rule["distribution"]) == ([], "RandomWeighted")
    # A connection has no path: the rule takes everything (its HTTP equivalent, for a data plane
    # that only speaks HTTP).
    assert rule["matches"] == [
        {
            "path": {"type": "PathPrefix", "value": "/"},
            "headers": [],
            "queryParams": [],
            "method": None,
        }
    ]
    assert [(b["name"], b["weight"], b["exists"]) for b in rule["backends"]] == [
        ("db-v1", 9, True),
        ("db-v2", 1, False),
    ]
    assert rule["backends"][0]["failureInjector"] is None
    assert rule["backends"][1]["failureInjector"] == {
        "status": 500,
        "message": "backend Service shop/db-v2 does not exist",
        "refuseConnection": True,
    }


def test_tls_route_serves_its_sni_hostnames() -> None:
    document = policy_json(policy(tls(rules=WEIGHTED), present=(svc("db-v1"), svc("db-v2"))))
    assert document["protocol"] == "tls"
    (route,) = document["routes"]
    assert (route["kind"], route["hostnames"]) == (
        "TLSRoute",
        ["db.example.com", "*.db.example.com"],
    )
    assert all(b["exists"] for b in route["rules"][0]["backends"])


def test_an_unpermitted_backend_of_a_producer_tcp_route_is_kept_and_refused() -> None:
    route = tcp(rules=[{"backendRefs": [{"name": "db", "namespace": "other", "port": 5432}]}])
    assert route_grant_namespaces(route) == {"other"}
    assert ObjectKey(namespace="other", name="db") in route_service_dependencies(route)
    document = policy_json(policy(route, present=(svc("db", namespace="other"),)))
    (backend,) = document["routes"][0]["rules"][0]["backends"]
    assert (backend["exists"], backend["failureInjector"]["refuseConnection"]) == (False, True)
    assert "no ReferenceGrant" in backend["failureInjector"]["message"]
    assert "TCPRoutes in namespace shop" in backend["failureInjector"]["message"]


def test_one_tcp_route_per_port_the_oldest() -> None:
    older, newer = tcp("b-older", "2024-01-01T00:00:00Z"), tcp("a-newer", "2024-02-01T00:00:00Z")
    assert [r.name for r in policy(newer, older).routes] == ["b-older"]
    assert [r.name for r in policy(older, newer).routes] == ["b-older"]


def test_two_tls_routes_share_a_port_oldest_first() -> None:
    one = tls("one", "2024-01-01T00:00:00Z", hostnames=["a.example"])
    two = tls("two", "2024-01-02T00:00:00Z", hostnames=["b.example"])
    assert [r.name for r in policy(two, one).routes] == ["one", "two"]


@pytest.mark.parametrize(
    ("routes", "kind", "protocol"),
    [
        ((tcp(), tls(), http(), grpc()), "GRPCRoute", "grpc"),
        ((tcp(), tls(), http()), "HTTPRoute", "detect"),
        ((tcp(), tls()), "TLSRoute", "tls"),
        ((tcp(),), "TCPRoute", "opaque"),
        ((), "Default", "detect"),
    ],
)
def test_kind_precedence_on_one_port(
    routes: tuple[MeshRoute, ...], kind: str, protocol: str
) -> None:
    built = policy(*routes)
    assert {r.kind for r in built.routes} == {kind}
    assert built.protocol == protocol


def test_an_opaque_port_stays_opaque_whatever_routes_attach() -> None:
    opaque = svc("db", appProtocol="linkerd.io/opaque")
    assert policy(tls(), parent=opaque).protocol == "opaque"
    assert policy(grpc(), parent=opaque).protocol == "opaque"


@pytest.mark.parametrize(
    ("hostnames", "message"),
    [
        ([], "spec.hostnames: must have at least 1 item"),
        (["10.0.0.1"], "'10.0.0.1': TLSRoute hostnames cannot be IP addresses"),
        (["a.*.b"], "'a.*.b' is not a valid hostname"),
    ],
)
def test_tls_route_hostnames_are_checked_as_the_crd_does(
    hostnames: list[str], message: str
) -> None:
    with pytest.raises(InvalidObject) as caught:
        tls(hostnames=hostnames)
    assert str(caught.value).startswith("TLSRoute shop/s: spec.hostnames: ")
    assert message in str(caught.value)


def test_a_stream_route_has_exactly_one_rule_of_backends() -> None:
    with pytest.raises(InvalidObject, match=r"spec\.rules"):
        tcp(rules=[])
    with pytest.raises(InvalidObject, match=r"spec\.rules"):
        tcp(rules=WEIGHTED * 2)
    with pytest.raises(InvalidObject, match="backendRefs"):
        tcp(rules=[{"backendRefs": []}])
