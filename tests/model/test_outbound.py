"""resolve_route and build_outbound_policy: the Gateway API's and Linkerd's rules for mesh routes.

The cases a user relies on: a backend whose Service is missing is kept and answers 500 until the
Service appears; other kinds, missing ports and cross-namespace references without a matching
ReferenceGrant are reported the same way; routes attach to a Service port by parentRef;
producer routes apply to everyone, consumer routes only to their own namespace; routes are
ordered oldest first; a port without routes gets a Default route.
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
from interlock.model.meta import ObjectKey
from interlock.model.outbound import Backend, FailureInjector, ResolvedRoute
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_dependencies import route_grant_namespaces, route_service_dependencies
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, parse_service


def svc(namespace: str, name: str, *ports: int | tuple[str, int], **spec: Any) -> Service:
    port_list = [
        {"name": p[0], "port": p[1]} if isinstance(p, tuple) else {"port": p} for p in ports
    ]
    return parse_service(
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"ports": port_list, **spec}}
    )


def services(*items: Service) -> dict[ObjectKey, Service]:
    return {s.key: s for s in items}


def route(
    namespace: str,
    name: str,
    *,
    parents: list[dict[str, Any]] | None = None,
    rules: list[dict[str, Any]] | None = None,
    created: str = "2024-01-01T00:00:00Z",
    generation: int = 1,
) -> HTTPRoute:
    spec: dict[str, Any] = {
        "parentRefs": parents
        if parents is not None
        else [{"group": "", "kind": "Service", "name": "web"}],
    }
    if rules is not None:
        spec["rules"] = rules
    return parse_http_route(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": created,
                "generation": generation,
            },
            "spec": spec,
        }
    )


def backend_rule(*refs: dict[str, Any]) -> dict[str, Any]:
    return {"backendRefs": list(refs)}


def grant(
    namespace: str,
    *,
    from_group: str = GATEWAY_GROUP,
    from_kind: str = "HTTPRoute",
    from_namespace: str = "shop",
    to_group: str = "",
    to_kind: str = "Service",
    to_name: str | None = None,
) -> ReferenceGrant:
    to: dict[str, Any] = {"group": to_group, "kind": to_kind}
    if to_name is not None:
        to["name"] = to_name
    return parse_reference_grant(
        {
            "metadata": {"name": "g", "namespace": namespace},
            "spec": {
                "from": [{"group": from_group, "kind": from_kind, "namespace": from_namespace}],
                "to": [to],
            },
        }
    )


def only_backend(resolved: ResolvedRoute) -> Backend:
    (rule,) = resolved.rules
    (backend,) = rule.backends
    return backend


# --- resolve_route ---------------------------------------------------------------------------


def test_existing_backend_resolves() -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "api", "port": 8080, "weight": 7})])
    backend = only_backend(resolve_route(r, services(svc("shop", "api", 8080)), []))
    assert backend == Backend(
        kind="Service",
        group="",
        namespace="shop",
        name="api",
        port=8080,
        weight=7,
        exists=True,
    )


def test_missing_backend_is_kept_with_its_reference_and_a_500_naming_it() -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "api", "port": 8080, "weight": 3})])
    backend = only_backend(resolve_route(r, {}, []))
    assert (backend.kind, backend.namespace, backend.name, backend.port, backend.weight) == (
        "Service",
        "shop",
        "api",
        8080,
        3,
    )
    assert backend.exists is False
    assert backend.reason == "BackendNotFound"
    assert backend.failure_injector == FailureInjector(
        status=500, message="backend Service shop/api does not exist"
    )


def test_backend_becomes_valid_when_its_service_appears_and_invalid_when_it_goes() -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "api", "port": 8080})])
    before = resolve_route(r, {}, [])
    after = resolve_route(r, services(svc("shop", "api", 8080)), [])
    again = resolve_route(r, {}, [])
    assert only_backend(after).exists
    assert only_backend(after).failure_injector is None
    assert before == again
    assert before != after


BACKEND_CASES = [
    pytest.param(
        {"name": "api", "port": 9999},
        [svc("shop", "api", 8080)],
        [],
        "BackendNotFound",
        "backend Service shop/api has no port 9999",
        id="port-not-on-service",
    ),
    pytest.param(
        {"name": "api"},
        [svc("shop", "api", 8080)],
        [],
        "BackendNotFound",
        "backend Service shop/api: port is required",
        id="port-missing",
    ),
    pytest.param(
        {"group": "apps", "kind": "Deployment", "name": "api", "port": 8080},
        [svc("shop", "api", 8080)],
        [],
        "InvalidKind",
        "backend Deployment shop/api: kind 'Deployment' in group 'apps' is not supported; "
        "only core Services can be backends",
        id="unknown-kind",
    ),
    pytest.param(
        {"group": "example.com", "kind": "Service", "name": "api", "port": 8080},
        [svc("shop", "api", 8080)],
        [],
        "InvalidKind",
        None,
        id="service-kind-in-other-group",
    ),
    pytest.param(
        {"name": "api", "namespace": "other", "port": 8080},
        [svc("other", "api", 8080)],
        [],
        "RefNotPermitted",
        "backend Service other/api: no ReferenceGrant in namespace other permits references "
        "from HTTPRoutes in namespace shop",
        id="cross-namespace-without-grant",
    ),
    pytest.param(
        {"name": "api", "namespace": "other", "port": 8080},
        [],
        [grant("other")],
        "BackendNotFound",
        "backend Service other/api does not exist",
        id="cross-namespace-granted-but-missing",
    ),
]


@pytest.mark.parametrize(("ref", "present", "grants", "reason", "message"), BACKEND_CASES)
def test_backends_that_cannot_carry_traffic(
    ref: dict[str, Any],
    present: list[Service],
    grants: list[ReferenceGrant],
    reason: str,
    message: str | None,
) -> None:
    backend = only_backend(
        resolve_route(route("shop", "r", rules=[backend_rule(ref)]), services(*present), grants)
    )
    assert backend.exists is False
    assert backend.reason == reason
    assert backend.failure_injector is not None
    assert backend.failure_injector.status == 500
    assert "api" in backend.failure_injector.message
    if message is not None:
        assert backend.failure_injector.message == message
    # The reference data is kept so the backend can come back to life.
    assert backend.name == "api"
    assert backend.kind == ref.get("kind", "Service")
    assert backend.namespace == ref.get("namespace", "shop")
    assert backend.port == ref.get("port")


GRANT_CASES = [
    pytest.param(grant("other"), True, id="grant-for-all-services"),
    pytest.param(grant("other", to_name="api"), True, id="grant-for-this-service"),
    pytest.param(grant("other", to_group="core"), True, id="grant-spelling-core"),
    pytest.param(grant("shop"), False, id="grant-in-wrong-namespace"),
    pytest.param(grant("third"), False, id="grant-in-unrelated-namespace"),
    pytest.param(grant("other", from_group=""), False, id="wrong-from-group"),
    pytest.param(grant("other", from_kind="GRPCRoute"), False, id="wrong-from-kind"),
    pytest.param(grant("other", from_namespace="edge"), False, id="wrong-from-namespace"),
    pytest.param(grant("other", to_group="apps"), False, id="wrong-to-group"),
    pytest.param(grant("other", to_kind="Secret"), False, id="wrong-to-kind"),
    pytest.param(grant("other", to_name="api-v2"), False, id="wrong-to-name"),
]


@pytest.mark.parametrize(("the_grant", "permitted"), GRANT_CASES)
def test_cross_namespace_backend_needs_a_matching_grant(
    the_grant: ReferenceGrant, permitted: bool
) -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "api", "namespace": "other", "port": 80})])
    backend = only_backend(resolve_route(r, services(svc("other", "api", 80)), [the_grant]))
    assert backend.exists is permitted
    assert backend.reason == (None if permitted else "RefNotPermitted")


def test_same_namespace_backend_needs_no_grant() -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "api", "namespace": "shop", "port": 80})])
    assert only_backend(resolve_route(r, services(svc("shop", "api", 80)), [])).exists


def test_weight_zero_backend_is_kept_with_weight_zero() -> None:
    r = route(
        "shop",
        "r",
        rules=[backend_rule({"name": "a", "port": 80, "weight": 0}, {"name": "b", "port": 80})],
    )
    (rule,) = resolve_route(r, services(svc("shop", "a", 80), svc("shop", "b", 80)), []).rules
    assert [(b.name, b.weight, b.exists) for b in rule.backends] == [("a", 0, True), ("b", 1, True)]


def test_resolved_route_carries_everything_the_policy_and_status_need() -> None:
    r = parse_http_route(
        {
            "metadata": {
                "name": "r",
                "namespace": "shop",
                "generation": 4,
                "creationTimestamp": "2024-02-03T04:05:06Z",
            },
            "spec": {
                "parentRefs": [
                    {"group": "", "kind": "Service", "name": "web", "port": 80},
                    {"name": "gw"},
                    {"group": "core", "kind": "Service", "name": "web", "namespace": "front"},
                ],
                "hostnames": ["web.shop"],
                "rules": [
                    {
                        "name": "one",
                        "matches": [{"path": {"type": "Exact", "value": "/a"}}],
                        "filters": [
                            {
                                "type": "RequestHeaderModifier",
                                "requestHeaderModifier": {"add": [{"name": "x", "value": "1"}]},
                            }
                        ],
                        "backendRefs": [{"name": "gone", "port": 80}, {"name": "api", "port": 80}],
                        "timeouts": {"request": "5s"},
                    }
                ],
            },
        }
    )
    resolved = resolve_route(r, services(svc("shop", "api", 80)), [])
    assert resolved.key == ObjectKey(namespace="shop", name="r")
    assert (resolved.kind, resolved.group, resolved.generation) == ("HTTPRoute", GATEWAY_GROUP, 4)
    assert resolved.creation_timestamp == datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert [(p.namespace, p.name, p.port) for p in resolved.parents] == [
        ("shop", "web", 80),
        ("front", "web", None),
    ]
    assert resolved.hostnames == ("web.shop",)
    (rule,) = resolved.rules
    assert rule.name == "one"
    assert rule.matches[0].path.type == "Exact"
    assert rule.filters[0].type == "RequestHeaderModifier"
    assert rule.timeouts is not None
    assert rule.timeouts.request == "5s"
    assert [b.name for b in resolved.unresolved_backends] == ["gone"]


# --- dependencies ----------------------------------------------------------------------------


def test_route_depends_on_its_backend_and_parent_services_only() -> None:
    r = route(
        "shop",
        "r",
        parents=[
            {"group": "", "kind": "Service", "name": "web"},
            {"group": "", "kind": "Service", "name": "web", "namespace": "front"},
            {"name": "gw"},
        ],
        rules=[
            backend_rule(
                {"name": "a", "port": 80}, {"name": "b", "namespace": "other", "port": 80}
            ),
            backend_rule({"kind": "Deployment", "group": "apps", "name": "d", "port": 80}),
        ],
    )
    assert route_service_dependencies(r) == {
        ObjectKey(namespace="shop", name="web"),
        ObjectKey(namespace="front", name="web"),
        ObjectKey(namespace="shop", name="a"),
        ObjectKey(namespace="other", name="b"),
    }
    assert route_grant_namespaces(r) == {"other"}


def test_route_without_cross_namespace_backends_needs_no_grants() -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "a", "namespace": "shop", "port": 80})])
    assert route_grant_namespaces(r) == frozenset()


# --- build_outbound_policy -------------------------------------------------------------------

WEB = svc("shop", "web", ("http", 80), ("admin", 9000))


def resolved_routes(
    *routes: HTTPRoute, present: tuple[Service, ...] = (WEB,)
) -> list[ResolvedRoute]:
    return [resolve_route(r, services(*present), []) for r in routes]


def attached_names(policy_routes: Any) -> list[str]:
    return [f"{r.namespace}/{r.name}" for r in policy_routes]


@pytest.mark.parametrize(
    ("parent", "port", "attached"),
    [
        ({"group": "", "kind": "Service", "name": "web"}, 80, True),
        ({"group": "", "kind": "Service", "name": "web"}, 9000, True),
        ({"group": "", "kind": "Service", "name": "web", "port": 80}, 80, True),
        ({"group": "", "kind": "Service", "name": "web", "port": 80}, 9000, False),
        ({"group": "", "kind": "Service", "name": "web", "sectionName": "admin"}, 9000, True),
        ({"group": "", "kind": "Service", "name": "web", "sectionName": "admin"}, 80, False),
        ({"group": "", "kind": "Service", "name": "web", "port": 81}, 81, False),
        ({"group": "", "kind": "Service", "name": "other"}, 80, False),
        ({"name": "web"}, 80, False),  # a Gateway named web is not this Service
    ],
)
def test_route_attaches_by_service_parent_and_port(
    parent: dict[str, Any], port: int, attached: bool
) -> None:
    routes = resolved_routes(route("shop", "r", parents=[parent]))
    policy = build_outbound_policy(WEB, "shop", "web", port, "shop", routes)
    assert (attached_names(policy.routes) == ["shop/r"]) is attached
    if not attached:
        assert [r.kind for r in policy.routes] == ["Default"]


def test_producer_routes_apply_where_the_client_namespace_has_no_consumer_route() -> None:
    producer = route("shop", "producer")
    consumer = route(
        "front",
        "consumer",
        parents=[{"group": "", "kind": "Service", "name": "web", "namespace": "shop"}],
    )
    routes = resolved_routes(producer, consumer)
    seen = {
        client: attached_names(build_outbound_policy(WEB, "shop", "web", 80, client, routes).routes)
        for client in ("shop", "front", "elsewhere")
    }
    assert seen == {
        "shop": ["shop/producer"],
        # GEP-1294: a namespace with consumer routes for the Service uses only those.
        "front": ["front/consumer"],
        "elsewhere": ["shop/producer"],
    }


def test_routes_are_ordered_oldest_first_then_by_namespace_and_name() -> None:
    parent = [{"group": "", "kind": "Service", "name": "web", "namespace": "shop"}]
    routes = resolved_routes(
        route("shop", "zeta", parents=parent, created="2024-01-01T00:00:00Z"),
        route("shop", "new", parents=parent, created="2024-06-01T00:00:00Z"),
        route("shop", "alpha", parents=parent, created="2024-01-01T00:00:00Z"),
        route("front", "zeta", parents=parent, created="2024-01-01T00:00:00Z"),
        route("shop", "old", parents=parent, created="2023-01-01T00:00:00Z"),
    )
    # Seen from the Service's own namespace: its producer routes (front's consumer route
    # applies to front only, and there alone: see consumer precedence).
    policy = build_outbound_policy(WEB, "shop", "web", 80, "shop", routes)
    assert attached_names(policy.routes) == ["shop/old", "shop/alpha", "shop/zeta", "shop/new"]


def test_no_route_gives_a_default_route_to_the_service_port() -> None:
    policy = build_outbound_policy(WEB, "shop", "web", 80, "front", [])
    assert policy_json(policy) == {
        "namespace": "shop",
        "service": "web",
        "port": 80,
        "clientNamespace": "front",
        "protocol": "detect",
        "failureAccrual": None,
        "routes": [
            {
                "kind": "Default",
                "group": "",
                "namespace": "shop",
                "name": "web",
                "creationTimestamp": None,
                "hostnames": [],
                "rules": [
                    {
                        "name": None,
                        "matches": [
                            {
                                "path": {"type": "PathPrefix", "value": "/"},
                                "headers": [],
                                "queryParams": [],
                                "method": None,
                            }
                        ],
                        "filters": [],
                        "timeouts": {
                            "request": None,
                            "backendRequest": None,
                            "response": None,
                            "idle": None,
                        },
                        "retry": None,
                        "distribution": "FirstAvailable",
                        "backends": [
                            {
                                "kind": "Service",
                                "namespace": "shop",
                                "name": "web",
                                "port": 80,
                                "weight": 1,
                                "exists": True,
                                "failureInjector": None,
                                "filters": [],
                            }
                        ],
                    }
                ],
            }
        ],
    }


@pytest.mark.parametrize(
    ("service", "message"),
    [
        (None, "Service shop/web does not exist"),
        (svc("shop", "web", 8080), "Service shop/web has no port 80"),
    ],
)
def test_default_route_to_a_missing_service_or_port_fails_with_500(
    service: Service | None, message: str
) -> None:
    policy = build_outbound_policy(service, "shop", "web", 80, "shop", [])
    (default,) = policy.routes
    (backend,) = default.rules[0].backends
    assert default.kind == "Default"
    assert backend.exists is False
    assert backend.failure_injector == FailureInjector(message=message)


@pytest.mark.parametrize(
    "parent_service",
    [
        None,
        svc("shop", "web", 80, clusterIP="None"),
        svc("shop", "web", 80, type="ExternalName", externalName="example.com"),
    ],
    ids=["missing", "headless", "external-name"],
)
def test_routes_do_not_attach_to_a_parent_that_cannot_take_them(
    parent_service: Service | None,
) -> None:
    routes = resolved_routes(route("shop", "r"))
    policy = build_outbound_policy(parent_service, "shop", "web", 80, "shop", routes)
    assert [r.kind for r in policy.routes] == ["Default"]


def test_policy_json_has_the_contract_shape() -> None:
    r = route(
        "shop",
        "r",
        created="2024-02-03T04:05:06Z",
        rules=[
            {
                "matches": [{"path": {"type": "Exact", "value": "/a"}, "method": "GET"}],
                "filters": [
                    {
                        "type": "RequestHeaderModifier",
                        "requestHeaderModifier": {"set": [{"name": "x", "value": "1"}]},
                    }
                ],
                "backendRefs": [{"name": "gone", "port": 80, "weight": 2}],
                "timeouts": {"backendRequest": "2s"},
            }
        ],
    )
    policy = build_outbound_policy(WEB, "shop", "web", 80, "shop", resolved_routes(r))
    (route_json,) = policy_json(policy)["routes"]
    assert route_json["kind"] == "HTTPRoute"
    assert route_json["group"] == GATEWAY_GROUP
    assert route_json["creationTimestamp"] == "2024-02-03T04:05:06Z"
    (rule_json,) = route_json["rules"]
    assert set(rule_json) == {
        "name",
        "matches",
        "filters",
        "timeouts",
        "retry",
        "distribution",
        "backends",
    }
    assert rule_json["matches"][0]["method"] == "GET"
    assert rule_json["filters"] == [
        {
            "type": "RequestHeaderModifier",
            "requestHeaderModifier": {
                "set": [{"name": "x", "value": "1"}],
                "add": [],
                "remove": [],
            },
        }
    ]
    assert rule_json["timeouts"] == {
        "request": None,
        "backendRequest": "2s",
        "response": None,
        "idle": None,
    }
    assert rule_json["backends"] == [
        {
            "kind": "Service",
            "namespace": "shop",
            "name": "gone",
            "port": 80,
            "weight": 2,
            "exists": False,
            "failureInjector": {
                "status": 500,
                "message": "backend Service shop/gone does not exist",
            },
            "filters": [],
        }
    ]


def test_rule_without_backends_sends_to_the_parent_port_unless_it_redirects() -> None:
    r = route(
        "shop",
        "r",
        rules=[
            {"matches": [{"path": {"value": "/a"}}]},
            {
                "matches": [{"path": {"value": "/old"}}],
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}],
            },
        ],
    )
    policy = build_outbound_policy(WEB, "shop", "web", 9000, "shop", resolved_routes(r))
    to_parent, redirect = policy.routes[0].rules
    assert [(b.name, b.port, b.exists) for b in to_parent.backends] == [("web", 9000, True)]
    assert redirect.backends == ()


def test_equal_inputs_give_equal_policies_and_a_service_change_shows() -> None:
    r = route("shop", "r", rules=[backend_rule({"name": "api", "port": 80})])
    without = build_outbound_policy(WEB, "shop", "web", 80, "shop", resolved_routes(r))
    assert without == build_outbound_policy(WEB, "shop", "web", 80, "shop", resolved_routes(r))
    with_api = build_outbound_policy(
        WEB, "shop", "web", 80, "shop", resolved_routes(r, present=(WEB, svc("shop", "api", 80)))
    )
    assert with_api != without
    assert with_api.routes[0].rules[0].backends[0].exists
