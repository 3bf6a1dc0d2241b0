"""HTTPRoute status, observedGeneration, and only the Lease holder writes."""

from __future__ import annotations

from typing import Any

from e2e_clients import Cluster, StartController, eventually
from outbound_objects import backend, http_route, parent, service

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


async def test_only_the_leader_writes_and_the_other_takes_over(
    cluster: Cluster, start_controller: StartController
):
    leader = await start_controller(identity="replica-1")
    await eventually(lambda: leader.inspect().leading, message="replica-1 leads")
    follower = await start_controller(identity="replica-2")
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
