"""A route or Ingress being deleted (``deletionTimestamp`` set, a finalizer holding it) is treated
as gone (``docs/reliability.md``, "Objects being deleted") — ``interlock.model.meta.going_away``
explains why; here the user-visible half: its policy entry and its edge go at once, not when the
finalizer is removed, and nothing comes back when it finally disappears. On both lanes (the
embedded server and kube-apiserver both keep an object with finalizers until they are removed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from interlock.model.meta import going_away
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey
from tests.kit.lanes import ControlPlane
from tests.kit.reliability_kit import crd_cluster, eventually, policy_watch, ready_controller, write
from tests.kit.reliability_objects import build

HOLD = "example.com/hold"
TARGET = WatchTarget(ServicePortKey("default", "svc-a", 80), client_namespace="default")


def test_a_route_and_an_ingress_being_deleted_stop_applying_at_once(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    async def scenario() -> None:
        async with crd_cluster(tmp_path, control_plane) as cluster:
            await write(cluster, build("Service", "svc-a", 0))
            await write(cluster, build("Service", "svc-b", 0))
            route = build("HTTPRoute", "r-0", 0)  # parent svc-a, backend svc-a
            ingress = build("Ingress", "i-0", 0)  # h0.example -> svc-a
            ingress["metadata"]["annotations"] = {}
            for obj in (route, ingress):
                obj["metadata"]["finalizers"] = [HOLD]
                await write(cluster, obj)
            async with (
                ready_controller(cluster, "terminating") as controller,
                policy_watch(controller, TARGET) as slot,
            ):

                def routes() -> list[str]:
                    update = slot.latest
                    return [] if update is None else [r.name for r in update.policy.routes]

                def hosts() -> list[str]:
                    edge = controller.inspect().edge
                    assert edge is not None and edge.served is not None
                    served = edge.served.to_json()["hosts"]
                    return [h["host"] for h in served if h["routes"]]

                await eventually(lambda: routes() == ["r-0"], within=60.0, message="r-0 applies")
                await eventually(lambda: hosts() == ["h0.example"], within=60.0, message="served")

                for obj in (route, ingress):
                    await cluster.delete(obj)
                    held = await cluster.get(obj)
                    assert held is not None and held["metadata"].get("deletionTimestamp")
                await eventually(
                    lambda: "r-0" not in routes(), within=60.0, message="r-0 no longer applies"
                )
                await eventually(lambda: hosts() == [], within=60.0, message="h0 no longer served")

                for obj in (route, ingress):
                    await cluster.patch(obj, {"metadata": {"finalizers": None}})
                    await eventually(
                        lambda o=obj: _gone(cluster, o), within=60.0, message="really gone"
                    )
                await eventually(
                    lambda: controller.inspect().idle, within=60.0, message="controller idle"
                )
                assert "r-0" not in routes() and hosts() == []

    asyncio.run(scenario())


async def _gone(cluster: object, obj: dict[str, object]) -> bool:
    return await cluster.get(obj) is None  # type: ignore[attr-defined]


def test_only_routes_and_ingresses_being_deleted_are_going_away() -> None:
    deleting = {"metadata": {"name": "x", "deletionTimestamp": "2026-12-01T00:00:00Z"}}
    assert going_away("HTTPRoute", deleting) and going_away("Ingress", deleting)
    assert not going_away("HTTPRoute", {"metadata": {"name": "x", "finalizers": [HOLD]}})
    # A Service held by its load-balancer cleanup finalizer still has endpoints; a ModuleSet or
    # Secret being deleted keeps guarding what names it until it is gone.
    assert not any(going_away(kind, deleting) for kind in ("Service", "ModuleSet", "Secret"))
