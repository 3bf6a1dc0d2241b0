"""The trace names, for every message, the Kubernetes event that caused it."""

from __future__ import annotations

from interlock.actors.messages import route_address
from interlock.controller.app import Controller
from interlock.mailbox.testing import capture_trace
from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import backend, backends_of, http_route, parent, service


async def test_a_service_event_correlates_the_route_messages_it_causes(
    cluster: Cluster, controller: Controller, policy: PolicyClient
):
    await cluster.apply(service("web"))
    await cluster.apply(http_route("r", parents=[parent("web")], backends=[backend("api")]))
    watch = await policy.watch("web")
    with capture_trace(controller.system) as captured:
        created = await cluster.apply(service("api"))
        await watch.until(lambda p: backends_of(p) == [("api", True, None)])
        correlation = f"Upserted Service default/api rv={created['metadata']['resourceVersion']}"
        route = route_address("default", "r")
        await eventually(
            lambda: captured.events("handled", correlation_id=correlation, recipient=route),
            message="the route's handling correlated with the Service event",
        )
    watch.close()
    chain = captured.events(correlation_id=correlation)
    recipients = {r["recipient"] for r in chain}
    assert {"informer-router", "service-directory", route} <= recipients
    assert any(r["recipient"].startswith("watch/default/web/80/") for r in chain)
    # Each message names the one that caused it, back to the informer event.
    by_id = {r["id"]: r for r in chain if r["event"] == "handled"}
    route_record = next(r for r in chain if r["recipient"] == route and r["event"] == "handled")
    causes = []
    record = route_record
    while record.get("causation_id") in by_id:
        record = by_id[record["causation_id"]]
        causes.append(record["recipient"])
    assert causes == ["service-directory", "informer-router"]
