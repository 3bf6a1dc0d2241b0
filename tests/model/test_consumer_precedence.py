"""GEP-1294's consumer-route precedence: a client namespace with consumer routes for a Service
port uses only those; producer routes apply where it has none (issue 28: interlock, like
Linkerd's controller, served the union ordered by age, so an older producer route beat the
consumer's own route). The policy both APIs and the mesh listener read is built by
``build_outbound_policy``, so this is checked there, over every order the routes arrive in."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.model.gateway import parse_http_route
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import parse_service

WEB = parse_service(
    {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "http", "port": 80}]},
    }
)
NAMESPACES = ("shop", "front", "back")
"""The Service's namespace (producer routes) and two client namespaces (consumer routes)."""


def http_route(namespace: str, name: str, day: int) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": f"2024-01-{day:02d}T00:00:00Z",
        },
        "spec": {
            "parentRefs": [{"group": "", "kind": "Service", "name": "web", "namespace": "shop"}],
            "rules": [{"backendRefs": [{"name": "web", "namespace": "shop", "port": 80}]}],
        },
    }


ROUTES = st.lists(
    st.tuples(st.sampled_from(NAMESPACES), st.integers(min_value=1, max_value=5)),
    min_size=0,
    max_size=7,
)


@settings(max_examples=80, deadline=None)
@given(ROUTES, st.randoms(use_true_random=False), st.sampled_from((*NAMESPACES, "other")))
def test_a_namespace_with_consumer_routes_uses_only_those_whatever_the_order(
    specs: list[tuple[str, int]], shuffler: Any, client: str
) -> None:
    raw = [http_route(namespace, f"r{i}", day) for i, (namespace, day) in enumerate(specs)]
    resolved = [resolve_route(parse_http_route(r), {WEB.key: WEB}, ()) for r in raw]
    policy = build_outbound_policy(WEB, "shop", "web", 80, client, resolved)
    served = [(r.namespace, r.name) for r in policy.routes if r.kind == "HTTPRoute"]

    consumer = [(ns, f"r{i}") for i, (ns, _) in enumerate(specs) if ns == client != "shop"]
    producer = [(ns, f"r{i}") for i, (ns, _) in enumerate(specs) if ns == "shop"]
    assert set(served) == set(consumer or producer)
    if not served:
        assert [r.kind for r in policy.routes] == ["Default"]

    shuffled = list(resolved)
    shuffler.shuffle(shuffled)
    again = build_outbound_policy(WEB, "shop", "web", 80, client, shuffled)
    assert again == policy


def test_an_older_producer_route_does_not_shadow_the_consumers_route() -> None:
    # The case: overlapping producer and consumer routes, the producer's older.
    producer = http_route("shop", "old-producer", 1)
    consumer = http_route("front", "mine", 9)
    resolved = [
        resolve_route(parse_http_route(r), {WEB.key: WEB}, ()) for r in (producer, consumer)
    ]
    seen = {
        client: [
            r.name for r in build_outbound_policy(WEB, "shop", "web", 80, client, resolved).routes
        ]
        for client in ("front", "back", "shop")
    }
    assert seen == {"front": ["mine"], "back": ["old-producer"], "shop": ["old-producer"]}
