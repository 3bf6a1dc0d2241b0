"""FaultyEdge: planned failures change nothing; successes are recorded for fail-closed checks."""

from __future__ import annotations

import pytest

from interlock.edge.faults import FaultyEdge
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import ApplyModules, PermanentEdgeError, TransientEdgeError
from interlock.model.moduleset import Modules
from tests.kit.secrets_kit import BASIC_AUTH, SECRETS

from .conftest import BACKEND, HOST


async def apply(edge: FaultyEdge, modules: Modules = BASIC_AUTH) -> None:
    await edge.apply_modules(
        ApplyModules(
            host=HOST, route_id="r", path="/", path_type="Prefix", modules=modules, secrets=SECRETS
        )
    )


async def test_transient_faults_fail_the_next_calls_then_pass() -> None:
    inner = InProcessEdge()
    edge = FaultyEdge(inner)
    edge.plan.fail_next("apply_modules", 2, retry_after=1.5)
    for _ in range(2):
        with pytest.raises(TransientEdgeError, match="route r: injected transient") as error:
            await apply(edge)
        assert error.value.retry_after == 1.5
        assert inner.snapshot_now().hosts == ()
    await apply(edge)
    assert inner.snapshot_now().route(host=HOST, route_id="r") is not None
    assert edge.plan.calls["apply_modules"] == 3
    assert edge.plan.injected["apply_modules"] == 2


async def test_permanent_fault_leaves_the_served_route_unchanged() -> None:
    inner = InProcessEdge()
    edge = FaultyEdge(inner)
    await apply(edge)
    await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    before = inner.snapshot_now()
    edge.plan.fail_next("apply_modules", kind="permanent")
    with pytest.raises(PermanentEdgeError):
        await apply(edge, Modules())
    assert inner.snapshot_now() == before
    assert edge.plan.pending("apply_modules") == 0


async def test_served_configurations_are_recorded_in_order() -> None:
    edge = FaultyEdge(InProcessEdge())
    await apply(edge)
    edge.plan.fail_next("attach_backend")
    with pytest.raises(TransientEdgeError):
        await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    await edge.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    await edge.remove_route(host=HOST, route_id="r")
    log = edge.served_routes(host=HOST.upper(), route_id="r")
    assert [(c.method, c.exists, c.applied, c.backend_attached) for c in log] == [
        ("apply_modules", True, True, False),
        ("attach_backend", True, True, True),
        ("remove_route", False, False, False),
    ]
    assert log[0].modules["order"] == ["basicAuth"]
    # The monitor's invariant: a backend is never served without applied modules.
    assert all(c.applied for c in edge.served if c.backend_attached)


def test_fault_count_must_be_positive() -> None:
    edge = FaultyEdge(InProcessEdge())
    with pytest.raises(ValueError, match="count must be at least 1"):
        edge.plan.fail_next("snapshot", 0)
