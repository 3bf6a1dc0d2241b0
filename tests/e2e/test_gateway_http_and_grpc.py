"""An HTTPRoute and a GRPCRoute sharing a hostname on one listener (both lanes).

A gRPC call is an HTTP request: a listener cannot serve a host by an HTTPRoute and a GRPCRoute
at once. The GRPCRoute spec: the older route is accepted (then the first by namespace/name),
the other says ``Accepted`` False on that parent, and the listener counts one route. Routes of
the two kinds on different hostnames live side by side, and the loser is accepted once the
winner goes.
"""

from __future__ import annotations

from typing import Any

from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import GROUP, Env, gateway_obj, http_listener, route_obj
from tests.kit.gateway_env import env as env


def grpc_route(name: str, hostname: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "one"}],
            "hostnames": [hostname],
            "rules": [{"backendRefs": [{"name": "green", "port": 80}]}],
        },
    }


async def accepted(env: Env, kind: str, name: str) -> tuple[str, str] | None:
    obj = await env.read(kind, name)
    for entry in (obj or {}).get("status", {}).get("parents", []):
        if entry["parentRef"]["name"] == "one":
            for found in entry["conditions"]:
                if found["type"] == "Accepted":
                    return (found["status"], found["reason"])
    return None


async def test_the_older_of_an_httproute_and_a_grpcroute_on_one_hostname_is_served(
    env: Env,
) -> None:
    await env.cluster.apply(gateway_obj("one", http_listener("http")))
    web = route_obj("web", [{"name": "one"}], "blue", hostnames=["shared.example"])
    await env.cluster.apply(web)
    address = await env.address("one")

    async def web_served() -> bool:
        return await env.backend_of(address, "shared.example") == "blue"

    await eventually(web_served, message="the HTTPRoute serves shared.example")
    await env.cluster.tick()
    await env.cluster.apply(grpc_route("greeter", "shared.example"))
    await env.cluster.apply(grpc_route("elsewhere", "grpc.example"))

    async def decided() -> bool:
        listeners = (await env.read("Gateway", "one") or {}).get("status", {}).get("listeners")
        return (
            await accepted(env, "GRPCRoute", "greeter") == ("False", "RouteReasonConflicted")
            and await accepted(env, "GRPCRoute", "elsewhere") == ("True", "Accepted")
            and await accepted(env, "HTTPRoute", "web") == ("True", "Accepted")
            and bool(listeners)
            and listeners[0]["attachedRoutes"] == 2
        )

    await eventually(decided, message="the younger GRPCRoute on shared.example is refused")
    assert await env.backend_of(address, "shared.example") == "blue"

    obj = await env.read("HTTPRoute", "web")
    assert obj is not None
    await env.cluster.delete(obj)

    async def freed() -> bool:
        return await accepted(env, "GRPCRoute", "greeter") == ("True", "Accepted")

    await eventually(freed, message="the GRPCRoute is accepted once the HTTPRoute is gone")
    for name in ("greeter", "elsewhere"):
        found = await env.read("GRPCRoute", name)
        if found is not None:
            await env.cluster.delete(found)
