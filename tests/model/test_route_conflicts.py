"""Conflicts between route kinds on one port: the status says which route lost.

A route that another route keeps off every port it attaches to gets ``Accepted: False`` with
reason ``RouteReasonConflicted`` naming the winner, exactly when the policy does not serve it:
each case checks the status against :func:`build_outbound_policy` for the same routes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.model.gateway import parse_http_route
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import ObjectKey
from interlock.model.outbound import MeshRoute, ResolvedRoute
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_kinds import kinds_that_beat
from interlock.model.route_resolution import resolve_route
from interlock.model.route_status import route_status
from interlock.model.service import Service, parse_service
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
DB = ObjectKey(namespace="shop", name="db")


def db(*ports: int, app_protocol: str | None = None) -> Service:
    """Service shop/db; every port with ``app_protocol`` when given."""
    extra = {"appProtocol": app_protocol} if app_protocol else {}
    return parse_service(
        {
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"ports": [{"port": p, "name": f"p{p}", **extra} for p in ports]},
        }
    )


def route(
    kind: str,
    name: str,
    *,
    created: str = "2024-01-01T00:00:00Z",
    namespace: str = "shop",
    port: int | None = 5432,
) -> MeshRoute:
    parent: dict[str, Any] = {"group": "core", "kind": "Service", "name": "db", "namespace": "shop"}
    if port is not None:
        parent["port"] = port
    spec: dict[str, Any] = {
        "parentRefs": [parent],
        "rules": [{"backendRefs": [{"name": "db", "namespace": "shop", "port": 5432}]}],
    }
    if kind == "TLSRoute":
        spec["hostnames"] = ["db.example.com"]
    parse = {
        "HTTPRoute": parse_http_route,
        "GRPCRoute": parse_grpc_route,
        "TLSRoute": parse_tls_route,
        "TCPRoute": parse_tcp_route,
    }[kind]
    return parse(
        {
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
            "spec": spec,
        }
    )


def accepted(subject: MeshRoute, others: list[MeshRoute], service: Service) -> tuple[str, str, str]:
    services = {DB: service}
    resolved = {r.metadata.name: resolve_route(r, services, []) for r in [subject, *others]}
    mine: ResolvedRoute = resolved[subject.metadata.name]
    competitors = [r.attachment for name, r in resolved.items() if name != subject.metadata.name]
    entries = route_status(subject, mine, services, now=NOW, competitors={DB: competitors})
    (condition,) = [c for c in entries[0]["conditions"] if c["type"] == "Accepted"]
    return condition["status"], condition["reason"], condition["message"]


def served_names(routes: list[MeshRoute], service: Service, client: str = "shop") -> set[str]:
    services = {DB: service}
    names: set[str] = set()
    for port in service.spec.ports:
        policy = build_outbound_policy(
            service,
            "shop",
            "db",
            port.port,
            client,
            [resolve_route(r, services, []) for r in routes],
        )
        names |= {r.name for r in policy.routes}
    return names


KINDS = ["GRPCRoute", "HTTPRoute", "TLSRoute", "TCPRoute"]


@pytest.mark.parametrize("winner", KINDS)
@pytest.mark.parametrize("loser", KINDS)
def test_the_kind_earlier_in_the_precedence_wins(winner: str, loser: str) -> None:
    if winner == loser:
        return
    first, second = route(winner, "w"), route(loser, "l")
    if KINDS.index(winner) > KINDS.index(loser):
        first, second = second, first
    status, reason, message = accepted(second, [first], db(5432))
    assert (status, reason) == ("False", "RouteReasonConflicted")
    assert message.startswith(
        f"conflicts with {first.__class__.__name__} shop/{first.metadata.name} on Service "
        "shop/db port 5432, which is served instead (route kinds take a port in the order "
        "GRPCRoute > HTTPRoute > TLSRoute > TCPRoute)"
    )
    assert accepted(first, [second], db(5432))[:2] == ("True", "Accepted")
    assert served_names([first, second], db(5432)) == {first.metadata.name}


def test_a_port_serves_the_oldest_tcp_route() -> None:
    older = route("TCPRoute", "b", created="2024-01-01T00:00:00Z")
    newer = route("TCPRoute", "a", created="2024-02-01T00:00:00Z")
    status, reason, message = accepted(newer, [older], db(5432))
    assert (status, reason) == ("False", "RouteReasonConflicted")
    assert "TCPRoute shop/b" in message and "a port serves one TCPRoute, the oldest" in message
    assert accepted(older, [newer], db(5432))[0] == "True"
    assert served_names([older, newer], db(5432)) == {"b"}


def test_routes_of_one_kind_that_select_do_not_conflict() -> None:
    one, two = route("TLSRoute", "one"), route("TLSRoute", "two", created="2024-03-01T00:00:00Z")
    assert accepted(two, [one], db(5432))[0] == "True"
    assert served_names([one, two], db(5432)) == {"one", "two"}


def test_a_route_that_keeps_one_of_its_ports_is_not_conflicted() -> None:
    # The TCPRoute names no port (it attaches to both); the GRPCRoute takes 5432 only.
    tcp, grpc = route("TCPRoute", "t", port=None), route("GRPCRoute", "g", port=5432)
    assert accepted(tcp, [grpc], db(5432, 5433))[0] == "True"
    assert served_names([tcp, grpc], db(5432, 5433)) == {"t", "g"}
    # Without 5433 it loses its last port.
    status, _, message = accepted(tcp, [grpc], db(5432))
    assert status == "False" and "port 5432" in message


def test_a_consumer_route_takes_a_port_only_for_its_own_namespace() -> None:
    consumer_grpc = route("GRPCRoute", "g", namespace="client")
    producer_http = route("HTTPRoute", "h")
    # The producer route still serves every other namespace: not conflicted.
    assert accepted(producer_http, [consumer_grpc], db(5432))[0] == "True"
    assert served_names([consumer_grpc, producer_http], db(5432), client="other") == {"h"}
    assert served_names([consumer_grpc, producer_http], db(5432), client="client") == {"g"}
    # A namespace with consumer routes for the port uses only those (GEP-1294): a producer
    # route of a stronger kind does not take the port from them there.
    producer_grpc, consumer_http = (
        route("GRPCRoute", "g"),
        route("HTTPRoute", "h", namespace="client"),
    )
    assert accepted(consumer_http, [producer_grpc], db(5432))[0] == "True"
    assert served_names([producer_grpc, consumer_http], db(5432), client="client") == {"h"}


def test_a_parent_that_cannot_take_routes_says_so_rather_than_conflict() -> None:
    http, grpc = route("HTTPRoute", "h", port=9999), route("GRPCRoute", "g", port=None)
    status, reason, _ = accepted(http, [grpc], db(5432))
    assert (status, reason) == ("False", "NoMatchingParent")


def test_a_route_reads_only_the_kinds_that_can_beat_it() -> None:
    assert kinds_that_beat("GRPCRoute") == ()
    assert kinds_that_beat("HTTPRoute") == ("GRPCRoute",)
    assert kinds_that_beat("TLSRoute") == ("GRPCRoute", "HTTPRoute")
    assert kinds_that_beat("TCPRoute") == ("GRPCRoute", "HTTPRoute", "TLSRoute", "TCPRoute")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.integers(min_value=1, max_value=4),  # day of creation: ties happen
            st.sampled_from(["shop", "client"]),
            st.sampled_from([5432, None]),
        ),
        min_size=1,
        max_size=6,
    ),
    st.randoms(use_true_random=False),
    st.sampled_from([None, "linkerd.io/opaque", "http", "kubernetes.io/h2c"]),
)
def test_status_says_conflicted_exactly_when_the_policy_does_not_serve_the_route(
    specs: list[tuple[str, int, str, int | None]], rng: Any, app_protocol: str | None
) -> None:
    routes = [
        route(kind, f"r{i}", created=f"2024-01-0{day}T00:00:00Z", namespace=ns, port=port)
        for i, (kind, day, ns, port) in enumerate(specs)
    ]
    service = db(5432, app_protocol=app_protocol)
    shuffled = routes[:]
    rng.shuffle(shuffled)
    for client in ("shop", "client"):
        assert served_names(routes, service, client) == served_names(shuffled, service, client)
    for subject in routes:
        others = [r for r in routes if r is not subject]
        conflicted = accepted(subject, others, service)[1] == "RouteReasonConflicted"
        # The clients the route applies to: everyone (producer) or its own namespace (consumer).
        clients = ("shop", "client") if subject.metadata.namespace == "shop" else ("client",)
        served = any(subject.metadata.name in served_names(routes, service, c) for c in clients)
        assert conflicted == (not served), subject.metadata.name


def test_an_opaque_port_serves_its_tcp_route_and_says_why_the_others_are_not():
    opaque = db(5432, app_protocol="linkerd.io/opaque")
    http, tcp = route("HTTPRoute", "h"), route("TCPRoute", "t", created="2024-02-01T00:00:00Z")
    # Linkerd's proxies never parse an opaque port's traffic: no HTTP route applies there.
    assert served_names([http, tcp], opaque) == {"t"}
    status, reason, message = accepted(http, [tcp], opaque)
    assert (status, reason) == ("False", "RouteReasonConflicted")
    assert "port 5432 is opaque" in message and "only TCPRoutes are served" in message
    assert accepted(tcp, [http], opaque)[0] == "True"
    # Alone, the HTTPRoute is still not served: the port's Default route is.
    assert "h" not in served_names([http], opaque)
    assert accepted(http, [], opaque)[1] == "RouteReasonConflicted"


def test_an_http1_port_serves_http_routes_not_grpc_routes():
    # Linkerd: appProtocol http is HTTP/1, which carries no gRPC; the HTTPRoute is served even
    # though a GRPCRoute would win a port of unknown protocol.
    http1 = db(5432, app_protocol="http")
    http, grpc = route("HTTPRoute", "h"), route("GRPCRoute", "g")
    assert served_names([http, grpc], http1) == {"h"}
    assert accepted(http, [grpc], http1)[0] == "True"
    status, reason, message = accepted(grpc, [http], http1)
    assert (status, reason) == ("False", "RouteReasonConflicted")
    assert "is HTTP/1 (appProtocol http)" in message
    # On HTTP/2 (h2c) both kinds can be served: the GRPCRoute wins, as on a detect port.
    h2c = db(5432, app_protocol="kubernetes.io/h2c")
    assert served_names([http, grpc], h2c) == {"g"}
