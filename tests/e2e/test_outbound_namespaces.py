"""``--namespace``: a controller limited to some namespaces sees nothing of the others."""

from __future__ import annotations

from tests.kit.e2e_clients import Cluster, PolicyClient, StartController, cluster_settings
from tests.kit.outbound_objects import (
    backend,
    backends_of,
    http_route,
    parent,
    route_names,
    service,
)


async def test_only_the_watched_namespaces_are_seen(
    cluster: Cluster, start_controller: StartController, http, kubeconfig: str
):
    await cluster.namespace("shop")
    for namespace in ("shop", "default"):
        await cluster.apply(service("web", namespace=namespace))
        await cluster.apply(service("api", namespace=namespace))
        await cluster.apply(
            http_route("r", namespace=namespace, parents=[parent("web")], backends=[backend("api")])
        )
    controller = await start_controller(
        identity="shop-only", cluster=cluster_settings(kubeconfig, namespaces=("shop",))
    )
    assert controller.policy_site is not None
    policy = PolicyClient(http, controller.policy_site.url)
    shop = await policy.get("web", namespace="shop")
    assert route_names(shop) == ["HTTPRoute:shop/r"]
    assert backends_of(shop) == [("api", True, None)]
    # default is not watched: its Service is unknown to this controller.
    other = await policy.get("web", namespace="default")
    assert route_names(other) == ["Default:default/web"]
    assert backends_of(other) == [("web", False, 500)]
