"""FanOutEdge: a call succeeds only when every worker carried it out; one refused anywhere leaves
every worker on the last good configuration, and a restarted worker is reprogrammed."""

from __future__ import annotations

import pytest

from interlock.edge.fanout import FanOutEdge, merged
from interlock.edge.faults import FaultyEdge
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.model.moduleset import Modules
from interlock.model.service import ServicePortKey
from tests.kit.secrets_kit import BASIC_AUTH, JWT, SECRETS

from .conftest import BACKEND, HOST

OTHER_BACKEND = BackendTarget(ServicePortKey("default", "other", 8080))


def command(modules: Modules = BASIC_AUTH, route_id: str = "r") -> ApplyModules:
    return ApplyModules(
        host=HOST, route_id=route_id, path="/", path_type="Prefix", modules=modules, secrets=SECRETS
    )


def two_workers() -> tuple[FanOutEdge, list[InProcessEdge], list[FaultyEdge]]:
    inner = [InProcessEdge(), InProcessEdge()]
    faulty = [FaultyEdge(edge) for edge in inner]
    return FanOutEdge(faulty), inner, faulty


async def test_every_worker_serves_what_was_applied() -> None:
    edge, inner, _ = two_workers()
    await edge.apply_modules(command())
    await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    for worker in inner:
        route = worker.snapshot_now().route(host=HOST, route_id="r")
        assert route is not None and route.applied and route.backend == BACKEND
        assert route.modules["order"] == ["basicAuth"]
    assert await edge.snapshot() == inner[0].snapshot_now()


async def test_modules_refused_by_one_worker_leave_all_on_the_last_good_chain() -> None:
    edge, inner, faulty = two_workers()
    await edge.apply_modules(command(BASIC_AUTH))
    await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    before = [worker.snapshot_now() for worker in inner]
    faulty[1].plan.fail_next("apply_modules", kind="permanent")
    with pytest.raises(PermanentEdgeError, match=r"edge worker 2 of 2: .*injected permanent"):
        await edge.apply_modules(command(JWT))
    # Worker 1 applied the JWT chain, then was put back on basicAuth.
    assert [c.modules.get("order") for c in faulty[0].served] == [
        ["basicAuth"],
        ["basicAuth"],
        ["jwt"],
        ["basicAuth"],
    ]
    assert [worker.snapshot_now() for worker in inner] == before
    assert edge.desired.modules[(HOST, "r")].modules == BASIC_AUTH


async def test_a_transient_failure_anywhere_is_transient_with_the_longest_retry_after() -> None:
    edge, inner, faulty = two_workers()
    await edge.apply_modules(command())
    faulty[0].plan.fail_next("attach_backend", kind="permanent")
    faulty[1].plan.fail_next("attach_backend", retry_after=3.0)
    with pytest.raises(TransientEdgeError) as error:
        await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    assert error.value.retry_after == 3.0
    assert "edge worker 1 of 2" in error.value.message
    assert "edge worker 2 of 2" in error.value.message
    for worker in inner:
        route = worker.snapshot_now().route(host=HOST, route_id="r")
        assert route is not None and route.backend is None


async def test_a_backend_refused_by_one_worker_keeps_the_previous_backend_everywhere() -> None:
    edge, inner, faulty = two_workers()
    await edge.apply_modules(command())
    await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    faulty[0].plan.fail_next("attach_backend")
    with pytest.raises(TransientEdgeError, match="edge worker 1 of 2"):
        await edge.attach_backend(host=HOST, route_id="r", backend=OTHER_BACKEND)
    for worker in inner:
        route = worker.snapshot_now().route(host=HOST, route_id="r")
        assert route is not None and route.backend == BACKEND


async def test_a_restarted_worker_is_reprogrammed_with_what_the_others_serve() -> None:
    edge, inner, _ = two_workers()
    await edge.apply_modules(command(BASIC_AUTH, route_id="a"))
    await edge.attach_backend(host=HOST, route_id="a", backend=BACKEND)
    await edge.apply_modules(command(JWT, route_id="b"))
    await edge.apply_modules(command(Modules(), route_id="gone"))
    await edge.remove_route(host=HOST, route_id="gone")
    fresh = InProcessEdge()
    await edge.replay(fresh)
    assert fresh.snapshot_now() == inner[0].snapshot_now()
    edge.workers[1] = fresh
    assert await edge.snapshot() == inner[0].snapshot_now()


async def test_routes_the_workers_serve_differently_are_shown_unapplied() -> None:
    one, two = InProcessEdge(), InProcessEdge()
    for worker in (one, two):
        await worker.apply_modules(command(route_id="same"))
    await one.apply_modules(command(route_id="only-one"))
    await one.attach_backend(host=HOST, route_id="same", backend=BACKEND)
    shown = merged([one.snapshot_now(), two.snapshot_now()])
    same = shown.route(host=HOST, route_id="same")
    only_one = shown.route(host=HOST, route_id="only-one")
    assert same is not None and not same.applied and same.backend is None
    assert only_one is not None and not only_one.applied


async def test_with_no_worker_running_every_call_fails_transiently() -> None:
    edge = FanOutEdge([])
    with pytest.raises(TransientEdgeError, match="none running"):
        await edge.apply_modules(command())
    with pytest.raises(TransientEdgeError, match="none running"):
        await edge.snapshot()
