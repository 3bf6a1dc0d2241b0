"""Real gRPC backends for the e2e tests (grpcio's asyncio server): a greeter that names itself.

``/demo.Greeter/Say`` answers ``NAME: hello TEXT (x-team)`` with ``x-served-by: NAME`` in its
initial metadata, and ``PERMISSION_DENIED`` ("NAME says no", in the trailers) to ``deny``;
``Count`` streams N messages of 40 kB (flow control on the way back); ``Stall`` never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from lanes import ENDPOINT_HOST

SERVICE = "demo.Greeter"
GREETERS = ("greeter", "greeter-v2")


def greeter(name: str) -> grpc.GenericRpcHandler:
    async def say(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        metadata = dict(context.invocation_metadata() or ())
        if request == b"deny":
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{name} says no")
        await context.send_initial_metadata((("x-served-by", name),))
        return f"{name}: hello {request.decode()} ({metadata.get('x-team', '-')})".encode()

    async def stall(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await asyncio.Event().wait()  # never answers: only a timeout ends the call
        return b""

    async def count(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        for index in range(int(request)):
            yield f"{name} {index} ".encode() + b"." * 40_000

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Say": grpc.unary_unary_rpc_method_handler(say),
            "Count": grpc.unary_stream_rpc_method_handler(count),
            "Stall": grpc.unary_unary_rpc_method_handler(stall),
        },
    )


@contextlib.asynccontextmanager
async def greeter_servers(names: tuple[str, ...] = GREETERS) -> AsyncIterator[dict[str, int]]:
    """A running greeter per name, on the endpoint host: name → port."""
    servers: list[grpc.aio.Server] = []
    ports: dict[str, int] = {}
    try:
        for name in names:
            server = grpc.aio.server()
            server.add_generic_rpc_handlers((greeter(name),))
            ports[name] = server.add_insecure_port(f"{ENDPOINT_HOST}:0")
            await server.start()
            servers.append(server)
        yield ports
    finally:
        for server in servers:
            await server.stop(None)


def say_route(*, parent: str = "greeter", say: str, rest: str) -> dict[str, Any]:
    """GRPCRoute ``default/greeter`` on the Service ``parent``: ``Say`` to the Service ``say``,
    the other methods to ``rest`` (port 80)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": "greeter", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "core", "kind": "Service", "name": parent}],
            "rules": [
                {
                    "matches": [{"method": {"service": SERVICE, "method": "Say"}}],
                    "backendRefs": [{"name": say, "port": 80}],
                },
                {"backendRefs": [{"name": rest, "port": 80}]},
            ],
        },
    }
