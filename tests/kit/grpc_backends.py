"""Real gRPC backends for the e2e tests (grpcio's asyncio server): a greeter that names itself.

``/demo.Greeter/Say`` answers ``NAME: hello TEXT (x-team)`` with ``x-served-by: NAME`` in its
initial metadata, and ``PERMISSION_DENIED`` ("NAME says no", in the trailers) to ``deny``;
``Count`` streams N messages of 40 kB (flow control on the way back); ``Stall`` never answers;
``Flaky`` answers ``UNAVAILABLE`` to the first N calls with the request ``KEY:N``, then
``NAME: KEY after K calls``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from tests.kit.e2e_clients import eventually
from tests.kit.lanes import ENDPOINT_HOST

SERVICE = "demo.Greeter"
GREETERS = ("greeter", "greeter-v2")
GRPC_RETRY = {"retry.linkerd.io/grpc": "unavailable", "retry.linkerd.io/limit": "2"}


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

    calls: Counter[bytes] = Counter()

    async def flaky(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        key, _, fails = request.partition(b":")
        calls[key] += 1
        if calls[key] <= int(fails or b"0"):
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{name} is flaky")
        return f"{name}: {key.decode()} after {calls[key]} calls".encode()

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Say": grpc.unary_unary_rpc_method_handler(say),
            "Count": grpc.unary_stream_rpc_method_handler(count),
            "Stall": grpc.unary_unary_rpc_method_handler(stall),
            "Flaky": grpc.unary_unary_rpc_method_handler(flaky),
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


def say_route(
    *, parent: str = "greeter", say: str, rest: str, retry: bool = False
) -> dict[str, Any]:
    """GRPCRoute ``default/greeter`` on the Service ``parent``: ``Say`` to the Service ``say``,
    the other methods to ``rest`` (port 80); with ``retry``, :data:`GRPC_RETRY`."""
    annotations = GRPC_RETRY if retry else {}
    metadata = {"name": "greeter", "namespace": "default", "annotations": annotations}
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": metadata,
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


async def until_said(
    channel: grpc.aio.Channel, greeter: str, *, message: str, text: bytes = b"ann"
) -> bytes:
    """Call ``Say`` until the greeter named ``greeter`` answers (the route that sends it there is
    in force; a failed call or another greeter's answer is tried again); its reply."""
    say = channel.unary_unary(f"/{SERVICE}/Say")
    replies: list[bytes] = []

    async def answered() -> bool:
        try:
            replies.append(await say(text, timeout=30))
        except grpc.aio.AioRpcError:
            return False
        return replies[-1].startswith(f"{greeter}:".encode())

    await eventually(answered, message=message)
    return replies[-1]


async def check_grpc_retries(channel: grpc.aio.Channel) -> None:
    """``retry.linkerd.io/grpc: unavailable`` with a limit of 2 (``say_route(retry=True)``,
    Say to greeter-v2, the rest to greeter): once the route is in force, a call failing twice
    succeeds on its third attempt; one failing more ends UNAVAILABLE after exactly three."""
    await until_said(channel, "greeter-v2", message="Say goes to greeter-v2")
    flaky = channel.unary_unary(f"/{SERVICE}/Flaky")
    assert await flaky(b"twice:2", timeout=30) == b"greeter: twice after 3 calls"
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await flaky(b"always:9", timeout=30)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert failed.value.details() == "greeter is flaky"
    assert await flaky(b"always:0", timeout=30) == b"greeter: always after 4 calls"
