"""Route parents, client namespaces and route order reach open watches, end to end."""

from __future__ import annotations

from tests.kit.e2e_clients import Cluster, PolicyClient
from tests.kit.outbound_objects import backend, http_route, parent, route_names, service


async def test_moving_a_parent_ref_moves_the_route(cluster: Cluster, policy: PolicyClient):
    for name in ("a", "b", "api"):
        await cluster.apply(service(name))
    await cluster.apply(http_route("r", parents=[parent("a")], backends=[backend("api")]))
    watch_a = await policy.watch("a")
    watch_b = await policy.watch("b")
    await watch_a.until(lambda p: route_names(p) == ["HTTPRoute:default/r"])
    assert route_names(watch_b.latest) == ["Default:default/b"]
    await cluster.apply(http_route("r", parents=[parent("b")], backends=[backend("api")]))
    await watch_a.until(lambda p: route_names(p) == ["Default:default/a"])
    await watch_b.until(lambda p: route_names(p) == ["HTTPRoute:default/r"])
    watch_a.close()
    watch_b.close()


async def test_consumer_routes_only_for_their_namespace_producer_routes_for_all(
    cluster: Cluster, policy: PolicyClient
):
    for namespace in ("shop", "pay"):
        await cluster.namespace(namespace)
    await cluster.apply(service("web"))
    await cluster.apply(service("api"))
    await cluster.apply(service("api", namespace="shop"))
    await cluster.tick()
    await cluster.apply(http_route("producer", parents=[parent("web")], backends=[backend("api")]))
    await cluster.tick()
    await cluster.apply(
        http_route(
            "consumer",
            namespace="shop",
            parents=[parent("web", namespace="default")],
            backends=[backend("api")],
        )
    )
    shop = await policy.watch("web", client="shop")
    # GEP-1294: a namespace with consumer routes for the Service uses only those, even where an
    # older producer route matches the same requests.
    await shop.until(lambda p: route_names(p) == ["HTTPRoute:shop/consumer"])
    for client in ("pay", "default"):
        assert route_names(await policy.get("web", client=client)) == ["HTTPRoute:default/producer"]
    shop.close()


async def test_routes_ordered_by_creation_then_name_default_when_none(
    cluster: Cluster, policy: PolicyClient
):
    await cluster.apply(service("web"))
    await cluster.apply(service("api"))
    watch = await policy.watch("web")
    assert route_names(watch.latest) == ["Default:default/web"]
    await cluster.tick()
    await cluster.apply(http_route("zeta", parents=[parent("web")], backends=[backend("api")]))
    await cluster.tick()
    # In the same second (as they nearly always are) the name decides; creationTimestamp has
    # one-second resolution, so the order expected is computed from what the server stamped.
    later = [
        await cluster.apply(http_route(name, parents=[parent("web")], backends=[backend("api")]))
        for name in ("beta", "alpha")
    ]
    later.sort(key=lambda o: (o["metadata"]["creationTimestamp"], o["metadata"]["name"]))
    expected = ["HTTPRoute:default/zeta"]
    expected += [f"HTTPRoute:default/{o['metadata']['name']}" for o in later]
    await watch.until(lambda p: route_names(p) == expected)
    for name in ("zeta", "alpha", "beta"):
        await cluster.delete(http_route(name, parents=[], backends=[]))
    await watch.until(lambda p: route_names(p) == ["Default:default/web"])
    watch.close()
