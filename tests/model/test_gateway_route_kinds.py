"""HTTPRoutes and GRPCRoutes sharing a hostname on one Gateway listener, decided purely."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.model.gateway import parse_http_route
from interlock.model.gateway_listeners import listener_problems, parse_gateway
from interlock.model.gateway_routes import (
    GatewayView,
    attach_routes,
    hostnames_overlap,
)
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import ObjectKey

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_hostnames_overlap_as_listeners_match_hosts() -> None:
    assert hostnames_overlap((), ("a.example",))
    assert hostnames_overlap(("a.example",), ("a.example", "b.example"))
    assert hostnames_overlap(("*.example",), ("a.example",))
    assert hostnames_overlap(("*.a.example",), ("*.example",))
    assert not hostnames_overlap(("a.example",), ("b.example",))
    assert not hostnames_overlap(("*.example",), ("example",))


def route(kind: str, name: str, age: int, hostnames: list[str]) -> Any:
    raw = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": (NOW + timedelta(seconds=age)).isoformat(),
        },
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": hostnames},
    }
    return parse_http_route(raw) if kind == "HTTPRoute" else parse_grpc_route(raw)


def accepted(routes: list[Any]) -> dict[str, str]:
    gateway = parse_gateway(
        {
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {
                "gatewayClassName": "interlock",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        }
    )
    view = GatewayView(
        gateway=gateway,
        checks=listener_problems(gateway, secrets={}, grants=()),
        address="10.0.0.1",
    )
    outcome = attach_routes(
        {gateway.key: view}, routes, services={}, grants=(), namespace_labels={}, now=NOW
    )
    found = {}
    for (kind, key), entries in outcome.parents.items():
        condition = next(c for c in entries[0]["conditions"] if c["type"] == "Accepted")
        found[f"{kind}/{key.name}"] = condition["reason"]
    assert outcome.attached[ObjectKey("default", "gw")]["http"] == sum(
        1 for reason in found.values() if reason == "Accepted"
    )
    return found


def test_the_older_kind_keeps_the_hostname_and_other_hosts_are_free() -> None:
    found = accepted(
        [
            route("GRPCRoute", "grpc", 2, ["shared.example"]),
            route("HTTPRoute", "web", 1, ["shared.example", "web.example"]),
            route("GRPCRoute", "calls", 3, ["calls.example"]),
            route("HTTPRoute", "more", 4, ["shared.example"]),
        ]
    )
    assert found == {
        "HTTPRoute/web": "Accepted",
        "GRPCRoute/grpc": "RouteReasonConflicted",
        "GRPCRoute/calls": "Accepted",
        # Of one kind, routes share a hostname as ever.
        "HTTPRoute/more": "Accepted",
    }


def test_same_age_the_first_by_name_wins() -> None:
    found = accepted(
        [route("HTTPRoute", "b", 1, ["x.example"]), route("GRPCRoute", "a", 1, ["*.example"])]
    )
    assert found == {"GRPCRoute/a": "Accepted", "HTTPRoute/b": "RouteReasonConflicted"}


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(4)))
def test_the_outcome_does_not_depend_on_the_order_routes_arrive_in(order: list[int]) -> None:
    routes = [
        route("HTTPRoute", "web", 1, ["shared.example"]),
        route("GRPCRoute", "grpc", 2, []),
        route("GRPCRoute", "calls", 3, ["calls.example"]),
        route("HTTPRoute", "late", 4, ["late.example"]),
    ]
    assert accepted([routes[i] for i in order]) == {
        "HTTPRoute/web": "Accepted",
        "GRPCRoute/grpc": "RouteReasonConflicted",
        "GRPCRoute/calls": "Accepted",
        # "grpc" (every host) is refused, so it keeps nothing off: "late" is served.
        "HTTPRoute/late": "Accepted",
    }
