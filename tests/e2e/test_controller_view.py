"""``Controller.inspect()`` and ``/debug/controller``: one read-only view of a running controller.

Tests read a controller through this view instead of reaching into its parts, so the view must
say what those parts say: leadership, idleness, the informers' stores, the watched Service
ports, what the edge serves and what its actors know per route. And it must be a snapshot: a
view taken before a change does not show it.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import aiohttp
import pytest

from interlock.config import EdgeConfig
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, create_if_absent, eventually
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, ingress

TARGET = WatchTarget(ServicePortKey("default", "web", 80), client_namespace="default")


async def test_the_view_says_what_the_parts_say(
    cluster: Cluster, start_controller: StartController, http: aiohttp.ClientSession
) -> None:
    await create_if_absent(cluster, INGRESS_CLASS_OBJ)
    controller = await start_controller(identity="replica-1", edge=EdgeConfig(addr=LOCAL))
    await eventually(lambda: controller.inspect().leading, message="replica-1 leads")
    before = controller.inspect()
    assert before.ready and before.edge is not None and not before.edge.remote
    assert before.edge.url is not None and before.edge.address is not None
    assert before.edge.url.endswith(f":{before.edge.address.port}")
    assert "shop.example" not in before.edge.served_hosts
    assert TARGET not in before.watches
    with pytest.raises(FrozenInstanceError):
        before.ready = False  # type: ignore[misc]

    await create_if_absent(cluster, ingress("shop", "shop.example"))
    slot = controller.watches.open_watch(TARGET)
    try:

        def served() -> bool:
            view = controller.inspect()
            assert view.edge is not None
            route = view.edge.route(host="shop.example", route_id="Prefix:/")
            return "shop.example" in view.edge.served_hosts and route is not None and view.idle

        await eventually(served, within=60.0, message="the edge serves shop.example")
        after = controller.inspect()
        assert after.edge is not None
        assert after.edge.route(host="shop.example", route_id="Prefix:/") is not None
        assert after.edge.route(host="shop.example", route_id="Exact:/nothing") is None
        assert TARGET in after.watches
        assert after.informers["Ingress.v1"].objects >= 1
        assert after.actors.kinds and after.ended_tasks == ("initial-sync",)
        # Taken before the Ingress: the earlier view did not change.
        assert "shop.example" not in before.edge.served_hosts
        assert before.edge.route(host="shop.example", route_id="Prefix:/") is None

        assert controller.admin_site is not None
        async with http.get(f"{controller.admin_site.url}/debug/controller") as response:
            assert response.status == 200
            page = await response.json()
        assert page["ready"] is True and page["leading"] is True
        assert "shop.example" in page["edge"]["servedHosts"]
        assert page["edge"]["routes"]["shop.example"] == ["Prefix:/"]
        assert str(TARGET) in page["watches"]
        assert page["informers"]["Ingress.v1"]["objects"] >= 1
    finally:
        controller.watches.close_watch(TARGET, slot)
