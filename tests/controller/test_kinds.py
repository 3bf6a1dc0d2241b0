"""The kinds table: every kind a running controller watches has a row, and the router tells each
change to the receivers of the halves that run — no more, no fewer."""

from __future__ import annotations

from interlock.actors.edge_messages import ENDPOINTS_DIRECTORY, INGRESS_DIRECTORY
from interlock.actors.gateway_messages import GATEWAY_CONTROLLER
from interlock.controller.kinds import KINDS, ROUTER, Half, rows_for, watched
from interlock.kube import resources

WATCHED = {
    value.kind
    for value in vars(resources).values()
    if isinstance(value, resources.Resource) and value.kind not in ("Event", "Lease")
}
"""Every kind interlock has a resource for, less the two it writes and never routes."""


def test_every_watched_kind_has_a_row_and_every_row_a_parser_or_a_reason() -> None:
    assert {row.kind for row in KINDS} == WATCHED
    assert all(row.parser is not None or row.kind == "Namespace" for row in KINDS)


def test_the_outbound_core_alone_routes_only_what_the_router_parses() -> None:
    rows = rows_for(frozenset({"outbound"}))
    assert {row.receiver for row in rows} == {ROUTER}
    assert {row.kind for row in rows} >= {"Service", "HTTPRoute", "ReferenceGrant"}


def test_endpoint_slices_have_one_receiver_whichever_halves_run() -> None:
    choices: list[frozenset[Half]] = [
        frozenset({"outbound", "edge"}),
        frozenset({"outbound", "mesh"}),
        frozenset({"outbound", "edge", "mesh"}),
    ]
    for halves in choices:
        slices = [row for row in rows_for(halves) if row.kind == "EndpointSlice"]
        assert [row.receiver for row in slices] == [ENDPOINTS_DIRECTORY], halves


def test_a_kind_read_by_two_halves_has_a_row_for_each() -> None:
    rows = rows_for(frozenset({"outbound", "edge", "gateway"}))
    routes = [(row.receiver, row.follows) for row in rows if row.kind == "HTTPRoute"]
    assert routes == [(ROUTER, False), (GATEWAY_CONTROLLER, True)]
    assert [row.receiver for row in rows if row.kind == "Ingress"] == [INGRESS_DIRECTORY]


def test_one_informer_a_kind_whichever_halves_read_it() -> None:
    every: frozenset[Half] = frozenset({"outbound", "edge", "mesh", "gateway"})
    kinds = watched(every)
    assert set(kinds) == WATCHED
    for kind, rows in kinds.items():
        assert {row.resources for row in rows} == {rows[0].resources}, kind
        assert all(resource.kind == kind for resource in rows[0].resources), kind
    assert [row.half for row in kinds["HTTPRoute"]] == ["outbound", "gateway"]


def test_the_outbound_core_alone_watches_no_edge_or_gateway_kind() -> None:
    kinds = watched(frozenset({"outbound"}))
    assert set(kinds) == {
        "Service",
        "Namespace",
        "ReferenceGrant",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
    }
    mesh = watched(frozenset({"outbound", "mesh"}))
    assert set(mesh) - set(kinds) == {"EndpointSlice"}
