"""A route the model cannot read: withdrawn from policies, reported on its status, and the
controller carries on."""

from __future__ import annotations

import pytest
from e2e_clients import Cluster, PolicyClient, eventually
from outbound_objects import backend, http_route, parent, route_names, service

from interlock.app import Controller

GOOD = http_route("r", parents=[parent("web")], backends=[backend("api")])
BAD = http_route("r", parents=[parent("web")], backends=[backend("api", weight=-5)])


@pytest.mark.embedded_only(
    "a real API server refuses a negative backend weight at admission (the CRD's minimum: 0)"
)
async def test_invalid_route_is_reported_and_withdrawn(
    cluster: Cluster, policy: PolicyClient, controller: Controller
):
    await cluster.apply(service("web"))
    await cluster.apply(service("api"))
    await cluster.apply(GOOD)
    watch = await policy.watch("web")
    await watch.until(lambda p: route_names(p) == ["HTTPRoute:default/r"])

    await cluster.apply(BAD)
    await watch.until(lambda p: route_names(p) == ["Default:default/web"])

    async def rejected() -> bool:
        route = await cluster.get(BAD)
        assert route is not None
        for entry in (route.get("status") or {}).get("parents", []):
            for condition in entry.get("conditions", []):
                if condition["type"] == "Accepted" and condition["status"] == "False":
                    return "spec.rules[0].backendRefs[0].weight" in condition["message"]
        return False

    await eventually(rejected, message="Accepted False naming the field")
    # The controller is still working: another route is served, and the fix brings r back.
    await cluster.apply(http_route("other", parents=[parent("web")], backends=[backend("api")]))
    await watch.until(lambda p: "HTTPRoute:default/other" in route_names(p))
    await cluster.apply(GOOD)
    both = ["HTTPRoute:default/other", "HTTPRoute:default/r"]
    await watch.until(lambda p: sorted(route_names(p)) == both)
    watch.close()
