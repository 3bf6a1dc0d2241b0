"""GRPCRoutes on a Gateway: attached to an HTTP listener, gRPC calls routed by method (both lanes).

A GRPCRoute naming a Gateway is Accepted by it (its own status entry, written beside nothing
else: it has no Service parent) and the listener counts it in ``attachedRoutes``; a call's
method chooses the rule, over h2c to the greeter backends.
"""

from __future__ import annotations

import grpc

from tests.kit.e2e_clients import eventually
from tests.kit.echo_backends import local_slice
from tests.kit.gateway_env import GROUP, Env, gateway_obj, http_listener
from tests.kit.gateway_env import env as env
from tests.kit.grpc_backends import SERVICE, greeter_servers, until_said


def grpc_service(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": "grpc", "port": 80, "appProtocol": "kubernetes.io/h2c"}]},
    }


async def test_grpc_route_on_a_gateway_routes_calls_by_method(env: Env) -> None:
    async with greeter_servers() as ports:
        for name, port in ports.items():
            await env.cluster.apply(grpc_service(name))
            await env.cluster.apply(local_slice(name, {"grpc": port}, name=f"{name}-gw"))
        await env.cluster.apply(gateway_obj("one", http_listener("http")))
        await env.cluster.apply(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GRPCRoute",
                "metadata": {"name": "greeter", "namespace": "default"},
                "spec": {
                    "parentRefs": [{"name": "one"}],
                    "hostnames": ["grpc.example"],
                    "rules": [
                        {
                            "matches": [{"method": {"service": SERVICE, "method": "Say"}}],
                            "backendRefs": [{"name": "greeter-v2", "port": 80}],
                        },
                        {"backendRefs": [{"name": "greeter", "port": 80}]},
                    ],
                },
            }
        )
        address = await env.address("one")

        async def accepted() -> bool:
            obj = await env.cluster.get(
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "GRPCRoute",
                    "metadata": {"name": "greeter", "namespace": "default"},
                }
            )
            entries = (obj or {}).get("status", {}).get("parents", [])
            return any(
                entry["controllerName"] == "interlock.dev/gateway-controller"
                and {c["type"]: c["status"] for c in entry["conditions"]}
                == {"Accepted": "True", "ResolvedRefs": "True"}
                for entry in entries
            )

        await eventually(accepted, message="the GRPCRoute is Accepted by Gateway one")
        options = [("grpc.default_authority", "grpc.example")]
        async with grpc.aio.insecure_channel(f"{address}:80", options=options) as channel:
            await until_said(
                channel, "greeter-v2", message="Say reaches greeter-v2 through the Gateway"
            )
            other = channel.unary_unary(f"/{SERVICE}/Flaky")
            reply: bytes = await other(b"key:0", timeout=10)
            assert reply.startswith(b"greeter:")
