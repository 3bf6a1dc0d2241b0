"""TLS listeners in Passthrough mode and TLSRoutes on them, decided purely."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from interlock.dataplane.plan import Forward, compile_policy
from interlock.dataplane.tunnel_plan import decide_tunnel
from interlock.model.gateway import parse_http_route
from interlock.model.gateway_listeners import listener_problems, parse_gateway
from interlock.model.gateway_routes import GatewayView, RoutesOutcome, attach_routes
from interlock.model.meta import ObjectKey
from interlock.model.service import parse_service
from interlock.model.stream_routes import parse_tls_route

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GATEWAY = parse_gateway(
    {
        "metadata": {"name": "gw", "namespace": "default", "generation": 2},
        "spec": {
            "gatewayClassName": "interlock",
            "listeners": [
                {
                    "name": "tls",
                    "port": 443,
                    "protocol": "TLS",
                    "hostname": "*.example",
                    "tls": {"mode": "Passthrough"},
                },
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {
                    "name": "terminate",
                    "port": 8443,
                    "protocol": "TLS",
                    "tls": {"mode": "Terminate", "certificateRefs": [{"name": "cert"}]},
                },
                {
                    "name": "http-kinds",
                    "port": 9443,
                    "protocol": "TLS",
                    "tls": {"mode": "Passthrough"},
                    "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]},
                },
            ],
        },
    }
)
SERVICES = {
    ObjectKey("default", name): parse_service(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"name": "tls", "port": 8443}]},
        }
    )
    for name in ("db", "wild")
}


def tls_route(name: str, hostnames: list[str], backend: str, **ref: Any) -> Any:
    return parse_tls_route(
        {
            "metadata": {"name": name, "namespace": "default", "generation": 1},
            "spec": {
                "parentRefs": [{"name": "gw", **ref}],
                "hostnames": hostnames,
                "rules": [{"backendRefs": [{"name": backend, "port": 8443}]}],
            },
        }
    )


def attach(routes: list[Any]) -> RoutesOutcome:
    view = GatewayView(
        gateway=GATEWAY,
        checks=listener_problems(GATEWAY, secrets={}, grants=()),
        address="10.0.0.1",
    )
    return attach_routes(
        {GATEWAY.key: view}, routes, services=SERVICES, grants=(), namespace_labels={}, now=NOW
    )


def accepted(outcome: RoutesOutcome, kind: str, name: str) -> tuple[bool, str, str]:
    entry = outcome.parents[(kind, ObjectKey("default", name))][0]
    found = next(c for c in entry["conditions"] if c["type"] == "Accepted")
    return found["status"] == "True", found["reason"], found["message"]


def test_a_passthrough_listener_carries_tls_routes_and_terminate_is_refused() -> None:
    checks = {c.listener.name: c for c in listener_problems(GATEWAY, secrets={}, grants=())}
    assert checks["tls"].supported_kinds == (("gateway.networking.k8s.io", "TLSRoute"),)
    assert checks["tls"].usable and not checks["tls"].problems
    # TLS terminated for TLSRoutes is not served: the listener says so in the spec's terms.
    terminate = checks["terminate"]
    assert not terminate.accepted and not terminate.usable
    assert [(p.condition, p.reason) for p in terminate.problems] == [
        ("Accepted", "UnsupportedValue")
    ]
    assert "Passthrough only" in terminate.problems[0].message
    # A kind a TLS listener cannot carry: InvalidRouteKinds, and nothing to carry.
    kinds = checks["http-kinds"]
    assert [(p.condition, p.reason) for p in kinds.problems] == [
        ("ResolvedRefs", "InvalidRouteKinds")
    ]
    assert kinds.supported_kinds == () and not kinds.usable


def test_tls_routes_attach_by_hostname_and_listeners_admit_only_their_kinds() -> None:
    outcome = attach(
        [
            tls_route("db", ["db.example"], "db"),
            tls_route("wild", ["*.example"], "wild"),
            tls_route("elsewhere", ["db.other"], "db"),
            tls_route("on-http", ["db.example"], "db", sectionName="http"),
            parse_http_route(
                {
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"parentRefs": [{"name": "gw", "sectionName": "tls"}]},
                }
            ),
        ]
    )
    assert accepted(outcome, "TLSRoute", "db")[:2] == (True, "Accepted")
    assert accepted(outcome, "TLSRoute", "wild")[:2] == (True, "Accepted")
    assert accepted(outcome, "TLSRoute", "elsewhere")[:2] == (False, "NoMatchingListenerHostname")
    assert accepted(outcome, "TLSRoute", "on-http")[:2] == (False, "NotAllowedByListeners")
    assert accepted(outcome, "HTTPRoute", "web")[:2] == (False, "NotAllowedByListeners")
    assert outcome.attached[GATEWAY.key] == {"tls": 2}
    entry = outcome.parents[("TLSRoute", ObjectKey("default", "db"))][0]
    resolved = next(c for c in entry["conditions"] if c["type"] == "ResolvedRefs")
    assert resolved["status"] == "True"


def test_a_missing_backend_is_reported_on_the_route() -> None:
    outcome = attach([tls_route("gone", ["db.example"], "missing")])
    entry = outcome.parents[("TLSRoute", ObjectKey("default", "gone"))][0]
    resolved = next(c for c in entry["conditions"] if c["type"] == "ResolvedRefs")
    assert (resolved["status"], resolved["reason"]) == ("False", "BackendNotFound")


def test_the_port_serves_the_most_specific_hostname_by_server_name() -> None:
    outcome = attach(
        [tls_route("db", ["db.example"], "db"), tls_route("wild", ["*.example"], "wild")]
    )
    ports = {port.port: port for port in outcome.serving[GATEWAY.key].ports}
    assert sorted(ports) == [80, 443]  # the Terminate and HTTPRoute-only listeners serve nothing
    port = ports[443]
    assert port.protocol == "TLS"

    def backend_for(name: str) -> str | None:
        listener = port.listener(name)
        virtual = None if listener is None else listener.virtual_host(name)
        if virtual is None:
            return None
        decision = decide_tunnel(compile_policy(virtual.policy), server_name=name, rng_value=0.5)
        assert isinstance(decision, Forward)
        return decision.target.name

    assert backend_for("db.example") == "db"
    assert backend_for("cache.example") == "wild"
    assert backend_for("a.db.example") == "wild"
    assert backend_for("db.other") is None
