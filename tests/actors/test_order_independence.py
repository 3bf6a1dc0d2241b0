"""Whatever the order of events (and however they interleave with the actors' work), the
policies the open watches end on equal what a fresh controller computes from the final state."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.outbound_harness import latest_policy, start_outbound
from tests.kit.outbound_objects import backend, http_route, parent, reference_grant, service

SERVICES = [("default", "web"), ("default", "api"), ("default", "db"), ("shop", "api")]
ROUTE_SPECS = [
    {"parents": [parent("web")], "backends": [backend("api"), backend("db")]},
    {"parents": [parent("web", port=80)], "backends": [backend("api", namespace="shop")]},
    {"parents": [parent("db")], "backends": [backend("web")]},
    {"parents": [parent("web"), parent("db")], "backends": [backend("api", weight=0)]},
]
ROUTES = [("default", "r1"), ("default", "r2"), ("shop", "r3")]
WATCHES = [("web", "default"), ("web", "shop"), ("db", "default"), ("api", "default")]


def obj_for(op: tuple[str, int, int]) -> tuple[tuple[str, str, str], dict[str, Any]]:
    kind, index, variant = op
    if kind == "service":
        namespace, name = SERVICES[index]
        ports = (80,) if variant % 2 == 0 else (80, 8080)
        return (kind, namespace, name), service(name, namespace=namespace, ports=ports)
    if kind == "route":
        namespace, name = ROUTES[index]
        spec = ROUTE_SPECS[variant % len(ROUTE_SPECS)]
        parents = [
            {**p, "namespace": "default"} if namespace != "default" else p for p in spec["parents"]
        ]
        return (kind, namespace, name), http_route(
            name,
            namespace=namespace,
            parents=parents,
            backends=spec["backends"],
            created=f"2026-01-01T00:00:0{index}Z",
        )
    grant = reference_grant("g", namespace="shop", from_namespace="default")
    return ("grant", "shop", "g"), grant


operations = st.lists(
    st.tuples(
        st.sampled_from(["service", "route", "grant"]),
        st.integers(0, 3),
        st.integers(0, 3),
        st.booleans(),  # delete
        st.booleans(),  # let the actors settle after this step
    ).map(lambda t: (t[0], t[1] % (len(ROUTES) if t[0] == "route" else 4), t[2], t[3], t[4])),
    max_size=25,
)


async def final_policies(ops: list[tuple[str, int, int, bool, bool]]) -> tuple[list, list]:
    live = start_outbound()
    slots = [live.watch(svc, client=client)[1] for svc, client in WATCHES]
    final: dict[tuple[str, str, str], dict[str, Any] | None] = {}
    for kind, index, variant, delete, settle in ops:
        key, obj = obj_for((kind, index, variant))
        if delete:
            live.delete(obj)
            final[key] = None
        else:
            live.apply(obj)
            final[key] = obj
        if settle:
            await live.settle()
    await live.settle()
    observed = [latest_policy(slot) for slot in slots]
    live.watches.close()
    await live.system.shutdown()

    fresh = start_outbound()
    for obj in final.values():
        if obj is not None:
            fresh.apply(obj)
    await fresh.settle()
    fresh_slots = [fresh.watch(svc, client=client)[1] for svc, client in WATCHES]
    await fresh.settle()
    expected = [latest_policy(slot) for slot in fresh_slots]
    fresh.watches.close()
    await fresh.system.shutdown()
    return observed, expected


@settings(max_examples=60, deadline=None)
@given(operations)
def test_final_policies_do_not_depend_on_event_order(ops):
    observed, expected = asyncio.run(final_policies(ops))
    assert json.dumps(observed, sort_keys=True) == json.dumps(expected, sort_keys=True)
