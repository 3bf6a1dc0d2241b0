"""A backend's existence reaches open watches, whichever of route and Service comes first."""

from __future__ import annotations

import pytest

from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import backend, backends_of, http_route, parent, service

ROUTE = http_route("r", parents=[parent("web", port=80)], backends=[backend("api")])


def api_exists(policy: dict) -> bool:
    return backends_of(policy) == [("api", True, None)]


def api_missing(policy: dict) -> bool:
    return backends_of(policy) == [("api", False, 500)]


@pytest.mark.parametrize("route_first", [True, False], ids=["route-first", "service-first"])
@pytest.mark.parametrize("watch_first", [True, False], ids=["watch-first", "watch-later"])
async def test_backend_service_created_and_deleted_under_an_open_watch(
    cluster: Cluster, policy: PolicyClient, route_first: bool, watch_first: bool
):
    await cluster.apply(service("web"))
    watch = await policy.watch("web") if watch_first else None
    if route_first:
        await cluster.apply(ROUTE)
        if watch is not None:
            await watch.until(api_missing)
        else:
            watch = await policy.watch("web")
            await watch.until(api_missing)
    await cluster.apply(service("api"))
    if not route_first:
        await cluster.apply(ROUTE)
    if watch is None:
        watch = await policy.watch("web")
    first_policy = watch.received[0]
    latest = await watch.until(api_exists)
    # The same connection carried every change: no reconnect.
    assert watch.received[0] is first_policy
    assert latest["routes"][0]["name"] == "r"
    await cluster.delete(service("api"))
    missing = await watch.until(api_missing)
    injector = missing["routes"][0]["rules"][0]["backends"][0]["failureInjector"]
    assert injector["status"] == 500
    assert "default/api" in injector["message"]
    watch.close()


async def test_parent_without_port_applies_to_every_port(cluster: Cluster, policy: PolicyClient):
    await cluster.apply(service("web", ports=(80, 8080)))
    await cluster.apply(http_route("r", parents=[parent("web")], backends=[backend("api")]))
    for port in (80, 8080):
        # The controller sees the route a moment after the API server stored it.
        async def missing(port: int = port) -> bool:
            return api_missing(await policy.get("web", port))

        await eventually(missing, message=f"port {port}: the route with its missing backend")
    await cluster.apply(service("api"))
    # Watches opened afterwards, on either port, see the backend.
    for port in (80, 8080):
        watch = await policy.watch("web", port)
        await watch.until(api_exists)
        watch.close()


async def test_unknown_service_or_port_answers_a_failing_default_route(
    cluster: Cluster, policy: PolicyClient
):
    missing = await policy.get("nowhere")
    assert [r["kind"] for r in missing["routes"]] == ["Default"]
    [backend_json] = missing["routes"][0]["rules"][0]["backends"]
    assert backend_json["exists"] is False
    assert backend_json["failureInjector"]["message"] == "Service default/nowhere does not exist"
    # The watch starts working the moment the Service appears.
    watch = await policy.watch("nowhere")
    await cluster.apply(service("nowhere"))
    await watch.until(lambda p: backends_of(p) == [("nowhere", True, None)])
    watch.close()
    wrong_port = await policy.get("nowhere", 81)
    assert backends_of(wrong_port) == [("nowhere", False, 500)]
    assert (
        "has no port 81"
        in (wrong_port["routes"][0]["rules"][0]["backends"][0]["failureInjector"]["message"])
    )
