"""A GRPCRoute on a Service parent reaches an open watch and gets a status, end to end: through the
informer, router, route actor and StatusWriter for its kind."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from interlock.api.policy_schema import OUTBOUND_POLICY_SCHEMA
from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import GATEWAY, service

VALIDATOR = Draft202012Validator(OUTBOUND_POLICY_SCHEMA)

ROUTE: dict[str, Any] = {
    "apiVersion": f"{GATEWAY}/v1",
    "kind": "GRPCRoute",
    "metadata": {"name": "users", "namespace": "default"},
    "spec": {
        "parentRefs": [{"group": "core", "kind": "Service", "name": "users", "port": 50051}],
        "rules": [
            {
                "name": "get",
                "matches": [{"method": {"service": "shop.v1.Users", "method": "Get"}}],
                "backendRefs": [{"name": "users-v2", "port": 50051}],
            }
        ],
    },
}


def only_backend(document: dict[str, Any]) -> dict[str, Any]:
    (route,) = document["routes"]
    (rule,) = route["rules"]
    (backend,) = rule["backends"]
    return backend


async def test_grpc_route_under_an_open_watch(cluster: Cluster, policy: PolicyClient):
    await cluster.apply(service("users", ports=(50051,)))
    watch = await policy.watch("users", 50051)
    # The watch may open before the controller saw the Service (real API server: later event).
    await watch.until(lambda p: only_backend(p)["exists"])
    assert watch.latest["protocol"] == "detect"

    await cluster.apply(ROUTE)
    document = await watch.next()
    VALIDATOR.validate(document)
    assert document["protocol"] == "grpc"
    assert [(r["kind"], r["name"]) for r in document["routes"]] == [("GRPCRoute", "users")]
    rule = document["routes"][0]["rules"][0]
    assert rule["grpcMatches"] == [
        {"method": {"type": "Exact", "service": "shop.v1.Users", "method": "Get"}, "headers": []}
    ]
    assert only_backend(document)["failureInjector"] == {
        "status": 500,
        "message": "backend Service default/users-v2 does not exist",
        "grpcStatus": 14,
    }

    await cluster.apply(service("users-v2", ports=(50051,)))
    document = await watch.next()
    VALIDATOR.validate(document)
    assert (only_backend(document)["exists"], only_backend(document)["failureInjector"]) == (
        True,
        None,
    )

    async def accepted_and_resolved() -> bool:
        stored = await cluster.get(ROUTE)
        entries = ((stored or {}).get("status") or {}).get("parents", [])
        ours = [e for e in entries if e.get("controllerName") == "interlock.dev/policy-controller"]
        return len(ours) == 1 and all(c["status"] == "True" for c in ours[0]["conditions"])

    await eventually(accepted_and_resolved, message="GRPCRoute Accepted and ResolvedRefs")

    await cluster.delete(ROUTE)
    document = await watch.next()
    assert [r["kind"] for r in document["routes"]] == ["Default"]
    assert document["protocol"] == "detect"
    watch.close()
