"""Start-up against an API server that is busy: a 429 or 500 during discovery is retried."""

from __future__ import annotations

from tests.kit.e2e_clients import Cluster, StartController


async def test_start_goes_through_a_failed_discovery_request(
    cluster: Cluster, start_controller: StartController
):
    cluster.faults.fail_next(2, 429, path_contains="/apis/gateway.networking.k8s.io")
    controller = await start_controller(identity="patient")
    assert controller.ready
    assert controller.http_route_resource is not None
    assert cluster.faults.pending() == 0
