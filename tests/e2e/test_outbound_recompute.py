"""A Service toggled 100 times while 1,000 routes exist wakes only the
routes that reference it (counted with the runtime's per-actor statistics)."""

from __future__ import annotations

import asyncio

from interlock.actors.messages import route_address
from tests.kit.e2e_clients import Cluster, PolicyClient, StartController, eventually
from tests.kit.lanes import LEASE_NAMESPACE
from tests.kit.outbound_objects import backend, backends_of, http_route, parent, service

ROUTES = 1000
PARENTS = 100
REFERENCING = 10
TOGGLES = 100


def route(i: int) -> dict:
    backends = [backend(f"b-{i}")]
    if i < REFERENCING:
        backends.append(backend("hot"))
    return http_route(f"r-{i}", parents=[parent(f"web-{i % PARENTS}")], backends=backends)


def held_lease() -> dict:
    # Another replica holds the Lease for an hour: this controller writes no status, so route
    # objects do not change under the test and every route message counted is a recompute.
    now = "2026-01-01T00:00:00.000000Z"
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "interlock", "namespace": LEASE_NAMESPACE},
        "spec": {
            "holderIdentity": "another-replica",
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
        },
    }


async def create_all(cluster: Cluster, objects: list[dict]) -> None:
    """Create many objects over HTTP, a few at a time."""
    pending = iter(objects)

    async def worker() -> None:
        for obj in pending:
            await cluster.create(obj)

    await asyncio.gather(*(worker() for _ in range(8)))


async def test_toggling_a_backend_recomputes_only_the_routes_that_reference_it(
    cluster: Cluster, start_controller: StartController, http
):
    await cluster.create(held_lease())
    controller = await start_controller(identity="replica-1")
    assert controller.policy_site is not None
    policy = PolicyClient(http, controller.policy_site.url)
    await create_all(cluster, [service(f"web-{i}") for i in range(PARENTS)])
    await create_all(cluster, [route(i) for i in range(ROUTES)])
    system = controller.system
    addresses = [route_address("default", f"r-{i}") for i in range(ROUTES)]
    await eventually(
        lambda: all(system.exists(a) for a in addresses) and controller.inspect().idle,
        within=30.0,
        message="1,000 route actors settled",
    )
    watch = await policy.watch("web-0")
    assert ("hot", False, 500) in backends_of(watch.latest)
    before = {a: system.actor_statistics(a).processed for a in addresses}

    for _ in range(TOGGLES):
        await cluster.apply(service("hot"))
        await cluster.delete(service("hot"))
    await cluster.apply(service("hot"))
    await watch.until(lambda p: ("hot", True, None) in backends_of(p), within=60.0)
    await eventually(lambda: controller.inspect().idle, message="actors idle")

    woken = {a for a in addresses if system.actor_statistics(a).processed != before[a]}
    assert woken == set(addresses[:REFERENCING])
    recomputes = sum(system.actor_statistics(a).processed - before[a] for a in woken)
    # At most one per event (bursts coalesce in the mailbox), at least one per route.
    assert REFERENCING <= recomputes <= REFERENCING * (2 * TOGGLES + 1)
    assert not controller.inspect().leading
    watch.close()
