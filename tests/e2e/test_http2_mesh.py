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

from tests.kit.e2e_clients import eventually
from tests.kit.grpc_backends import SERVICE, check_grpc_retries, greeter_servers, say_route
from tests.kit.h2_client import h2_get
from tests.kit.mesh_env import GATEWAY, MeshEnv, ref, route_obj, service_obj, ws_slice
from tests.kit.mesh_env import mesh as mesh  # the fixture
from tests.kit.outbound_objects import ACCRUAL


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
    elsewhere = {"scheme": "https", "port": 8443, "statusCode": 301}
    elsewhere["path"] = {"type": "ReplaceFullPath", "replaceFullPath": "/there"}
    full = {"hostname": "internal.example"}
    full["path"] = {"type": "ReplaceFullPath", "replaceFullPath": "/one"}
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
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/port"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": elsewhere}],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/full"}}],
            "filters": [{"type": "URLRewrite", "urlRewrite": full}],
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
    port = await h2_get(mesh.url, authority=authority, path="/port/x?q=1")
    assert (port.status, port.headers["location"]) == (301, "https://web.default:8443/there?q=1")
    full_path = await h2_get(mesh.url, authority=authority, path="/full/x/y?z=1")
    rewritten_full = json.loads(full_path.body)
    assert (rewritten_full["backend"], rewritten_full["path"]) == ("web", "/one")
    assert rewritten_full["query"] == "z=1"
    assert rewritten_full["headers"]["host"] == "internal.example", "the :authority rewritten"
    weights = {(await h2_get(mesh.url, authority=authority, path="/w")).headers["x-echo"]}
    weights |= {(await h2_get(mesh.url, authority=authority, path="/w")).headers["x-echo"]}
    assert weights == {"other"}


async def test_a_consumer_routes_filters_timeouts_retries_and_accrual_apply_to_h2c_requests(
    mesh: MeshEnv,
) -> None:
    for namespace in ("mesh-h2", "mesh-other"):
        await mesh.cluster.namespace(namespace)
    web = (await mesh.serve("web", namespace="mesh-h2"))[80]
    canary = (await mesh.serve("canary", namespace="mesh-h2"))[80]
    canary.every_value = True  # to see an added header after the client's own
    authority = "web.mesh-h2"
    # Another namespace's consumer route: seen by the controller before the listener's own.
    theirs = route_obj(
        "theirs",
        namespace="mesh-other",
        parent="web",
        parent_namespace="mesh-h2",
        rules=[
            {"matches": _prefix("/theirs"), "backendRefs": [ref("canary", namespace="mesh-h2")]}
        ],
    )
    await mesh.cluster.apply(theirs)
    await eventually(lambda: mesh.has_status(theirs), message="theirs has a status")
    add = {"add": [{"name": "X-Add", "value": "added"}]}
    cors = {"allowOrigins": ["https://app.example"], "allowMethods": ["GET"], "maxAge": 30}
    cors["exposeHeaders"] = ["X-Echo"]
    mine = route_obj(
        "mine",
        parent="web",
        parent_namespace="mesh-h2",
        rules=[
            {
                "matches": _prefix("/mine"),
                "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": add}],
                "backendRefs": [ref("canary", namespace="mesh-h2")],
            },
            {
                "matches": _prefix("/api"),
                "filters": [{"type": "CORS", "cors": cors}],
                "backendRefs": [ref("web", namespace="mesh-h2")],
            },
            {
                "matches": _prefix("/slow"),
                "timeouts": {"request": "10s", "backendRequest": "300ms"},
                "backendRefs": [ref("web", namespace="mesh-h2")],
            },
            {"matches": _prefix("/r"), "backendRefs": [ref("web", namespace="mesh-h2")]},
        ],
    )
    mine["metadata"]["annotations"] = {
        "retry.linkerd.io/http": "503",
        "retry.linkerd.io/limit": "2",
    }
    await mesh.cluster.apply(mine)
    sent = {"x-add": "client"}

    async def in_force() -> bool:
        reply = await h2_get(mesh.url, authority=authority, path="/mine/a", headers=sent)
        return reply.headers.get("x-echo") == "canary"

    await eventually(in_force, message="the listener's consumer route is in force over h2c")
    edited = await h2_get(mesh.url, authority=authority, path="/mine/a", headers=sent)
    assert json.loads(edited.body)["headers"]["x-add"] == ["client", "added"]
    foreign = await h2_get(mesh.url, authority=authority, path="/theirs/x")
    assert (foreign.status, foreign.reason) == (404, "no-route")
    # CORS: the listener answers the preflight; an allowed origin's answer gets its headers.
    origin = {"origin": "https://app.example"}
    before = len(web.received)
    preflight = await h2_get(
        mesh.url,
        authority=authority,
        path="/api",
        method="OPTIONS",
        headers={**origin, "access-control-request-method": "GET"},
    )
    assert (preflight.status, preflight.reason) == (200, "cors-preflight")
    assert preflight.headers["access-control-max-age"] == "30"
    assert len(web.received) == before, "a preflight is answered by the listener"
    allowed = await h2_get(mesh.url, authority=authority, path="/api", headers=origin)
    assert allowed.headers["x-echo"] == "web"
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert allowed.headers["access-control-expose-headers"] == "X-Echo"
    # backendRequest bounds the attempt's wait for headers from a backend that never answers.
    stalled = await h2_get(mesh.url, authority=authority, path="/slow?stall=1")
    assert web.stalled.is_set()
    assert (stalled.status, stalled.reason) == (504, "upstream-timeout")
    # Retries on the route's HTTP statuses; the last answer is relayed when they run out.
    assert (await h2_get(mesh.url, authority=authority, path="/r?fail_first=2")).status == 200
    assert web.seen["fail_first=2"] == 3
    assert (await h2_get(mesh.url, authority=authority, path="/r?fail_first=9")).status == 503
    assert web.seen["fail_first=9"] == 3
    # Failure accrual (the target Service's annotations): two 500s in a row take canary's
    # endpoint out, for h2c requests too.
    accruing = service_obj("web", "mesh-h2", (80,))
    accruing["metadata"]["annotations"] = ACCRUAL
    await mesh.cluster.apply(accruing)

    async def ejected() -> bool:
        reply = await h2_get(mesh.url, authority=authority, path="/mine/a?status=500")
        return reply.reason == "endpoints-failing"

    await eventually(ejected, message="two failures in a row take canary's endpoint out")
    before = len(canary.received)
    refused = await h2_get(mesh.url, authority=authority, path="/mine/a")
    assert (refused.status, refused.reason) == (503, "endpoints-failing")
    assert len(canary.received) == before, "the ejected endpoint gets nothing"


def _prefix(value: str) -> list[dict[str, Any]]:
    return [{"path": {"type": "PathPrefix", "value": value}}]
