"""Three mesh-semantics rules the policy keeps; each test fails if its defect returns.

- backendRef filters are served in the policy (they used to vanish after being accepted);
- GEP-1294: consumer routes send to any namespace without a ReferenceGrant, producer routes
  (which the edge and every client namespace follow) still need one;
- the status echoes each spec parentRef by value (``group: core`` stays ``core``).
"""

from datetime import UTC, datetime
from typing import Any

import pytest

from interlock.api.policy_json import policy_json
from interlock.model.gateway import (
    GATEWAY_GROUP,
    HTTPRoute,
    ReferenceGrant,
    parse_http_route,
    parse_reference_grant,
)
from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_dependencies import route_grant_namespaces
from interlock.model.route_resolution import resolve_route, resolve_route_by_parent
from interlock.model.route_status import route_status
from interlock.model.service import Service, parse_service

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def svc(namespace: str, name: str, port: int = 80) -> Service:
    return parse_service(
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"ports": [{"port": port}]}}
    )


def route(
    namespace: str,
    parents: list[dict[str, Any]],
    backend_refs: list[dict[str, Any]],
    *,
    status: list[dict[str, Any]] | None = None,
) -> HTTPRoute:
    return parse_http_route(
        {
            "metadata": {
                "name": "r",
                "namespace": namespace,
                "generation": 1,
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {"parentRefs": parents, "rules": [{"backendRefs": backend_refs}]},
            "status": {"parents": status or []},
        }
    )


def grant(namespace: str, from_namespace: str) -> ReferenceGrant:
    return parse_reference_grant(
        {
            "metadata": {"name": "g", "namespace": namespace},
            "spec": {
                "from": [
                    {"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": from_namespace}
                ],
                "to": [{"group": "", "kind": "Service"}],
            },
        }
    )


def known(*items: Service) -> dict[ObjectKey, Service]:
    return {s.key: s for s in items}


def web_policy(
    r: HTTPRoute, services: dict[ObjectKey, Service], *, client_namespace: str
) -> OutboundPolicy:
    """The policy of shop/web port 80 for ``client_namespace``, with ``r`` resolved."""
    web = services[ObjectKey(namespace="shop", name="web")]
    resolved = [resolve_route(r, services, [])]
    return build_outbound_policy(web, "shop", "web", 80, client_namespace, resolved)


WEB_IN_SHOP = {"group": "core", "kind": "Service", "name": "web", "namespace": "shop"}
HEADER_FILTER = {
    "type": "RequestHeaderModifier",
    "requestHeaderModifier": {"set": [{"name": "x-backend", "value": "v2"}]},
}

# --- backendRef filters ----------------------------------------------------------------------


def test_backend_filters_are_served_in_the_policy() -> None:
    r = route(
        "shop",
        [WEB_IN_SHOP],
        [{"name": "api", "port": 80, "filters": [HEADER_FILTER]}, {"name": "old", "port": 80}],
    )
    services = known(svc("shop", "web"), svc("shop", "api"), svc("shop", "old"))
    policy = web_policy(r, services, client_namespace="shop")
    backends = policy_json(policy)["routes"][0]["rules"][0]["backends"]
    assert [b["filters"] for b in backends] == [
        [
            {
                "type": "RequestHeaderModifier",
                "requestHeaderModifier": {
                    "set": [{"name": "x-backend", "value": "v2"}],
                    "add": [],
                    "remove": [],
                },
            }
        ],
        [],
    ]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        pytest.param(
            [HEADER_FILTER, HEADER_FILTER],
            "filter RequestHeaderModifier may appear at most once",
            id="repeated",
        ),
        pytest.param(
            [
                {"type": "RequestRedirect", "requestRedirect": {"hostname": "a.example"}},
                {"type": "URLRewrite", "urlRewrite": {"hostname": "b.example"}},
            ],
            "RequestRedirect and URLRewrite cannot be used together",
            id="redirect-and-rewrite",
        ),
    ],
)
def test_backend_filter_lists_follow_the_crd_rules(
    filters: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(InvalidObject) as caught:
        route("shop", [WEB_IN_SHOP], [{"name": "api", "port": 80, "filters": filters}])
    assert caught.value.field == "spec.rules[0].backendRefs[0].filters"
    assert message in str(caught.value)


# --- GEP-1294: ReferenceGrants for mesh routes -----------------------------------------------


def test_consumer_route_to_another_namespace_needs_no_grant() -> None:
    # In namespace "client", for the Service shop/web, sending to billing/api.
    r = route("client", [WEB_IN_SHOP], [{"name": "api", "namespace": "billing", "port": 80}])
    resolved = resolve_route(r, known(svc("shop", "web"), svc("billing", "api")), [])
    (backend,) = resolved.rules[0].backends
    assert (backend.exists, backend.reason) == (True, None)
    assert route_grant_namespaces(r) == frozenset()


def test_consumer_route_whose_backend_is_its_parent_resolves() -> None:
    # The canonical mesh timeout example: a consumer route that only adds a timeout.
    r = route("client", [WEB_IN_SHOP], [{"name": "web", "namespace": "shop", "port": 80}])
    services = known(svc("shop", "web"))
    policy = web_policy(r, services, client_namespace="client")
    (route_json,) = policy_json(policy)["routes"]
    assert route_json["name"] == "r"
    (backend,) = route_json["rules"][0]["backends"]
    assert (backend["exists"], backend["failureInjector"]) == (True, None)


@pytest.mark.parametrize(
    ("grants", "permitted"),
    [pytest.param([], False, id="no-grant"), pytest.param([grant("billing", "shop")], True)],
)
def test_producer_route_to_another_namespace_still_needs_a_grant(
    grants: list[ReferenceGrant], permitted: bool
) -> None:
    r = route("shop", [WEB_IN_SHOP], [{"name": "api", "namespace": "billing", "port": 80}])
    resolved = resolve_route(r, known(svc("shop", "web"), svc("billing", "api")), grants)
    (backend,) = resolved.rules[0].backends
    assert backend.exists is permitted
    assert backend.reason == (None if permitted else "RefNotPermitted")
    assert route_grant_namespaces(r) == {"billing"}


def test_one_route_producer_for_one_parent_consumer_for_another() -> None:
    r = route(
        "shop",
        [WEB_IN_SHOP, {"group": "", "kind": "Service", "name": "front", "namespace": "edge"}],
        [{"name": "api", "namespace": "billing", "port": 80}],
    )
    services = known(svc("shop", "web"), svc("edge", "front"), svc("billing", "api"))
    by_parent = resolve_route_by_parent(r, services, [])
    producer = by_parent[ObjectKey(namespace="shop", name="web")]
    consumer = by_parent[ObjectKey(namespace="edge", name="front")]
    assert [b.reason for b in producer.rules[0].backends] == ["RefNotPermitted"]
    assert [b.reason for b in consumer.rules[0].backends] == [None]
    assert [p.name for p in producer.parents] == ["web"]
    assert [p.name for p in consumer.parents] == ["front"]
    entries = route_status(r, by_parent, services, now=NOW)
    refs = {
        e["parentRef"]["name"]: next(c for c in e["conditions"] if c["type"] == "ResolvedRefs")
        for e in entries
    }
    assert (refs["web"]["status"], refs["web"]["reason"]) == ("False", "RefNotPermitted")
    assert (refs["front"]["status"], refs["front"]["reason"]) == ("True", "ResolvedRefs")


# --- status echoes parentRefs by value -------------------------------------------------------


@pytest.mark.parametrize("group", ["core", ""])
def test_status_echoes_the_spec_parent_ref_by_value(group: str) -> None:
    spec_ref = {"group": group, "kind": "Service", "name": "web", "sectionName": "http"}
    r = route("shop", [spec_ref], [{"name": "web", "port": 80}])
    service = parse_service(
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }
    )
    services = known(service)
    (entry,) = route_status(r, resolve_route(r, services, []), services, now=NOW)
    assert entry["parentRef"] == spec_ref


def test_stored_status_written_with_core_keeps_its_transition_time() -> None:
    r = route("shop", [WEB_IN_SHOP], [{"name": "web", "port": 80}])
    services = known(svc("shop", "web"))
    first = route_status(r, resolve_route(r, services, []), services, now=NOW)
    assert first[0]["parentRef"]["group"] == "core"
    stored = route("shop", [WEB_IN_SHOP], [{"name": "web", "port": 80}], status=first)
    later = datetime(2024, 5, 2, tzinfo=UTC)
    again = route_status(stored, resolve_route(stored, services, []), services, now=later)
    assert again == first
