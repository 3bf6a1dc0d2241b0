"""Real gRPC backends for the e2e tests (grpcio's asyncio server): a greeter that names itself.

``/demo.Greeter/Say`` answers ``NAME: hello TEXT (x-team)`` with ``x-served-by: NAME`` in its
initial metadata, and ``PERMISSION_DENIED`` ("NAME says no", in the trailers) to ``deny``;
``Count`` streams N messages of 40 kB (flow control on the way back); ``Stall`` never answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

SERVICE = "demo.Greeter"


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
