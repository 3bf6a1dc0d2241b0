"""A status someone else wrote after the leader is written over, for every kind it writes.

A status write already sent when a replica loses the Lease can land after the new leader's
(inherent to leases: the API server applies a request it received, whoever holds the Lease
now). The leader must not trust its own last write over what is stored: when the stored status
changes to one it did not write, it writes the desired one again. Here the test itself plays
the old leader's late write, on both API servers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlock.controller.app import Controller
from interlock.model.route_status import status_equal_ignoring_timestamps
from tests.kit.lanes import ControlPlane, lane_cluster
from tests.kit.reliability_kit import CRDS, eventually, objects, replica_config, write
from tests.kit.reliability_objects import INGRESS_CLASS, build

STALE_CONDITION = {
    "status": "False",
    "reason": "Stale",
    "message": "written by a replica that no longer leads",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
    "observedGeneration": 1,
}


def written(kind: str, status: dict[str, Any]) -> bool:
    """Whether ``status`` holds what the controller writes for ``kind``."""
    if kind == "Ingress":
        return bool((status.get("loadBalancer") or {}).get("ingress"))
    return bool(status.get("conditions" if kind == "ModuleSet" else "parents"))


def stale(kind: str, status: dict[str, Any]) -> dict[str, Any]:
    """Another status of the same shape, as an old leader might have computed it."""
    if kind == "Ingress":
        return {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    if kind == "ModuleSet":
        return {"conditions": [{**c, **STALE_CONDITION} for c in status["conditions"]]}
    parents = [
        {**parent, "conditions": [{**c, **STALE_CONDITION} for c in parent["conditions"]]}
        for parent in status["parents"]
    ]
    return {"parents": parents}


def same(kind: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    if kind == "Ingress":
        return a.get("loadBalancer") == b.get("loadBalancer")
    if kind == "ModuleSet":
        strip = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in a.get("conditions") or []
        ]
        other = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in b.get("conditions") or []
        ]
        return strip == other
    return status_equal_ignoring_timestamps(a.get("parents") or [], b.get("parents") or [])


@pytest.mark.parametrize("kind", ["Ingress", "ModuleSet", "HTTPRoute"])
def test_a_status_written_after_the_leaders_is_written_over(
    kind: str, tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    async def scenario() -> None:
        async with lane_cluster(tmp_path, control_plane, bookmark_interval=0.2) as server:
            await server.apply_manifests([CRDS])
            await write(server, INGRESS_CLASS)
            await write(server, build("Service", "svc-a", 0))
            await write(server, build("ModuleSet", "ms-1", 0))
            await write(server, build("Ingress", "i-0", 0))
            await write(server, build("HTTPRoute", "r-0", 0))
            controller = Controller(replica_config(server.controller_kubeconfig, "leader"))
            await controller.start()
            try:
                await controller.wait_ready(within=60.0)

                async def current() -> dict[str, Any]:
                    (found,) = await objects(server, kind)
                    return dict(found.get("status") or {})

                async def status_written() -> bool:
                    return written(kind, await current())

                await eventually(status_written, within=60.0, message=f"the {kind}'s status")
                await eventually(
                    lambda: controller.inspect().idle, within=60.0, message="the controller idle"
                )
                right = await current()
                (obj,) = await objects(server, kind)
                # What the server stored for the late write, from its own answer: the controller
                # may repair it before a second read could see it.
                stored = await server.patch(obj, {"status": stale(kind, right)}, status=True)
                assert not same(kind, dict(stored.get("status") or {}), right)

                async def repaired() -> bool:
                    return same(kind, await current(), right)

                await eventually(repaired, within=60.0, message=f"the {kind}'s status repaired")
            finally:
                await controller.stop()

    asyncio.run(scenario())
