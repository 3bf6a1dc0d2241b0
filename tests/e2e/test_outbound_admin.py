"""The admin server of a running controller: probes and the outbound debug views."""

from __future__ import annotations

from interlock.actors.messages import route_address
from interlock.controller.app import Controller
from tests.kit.e2e_clients import Cluster, PolicyClient
from tests.kit.outbound_objects import backend, http_route, parent, service


async def test_probes_and_debug_views(
    cluster: Cluster, controller: Controller, policy: PolicyClient, http
):
    assert controller.admin_site is not None
    admin = controller.admin_site.url
    await cluster.apply(service("web"))
    await cluster.apply(http_route("r", parents=[parent("web")], backends=[backend("api")]))
    watch = await policy.watch("web")
    await watch.until(lambda p: p["routes"][0]["name"] == "r")

    for probe in ("/healthz", "/readyz"):
        async with http.get(admin + probe) as response:
            assert response.status == 200
    async with http.get(admin + "/debug/actors?prefix=route/") as response:
        actors = await response.json()
    assert actors["system"]["kinds"]["route"]["actors"] == 1
    assert [a["address"] for a in actors["actors"]] == [route_address("default", "r")]
    async with http.get(admin + "/debug/watches") as response:
        watches = await response.json()
    assert {"target": "default/web:80 (client default)", "readers": 1}.items() <= watches[0].items()
    async with http.get(admin + "/debug/status") as response:
        status = await response.json()
    assert status["leading"] is True
    async with http.get(admin + "/metrics") as response:
        assert response.status == 200
        metrics = await response.text()
    assert 'kind="route"' in metrics
    watch.close()
