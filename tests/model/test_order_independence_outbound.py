"""The outbound model's outputs do not depend on the order of its input collections.

Informers deliver Services, grants and routes in any order, and the actors hold them in dicts
whose order is the arrival order. If any output depended on that order, two replicas (or one
replica before and after a restart) could serve different policies for the same cluster state,
and "send only when modified" would send spurious updates.
"""

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock.api.policy_json import policy_json
from interlock.dataplane.matching import select_route
from interlock.model.gateway import (
    GATEWAY_GROUP,
    HTTPRoute,
    ReferenceGrant,
    parse_http_route,
    parse_reference_grant,
)
from interlock.model.meta import ObjectKey
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.route_status import route_status
from interlock.model.service import Service, parse_service

NAMESPACES = ["a", "b"]
SERVICE_NAMES = ["web", "api", "db"]
PORTS = [80, 81]
NOW = datetime(2024, 5, 1, tzinfo=UTC)

services_st = st.lists(
    st.tuples(
        st.sampled_from(NAMESPACES),
        st.sampled_from(SERVICE_NAMES),
        st.lists(st.sampled_from(PORTS), min_size=1, max_size=2, unique=True),
        st.booleans(),
    ),
    max_size=6,
    unique_by=lambda t: (t[0], t[1]),
).map(
    lambda items: [
        parse_service(
            {
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "ports": [{"port": p} for p in ports],
                    **({"clusterIP": "None"} if headless else {}),
                },
            }
        )
        for ns, name, ports, headless in items
    ]
)

grants_st = st.lists(
    st.builds(
        lambda ns, from_ns, from_kind, to_name: parse_reference_grant(
            {
                "metadata": {"name": f"g-{from_ns}-{from_kind}-{to_name}", "namespace": ns},
                "spec": {
                    "from": [{"group": GATEWAY_GROUP, "kind": from_kind, "namespace": from_ns}],
                    "to": [
                        {"group": "", "kind": "Service", **({"name": to_name} if to_name else {})}
                    ],
                },
            }
        ),
        st.sampled_from(NAMESPACES),
        st.sampled_from(NAMESPACES),
        st.sampled_from(["HTTPRoute", "GRPCRoute"]),
        st.sampled_from([None, *SERVICE_NAMES]),
    ),
    max_size=4,
)

match_st = st.fixed_dictionaries(
    {
        "path": st.fixed_dictionaries(
            {
                "type": st.sampled_from(["Exact", "PathPrefix"]),
                "value": st.sampled_from(["/", "/x", "/x/y"]),
            }
        ),
    },
    optional={
        "method": st.sampled_from(["GET", "POST"]),
        "headers": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["h1", "h2"]), "value": st.sampled_from(["1", "2"])}
            ),
            max_size=2,
        ),
        "queryParams": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["q1", "q2"]), "value": st.sampled_from(["1", "2"])}
            ),
            max_size=2,
        ),
    },
)

backend_st = st.fixed_dictionaries(
    {"name": st.sampled_from(SERVICE_NAMES), "weight": st.integers(0, 3)},
    optional={
        "namespace": st.sampled_from(NAMESPACES),
        "port": st.sampled_from(PORTS),
        "kind": st.sampled_from(["Service", "Pod"]),
    },
)

parent_st = st.fixed_dictionaries(
    {"group": st.just(""), "kind": st.just("Service"), "name": st.sampled_from(["web", "api"])},
    optional={"namespace": st.sampled_from(NAMESPACES), "port": st.sampled_from(PORTS)},
)


def _route(ns: str, name: str, created: int, parents: Any, rules: Any) -> HTTPRoute:
    return parse_http_route(
        {
            "metadata": {
                "name": name,
                "namespace": ns,
                "generation": 1,
                "creationTimestamp": f"2024-01-0{created}T00:00:00Z",
            },
            "spec": {"parentRefs": parents, "rules": rules},
        }
    )


route_st = st.builds(
    _route,
    st.sampled_from(NAMESPACES),
    st.sampled_from(["r1", "r2", "r3"]),
    st.integers(1, 3),
    # The CRD refuses two refs to one parent unless their sectionNames differ.
    st.lists(
        parent_st, min_size=1, max_size=2, unique_by=lambda p: (p["name"], p.get("namespace"))
    ),
    st.lists(
        st.fixed_dictionaries(
            {
                "matches": st.lists(match_st, max_size=2),
                "backendRefs": st.lists(backend_st, max_size=3),
            }
        ),
        min_size=1,
        max_size=3,
    ),
)

routes_st = st.lists(
    route_st, max_size=5, unique_by=lambda r: (r.metadata.namespace, r.metadata.name)
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _by_key(items: list[Service]) -> dict[ObjectKey, Service]:
    return {s.key: s for s in items}


@FAST
@given(route=route_st, services=services_st, grants=grants_st, data=st.data())
def test_resolve_route_and_status_ignore_service_and_grant_order(
    route: HTTPRoute, services: list[Service], grants: list[ReferenceGrant], data: st.DataObject
) -> None:
    shuffled_services = data.draw(st.permutations(services))
    shuffled_grants = data.draw(st.permutations(grants))
    first = resolve_route(route, _by_key(services), grants)
    second = resolve_route(route, _by_key(shuffled_services), shuffled_grants)
    assert first == second
    assert route_status(route, first, _by_key(services), now=NOW) == route_status(
        route, second, _by_key(shuffled_services), now=NOW
    )


@FAST
@given(
    routes=routes_st,
    services=services_st,
    grants=grants_st,
    service_ns=st.sampled_from(NAMESPACES),
    service_name=st.sampled_from(["web", "api"]),
    port=st.sampled_from(PORTS),
    client=st.sampled_from(NAMESPACES),
    request=st.tuples(
        st.sampled_from(["GET", "POST"]),
        st.sampled_from(["/", "/x", "/x/y", "/x/y/z", "/xy"]),
        st.dictionaries(st.sampled_from(["h1", "h2"]), st.sampled_from(["1", "2"])),
        st.dictionaries(st.sampled_from(["q1", "q2"]), st.sampled_from(["1", "2"])),
    ),
    data=st.data(),
)
def test_policy_and_selection_ignore_route_order(
    routes: list[HTTPRoute],
    services: list[Service],
    grants: list[ReferenceGrant],
    service_ns: str,
    service_name: str,
    port: int,
    client: str,
    request: tuple[str, str, dict[str, str], dict[str, str]],
    data: st.DataObject,
) -> None:
    known = _by_key(services)
    service = known.get(ObjectKey(namespace=service_ns, name=service_name))
    resolved = [resolve_route(r, known, grants) for r in routes]
    shuffled = data.draw(st.permutations(resolved))
    policy = build_outbound_policy(service, service_ns, service_name, port, client, resolved)
    assert policy == build_outbound_policy(
        service, service_ns, service_name, port, client, shuffled
    )
    assert policy_json(policy) == policy_json(
        build_outbound_policy(service, service_ns, service_name, port, client, shuffled)
    )

    # select_route must not lean on the policy's route order either.
    method, path, headers, query = request
    reordered = replace(policy, routes=tuple(data.draw(st.permutations(policy.routes))))
    picked = select_route(policy, method=method, path=path, headers=headers, query=query)
    again = select_route(reordered, method=method, path=path, headers=headers, query=query)
    assert picked == again
