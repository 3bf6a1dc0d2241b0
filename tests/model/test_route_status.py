"""route_status: the Accepted and ResolvedRefs conditions a route author reads.

Also: other controllers' entries are kept verbatim, lastTransitionTime only moves when a
condition's status changes, and an unchanged status compares equal so no write happens.
"""

from datetime import UTC, datetime
from typing import Any

import pytest

from interlock.model.gateway import HTTPRoute, ReferenceGrant, parse_http_route
from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.route_resolution import resolve_route
from interlock.model.route_status import (
    CONTROLLER_NAME,
    rejected_route_status,
    route_status,
    status_equal_ignoring_timestamps,
)
from interlock.model.service import Service, parse_service

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
LATER = datetime(2024, 5, 1, 13, 0, 0, tzinfo=UTC)

GATEWAY_ENTRY = {
    "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"},
    "controllerName": "example.com/gateway-controller",
    "conditions": [
        {
            "type": "Accepted",
            "status": "True",
            "reason": "Accepted",
            "lastTransitionTime": "2020-01-01T00:00:00Z",
            "vendorField": {"kept": True},
        }
    ],
}


def svc(namespace: str, name: str, *ports: int, **spec: Any) -> Service:
    return parse_service(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": p} for p in ports], **spec},
        }
    )


def make_route(
    *,
    parents: list[dict[str, Any]] | None = None,
    backends: list[dict[str, Any]] | None = None,
    status: list[dict[str, Any]] | None = None,
    generation: int = 2,
) -> HTTPRoute:
    return parse_http_route(
        {
            "metadata": {"name": "r", "namespace": "shop", "generation": generation},
            "spec": {
                "parentRefs": parents
                if parents is not None
                else [{"group": "", "kind": "Service", "name": "web", "port": 80}],
                "rules": [
                    {
                        "backendRefs": backends
                        if backends is not None
                        else [{"name": "api", "port": 8080}]
                    }
                ],
            },
            "status": {"parents": status or []},
        }
    )


def compute(
    route: HTTPRoute,
    present: list[Service],
    grants: list[ReferenceGrant] | None = None,
    now: datetime = NOW,
) -> list[dict[str, Any]]:
    known: dict[ObjectKey, Service] = {s.key: s for s in present}
    return route_status(route, resolve_route(route, known, grants or []), known, now=now)


def conditions(entry: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in entry["conditions"]}


WEB = svc("shop", "web", 80)
API = svc("shop", "api", 8080)


def test_all_good() -> None:
    (entry,) = compute(make_route(), [WEB, API])
    # By value, as the spec wrote it: no namespace was written, so none is echoed.
    assert entry["parentRef"] == {"group": "", "kind": "Service", "name": "web", "port": 80}
    assert entry["controllerName"] == CONTROLLER_NAME
    assert conditions(entry) == {
        "Accepted": ("True", "Accepted", ""),
        "ResolvedRefs": ("True", "ResolvedRefs", ""),
    }
    for condition in entry["conditions"]:
        assert condition["observedGeneration"] == 2
        assert condition["lastTransitionTime"] == "2024-05-01T12:00:00Z"


@pytest.mark.parametrize(
    ("present", "message"),
    [
        ([API], "parent Service shop/web does not exist"),
        ([svc("shop", "web", 80, clusterIP="None"), API], "parent Service shop/web is headless"),
        (
            [svc("shop", "web", type="ExternalName", externalName="x.example"), API],
            "parent Service shop/web is of type ExternalName",
        ),
        ([svc("shop", "web", 81), API], "parent Service shop/web has no port 80"),
    ],
)
def test_parent_that_cannot_take_routes_is_not_accepted(
    present: list[Service], message: str
) -> None:
    (entry,) = compute(make_route(), present)
    status, reason, text = conditions(entry)["Accepted"]
    assert (status, reason) == ("False", "NoMatchingParent")
    assert text.startswith(message)


@pytest.mark.parametrize(
    ("backends", "present", "reason", "named"),
    [
        ([{"name": "api", "port": 8080}], [WEB], "BackendNotFound", "shop/api"),
        (
            [{"group": "apps", "kind": "Deployment", "name": "api", "port": 8080}],
            [WEB, API],
            "InvalidKind",
            "Deployment shop/api",
        ),
        (
            [{"name": "api", "namespace": "other", "port": 8080}],
            [WEB, svc("other", "api", 8080)],
            "RefNotPermitted",
            "other/api",
        ),
    ],
)
def test_unresolved_backend_is_reported_by_name(
    backends: list[dict[str, Any]], present: list[Service], reason: str, named: str
) -> None:
    (entry,) = compute(make_route(backends=backends), present)
    status, got_reason, message = conditions(entry)["ResolvedRefs"]
    assert (status, got_reason) == ("False", reason)
    assert named in message
    assert conditions(entry)["Accepted"][0] == "True"


def test_several_unresolved_backends_first_reason_all_named() -> None:
    route = make_route(
        backends=[
            {"name": "gone", "port": 1},
            {"name": "api", "port": 8080},
            {"kind": "Pod", "name": "p", "port": 1},
        ]
    )
    (entry,) = compute(route, [WEB, API])
    status, reason, message = conditions(entry)["ResolvedRefs"]
    assert (status, reason) == ("False", "BackendNotFound")
    assert "shop/gone" in message
    assert "Pod shop/p" in message


def test_other_controllers_entries_are_kept_verbatim_and_gateway_parents_ignored() -> None:
    route = make_route(
        parents=[
            {"name": "edge"},
            {"group": "", "kind": "Service", "name": "web", "port": 80},
        ],
        status=[GATEWAY_ENTRY],
    )
    entries = compute(route, [WEB, API])
    assert entries[0] == GATEWAY_ENTRY
    assert [e["controllerName"] for e in entries] == [
        "example.com/gateway-controller",
        CONTROLLER_NAME,
    ]


def test_our_stale_entries_are_dropped() -> None:
    stale = {
        "parentRef": {"group": "", "kind": "Service", "name": "old", "namespace": "shop"},
        "controllerName": CONTROLLER_NAME,
        "conditions": [],
    }
    entries = compute(make_route(status=[stale]), [WEB, API])
    assert [e["parentRef"]["name"] for e in entries] == ["web"]


def test_one_entry_per_service_parent_in_spec_order() -> None:
    route = make_route(
        parents=[
            {"group": "", "kind": "Service", "name": "web", "port": 80},
            {"group": "core", "kind": "Service", "name": "web", "namespace": "front"},
        ]
    )
    entries = compute(route, [WEB, API, svc("front", "web", 80)])
    assert [e["parentRef"] for e in entries] == [
        {"group": "", "kind": "Service", "name": "web", "port": 80},
        {"group": "core", "kind": "Service", "name": "web", "namespace": "front"},
    ]


def test_transition_time_is_kept_while_status_is_unchanged() -> None:
    first = compute(make_route(), [WEB])  # backend missing
    again = compute(make_route(status=first, generation=3), [WEB], now=LATER)
    assert status_equal_ignoring_timestamps(first, again) is False  # observedGeneration moved
    times = {c["type"]: c["lastTransitionTime"] for c in again[0]["conditions"]}
    assert times == {"Accepted": "2024-05-01T12:00:00Z", "ResolvedRefs": "2024-05-01T12:00:00Z"}
    # Once the backend appears, ResolvedRefs flips and only it gets a new time.
    fixed = compute(make_route(status=again, generation=3), [WEB, API], now=LATER)
    times = {c["type"]: c["lastTransitionTime"] for c in fixed[0]["conditions"]}
    assert times == {"Accepted": "2024-05-01T12:00:00Z", "ResolvedRefs": "2024-05-01T13:00:00Z"}


def test_recomputing_an_unchanged_route_gives_an_equal_status() -> None:
    first = compute(make_route(), [WEB, API])
    second = compute(make_route(status=first), [WEB, API], now=LATER)
    assert second == first
    assert status_equal_ignoring_timestamps(first, second)


def test_status_equal_ignores_only_timestamps() -> None:
    first = compute(make_route(), [WEB, API])
    moved = compute(make_route(), [WEB, API], now=LATER)
    assert moved != first
    assert status_equal_ignoring_timestamps(first, moved)
    broken = compute(make_route(), [WEB])
    assert not status_equal_ignoring_timestamps(first, broken)


def _raw_route(rules: list[dict[str, Any]], status: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "shop", "generation": 5},
        "spec": {
            "parentRefs": [{"name": "edge"}, {"group": "", "kind": "Service", "name": "web"}],
            "rules": rules,
        },
        "status": {"parents": status},
    }


def test_route_that_fails_to_parse_is_rejected_with_the_error_in_its_status() -> None:
    mirror = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "s", "port": 80}}}
    raw = _raw_route([{"filters": [mirror]}], [GATEWAY_ENTRY])
    with pytest.raises(InvalidObject) as err:
        parse_http_route(raw)
    entries = rejected_route_status(raw, err.value, now=NOW)
    assert entries is not None
    assert entries[0] == GATEWAY_ENTRY
    ours = entries[1]
    assert ours["parentRef"]["name"] == "web"
    (accepted,) = ours["conditions"]
    assert (accepted["type"], accepted["status"], accepted["reason"]) == (
        "Accepted",
        "False",
        "UnsupportedValue",
    )
    assert (
        "spec.rules[0].filters[0]: filter type RequestMirror is valid but not implemented"
        in (accepted["message"])
    )
    assert accepted["observedGeneration"] == 5
    # Recomputed later, nothing changed: same status, same transition time.
    raw["status"]["parents"] = entries
    assert rejected_route_status(raw, err.value, now=LATER) == entries


def test_rejected_route_whose_parents_are_unreadable_gives_no_status() -> None:
    raw = _raw_route([], [])
    raw["spec"]["parentRefs"] = [{"kind": "Service", "port": "eighty"}]
    with pytest.raises(InvalidObject) as err:
        parse_http_route(raw)
    assert rejected_route_status(raw, err.value, now=NOW) is None
