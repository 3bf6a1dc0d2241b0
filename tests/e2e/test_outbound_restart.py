"""The API server restarts while the controller runs (a control-plane upgrade, a crash): every
informer reconnects on its own, a change made after the restart reaches the open policy watch,
and the leader goes on writing status. On the real lane this restarts kube-apiserver itself
(``hack/real-cluster.sh restart``), etcd keeping the data."""

from __future__ import annotations

from typing import Any

from interlock.controller.app import Controller
from interlock.kube.transport import KubeApiError
from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import backend, backends_of, http_route, parent, service

ROUTE = http_route("r", parents=[parent("web")], backends=[backend("api")])


async def apply_when_served(cluster: Cluster, obj: dict[str, Any]) -> None:
    """Apply ``obj`` once the API server answers again (connections from before the restart
    are gone; the server may still be starting)."""

    async def applied() -> bool:
        try:
            await cluster.apply(obj)
        except KubeApiError as error:
            if error.code not in (0, 429, 500, 503):
                raise
            return False
        return True

    await eventually(applied, within=90.0, message=f"{obj['kind']} applied after the restart")


def accepted(route: dict[str, Any] | None, resolved: str) -> bool:
    for entry in ((route or {}).get("status") or {}).get("parents", []):
        for condition in entry.get("conditions", []):
            if condition["type"] == "ResolvedRefs" and condition["status"] == resolved:
                return True
    return False


async def test_a_change_after_an_api_server_restart_reaches_the_open_watch(
    cluster: Cluster, policy: PolicyClient, controller: Controller
):
    await cluster.apply(service("web"))
    await cluster.apply(ROUTE)
    watch = await policy.watch("web")
    await watch.until(lambda p: backends_of(p) == [("api", False, 500)])

    async def resolved(status: str) -> bool:
        return accepted(await cluster.get(ROUTE), status)

    await eventually(lambda: resolved("False"), message="ResolvedRefs False (api is missing)")

    await cluster.faults.restart()
    await apply_when_served(cluster, service("api"))

    await watch.until(lambda p: backends_of(p) == [("api", True, None)], within=90.0)
    assert controller.inspect().reconnects >= 1
    # Leadership survived it (or was taken again): the status follows the change.
    await eventually(lambda: resolved("True"), within=60.0, message="ResolvedRefs True")
    watch.close()
