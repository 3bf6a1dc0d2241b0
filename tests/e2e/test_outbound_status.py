"""HTTPRoute status, observedGeneration, and only the Lease holder writes."""

from __future__ import annotations

from typing import Any

from interlock.kube.client_metrics import client_metrics
from tests.kit.e2e_clients import Cluster, StartController, eventually
from tests.kit.outbound_objects import backend, http_route, parent, service

ROUTE = http_route("r", parents=[parent("web")], backends=[backend("api")])


async def conditions(cluster: Cluster) -> dict[str, tuple[str, str, int]]:
    """Our conditions on the route: type → (status, reason, observedGeneration)."""
    route = await cluster.get(ROUTE)
    assert route is not None
    found: dict[str, tuple[str, str, int]] = {}
    for entry in (route.get("status") or {}).get("parents", []):
        if entry.get("controllerName") != "interlock.dev/policy-controller":
            continue
        for condition in entry["conditions"]:
            found[condition["type"]] = (
                condition["status"],
                condition["reason"],
                condition["observedGeneration"],
            )
    return found


def status_writes(controller: Any) -> int:
    status = controller.inspect().status
    assert status is not None
    return status.writes


async def test_status_follows_the_backend_and_the_generation(
    cluster: Cluster, start_controller: StartController
):
    await start_controller(identity="replica-1")
    await cluster.apply(service("web"))
    await cluster.apply(ROUTE)

    async def backend_not_found() -> bool:
        found = await conditions(cluster)
        return found.get("ResolvedRefs", ("", "", 0))[:2] == ("False", "BackendNotFound")

    await eventually(backend_not_found, message="ResolvedRefs False/BackendNotFound")
    assert (await conditions(cluster))["Accepted"] == ("True", "Accepted", 1)

    await cluster.apply(service("api"))

    async def resolved(generation: int) -> bool:
        found = await conditions(cluster)
        return found.get("ResolvedRefs") == ("True", "ResolvedRefs", generation) and found.get(
            "Accepted"
        ) == ("True", "Accepted", generation)

    await eventually(lambda: resolved(1), message="ResolvedRefs True at generation 1")
    edited = http_route("r", parents=[parent("web")], backends=[backend("api", weight=5)])
    stored = await cluster.apply(edited)
    assert stored["metadata"]["generation"] == 2
    await eventually(lambda: resolved(2), message="observedGeneration 2")


async def leader_and_follower(start_controller: StartController) -> tuple[Any, Any]:
    """replica-1, leading, and replica-2, started once replica-1 holds the Lease."""
    leader = await start_controller(identity="replica-1")
    await eventually(lambda: leader.inspect().leading, message="replica-1 leads")
    return leader, await start_controller(identity="replica-2")


async def test_only_the_leader_writes_and_the_other_takes_over(
    cluster: Cluster, start_controller: StartController
):
    leader, follower = await leader_and_follower(start_controller)
    await cluster.apply(service("web"))
    await cluster.apply(ROUTE)

    async def reason_is(reason: str) -> bool:
        return (await conditions(cluster)).get("ResolvedRefs", ("", "", 0))[1] == reason

    await eventually(lambda: reason_is("BackendNotFound"), message="BackendNotFound")
    # The server has the status before the writer has read its answer and counted the write.
    await eventually(lambda: status_writes(leader) >= 1, message="the leader counted its write")
    assert not follower.inspect().leading
    assert status_writes(follower) == 0

    await leader.stop()
    await eventually(lambda: follower.inspect().leading, message="replica-2 takes over")
    await cluster.apply(service("api"))
    await eventually(lambda: reason_is("ResolvedRefs"), message="ResolvedRefs after takeover")
    await eventually(lambda: status_writes(follower) >= 1, message="replica-2 counted its write")


def status_patches(controller: Any) -> int:
    """PATCH requests on ``httproutes/status`` this controller's API client has sent."""
    metrics = client_metrics(controller.api)
    assert metrics is not None
    return sum(
        count
        for (verb, _group, resource, subresource, _code), count in (
            metrics.statistics().resource_requests.items()
        )
        if (verb, resource, subresource) == ("patch", "httproutes", "status")
    )


async def test_a_new_leader_over_correct_statuses_writes_nothing(
    cluster: Cluster, start_controller: StartController
):
    leader, follower = await leader_and_follower(start_controller)
    await cluster.apply(service("web"))
    await cluster.apply(service("api"))
    names = [f"r{i}" for i in range(5)]
    for name in names:
        await cluster.apply(http_route(name, parents=[parent("web")], backends=[backend("api")]))

    def follower_status() -> Any:
        status = follower.inspect().status
        assert status is not None
        return status

    # The follower agrees with every status the leader wrote once its informer shows them.
    await eventually(
        lambda: follower_status().objects >= len(names) and follower_status().to_write == 0,
        message="the follower sees the leader's statuses as its own",
    )
    # The follower's informer can show the last status before the leader has read the
    # server's answer to that write and counted it.
    await eventually(
        lambda: status_writes(leader) >= len(names), message="the leader counted every write"
    )
    assert status_patches(follower) == 0

    await leader.stop()
    await eventually(lambda: follower.inspect().leading, message="replica-2 takes over")
    # Every object checked on taking over, none of them written.
    await eventually(
        lambda: (
            follower_status().skipped >= len(names)
            and follower_status().pending == 0
            and follower_status().in_flight == 0
        ),
        message="replica-2 checked every route",
    )
    assert follower_status().writes == 0
    assert status_patches(follower) == 0

    # The same counters see a write when one is due (the test can fail).
    await cluster.apply(http_route("r0", parents=[parent("web")], backends=[backend("gone")]))
    await eventually(lambda: status_patches(follower) >= 1, message="replica-2 writes r0")
    await eventually(lambda: follower_status().writes >= 1, message="replica-2 counted it")
