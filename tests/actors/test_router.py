"""The informer router: parse, hand on, survive bad objects, leave unknown kinds to others."""

from __future__ import annotations

from loguru import logger

from interlock.actors.messages import INFORMER_ROUTER, ObjectChanged, route_address
from interlock.actors.router import InformerRouter
from interlock.mailbox import ActorSystem
from interlock.mailbox.testing import capture_trace, wait_idle
from tests.kit.outbound_harness import Outbound, latest_policy
from tests.kit.outbound_objects import (
    backend,
    backends_of,
    http_route,
    parent,
    route_names,
    service,
)


async def test_a_bad_service_is_logged_with_its_field_and_changes_nothing(outbound: Outbound):
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(str(m)), level="WARNING")
    try:
        outbound.apply(service("web"))
        outbound.apply(service("api"))
        outbound.apply(http_route("r", parents=[parent("web")], backends=[backend("api")]))
        _, slot = outbound.watch("web")
        await outbound.settle()
        bad = service("api")
        bad["spec"]["ports"][0]["port"] = 70000
        outbound.apply(bad)
        await outbound.settle()
    finally:
        logger.remove(sink)
    assert any("Service default/api: spec.ports[0].port" in m for m in messages)
    # The last good Service stands; the router and the rest keep working.
    assert backends_of(latest_policy(slot)) == [("api", True, None)]
    outbound.delete(service("api"))
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", False, 500)]


async def test_v1beta1_and_v1_events_are_one_route(outbound: Outbound):
    outbound.apply(service("web"))
    outbound.apply(
        http_route("r", parents=[parent("web")], backends=[backend("a")], version="v1beta1")
    )
    outbound.apply(http_route("r", parents=[parent("web")], backends=[backend("b")]))
    _, slot = outbound.watch("web")
    await outbound.settle()
    assert route_names(latest_policy(slot)) == ["HTTPRoute:default/r"]
    assert [b[0] for b in backends_of(latest_policy(slot))] == ["b"]
    assert outbound.system.addresses("route/") == [route_address("default", "r")]


async def test_other_kinds_go_to_their_receivers_with_the_events_correlation():
    system = ActorSystem()
    seen: list[tuple[str, str]] = []
    system.spawn(
        INFORMER_ROUTER,
        lambda: InformerRouter(
            forward={"Ingress": [lambda change: seen.append((change.kind, change.name))]}
        ),
    )
    for kind in ("Ingress", "ConfigMap"):
        change = ObjectChanged(
            kind=kind, namespace="default", name="x", deleted=False, resource_version="1", obj={}
        )
        system.tell(INFORMER_ROUTER, change, correlation_id=change.identity)
    await wait_idle(system)
    await system.shutdown()
    assert seen == [("Ingress", "x")]


async def test_secret_data_never_reaches_the_trace():
    system = ActorSystem()
    with capture_trace(system) as captured:
        system.spawn(
            INFORMER_ROUTER, lambda: InformerRouter(forward={"Secret": [lambda change: None]})
        )
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "users", "namespace": "default"},
            "data": {"htpasswd": "c3VwZXItc2VjcmV0LXZhbHVl"},
        }
        change = ObjectChanged.of(secret, resource_version="7")
        system.tell(INFORMER_ROUTER, change, correlation_id=change.identity)
        await wait_idle(system)
    await system.shutdown()
    assert captured.events("handled", correlation_id="Upserted Secret default/users rv=7")
    assert "c3VwZXItc2VjcmV0LXZhbHVl" not in captured.text()
