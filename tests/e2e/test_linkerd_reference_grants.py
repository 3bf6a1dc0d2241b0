"""``--lax-reference-grants``: Linkerd's reading of ReferenceGrants, one flag away (issue 28).

interlock follows GEP-1294: a producer route (in its parent Service's namespace) reaches every
client and the edge, so its backend in another namespace needs a ReferenceGrant there. Linkerd's
controller uses such a backend without one. Both readings are reasonable for a mesh that trusts
its namespaces; the deviation is a flag, off by default, so it is always visible.
"""

from __future__ import annotations

from dataclasses import replace

import aiohttp
import pytest

from tests.kit.e2e_clients import TEST_POLICY, Cluster, PolicyClient, StartController
from tests.kit.outbound_objects import backend, backends_of, http_route, parent, service

ROUTE = http_route(
    "to-billing",
    namespace="shop",
    parents=[parent("web", port=80)],
    backends=[backend("api", namespace="billing")],
)


@pytest.mark.parametrize(("lax", "expected"), [(False, (False, 500)), (True, (True, None))])
async def test_a_producer_routes_cross_namespace_backend_without_a_grant(
    cluster: Cluster,
    start_controller: StartController,
    http: aiohttp.ClientSession,
    lax: bool,
    expected: tuple[bool, int | None],
) -> None:
    for namespace in ("shop", "billing"):
        await cluster.namespace(namespace)
    await cluster.apply(service("web", namespace="shop"))
    await cluster.apply(service("api", namespace="billing"))
    await cluster.apply(ROUTE)
    controller = await start_controller(policy=replace(TEST_POLICY, lax_reference_grants=lax))
    assert controller.policy_site is not None
    policy = PolicyClient(http, controller.policy_site.url)
    watch = await policy.watch("web", namespace="shop")
    try:
        served = await watch.until(lambda p: [b[0] for b in backends_of(p)] == ["api"])
    finally:
        watch.close()
    assert backends_of(served) == [("api", *expected)]
