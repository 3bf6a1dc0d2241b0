"""ListenerSets merged into Gateways: admission, precedence and conflicts, status, routes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.model.gateway import parse_http_route, parse_reference_grant
from interlock.model.gateway_listeners import listener_problems, parse_gateway
from interlock.model.gateway_routes import GatewayView, attach_routes
from interlock.model.listener_sets import (
    ListenerSet,
    ListenerSetOutcome,
    listener_set_outcomes,
    listener_set_status,
    parent_accepted,
    parse_listener_set,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import SecretValue
from interlock.model.service import parse_service

NOW = datetime(2026, 1, 1, tzinfo=UTC)
INFRA = "infra"
GROUP = "gateway.networking.k8s.io"


def http(name: str, hostname: str | None = None, **extra: Any) -> dict[str, Any]:
    listener: dict[str, Any] = {"name": name, "port": 80, "protocol": "HTTP", **extra}
    if hostname is not None:
        listener["hostname"] = hostname
    return listener


def gateway(*listeners: dict[str, Any], allowed: dict[str, Any] | None = None) -> Any:
    spec: dict[str, Any] = {"gatewayClassName": "interlock", "listeners": list(listeners)}
    if allowed is not None:
        spec["allowedListeners"] = {"namespaces": allowed}
    return parse_gateway(
        {"metadata": {"name": "gw", "namespace": INFRA, "generation": 2}, "spec": spec}
    )


def listener_set(
    name: str, *listeners: dict[str, Any], namespace: str = INFRA, age: int = 0
) -> ListenerSet:
    return parse_listener_set(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "generation": 4,
                "creationTimestamp": (NOW + timedelta(seconds=age)).isoformat(),
            },
            "spec": {
                "parentRef": {"name": "gw", "namespace": INFRA},
                "listeners": list(listeners),
            },
        }
    )


def outcomes(
    gw: Any,
    *sets: ListenerSet,
    labels: dict[str, dict[str, str]] | None = None,
    secrets: dict[ObjectKey, dict[str, SecretValue]] | None = None,
    grants: list[Any] | None = None,
) -> tuple[Any, dict[ObjectKey, ListenerSetOutcome]]:
    own = listener_problems(gw, secrets=secrets or {}, grants=grants or [])
    found = listener_set_outcomes(
        gw,
        own,
        sets,
        accepted=parent_accepted(own, "10.0.0.1"),
        namespace_labels=labels or {},
        secrets=secrets or {},
        grants=grants or [],
    )
    return own, found


def listener_conditions(status: dict[str, Any]) -> dict[str, dict[str, tuple[str, str]]]:
    return {
        entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
        for entry in status["listeners"]
    }


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


@pytest.mark.parametrize(
    ("allowed", "namespace", "labels", "admitted"),
    [
        (None, INFRA, {}, False),  # the default: no ListenerSet at all
        ({"from": "None"}, INFRA, {}, False),
        ({"from": "Same"}, INFRA, {}, True),
        ({"from": "Same"}, "team", {}, False),
        ({"from": "All"}, "team", {}, True),
        ({"from": "Selector", "selector": {"matchLabels": {"a": "b"}}}, "team", {"a": "b"}, True),
        ({"from": "Selector", "selector": {"matchLabels": {"a": "b"}}}, "team", {"a": "c"}, False),
    ],
)
def test_allowed_listeners_decides_which_listener_sets_attach(
    allowed: dict[str, Any] | None, namespace: str, labels: dict[str, str], admitted: bool
) -> None:
    gw = gateway(http("web", "gw.example"), allowed=allowed)
    ls = listener_set("team-ls", http("team", "team.example"), namespace=namespace)
    _, found = outcomes(gw, ls, labels={namespace: labels})
    outcome = found[ls.key]
    status = listener_set_status(ls, outcome, address="10.0.0.1", attached={}, now=NOW)
    if admitted:
        assert outcome.accepted
        assert conditions(status) == {
            "Accepted": ("True", "Accepted"),
            "Programmed": ("True", "Programmed"),
        }
        assert listener_conditions(status)["team"]["Programmed"] == ("True", "Programmed")
    else:
        assert not outcome.accepted
        assert conditions(status) == {
            "Accepted": ("False", "NotAllowed"),
            "Programmed": ("False", "NotAllowed"),
        }
    assert {c["observedGeneration"] for c in status["conditions"]} == {4}


def test_conflicts_follow_the_spec_precedence_gateway_then_age_then_name() -> None:
    gw = gateway(
        http("gateway-listener", "gw.example"),
        http("shared", "shared.example"),
        allowed={"from": "Same"},
    )
    # Created in one second: "b-..." loses to "a-..." by name; "z-old" is older than both.
    a = listener_set("a-first", http("own-a", "a.example"), http("dup", "set.example"))
    b = listener_set("b-second", http("dup", "set.example"))
    late = listener_set("c-late", http("shared", "shared.example"), age=5)
    old = listener_set("z-old", http("tcp", protocol="TCP"), age=-5)
    _, found = outcomes(gw, late, b, a, old)
    assert list(found) == [old.key, a.key, b.key, late.key]

    def states(ls: ListenerSet) -> dict[str, dict[str, tuple[str, str]]]:
        return listener_conditions(
            listener_set_status(ls, found[ls.key], address="10.0.0.1", attached={}, now=NOW)
        )

    # A TCP listener on the Gateway's HTTP port: the conflict is the reason, not the protocol.
    assert states(old)["tcp"] == {
        "Accepted": ("False", "ProtocolConflict"),
        "Conflicted": ("True", "ProtocolConflict"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
        "Programmed": ("False", "ProtocolConflict"),
    }
    assert states(a)["dup"]["Accepted"] == ("True", "Accepted")
    assert states(a)["own-a"]["Programmed"] == ("True", "Programmed")
    for ls, name in ((b, "dup"), (late, "shared")):
        assert states(ls)[name]["Accepted"] == ("False", "HostnameConflict")
        assert states(ls)[name]["Conflicted"] == ("True", "HostnameConflict")
        assert states(ls)[name]["Programmed"] == ("False", "HostnameConflict")
    # A set whose every listener conflicts is not accepted, nor counted on its Gateway.
    b_status = listener_set_status(b, found[b.key], address="10.0.0.1", attached={}, now=NOW)
    assert conditions(b_status) == {
        "Accepted": ("False", "ListenersNotValid"),
        "Programmed": ("False", "ListenersNotValid"),
    }
    assert [key.name for key, o in found.items() if o.accepted] == ["a-first"]


def test_within_a_listener_set_the_first_listener_of_a_port_keeps_it() -> None:
    gw = gateway(http("web", "gw.example"), allowed={"from": "Same"})
    ls = listener_set(
        "mixed",
        http("before", "before.example"),
        http("tcp", protocol="TCP"),  # port 80 is the Gateway's, in HTTP
        http("after", "after.example"),
        {"name": "alt", "port": 8080, "protocol": "HTTP"},
        {"name": "alt-tcp", "port": 8080, "protocol": "TCP"},  # 8080 is "alt"'s, in HTTP
    )
    _, found = outcomes(gw, ls)
    states = listener_conditions(
        listener_set_status(ls, found[ls.key], address="10.0.0.1", attached={}, now=NOW)
    )
    assert {name: state["Accepted"] for name, state in states.items()} == {
        "before": ("True", "Accepted"),
        "tcp": ("False", "ProtocolConflict"),
        "after": ("True", "Accepted"),
        "alt": ("True", "Accepted"),
        "alt-tcp": ("False", "ProtocolConflict"),
    }
    assert found[ls.key].accepted


def test_a_listener_set_of_a_gateway_not_accepted_is_refused() -> None:
    gw = gateway(http("bad", protocol="UDP"), allowed={"from": "All"})
    ls = listener_set("ls", http("fine", "fine.example"))
    _, found = outcomes(gw, ls)
    assert found[ls.key].refused is not None
    assert found[ls.key].refused[0] == "ParentNotAccepted"


def _secret() -> dict[str, SecretValue]:
    return {
        "tls.crt": SecretValue(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"),
        "tls.key": SecretValue(b"-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n"),
    }


def _grant(kind: str, namespace: str) -> Any:
    return parse_reference_grant(
        {
            "metadata": {"name": f"for-{kind}", "namespace": "certs"},
            "spec": {
                "from": [{"group": GROUP, "kind": kind, "namespace": namespace}],
                "to": [{"group": "", "kind": "Secret"}],
            },
        }
    )


def test_certificates_in_other_namespaces_need_a_grant_from_listener_sets() -> None:
    https = {
        "name": "tls",
        "port": 443,
        "protocol": "HTTPS",
        "hostname": "team.example",
        "tls": {"certificateRefs": [{"name": "cert", "namespace": "certs"}]},
    }
    gw = gateway(http("web", "gw.example"), allowed={"from": "All"})
    ls = listener_set("team", https, namespace="team")
    secrets = {ObjectKey(namespace="certs", name="cert"): _secret()}

    def tls_state(grants: list[Any]) -> dict[str, tuple[str, str]]:
        _, found = outcomes(gw, ls, secrets=secrets, grants=grants)
        status = listener_set_status(ls, found[ls.key], address="10.0.0.1", attached={}, now=NOW)
        return listener_conditions(status)["tls"]

    # A grant to Gateways does not speak for ListenerSets, nor one for another namespace.
    for grants in ([], [_grant("Gateway", INFRA)], [_grant("ListenerSet", INFRA)]):
        assert tls_state(grants)["ResolvedRefs"] == ("False", "RefNotPermitted")
    assert tls_state([_grant("ListenerSet", "team")])["ResolvedRefs"] == ("True", "ResolvedRefs")


def _route(name: str, *parents: dict[str, Any], namespace: str = INFRA) -> Any:
    return parse_http_route(
        {
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {
                "parentRefs": list(parents),
                "rules": [{"backendRefs": [{"name": "echo", "port": 80, "namespace": INFRA}]}],
            },
        }
    )


LS_REF = {"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "namespace": "team"}


def test_routes_reach_a_listener_set_only_through_a_listener_set_parent_ref() -> None:
    gw = gateway(
        http("web", "gw.example", allowedRoutes={"namespaces": {"from": "All"}}),
        allowed={"from": "All"},
    )
    ls = listener_set(
        "team-ls",
        http("same", "same.example"),  # allowedRoutes "Same": the ListenerSet's namespace
        http("all", "all.example", allowedRoutes={"namespaces": {"from": "All"}}),
        namespace="team",
    )
    own, found = outcomes(gw, ls)
    view = GatewayView(gateway=gw, checks=own, address="10.0.0.1", listener_sets=found)
    service = parse_service(
        {
            "metadata": {"name": "echo", "namespace": INFRA},
            "spec": {"ports": [{"port": 80}]},
        }
    )
    routes = [
        _route("to-gateway", {"name": "gw"}),
        # The Gateway has no listener "same": a Gateway parentRef never reaches a ListenerSet's.
        _route("gateway-section", {"name": "gw", "sectionName": "same"}),
        _route("to-set", {**LS_REF, "name": "team-ls"}, namespace="team"),
        _route("to-set-section", {**LS_REF, "name": "team-ls", "sectionName": "all"}),
        _route("from-infra", {**LS_REF, "name": "team-ls", "sectionName": "same"}),
    ]
    grant = parse_reference_grant(
        {
            "metadata": {"name": "from-team", "namespace": INFRA},
            "spec": {
                "from": [
                    {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "team"}
                ],
                "to": [{"group": "", "kind": "Service"}],
            },
        }
    )
    result = attach_routes(
        {gw.key: view},
        routes,
        services={service.key: service},
        grants=[grant],
        namespace_labels={},
        now=NOW,
    )

    def accepted(name: str) -> list[tuple[str, str, str]]:
        entries = next(v for (_, key), v in result.parents.items() if key.name == name)
        return [
            (
                entry["parentRef"].get("kind", "Gateway"),
                entry["conditions"][0]["status"],
                entry["conditions"][0]["reason"],
            )
            for entry in entries
        ]

    assert accepted("to-gateway") == [("Gateway", "True", "Accepted")]
    assert accepted("gateway-section") == [("Gateway", "False", "NoMatchingParent")]
    assert accepted("to-set") == [("ListenerSet", "True", "Accepted")]
    assert accepted("to-set-section") == [("ListenerSet", "True", "Accepted")]
    assert accepted("from-infra") == [("ListenerSet", "False", "NotAllowedByListeners")]
    assert result.attached[gw.key] == {"web": 1}
    assert result.listener_set_attached[ls.key] == {"same": 1, "all": 2}
    served = result.serving[gw.key]
    (port,) = served.ports
    assert [listener.hostname for listener in port.listeners] == [
        "same.example",
        "all.example",
        "gw.example",
    ]
    served_all = port.listener("all.example")
    assert served_all is not None
    (virtual,) = served_all.virtual_hosts
    assert sorted(route.name for route in virtual.policy.routes) == ["to-set", "to-set-section"]


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(5)))
def test_outcomes_do_not_depend_on_the_order_listener_sets_arrive_in(order: list[int]) -> None:
    gw = gateway(http("web", "gw.example"), allowed={"from": "All"})
    sets = [
        listener_set("b", http("dup", "dup.example"), age=1),
        listener_set("a", http("dup", "dup.example"), http("tcp", protocol="TCP"), age=1),
        listener_set("old", http("web", "gw.example"), age=-3),
        listener_set("other-ns", http("dup", "dup.example"), namespace="team", age=1),
        listener_set("new", http("fresh", "fresh.example"), age=9),
    ]
    _, expected = outcomes(gw, *sets)
    _, found = outcomes(gw, *(sets[i] for i in order))
    assert list(found.items()) == list(expected.items())
