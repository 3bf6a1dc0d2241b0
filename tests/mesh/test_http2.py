"""The HTTP/2 machinery alone (interlock.dataplane.http2_server and http2_client): a real gRPC
client (grpcio) through a listener that sniffs the protocol, relayed over h2c to a real gRPC
server — unary and streaming calls, metadata, trailers with an error status — and HTTP/1.1 on
the same port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest
from aiohttp import web

from interlock.dataplane.http2_client import H2Upstreams, relay_h2
from interlock.dataplane.http2_server import H2Responder, H2ServerProtocol, SniffingProtocol
from interlock.dataplane.request_stream import H2Request

SERVICE = "demo.Echo"


async def _unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    metadata = dict(context.invocation_metadata() or ())
    if request == b"fail":
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
    await context.send_initial_metadata((("x-upstream", "grpc"),))
    return b"echo " + request + b" team=" + metadata.get("x-team", "").encode()


async def _stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    for index in range(int(request)):
        yield b"%d" % index + b"x" * 70_000  # past the default 64 KiB window


@pytest.fixture
async def grpc_upstream() -> AsyncIterator[int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "Say": grpc.unary_unary_rpc_method_handler(_unary),
                    "Count": grpc.unary_stream_rpc_method_handler(_stream),
                },
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield port
    await server.stop(None)


@pytest.fixture
async def listener(grpc_upstream: int) -> AsyncIterator[int]:
    upstreams = H2Upstreams()

    async def handle(request: H2Request, responder: H2Responder) -> None:
        failed = await relay_h2(
            request,
            responder,
            upstreams=upstreams,
            address=("127.0.0.1", grpc_upstream),
            authority=request.authority,
            path=request.path,
            headers=request.headers.items(),
            connect_timeout=5,
            headers_timeout=30,
            where="test",
        )
        if failed is not None:
            responder.send_headers(failed.status, [("x-interlock-reason", failed.reason)], end=True)

    async def http1(_request: web.BaseRequest) -> web.Response:
        return web.Response(text="http/1.1 here")

    http1_server = web.Server(http1)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SniffingProtocol(
            http1=http1_server,
            http2=lambda: H2ServerProtocol(handle, scheme="http"),
            choose_within=30,
        ),
        "127.0.0.1",
        0,
    )
    yield server.sockets[0].getsockname()[1]
    server.close()
    await http1_server.shutdown(1)
    await upstreams.close()


async def test_unary_calls_metadata_and_error_trailers_flow(listener: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{listener}") as channel:
        say = channel.unary_unary(f"/{SERVICE}/Say")
        call = say(b"hi", metadata=(("x-team", "blue"),), timeout=30)
        assert await call == b"echo hi team=blue"
        assert ("x-upstream", "grpc") in tuple(await call.initial_metadata())
        assert await call.code() == grpc.StatusCode.OK
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await say(b"fail", timeout=30)
        assert failed.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert failed.value.details() == "no"
        # Many calls on the one client connection, multiplexed upstream too.
        replies = await asyncio.gather(*(say(b"%d" % i, timeout=30) for i in range(20)))
        assert replies == [b"echo %d team=" % i for i in range(20)]


async def test_a_server_stream_larger_than_the_flow_control_windows(listener: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{listener}") as channel:
        count = channel.unary_stream(f"/{SERVICE}/Count")
        received = [message async for message in count(b"5", timeout=30)]
    assert [m[:1] for m in received] == [b"0", b"1", b"2", b"3", b"4"]
    assert all(len(m) == 70_001 for m in received)


async def test_http1_is_served_on_the_same_port(listener: int) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{listener}/") as r:
        assert await r.text() == "http/1.1 here"


@pytest.mark.parametrize("first_bytes", [b"", b"PRI * HTTP/2"])
async def test_a_connection_that_never_says_its_protocol_is_closed(first_bytes: bytes) -> None:
    async def never(_request: H2Request, _responder: H2Responder) -> None:
        raise AssertionError("no stream can start")

    async def http1(_request: web.BaseRequest) -> web.Response:
        return web.Response()

    http1_server = web.Server(http1)
    server = await asyncio.get_running_loop().create_server(
        lambda: SniffingProtocol(
            http1=http1_server,
            http2=lambda: H2ServerProtocol(never, scheme="http"),
            choose_within=0.1,
        ),
        "127.0.0.1",
        0,
    )
    try:
        reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        writer.write(first_bytes)
        # The listener closes it (EOF) instead of holding it open forever.
        assert await asyncio.wait_for(reader.read(), 30) == b""
        writer.close()
    finally:
        server.close()
