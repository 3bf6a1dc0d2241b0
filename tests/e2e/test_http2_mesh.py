"""gRPC through the mesh listener: a real grpcio client on a plaintext channel
(h2c with prior knowledge) names the Service in its authority; the listener routes the call by
the Service port's policy — a GRPCRoute choosing the backend by method — and relays it over h2c
to a real grpcio server: messages, metadata, status and details in the trailers. HTTP/1.1 keeps
working on the same port."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from e2e_clients import eventually
from grpc_backends import SERVICE, check_grpc_retries, greeter_servers, say_route
from h2_client import h2_get
from mesh_env import GATEWAY, MeshEnv, ref, route_obj, service_obj, ws_slice
from mesh_env import mesh as mesh  # the fixture


@pytest.fixture
async def greeters(mesh: MeshEnv) -> AsyncIterator[None]:
    async with greeter_servers() as ports:
        for name, port in ports.items():
            await mesh.cluster.apply(service_obj(name, "default", (80,)))
            await mesh.cluster.apply(ws_slice(name, port))
        yield


def channel(mesh: MeshEnv, authority: str) -> grpc.aio.Channel:
    target = mesh.url.removeprefix("http://")
    return grpc.aio.insecure_channel(target, options=(("grpc.default_authority", authority),))


async def say(ch: grpc.aio.Channel, text: bytes, **kwargs: Any) -> grpc.aio.UnaryUnaryCall:
    return ch.unary_unary(f"/{SERVICE}/Say")(text, timeout=30, **kwargs)


async def test_a_grpc_call_reaches_the_service_its_authority_names(
    mesh: MeshEnv, greeters: None
) -> None:
    async with channel(mesh, "greeter.default.svc.cluster.local:80") as ch:
        replies: list[bytes] = []

        async def answered() -> bool:
            try:
                replies.append(await await_call(await say(ch, b"ann")))
            except grpc.aio.AioRpcError:
                return False  # until the controller has seen the Service and its endpoints
            return True

        await eventually(answered, message="the gRPC call is routed")
        assert replies[-1] == b"greeter: hello ann (-)"
        call = await say(ch, b"bob", metadata=(("x-team", "blue"),))
        assert await call == b"greeter: hello bob (blue)"
        assert ("x-served-by", "greeter") in tuple(await call.initial_metadata())
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await await_call(await say(ch, b"deny"))
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert denied.value.details() == "greeter says no"
        count = ch.unary_stream(f"/{SERVICE}/Count")
        messages = [m async for m in count(b"4", timeout=30)]
        assert [m.split(b" ")[1] for m in messages] == [b"0", b"1", b"2", b"3"]
    # HTTP/1.1 on the same port.
    reply = await mesh.call("nothing-here")
    assert (reply.status, reply.headers["X-Interlock-Reason"]) == (404, "unknown-host")


async def test_a_grpc_route_chooses_the_backend_by_method(mesh: MeshEnv, greeters: None) -> None:
    await mesh.cluster.apply(say_route(say="greeter-v2", rest="greeter"))
    async with channel(mesh, "greeter.default:80") as ch:
        seen: list[bytes] = []

        async def v2() -> bool:
            try:
                seen.append(await await_call(await say(ch, b"cy")))
            except grpc.aio.AioRpcError:
                return False
            return seen[-1].startswith(b"greeter-v2:")

        await eventually(v2, message="Say goes to greeter-v2")
        count = ch.unary_stream(f"/{SERVICE}/Count")
        messages = [m async for m in count(b"1", timeout=30)]
        assert messages[0].startswith(b"greeter 0 ")  # the other method, the other rule


async def test_a_service_that_does_not_exist_fails_the_call(mesh: MeshEnv) -> None:
    async with channel(mesh, "nobody.default.svc") as ch:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await await_call(await say(ch, b"x"))
    # The Default route's 500, as gRPC reads an HTTP status without grpc-status.
    assert failed.value.code() in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
    assert "500" in (failed.value.details() or "")


async def await_call(call: grpc.aio.UnaryUnaryCall) -> bytes:
    reply: bytes = await call
    return reply


async def test_a_rules_timeout_and_response_headers_apply_to_grpc_calls(
    mesh: MeshEnv, greeters: None
) -> None:
    await mesh.cluster.apply(
        {
            "apiVersion": f"{GATEWAY}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "greeter-timeout", "namespace": "default"},
            "spec": {
                "parentRefs": [{"group": "core", "kind": "Service", "name": "greeter"}],
                "rules": [
                    {
                        "timeouts": {"request": "1s"},
                        "filters": [
                            {
                                "type": "ResponseHeaderModifier",
                                "responseHeaderModifier": {
                                    "set": [{"name": "X-Route", "value": "timeout"}]
                                },
                            }
                        ],
                        "backendRefs": [{"name": "greeter", "port": 80}],
                    }
                ],
            },
        }
    )
    async with channel(mesh, "greeter.default") as ch:
        stall = ch.unary_unary(f"/{SERVICE}/Stall")
        failed: list[grpc.aio.AioRpcError] = []

        async def timed_out() -> bool:
            try:
                await stall(b"", timeout=10)
            except grpc.aio.AioRpcError as error:
                failed.append(error)
                return "504" in (error.details() or "")
            return False

        # Until the route is in force the call ends by the client's own 10 s deadline.
        await eventually(timed_out, message="the listener's 504 ends the call")
    assert failed[-1].code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN)
    # The same rule's ResponseHeaderModifier reaches a call that is answered.
    async with channel(mesh, "greeter.default") as ch:
        call = await say(ch, b"dee")
        assert await call == b"greeter: hello dee (-)"
        assert ("x-route", "timeout") in tuple(await call.initial_metadata())


async def test_grpc_calls_are_retried_on_the_routes_grpc_statuses(
    mesh: MeshEnv, greeters: None
) -> None:
    await mesh.cluster.apply(say_route(say="greeter-v2", rest="greeter", retry=True))
    async with channel(mesh, "greeter.default:80") as ch:
        await check_grpc_retries(ch)


async def test_an_h2c_request_gets_the_rules_filters_redirects_rewrites_and_weights(
    mesh: MeshEnv,
) -> None:
    await mesh.serve("web")
    await mesh.serve("other")
    edits = {"set": [{"name": "X-Env", "value": "prod"}], "remove": ["X-Drop"]}
    backend_edit = {"set": [{"name": "X-Backend-Filter", "value": "other"}]}
    redirect = {"hostname": "moved.example", "statusCode": 307}
    rewrite = {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/rule"}}],
            "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": edits}],
            "backendRefs": [ref("web")],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/backend"}}],
            "backendRefs": [
                ref(
                    "other",
                    filters=[
                        {"type": "RequestHeaderModifier", "requestHeaderModifier": backend_edit}
                    ],
                )
            ],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/moved"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
            "filters": [{"type": "URLRewrite", "urlRewrite": rewrite}],
            "backendRefs": [ref("web")],
        },
        {"backendRefs": [ref("web", weight=0), ref("other", weight=100)]},
    ]
    await mesh.cluster.apply(route_obj("web", parent="web", rules=rules))
    authority = "web.default"

    async def in_force() -> bool:
        reply = await h2_get(mesh.url, authority=authority, path="/w")
        return reply.headers.get("x-echo") == "other"

    await eventually(in_force, message="the route is in force for h2c requests")
    sent = {"x-env": "dev", "x-drop": "secret"}
    rule = await h2_get(mesh.url, authority=authority, path="/rule/a", headers=sent)
    seen = json.loads(rule.body)["headers"]
    assert (seen["x-env"], "x-drop" in seen, seen["host"]) == ("prod", False, authority)
    backend = json.loads((await h2_get(mesh.url, authority=authority, path="/backend/b")).body)
    assert (backend["backend"], backend["headers"]["x-backend-filter"]) == ("other", "other")
    moved = await h2_get(mesh.url, authority=authority, path="/moved/x?q=1")
    assert (moved.status, moved.headers["location"]) == (307, "http://moved.example/moved/x?q=1")
    assert "x-echo" not in moved.headers
    rewritten = json.loads((await h2_get(mesh.url, authority=authority, path="/api/x/y")).body)
    assert (rewritten["backend"], rewritten["path"]) == ("web", "/v2/x/y")
    weights = {(await h2_get(mesh.url, authority=authority, path="/w")).headers["x-echo"]}
    weights |= {(await h2_get(mesh.url, authority=authority, path="/w")).headers["x-echo"]}
    assert weights == {"other"}
