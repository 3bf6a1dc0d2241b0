"""decide_tunnel(): where a CONNECT tunnel goes by its Service port's policy — a TCPRoute's
backends by weight, a TLSRoute by the server name, the Default route to the Service, HTTP
routes refused, a backend that cannot be used answered."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from interlock.dataplane import Answer, Forward, compile_policy
from interlock.dataplane.answers import BACKEND_NOT_FOUND, NO_SNI_MATCH, NOT_A_TUNNEL
from interlock.dataplane.tunnel_plan import decide_tunnel, hostname_rank, needs_server_name
from interlock.model.gateway import parse_http_route
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import parse_service
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route

PARENT = {"group": "core", "kind": "Service", "name": "db", "port": 5432}
SERVICES = ("db", "v1", "v2")


def route(kind: str, name: str, backends: dict[str, int], **spec: Any) -> Any:
    parse = {"TCPRoute": parse_tcp_route, "TLSRoute": parse_tls_route}[kind]
    refs = [{"name": b, "port": 5432, "weight": w} for b, w in backends.items()]
    return parse(
        {
            "metadata": {
                "name": name,
                "namespace": "shop",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"parentRefs": [PARENT], "rules": [{"backendRefs": refs}], **spec},
        }
    )


def policy(*routes: Any) -> OutboundPolicy:
    known = {
        s.key: s
        for s in (
            parse_service(
                {
                    "metadata": {"name": n, "namespace": "shop"},
                    "spec": {"ports": [{"port": 5432}]},
                }
            )
            for n in SERVICES
        )
    }
    db = next(s for s in known.values() if s.key.name == "db")
    resolved = [resolve_route(r, known, []) for r in routes]
    return build_outbound_policy(db, "shop", "db", 5432, "shop", resolved)


def to(decided: Forward | Answer) -> str:
    assert isinstance(decided, Forward), decided
    return decided.target.name


def test_a_tcp_route_splits_by_weight() -> None:
    plan = compile_policy(policy(route("TCPRoute", "t", {"v1": 1, "v2": 3})))
    assert not needs_server_name(plan.policy)
    chosen = Counter(
        to(decide_tunnel(plan, server_name=None, rng_value=i / 100)) for i in range(100)
    )
    assert chosen == {"v1": 25, "v2": 75}


def test_a_backend_that_cannot_be_used_answers_its_injector() -> None:
    plan = compile_policy(policy(route("TCPRoute", "t", {"missing": 1})))
    decided = decide_tunnel(plan, server_name=None, rng_value=0.5)
    assert isinstance(decided, Answer)
    assert (decided.status, decided.reason) == (500, BACKEND_NOT_FOUND)
    assert "shop/missing" in decided.detail


def test_tls_routes_by_server_name_exact_before_wildcard() -> None:
    plan = compile_policy(
        policy(
            route("TLSRoute", "wild", {"v2": 1}, hostnames=["*.example.com"]),
            route("TLSRoute", "exact", {"v1": 1}, hostnames=["db.example.com"]),
        )
    )
    assert needs_server_name(plan.policy)
    assert to(decide_tunnel(plan, server_name="db.example.com", rng_value=0.1)) == "v1"
    assert to(decide_tunnel(plan, server_name="a.b.example.com", rng_value=0.1)) == "v2"
    for unmatched in ("example.com", "db.example.org", None):
        decided = decide_tunnel(plan, server_name=unmatched, rng_value=0.1)
        assert isinstance(decided, Answer)
        assert decided.reason == NO_SNI_MATCH


def test_the_default_route_goes_to_the_service_and_http_routes_refuse() -> None:
    assert to(decide_tunnel(compile_policy(policy()), server_name=None, rng_value=0.5)) == "db"
    http = parse_http_route(
        {
            "metadata": {"name": "h", "namespace": "shop"},
            "spec": {"parentRefs": [PARENT], "rules": [{}]},
        }
    )
    decided = decide_tunnel(compile_policy(policy(http)), server_name=None, rng_value=0.5)
    assert isinstance(decided, Answer)
    assert (decided.status, decided.reason) == (405, NOT_A_TUNNEL)


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("db.example.com", "db.example.com", True),
        ("DB.example.com.", "db.example.com", True),
        ("db.example.com", "x.db.example.com", False),
        ("*.example.com", "db.example.com", True),
        ("*.example.com", "a.b.example.com", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "badexample.com", False),
    ],
)
def test_hostname_matching(pattern: str, name: str, matches: bool) -> None:
    assert (hostname_rank(pattern, name) is not None) is matches
