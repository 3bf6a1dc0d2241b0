"""Three mesh-semantics rules end to end (backendRef filters served, GEP-1294 ReferenceGrants,
parentRefs echoed by value): what an open watch receives, and what the status says.

Each change is followed by exactly the expected next document; a change that does not alter
the policy produces none, which is checked without waiting on a clock: a later change that does
alter it is made, and the next document must be that one.
"""

from __future__ import annotations

from typing import Any

from tests.kit.e2e_clients import Cluster, PolicyClient, PolicyWatch, eventually
from tests.kit.outbound_objects import GATEWAY, http_route, service

MATCH_ALL = {"path": {"type": "PathPrefix", "value": "/"}, "headers": [], "queryParams": []}
HEADER_FILTER = {
    "type": "RequestHeaderModifier",
    "requestHeaderModifier": {"set": [{"name": "x-backend", "value": "billing"}]},
}


def consumer_route(backend_refs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "timeouts", "namespace": "client"},
        "spec": {
            "parentRefs": [
                {"group": "core", "kind": "Service", "name": "web", "namespace": "shop"}
            ],
            "rules": [{"backendRefs": backend_refs, "timeouts": {"request": "5s"}}],
        },
    }


def backend_json(namespace: str, name: str, *, filters: list[Any], exists: bool) -> dict[str, Any]:
    return {
        "kind": "Service",
        "namespace": namespace,
        "name": name,
        "port": 80,
        "weight": 1,
        "exists": exists,
        "failureInjector": None
        if exists
        else {"status": 500, "message": f"backend Service {namespace}/{name} does not exist"},
        "filters": filters,
    }


def policy_json(route: dict[str, Any], backends: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "namespace": "shop",
        "service": "web",
        "port": 80,
        "clientNamespace": "client",
        "protocol": "detect",
        "failureAccrual": None,
        "routes": [
            {
                "kind": "HTTPRoute",
                "group": GATEWAY,
                "namespace": "client",
                "name": "timeouts",
                "creationTimestamp": route["metadata"]["creationTimestamp"],
                "hostnames": [],
                "rules": [
                    {
                        "name": None,
                        "matches": [{**MATCH_ALL, "method": None}],
                        "filters": [],
                        "timeouts": {
                            "request": "5s",
                            "backendRequest": None,
                            "response": None,
                            "idle": None,
                        },
                        "retry": None,
                        "distribution": "RandomWeighted",
                        "backends": backends,
                    }
                ],
            }
        ],
    }


async def next_is(watch: PolicyWatch, expected: dict[str, Any]) -> None:
    assert await watch.next() == expected


async def our_status(cluster: Cluster, route: dict[str, Any]) -> list[dict[str, Any]]:
    stored = await cluster.get(route)
    assert stored is not None
    return [
        entry
        for entry in (stored.get("status") or {}).get("parents", [])
        if entry.get("controllerName") == "interlock.dev/policy-controller"
    ]


async def test_consumer_route_to_its_parent_and_across_namespaces(
    cluster: Cluster, policy: PolicyClient
):
    for namespace in ("shop", "client", "billing"):
        await cluster.namespace(namespace)
    await cluster.apply(service("web", namespace="shop"))
    watch = await policy.watch("web", namespace="shop", client="client")
    # The watch may open before the controller saw the Service (real API server: later event).
    await watch.until(lambda p: p["routes"][0]["rules"][0]["backends"][0]["exists"])
    assert [r["kind"] for r in watch.latest["routes"]] == ["Default"]

    # The canonical mesh timeout example: the backend is the parent Service itself, in another
    # namespace than the route, with no ReferenceGrant anywhere.
    itself = consumer_route([{"name": "web", "namespace": "shop", "port": 80}])
    stored = await cluster.apply(itself)
    await next_is(
        watch, policy_json(stored, [backend_json("shop", "web", filters=[], exists=True)])
    )

    # A backend in a third namespace with a filter of its own: served, and no grant needed.
    across = consumer_route(
        [{"name": "api", "namespace": "billing", "port": 80, "filters": [HEADER_FILTER]}]
    )
    served_filter = {
        **HEADER_FILTER,
        "requestHeaderModifier": {
            "set": [{"name": "x-backend", "value": "billing"}],
            "add": [],
            "remove": [],
        },
    }
    stored = await cluster.apply(across)
    await next_is(
        watch,
        policy_json(
            stored, [backend_json("billing", "api", filters=[served_filter], exists=False)]
        ),
    )
    # A Service nobody refers to changes nothing; the backend's Service appearing does.
    await cluster.apply(service("unrelated", namespace="billing"))
    await cluster.apply(service("api", namespace="billing"))
    await next_is(
        watch,
        policy_json(stored, [backend_json("billing", "api", filters=[served_filter], exists=True)]),
    )
    watch.close()

    async def resolved() -> bool:
        entries = await our_status(cluster, across)
        return bool(entries) and all(
            c["status"] == "True" for e in entries for c in e["conditions"]
        )

    await eventually(resolved, message="Accepted and ResolvedRefs True without a grant")
    (entry,) = await our_status(cluster, across)
    # Echoed by value, as the spec wrote it.
    assert entry["parentRef"] == {
        "group": "core",
        "kind": "Service",
        "name": "web",
        "namespace": "shop",
    }


async def test_producer_route_across_namespaces_needs_a_grant(
    cluster: Cluster, policy: PolicyClient
):
    for namespace in ("shop", "billing"):
        await cluster.namespace(namespace)
    await cluster.apply(service("web", namespace="shop"))
    await cluster.apply(service("api", namespace="billing"))
    route = http_route(
        "producer",
        namespace="shop",
        parents=[{"group": "", "kind": "Service", "name": "web"}],
        backends=[{"name": "api", "namespace": "billing", "port": 80}],
    )
    await cluster.apply(route)
    # Seen from any namespace (the edge included), so the grant is required.
    watch = await policy.watch("web", namespace="shop", client="elsewhere")
    first = await watch.until(lambda p: p["routes"][0]["name"] == "producer")
    (backend,) = first["routes"][0]["rules"][0]["backends"]
    assert backend["exists"] is False
    assert "no ReferenceGrant in namespace billing" in backend["failureInjector"]["message"]
    await cluster.apply(
        {
            "apiVersion": f"{GATEWAY}/v1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "from-shop", "namespace": "billing"},
            "spec": {
                "from": [{"group": GATEWAY, "kind": "HTTPRoute", "namespace": "shop"}],
                "to": [{"group": "", "kind": "Service"}],
            },
        }
    )
    granted = await watch.next()
    (backend,) = granted["routes"][0]["rules"][0]["backends"]
    assert (backend["exists"], backend["failureInjector"]) == (True, None)
    watch.close()
