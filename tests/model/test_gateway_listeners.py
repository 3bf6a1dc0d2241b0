"""Gateways' addresses, listeners and hostnames, decided as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from interlock.model.gateway_conditions import intersect_hostnames
from interlock.model.gateway_listeners import (
    AddressProblem,
    assign_addresses,
    gateway_status,
    listener_problems,
    parse_address_pool,
    parse_gateway,
)
from interlock.model.meta import ObjectKey

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def gateway(
    name: str,
    *listeners: dict[str, Any],
    age: int = 0,
    address: str | None = None,
    addresses: list[dict[str, str]] | None = None,
) -> Any:
    raw: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "infra",
            "generation": 3,
            "creationTimestamp": (NOW + timedelta(seconds=age)).isoformat(),
        },
        "spec": {
            "gatewayClassName": "interlock",
            "listeners": list(listeners) or [{"name": "http", "port": 80, "protocol": "HTTP"}],
            "addresses": addresses or [],
        },
    }
    if address is not None:
        raw["status"] = {"addresses": [{"type": "IPAddress", "value": address}]}
    return parse_gateway(raw)


@pytest.mark.parametrize(
    ("listener", "route", "expected"),
    [
        (None, [], ()),
        ("very.specific.com", [], ("very.specific.com",)),
        ("very.specific.com", ["non.matching.com", "very.specific.com"], ("very.specific.com",)),
        ("very.specific.com", ["*.specific.com"], ("very.specific.com",)),
        (
            "*.wildcard.io",
            ["wildcard.io", "foo.wildcard.io", "a.b.wildcard.io"],
            ("foo.wildcard.io", "a.b.wildcard.io"),
        ),
        ("*.wildcard.io", ["*.wildcard.io"], ("*.wildcard.io",)),
        ("*.wildcard.io", ["*.a.wildcard.io"], ("*.a.wildcard.io",)),
        ("*.a.wildcard.io", ["*.wildcard.io"], ("*.a.wildcard.io",)),
        ("very.specific.com", ["specific.but.wrong.com", "wildcard.io"], None),
        ("*.wildcard.io", ["wildcard.io"], None),
        (None, ["first.com", "*.second.com"], ("first.com", "*.second.com")),
    ],
)
def test_route_and_listener_hostnames_intersect_as_the_spec_says(
    listener: str | None, route: list[str], expected: tuple[str, ...] | None
) -> None:
    assert intersect_hostnames(listener, route) == expected


def test_address_pool_from_a_cidr_or_a_list() -> None:
    assert parse_address_pool("127.10.0.0/30") == ("127.10.0.1", "127.10.0.2")
    assert parse_address_pool("10.0.0.5, 10.0.0.7/32") == ("10.0.0.5", "10.0.0.7")
    with pytest.raises(ValueError, match="--gateway-addresses: 'nope'"):
        parse_address_pool("nope")


def test_addresses_are_stable_unique_and_the_oldest_gateway_chooses_first() -> None:
    pool = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    first = assign_addresses([gateway("b", age=2), gateway("a", age=1)], pool)
    assert first == {
        ObjectKey("infra", "a"): "10.0.0.1",
        ObjectKey("infra", "b"): "10.0.0.2",
    }
    # "a" goes; "b" keeps its address, a new Gateway takes a free one.
    later = assign_addresses([gateway("b", age=2, address="10.0.0.2"), gateway("c", age=3)], pool)
    assert later == {ObjectKey("infra", "b"): "10.0.0.2", ObjectKey("infra", "c"): "10.0.0.1"}


def test_an_address_not_yet_in_the_status_stays_when_an_older_gateway_leaves() -> None:
    # "b" was given 10.0.0.2 and its status written, but the watch has not shown it yet; "a"
    # goes, freeing 10.0.0.1. A client that read b's status already sends to 10.0.0.2.
    pool = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    first = assign_addresses([gateway("a", age=1), gateway("b", age=2)], pool)
    assert first[ObjectKey("infra", "b")] == "10.0.0.2"
    given = {key: found for key, found in first.items() if isinstance(found, str)}
    later = assign_addresses([gateway("b", age=2), gateway("c", age=3)], pool, given)
    assert later == {ObjectKey("infra", "b"): "10.0.0.2", ObjectKey("infra", "c"): "10.0.0.1"}
    # Without what was given, the status is all there is, and "b" would move.
    moved = assign_addresses([gateway("b", age=2), gateway("c", age=3)], pool)
    assert moved[ObjectKey("infra", "b")] == "10.0.0.1"


def test_a_full_pool_and_unusable_requested_addresses_are_reported() -> None:
    result = assign_addresses(
        [
            gateway("a", age=1),
            gateway("b", age=2),
            gateway("c", age=3, addresses=[{"type": "IPAddress", "value": "192.0.2.9"}]),
            gateway("d", age=4, addresses=[{"type": "Hostname", "value": "x.example"}]),
        ],
        ("10.0.0.1",),
    )
    assert result[ObjectKey("infra", "a")] == "10.0.0.1"
    assert isinstance(full := result[ObjectKey("infra", "b")], AddressProblem)
    assert (full.condition, full.reason) == ("Programmed", "AddressNotAssigned")
    assert isinstance(asked := result[ObjectKey("infra", "c")], AddressProblem)
    assert asked.reason == "AddressNotUsable"
    assert isinstance(kind := result[ObjectKey("infra", "d")], AddressProblem)
    assert (kind.condition, kind.reason) == ("Accepted", "UnsupportedAddress")


def test_a_broken_listener_leaves_the_others_working() -> None:
    gw = gateway(
        "mixed",
        {"name": "http", "port": 80, "protocol": "HTTP"},
        {"name": "udp", "port": 53, "protocol": "UDP"},
        {
            "name": "kinds",
            "port": 8080,
            "protocol": "HTTP",
            "allowedRoutes": {"kinds": [{"kind": "TCPRoute"}]},
        },
        {
            "name": "tls",
            "port": 443,
            "protocol": "HTTPS",
            "tls": {"certificateRefs": [{"name": "missing"}]},
        },
    )
    checks = listener_problems(gw, secrets={}, grants=[])
    status = gateway_status(gw, checks, address="10.0.0.1", attached={"http": 2}, now=NOW)
    by_name = {
        entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
        for entry in status["listeners"]
    }
    assert by_name["http"] == {
        "Accepted": ("True", "Accepted"),
        "Conflicted": ("False", "NoConflicts"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
        "Programmed": ("True", "Programmed"),
    }
    assert by_name["udp"]["Accepted"] == ("False", "UnsupportedProtocol")
    assert by_name["kinds"]["ResolvedRefs"] == ("False", "InvalidRouteKinds")
    assert by_name["tls"]["ResolvedRefs"] == ("False", "InvalidCertificateRef")
    assert by_name["tls"]["Programmed"][0] == "False"
    kinds = {entry["name"]: entry["supportedKinds"] for entry in status["listeners"]}
    assert kinds["kinds"] == []
    attached = {entry["name"]: entry["attachedRoutes"] for entry in status["listeners"]}
    assert attached == {"http": 2, "udp": 0, "kinds": 0, "tls": 0}
    gateway_conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert gateway_conditions == {
        "Accepted": ("True", "ListenersNotValid"),
        "Programmed": ("True", "Programmed"),
    }
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])
    assert status["addresses"] == [{"type": "IPAddress", "value": "10.0.0.1"}]


def test_unchanged_conditions_keep_their_transition_time() -> None:
    gw = gateway("a")
    checks = listener_problems(gw, secrets={}, grants=[])
    first = gateway_status(gw, checks, address="10.0.0.1", attached={}, now=NOW)
    stored = parse_gateway(
        {
            "metadata": {"name": "a", "namespace": "infra", "generation": 3},
            "spec": {
                "gatewayClassName": "interlock",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
            "status": first,
        }
    )
    later = gateway_status(
        stored, checks, address="10.0.0.1", attached={}, now=NOW + timedelta(hours=1)
    )
    assert later == first


def test_a_port_the_data_plane_cannot_open_is_reported_on_its_listeners_only() -> None:
    gw = gateway(
        "ports",
        {"name": "web", "port": 80, "protocol": "HTTP"},
        {"name": "alt", "port": 8080, "protocol": "HTTP"},
    )
    checks = listener_problems(gw, secrets={}, grants=[])
    status = gateway_status(
        gw,
        checks,
        address="10.0.0.1",
        attached={},
        now=NOW,
        port_failures={8080: "cannot listen on 10.0.0.1:8080: Address already in use"},
    )
    by_name = {
        entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
        for entry in status["listeners"]
    }
    assert by_name["alt"]["Accepted"] == ("False", "PortUnavailable")
    assert by_name["alt"]["Programmed"] == ("False", "Invalid")
    assert by_name["web"]["Programmed"] == ("True", "Programmed")
    gateway_conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert gateway_conditions["Accepted"] == ("True", "ListenersNotValid")
    assert gateway_conditions["Programmed"] == ("True", "Programmed")


def test_a_gateway_with_parameters_is_not_accepted_and_not_served() -> None:
    raw_gateway = parse_gateway(
        {
            "metadata": {"name": "params", "namespace": "infra", "generation": 1},
            "spec": {
                "gatewayClassName": "interlock",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
                "infrastructure": {
                    "parametersRef": {"group": "invalid.io", "kind": "Params", "name": "x"}
                },
            },
        }
    )
    found = assign_addresses([raw_gateway], ("10.0.0.1",))[raw_gateway.key]
    assert isinstance(found, AddressProblem)
    checks = listener_problems(raw_gateway, secrets={}, grants=[])
    status = gateway_status(raw_gateway, checks, address=found, attached={}, now=NOW)
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["Accepted"] == ("False", "InvalidParameters")
    assert conditions["Programmed"][0] == "False"
    assert status["addresses"] == []


def test_requested_addresses_must_all_be_usable_and_an_empty_value_asks_for_any() -> None:
    pool = ("10.0.0.1", "10.0.0.2", "10.0.0.254")
    mixed = gateway(
        "mixed",
        age=1,
        addresses=[
            {"type": "IPAddress", "value": "192.0.2.1"},
            {"type": "IPAddress", "value": "10.0.0.254"},
        ],
    )
    usable = gateway("usable", age=2, addresses=[{"type": "IPAddress", "value": "10.0.0.254"}])
    empty = gateway("empty", age=3, addresses=[{"type": "IPAddress", "value": ""}])
    result = assign_addresses([mixed, usable, empty], pool)
    assert isinstance(problem := result[mixed.key], AddressProblem)
    assert (problem.condition, problem.reason) == ("Programmed", "AddressNotUsable")
    assert "192.0.2.1" in problem.message
    assert result[usable.key] == "10.0.0.254"
    assert result[empty.key] == "10.0.0.1"
