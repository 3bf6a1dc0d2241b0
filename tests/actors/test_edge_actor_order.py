"""Property tests: in whatever order Ingress parts arrive, the edge converges and fails closed."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock.actors import topics
from interlock.actors.edge import EdgeActor, EdgeSettings
from interlock.actors.edge_messages import (
    HostPart,
    edge_address,
)
from interlock.actors.messages import (
    STATUS_WRITER,
)
from interlock.edge.faults import FaultyEdge
from interlock.edge.inprocess import InProcessEdge
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.mailbox.testing import ManualSleep, RecordingActor, wait_idle
from interlock.model.edge import edge_from_parts, ingress_host_routes
from interlock.model.edge_board import EdgeBoard
from interlock.model.ingress import parse_ingress
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import parse_module_set
from interlock.model.service import parse_service
from tests.kit.edge_objects import ingress as ingress_json

HOST = "order.example"
SERVICE = parse_service(
    {"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}
)
INGRESSES = ("a", "b", "c")
PATHS = ("/", "/api", "/api/v2")
VARIANTS: dict[str, dict[str, Any]] = {
    "blue": {"headers": {"request": {"add": {"X-Team": "blue"}}}},
    "red": {"headers": {"request": {"add": {"X-Team": "red"}}}},
    "bad": {"ipRestriction": {"allow": ["10.0.0.0/33"]}},
}


def part(name: str, path: str, variant: str) -> HostPart:
    created = {
        "a": "2026-01-01T00:00:00Z",
        "b": "2026-01-02T00:00:00Z",
        "c": "2026-01-03T00:00:00Z",
    }
    ingress = parse_ingress(
        ingress_json(name, HOST, modules="m", path=path, class_name=None, created=created[name])
    )
    module_set = parse_module_set(
        {
            "metadata": {"name": "m", "namespace": "default"},
            "spec": {"modules": VARIANTS[variant]},
        }
    )
    routes = ingress_host_routes(
        ingress,
        {ObjectKey(namespace="default", name="m"): module_set},
        {},
        {SERVICE.key: SERVICE},
    )[HOST]
    return HostPart(ingress=ingress.key, uid="", routes=tuple(routes))


Op = tuple[str, str | None, str, bool]
"""(ingress, path or None to withdraw, variant, let the actor run a step afterwards)."""


def ops(variants: list[str]) -> st.SearchStrategy[list[Op]]:
    return st.lists(
        st.tuples(
            st.sampled_from(INGRESSES),
            st.one_of(st.none(), st.sampled_from(PATHS)),
            st.sampled_from(variants),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    )


async def run(sequence: list[Op]) -> tuple[FaultyEdge, InProcessEdge, dict[str, HostPart]]:
    system = ActorSystem(timer_sleep=ManualSleep(gated=True))
    inner = InProcessEdge()
    provider = FaultyEdge(inner)
    system.spawn(STATUS_WRITER, RecordingActor)
    board = EdgeBoard()
    final: dict[str, HostPart] = {}

    def actor() -> EdgeActor:
        return EdgeActor(
            host=HOST,
            settings=EdgeSettings(
                provider=provider,
                board=board,
                backoff=BackoffPolicy(initial=0.01, maximum=0.01),
                rng=random.Random(0),
            ),
        )

    try:
        for name, path, variant, step in sequence:
            key = f"default/{name}"
            if path is None:
                final.pop(key, None)
                system.unpublish(topics.HOST.topic(HOST), key)
            else:
                final[key] = part(name, path, variant)
                system.spawn_or_get(edge_address(HOST), actor)
                system.publish(topics.HOST.topic(HOST), key, final[key])
            if step:
                await asyncio.sleep(0)
        await wait_idle(system)
    finally:
        await system.shutdown()
    return provider, inner, final


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops(["blue", "red"]))
def test_the_served_edge_is_the_desired_edge_whatever_the_order(sequence: list[Op]) -> None:
    _, inner, final = asyncio.run(run(sequence))
    desired, _ = edge_from_parts(HOST, {p.ingress: p.routes for p in final.values()})
    served = inner.snapshot_now().host(HOST)
    served_routes = {} if served is None else {r.route_id: r for r in served.routes}
    assert set(served_routes) == {r.route_id for r in desired.routes}
    for route in desired.routes:
        got = served_routes[route.route_id]
        assert got.backend is not None and got.backend.key.name == "web"
        wanted = route.modules.headers
        assert wanted is not None
        assert got.modules["modules"]["headers"]["request"]["add"] == wanted.request.add


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops(["blue", "red", "bad"]))
def test_a_backend_is_never_attached_to_a_route_without_its_modules(sequence: list[Op]) -> None:
    provider, _, _ = asyncio.run(run(sequence))
    for config in provider.served:
        if config.backend_attached:
            # Every good variant has a headers module; a reservation has none.
            assert config.applied and "headers" in config.modules.get("order", [])
