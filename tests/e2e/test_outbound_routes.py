"""Issue 5, scenarios 3, 4 and 5: parents, client namespaces and route order, end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from e2e_clients import Cluster, PolicyClient
from outbound_objects import backend, http_route, parent, route_names, service

from interlock.embedded import EmbeddedApiServer, running_api_server


class SteppingClock:
    """The API server's clock: each object created gets a later creationTimestamp."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


CLOCK = SteppingClock()


@pytest.fixture
async def api_server() -> AsyncIterator[EmbeddedApiServer]:
    async with running_api_server(bookmark_interval=0.2, clock=CLOCK) as server:
        yield server


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
    CLOCK.now += timedelta(seconds=1)
    await cluster.apply(http_route("producer", parents=[parent("web")], backends=[backend("api")]))
    CLOCK.now += timedelta(seconds=1)
    await cluster.apply(
        http_route(
            "consumer",
            namespace="shop",
            parents=[parent("web", namespace="default")],
            backends=[backend("api")],
        )
    )
    shop = await policy.watch("web", client="shop")
    await shop.until(
        lambda p: route_names(p) == ["HTTPRoute:default/producer", "HTTPRoute:shop/consumer"]
    )
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
    CLOCK.now += timedelta(seconds=10)
    await cluster.apply(http_route("zeta", parents=[parent("web")], backends=[backend("api")]))
    CLOCK.now += timedelta(seconds=10)
    # Same second: the name decides.
    await cluster.apply(http_route("beta", parents=[parent("web")], backends=[backend("api")]))
    await cluster.apply(http_route("alpha", parents=[parent("web")], backends=[backend("api")]))
    expected = ["HTTPRoute:default/zeta", "HTTPRoute:default/alpha", "HTTPRoute:default/beta"]
    await watch.until(lambda p: route_names(p) == expected)
    for name in ("zeta", "alpha", "beta"):
        await cluster.delete(http_route(name, parents=[], backends=[]))
    await watch.until(lambda p: route_names(p) == ["Default:default/web"])
    watch.close()
