"""The Gateway rows' route parsers: a route naming a Gateway is parsed with interlock's filters
taken out, one that does not parse becomes a RejectedRoute (its Gateways report why), and one
naming no Gateway is none of theirs."""

from __future__ import annotations

from typing import Any

from interlock.actors.messages import ObjectChanged
from interlock.actors.router import parse_change
from interlock.controller.kinds import KINDS
from interlock.model.gateway import HTTPRoute
from interlock.model.gateway_route_input import (
    GatewayRouteInput,
    read_gateway_grpc_route,
    read_gateway_http_route,
)
from interlock.model.gateway_routes import RejectedRoute
from interlock.model.meta import ObjectKey, namespace_labels


def _route(kind: str, parent: dict[str, Any], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": {"namespace": "team", "name": "web", "generation": 3},
        "spec": {"parentRefs": [parent], "rules": rules},
        "status": {"parents": [{"parentRef": parent, "controllerName": "else.example/x"}]},
    }


GATEWAY = {"name": "public"}
BACKEND = {"backendRefs": [{"name": "web", "port": 80}]}


def test_module_set_filters_are_taken_out_before_the_route_is_parsed() -> None:
    modules = {
        "type": "ExtensionRef",
        "extensionRef": {"group": "interlock.dev", "kind": "ModuleSet", "name": "office-only"},
    }
    read = read_gateway_http_route(
        _route("HTTPRoute", GATEWAY, [{**BACKEND, "filters": [modules]}])
    )
    assert isinstance(read.route, HTTPRoute)
    assert read.module_names == {0: ("office-only",)}
    assert read.mirror_filters == {}


def test_a_route_that_does_not_parse_is_rejected_with_why_not_dropped() -> None:
    raw = _route("HTTPRoute", GATEWAY, [{**BACKEND, "filters": [{"type": "Unknown"}]}])
    read = read_gateway_http_route(raw)
    assert isinstance(read.route, RejectedRoute)
    assert read.route.key == ObjectKey(namespace="team", name="web")
    assert read.route.generation == 3
    assert [ref.name for ref in read.route.parent_refs] == ["public"]
    assert "filters" in read.route.message
    assert read.route.stored_parents == tuple(raw["status"]["parents"])
    grpc = read_gateway_grpc_route(_route("GRPCRoute", GATEWAY, [{"matches": "no list"}]))
    assert isinstance(grpc.route, RejectedRoute)
    assert grpc.route.kind == "GRPCRoute"


def test_a_route_naming_no_gateway_is_none_of_the_gateways() -> None:
    service = {"group": "", "kind": "Service", "name": "web"}
    assert read_gateway_http_route(_route("HTTPRoute", service, [BACKEND])).route is None
    listener_set = {"kind": "ListenerSet", "name": "extra"}
    assert read_gateway_http_route(_route("HTTPRoute", listener_set, [BACKEND])).route is not None


def test_the_gateway_row_hands_an_unparsable_route_on_as_a_rejection() -> None:
    (row,) = (r for r in KINDS if r.kind == "HTTPRoute" and r.half == "gateway")
    assert row.parser is not None
    raw = _route("HTTPRoute", GATEWAY, [{**BACKEND, "filters": [{"type": "Unknown"}]}])
    told = parse_change(ObjectChanged.of(raw), row.parser)
    assert isinstance(told.value, GatewayRouteInput)
    assert isinstance(told.value.route, RejectedRoute)


def test_namespace_labels_never_fail() -> None:
    assert namespace_labels({"metadata": {"name": "a", "labels": {"env": "prod"}}}) == {
        "env": "prod"
    }
    assert namespace_labels({"metadata": {"name": "a"}}) == {}
    assert namespace_labels({}) == {}
