"""A route the model cannot read: withdrawn from policies, reported on its status, and the
controller carries on."""

from __future__ import annotations

import pytest

from interlock.controller.app import Controller
from interlock.kube.transport import KubeApiError
from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import backend, http_route, parent, route_names, service

GOOD = http_route("r", parents=[parent("web")], backends=[backend("api")])
# Admitted by the Gateway API CRD, refused by interlock: it cannot mirror traffic, and the
# Gateway API forbids skipping a filter silently.
BAD = http_route("r", parents=[parent("web")], backends=[backend("api")])
BAD["spec"]["rules"][0]["filters"] = [
    {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "api", "port": 80}}}
]
NEGATIVE_WEIGHT = http_route("w", parents=[parent("web")], backends=[backend("api", weight=-5)])


async def test_a_negative_weight_is_refused_at_admission(cluster: Cluster) -> None:
    """Both API servers refuse what the CRD's schema refuses (its minimum: 0)."""
    with pytest.raises(KubeApiError) as refused:
        await cluster.apply(NEGATIVE_WEIGHT)
    assert (refused.value.code, refused.value.reason) == (422, "Invalid")
    assert "spec.rules[0].backendRefs[0].weight" in refused.value.message


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
                    return "spec.rules[0].filters[0]" in condition["message"]
        return False

    await eventually(rejected, message="Accepted False naming the field")
    # The controller is still working: another route is served, and the fix brings r back.
    await cluster.apply(http_route("other", parents=[parent("web")], backends=[backend("api")]))
    await watch.until(lambda p: "HTTPRoute:default/other" in route_names(p))
    await cluster.apply(GOOD)
    both = ["HTTPRoute:default/other", "HTTPRoute:default/r"]
    await watch.until(lambda p: sorted(route_names(p)) == both)
    watch.close()
