"""Dropped watch connections and a 410 in the middle of a burst of changes.

Whatever the informers went through, the policies the open watches end on must equal what a
fresh controller computes from the final state of the cluster.
"""

from __future__ import annotations

import random

import pytest

from interlock.controller.app import Controller
from tests.kit.e2e_clients import Cluster, PolicyClient, StartController, eventually
from tests.kit.outbound_objects import backend, http_route, parent, service

PARENTS = ("web-0", "web-1", "web-2")
BACKENDS = tuple(f"api-{i}" for i in range(6))


@pytest.mark.compaction
async def test_final_policies_equal_a_fresh_controllers_after_drops_and_410(
    cluster: Cluster,
    controller: Controller,
    policy: PolicyClient,
    start_controller: StartController,
    http,
):
    rng = random.Random(7)
    for name in PARENTS:
        await cluster.apply(service(name))
    watches = {name: await policy.watch(name) for name in PARENTS}

    for step in range(120):
        action = rng.random()
        if action < 0.4:
            name = rng.choice(BACKENDS)
            if rng.random() < 0.5:
                await cluster.apply(service(name))
            else:
                await cluster.delete(service(name))
        else:
            route = http_route(
                f"r-{rng.randrange(8)}",
                parents=[parent(rng.choice(PARENTS))],
                backends=[backend(rng.choice(BACKENDS)), backend(rng.choice(BACKENDS))],
            )
            if rng.random() < 0.8:
                await cluster.apply(route)
            else:
                await cluster.delete(route)
        if step == 40:
            cluster.faults.drop_watches()
        if step == 70:
            # While no informer can watch: connections dropped, a change of each kind, then
            # the history forgotten. Every informer's next watch is from a forgotten
            # resourceVersion and gets 410.
            async with cluster.faults.watches_cut():
                await cluster.apply(service("api-late"))
                await cluster.apply(
                    http_route(
                        "r-late", parents=[parent(PARENTS[0])], backends=[backend("api-late")]
                    )
                )
                await cluster.faults.compact()
        if step == 90:
            cluster.faults.drop_watches()

    # The informers went through it (they may still be in their reconnect backoff).
    await eventually(lambda: controller.inspect().relists >= 1, message="a relist after 410")
    assert controller.inspect().reconnects >= 3

    fresh = await start_controller(identity="fresh")
    assert fresh.policy_site is not None
    fresh_policy = PolicyClient(http, fresh.policy_site.url)
    for name, watch in watches.items():
        expected = await fresh_policy.get(name)
        await watch.until(lambda p, expected=expected: p == expected, within=60.0)
        # And the controller that lived through it all answers the same to a new GET.
        assert await policy.get(name) == expected
        watch.close()
