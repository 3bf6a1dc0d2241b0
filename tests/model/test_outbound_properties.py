"""Invariants of the outbound model that every consumer relies on, checked on random input.

- a backend ``exists`` exactly when it has no failure injector, and then it has no reason;
- a policy always has at least one route, and every rule of it has a match;
- a policy never loses a backend: each attached route's backends keep name, port and weight;
- the route and rule ``select_route`` picks come from the policy, and the rule really matches.
"""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.api.policy_json import policy_json
from interlock.dataplane.matching import select_route
from interlock.model.gateway import HTTPRoute, parse_http_route
from interlock.model.meta import ObjectKey
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, parse_service

NAMES = ["web", "api"]
PATHS = ["/", "/x", "/x/y", "/xy", "/x/yz"]

service_st = st.builds(
    lambda name, ports: parse_service(
        {
            "metadata": {"name": name, "namespace": "a"},
            "spec": {"ports": [{"port": p} for p in ports]},
        }
    ),
    st.just("api"),
    st.lists(st.sampled_from([80, 81]), max_size=2, unique=True),
)

route_st = st.builds(
    lambda name, parents, rules: parse_http_route(
        {
            "metadata": {"name": name, "namespace": "a"},
            "spec": {"parentRefs": parents, "rules": rules},
        }
    ),
    st.sampled_from(["r1", "r2"]),
    st.lists(
        st.fixed_dictionaries(
            {"group": st.just(""), "kind": st.just("Service"), "name": st.sampled_from(NAMES)},
            optional={"port": st.sampled_from([80, 81])},
        ),
        min_size=1,
        max_size=2,
        # The CRD refuses two refs to one parent unless their sectionNames differ.
        unique_by=lambda ref: ref["name"],
    ),
    st.lists(
        st.fixed_dictionaries(
            {
                "matches": st.lists(
                    st.fixed_dictionaries(
                        {
                            "path": st.fixed_dictionaries(
                                {
                                    "type": st.sampled_from(["Exact", "PathPrefix"]),
                                    "value": st.sampled_from(PATHS[:3]),
                                }
                            )
                        },
                        optional={"method": st.sampled_from(["GET", "POST"])},
                    ),
                    max_size=2,
                ),
                "backendRefs": st.lists(
                    st.fixed_dictionaries(
                        {"name": st.sampled_from([*NAMES, "gone"]), "weight": st.integers(0, 5)},
                        optional={
                            "port": st.sampled_from([80, 81]),
                            "kind": st.sampled_from(["Service", "Pod"]),
                            "namespace": st.sampled_from(["a", "b"]),
                        },
                    ),
                    max_size=3,
                ),
            }
        ),
        min_size=1,
        max_size=3,
    ),
)


WEB = parse_service(
    {"metadata": {"name": "web", "namespace": "a"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}}
)


def _known(services: list[Service]) -> dict[ObjectKey, Service]:
    return {s.key: s for s in services}


@settings(max_examples=150, deadline=None)
@given(
    routes=st.lists(route_st, max_size=3, unique_by=lambda r: r.metadata.name),
    services=st.lists(service_st, max_size=1),
    port=st.sampled_from([80, 81]),
    method=st.sampled_from(["GET", "POST"]),
    path=st.sampled_from(PATHS),
)
def test_outbound_invariants(
    routes: list[HTTPRoute], services: list[Service], port: int, method: str, path: str
) -> None:
    # The parent Service always exists, so that routes attach and selection has work to do.
    known = _known([*services, WEB])
    resolved = [resolve_route(r, known, []) for r in routes]
    for route, result in zip(routes, resolved, strict=True):
        assert len(result.rules) == len(route.spec.rules)
        for rule, resolved_rule in zip(route.spec.rules, result.rules, strict=True):
            assert [(b.name, b.port, b.weight) for b in resolved_rule.backends] == [
                (ref.name, ref.port, ref.weight) for ref in rule.backend_refs
            ]
            for backend in resolved_rule.backends:
                assert backend.exists == (backend.failure_injector is None)
                assert (backend.reason is None) == backend.exists
                if backend.failure_injector is not None:
                    assert backend.failure_injector.status == 500
                    assert backend.name in backend.failure_injector.message

    web = known.get(ObjectKey(namespace="a", name="web"))
    policy = build_outbound_policy(web, "a", "web", port, "a", resolved)
    assert policy.routes
    assert all(rule.matches for route in policy.routes for rule in route.rules)
    json: dict[str, Any] = policy_json(policy)
    assert len(json["routes"]) == len(policy.routes)

    found = select_route(policy, method=method, path=path, headers={}, query={})
    if found is not None:
        chosen_route, chosen_rule = found
        assert chosen_route in policy.routes
        assert chosen_rule in chosen_route.rules
        assert any(
            (m.method in (None, method))
            and (
                path == m.path.value
                if m.path.type == "Exact"
                else m.path.value == "/"
                or path == m.path.value
                or path.startswith(m.path.value + "/")
            )
            for m in chosen_rule.matches
        )
