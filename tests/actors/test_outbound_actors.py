"""The outbound actors together: router, directories, route actors, service-port watches."""

from __future__ import annotations

import pytest

import interlock.actors.route as route_module
from interlock.actors import topics
from interlock.actors.messages import (
    INFORMER_ROUTER,
    DesiredRouteStatus,
    route_address,
    route_identity,
)
from interlock.actors.route import RouteActor
from interlock.actors.router import InformerRouter
from interlock.actors.service_port_watch import target_address
from interlock.actors.topics import (
    ROUTE_STATUS_TOPIC,
)
from interlock.mailbox import Published, Unpublished
from interlock.mailbox.slot import LatestValueSlot
from interlock.mailbox.testing import wait_until
from interlock.model.meta import ObjectKey
from interlock.model.policy_watch import PolicyUpdate
from tests.kit.outbound_harness import Outbound, latest_policy
from tests.kit.outbound_objects import (
    backend,
    backends_of,
    http_route,
    parent,
    reference_grant,
    route_names,
)
from tests.kit.outbound_objects import service as svc

ROUTE = http_route("r", parents=[parent("web")], backends=[backend("api")])


def desired_statuses(outbound: Outbound) -> list[DesiredRouteStatus]:
    """The desired statuses the route actors published, in order."""
    return [
        m.value
        for m in outbound.status_log
        if isinstance(m, Published) and isinstance(m.value, DesiredRouteStatus)
    ]


def _apply_the_route(outbound: Outbound) -> None:
    """Services web and api, and ROUTE (parent web, backend api)."""
    outbound.apply(svc("web"))
    outbound.apply(svc("api"))
    outbound.apply(ROUTE)


async def _watching_the_route(outbound: Outbound) -> LatestValueSlot[PolicyUpdate]:
    """The route applied and a watch of web open on it, settled: the watch's slot."""
    _apply_the_route(outbound)
    _, slot = outbound.watch("web")
    await outbound.settle()
    return slot


@pytest.mark.parametrize(
    "order",
    [
        ("web", "route", "watch", "api"),
        ("web", "api", "route", "watch"),
        ("watch", "web", "api", "route"),
        ("api", "watch", "route", "web"),
    ],
)
async def test_backend_existence_follows_the_service_whatever_the_order(outbound: Outbound, order):
    slot = None
    for step in order:
        if step == "web":
            outbound.apply(svc("web"))
        elif step == "api":
            outbound.apply(svc("api"))
        elif step == "route":
            outbound.apply(ROUTE)
        else:
            _, slot = outbound.watch("web")
        await outbound.settle()
    assert slot is not None
    assert backends_of(latest_policy(slot)) == [("api", True, None)]
    outbound.delete(svc("api"))
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", False, 500)]
    outbound.apply(svc("api"))
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", True, None)]


async def test_label_changes_of_a_service_wake_no_route(outbound: Outbound):
    _apply_the_route(outbound)
    await outbound.settle()
    address = route_address("default", "r")
    before = outbound.system.actor_statistics(address).processed
    outbound.apply(svc("api", labels={"team": "blue"}))
    await outbound.settle()
    assert outbound.system.actor_statistics(address).processed == before
    outbound.apply(svc("api", ports=(80, 81)))
    await outbound.settle()
    assert outbound.system.actor_statistics(address).processed == before + 1


async def test_moving_a_parent_unpublishes_from_the_old_one(outbound: Outbound):
    for name in ("a", "b", "api"):
        outbound.apply(svc(name))
    outbound.apply(http_route("r", parents=[parent("a")], backends=[backend("api")]))
    await outbound.settle()
    _, slot_a = outbound.watch("a")
    _, slot_b = outbound.watch("b")
    await outbound.settle()
    assert route_names(latest_policy(slot_a)) == ["HTTPRoute:default/r"]
    assert route_names(latest_policy(slot_b)) == ["Default:default/b"]
    outbound.apply(http_route("r", parents=[parent("b")], backends=[backend("api")]))
    await outbound.settle()
    assert route_names(latest_policy(slot_a)) == ["Default:default/a"]
    assert route_names(latest_policy(slot_b)) == ["HTTPRoute:default/r"]
    assert (
        outbound.system.retained(topics.PARENT.topic(ObjectKey(namespace="default", name="a")))
        == {}
    )


async def test_deleting_a_route_removes_it_and_stops_its_actor(outbound: Outbound):
    outbound.apply(svc("web"))
    outbound.apply(ROUTE)
    await outbound.settle()
    _, slot = outbound.watch("web")
    await outbound.settle()
    assert route_names(latest_policy(slot)) == ["HTTPRoute:default/r"]
    outbound.delete(ROUTE)
    await outbound.settle()
    assert route_names(latest_policy(slot)) == ["Default:default/web"]
    assert not outbound.system.exists(route_address("default", "r"))
    assert Unpublished(ROUTE_STATUS_TOPIC, route_identity("default", "r")) in outbound.status_log


async def test_cross_namespace_backend_needs_a_grant(outbound: Outbound):
    outbound.apply(svc("web"))
    outbound.apply(svc("api", namespace="shared"))
    outbound.apply(
        http_route("r", parents=[parent("web")], backends=[backend("api", namespace="shared")])
    )
    _, slot = outbound.watch("web")
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", False, 500)]
    grant = reference_grant("g", namespace="shared", from_namespace="default")
    outbound.apply(grant)
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", True, None)]
    outbound.delete(grant)
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", False, 500)]


async def test_status_is_sent_when_it_changes(outbound: Outbound):
    outbound.apply(svc("web"))
    outbound.apply(ROUTE)
    await outbound.settle()

    def reasons() -> list[str]:
        last = desired_statuses(outbound)[-1]
        assert last.parents is not None
        return [c["reason"] for c in last.parents[0]["conditions"]]

    assert reasons() == ["Accepted", "BackendNotFound"]
    sent = len(outbound.status_log)
    outbound.apply(svc("web", labels={"x": "y"}))
    await outbound.settle()
    assert len(outbound.status_log) == sent
    outbound.apply(svc("api"))
    await outbound.settle()
    assert reasons() == ["Accepted", "ResolvedRefs"]


async def test_a_stored_status_written_by_another_replica_is_told_once(outbound: Outbound):
    _apply_the_route(outbound)
    await outbound.settle()
    first = desired_statuses(outbound)[-1]
    assert first.stored == []
    # Another replica writes the desired status: the StatusWriter must learn that it is stored
    # (else, on gaining the Lease, it writes it again), though the desired status is the same.
    written = {**ROUTE, "status": {"parents": first.parents}}
    outbound.apply(written)
    await outbound.settle()
    told = desired_statuses(outbound)[-1]
    assert told.stored == first.parents
    assert told.parents == first.parents
    sent = len(outbound.status_log)
    outbound.apply(written)  # nothing new: nothing told
    await outbound.settle()
    assert len(outbound.status_log) == sent


async def test_an_invalid_route_is_withdrawn_and_reported(outbound: Outbound):
    slot = await _watching_the_route(outbound)
    assert route_names(latest_policy(slot)) == ["HTTPRoute:default/r"]
    bad = http_route("r", parents=[parent("web")], backends=[backend("api", weight=-1)])
    outbound.apply(bad)
    await outbound.settle()
    assert route_names(latest_policy(slot)) == ["Default:default/web"]
    last = desired_statuses(outbound)[-1]
    assert last.parents is not None
    condition = last.parents[0]["conditions"][0]
    assert (condition["type"], condition["status"]) == ("Accepted", "False")
    assert "spec.rules[0].backendRefs[0].weight" in condition["message"]
    # Fixing it brings the route back.
    outbound.apply(ROUTE)
    await outbound.settle()
    assert route_names(latest_policy(slot)) == ["HTTPRoute:default/r"]


async def test_a_watch_stops_after_its_last_reader_and_the_grace_period(outbound: Outbound):
    outbound.apply(svc("web"))
    target, first = outbound.watch("web")
    _, second = outbound.watch("web")
    await outbound.settle()
    assert outbound.system.exists(target_address(target))
    outbound.watches.close_watch(target, first)
    outbound.watches.close_watch(target, second)
    await wait_until(lambda: not outbound.system.exists(target_address(target)))
    assert outbound.watches.targets() == []
    # A new reader gets a fresh watch with the current policy.
    _, third = outbound.watch("web")
    await outbound.settle()
    assert route_names(latest_policy(third)) == ["Default:default/web"]


async def test_a_reader_returning_within_the_grace_period_keeps_the_watch(outbound: Outbound):
    outbound.apply(svc("web"))
    target, slot = outbound.watch("web")
    await outbound.settle()
    outbound.watches.close_watch(target, slot)
    _, again = outbound.watch("web")
    # The policy is there at once, without a round trip through the actor.
    assert again.version == 1
    await outbound.settle()
    assert outbound.system.exists(target_address(target))


async def test_unchanged_inputs_push_nothing(outbound: Outbound):
    slot = await _watching_the_route(outbound)
    version = slot.version
    outbound.apply(svc("api", labels={"a": "b"}))
    outbound.apply(ROUTE)
    await outbound.settle()
    assert slot.version == version


async def test_consumer_routes_only_for_their_own_client_namespace(outbound: Outbound):
    outbound.apply(svc("web"))
    outbound.apply(svc("api", namespace="shop"))
    outbound.apply(
        http_route(
            "consumer",
            namespace="shop",
            parents=[parent("web", namespace="default")],
            backends=[backend("api")],
        )
    )
    _, shop = outbound.watch("web", client="shop")
    _, other = outbound.watch("web", client="pay")
    await outbound.settle()
    assert route_names(latest_policy(shop)) == ["HTTPRoute:shop/consumer"]
    assert route_names(latest_policy(other)) == ["Default:default/web"]


class CrashOnDeletion(RouteActor):
    """Crashes handling its route's deletion, once per process (a bug in the handler)."""

    crashed = False

    def _route_deleted(self) -> None:
        if not CrashOnDeletion.crashed and self.route is not None:
            CrashOnDeletion.crashed = True
            raise RuntimeError("a bug while handling the deletion")
        super()._route_deleted()


async def test_a_route_whose_actor_crashed_on_its_deletion_is_still_withdrawn(
    outbound: Outbound,
):
    system = outbound.system
    router = InformerRouter(
        route_factory=lambda ns, name, outputs: CrashOnDeletion(
            namespace=ns, name=name, outputs=outputs
        )
    )
    system.stop(INFORMER_ROUTER)
    system.spawn(INFORMER_ROUTER, lambda: router)
    outbound.apply(svc("web"))
    outbound.apply(ROUTE)
    _, slot = outbound.watch("web")
    await outbound.settle()
    assert route_names(latest_policy(slot)) == ["HTTPRoute:default/r"]
    outbound.delete(ROUTE)
    await wait_until(lambda: not system.exists(route_address("default", "r")))
    await outbound.settle()
    assert CrashOnDeletion.crashed
    assert system.statistics().restarts == 1
    assert route_names(latest_policy(slot)) == ["Default:default/web"]
    assert system.retained(topics.PARENT.topic(ObjectKey(namespace="default", name="web"))) == {}


class CrashOnServiceChange(RouteActor):
    """Crashes once handling a change of Service api (a bug in the handler)."""

    crashed = False

    def _published(self, topic: str, key: str, value: object) -> None:
        if topic == "service:default/api" and self.route is not None and not self.crashed_once():
            raise RuntimeError("a bug while handling a Service change")
        super()._published(topic, key, value)

    @classmethod
    def crashed_once(cls) -> bool:
        crashed, cls.crashed = cls.crashed, True
        return crashed


async def test_a_restarted_route_actor_republishes_nothing_unchanged(outbound: Outbound):
    system = outbound.system
    system.stop(INFORMER_ROUTER)
    system.spawn(
        INFORMER_ROUTER,
        lambda: InformerRouter(
            route_factory=lambda ns, name, outputs: CrashOnServiceChange(
                namespace=ns, name=name, outputs=outputs
            )
        ),
    )
    outbound.apply(svc("web"))
    outbound.apply(ROUTE)
    target, slot = outbound.watch("web")
    await outbound.settle()
    CrashOnServiceChange.crashed = True  # the initial subscription is not the crash we want
    outbound.apply(svc("api"))
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", True, None)]
    watch_before = system.actor_statistics(target_address(target)).processed
    CrashOnServiceChange.crashed = False
    # A change of api that leaves the route's output as it is (port 80 is still there).
    outbound.apply(svc("api", ports=(80, 81)))
    await wait_until(lambda: system.statistics().restarts == 1)
    await outbound.settle()
    # The fresh instance knew what its predecessor had published and stayed silent.
    assert system.actor_statistics(target_address(target)).processed == watch_before
    assert backends_of(latest_policy(slot)) == [("api", True, None)]


async def test_inputs_arriving_together_are_resolved_once(
    outbound: Outbound, monkeypatch: pytest.MonkeyPatch
):
    """The Services a route names, published while its actor waits its turn (as at start-up,
    when the Services are listed after the routes), are resolved once, not once each: a route
    actor lets the messages already behind a change arrive before it recomputes."""
    outbound.apply(ROUTE)
    await outbound.settle()
    resolved = 0
    resolve = route_module.resolve_route_by_parent

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal resolved
        resolved += 1
        return resolve(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(route_module, "resolve_route_by_parent", counting)
    address = route_address("default", "r")
    handled = outbound.system.actor_statistics(address).processed
    outbound.apply(svc("web"))
    outbound.apply(svc("api"))
    await outbound.settle()
    assert outbound.system.actor_statistics(address).processed == handled + 2
    assert resolved == 1
    last = desired_statuses(outbound)[-1]
    assert last.parents is not None
    assert [c["reason"] for c in last.parents[0]["conditions"]] == ["Accepted", "ResolvedRefs"]
    # One at a time, each is resolved when it comes.
    outbound.apply(svc("web", ports=(80, 81)))
    await outbound.settle()
    outbound.apply(svc("api", ports=(80, 81)))
    await outbound.settle()
    assert resolved == 3
