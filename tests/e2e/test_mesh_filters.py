"""Gateway API mesh conformance behaviours on the wire through the mesh listener: request and
response header modifiers (rule and backend level), redirects (host, status, path, port, scheme,
303/307/308), path and host rewrites, and timeouts — each checked by what the echo backend received
and what the client got."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.mesh_env import MeshEnv, ref, route_obj, service_obj, ws_slice
from tests.kit.mesh_env import mesh as mesh  # the fixture


def header_filter(kind: str, **edits: Any) -> dict[str, Any]:
    key = "requestHeaderModifier" if kind == "RequestHeaderModifier" else "responseHeaderModifier"
    return {"type": kind, key: edits}


async def test_request_and_response_header_modifiers_at_rule_and_backend_level(
    mesh: MeshEnv,
) -> None:
    await mesh.serve("web")
    await mesh.serve("other")
    rule_filters = [
        header_filter(
            "RequestHeaderModifier",
            set=[{"name": "X-Env", "value": "prod"}],
            add=[{"name": "X-Added", "value": "yes"}],
            remove=["X-Drop"],
        ),
        header_filter(
            "ResponseHeaderModifier",
            set=[{"name": "X-Served-By", "value": "mesh"}],
            remove=["X-Echo-Internal"],
        ),
    ]
    backend_filter = header_filter(
        "RequestHeaderModifier", set=[{"name": "X-Backend", "value": "other"}]
    )
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/rule"}}],
            "filters": rule_filters,
            "backendRefs": [ref("web")],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/backend"}}],
            "backendRefs": [ref("other", filters=[backend_filter])],
        },
    ]
    await mesh.cluster.apply(route_obj("web", parent="web", rules=rules))
    reply = await mesh.until(
        "web.default",
        lambda r: r.backend == "web" and r.echo["headers"].get("x-env") == "prod",
        "/rule/a",
        message="rule filters applied",
        headers={"X-Env": "dev", "X-Drop": "secret", "X-Added": "first"},
    )
    seen = reply.echo["headers"]
    assert seen["x-env"] == "prod"
    assert "x-drop" not in seen
    assert reply.headers["X-Served-By"] == "mesh"
    other = await mesh.until_backend("web.default", "other", "/backend/b")
    assert other.echo["headers"]["x-backend"] == "other"
    assert "x-env" not in other.echo["headers"]
    assert "X-Served-By" not in other.headers


@pytest.mark.parametrize(
    ("redirect", "path", "status", "location"),
    [
        ({"hostname": "moved.example"}, "/a?q=1", 302, "http://moved.example/a?q=1"),
        ({"statusCode": 301}, "/a", 301, "http://web.default/a"),
        ({"scheme": "https"}, "/a", 302, "https://web.default/a"),
        ({"port": 8443, "statusCode": 303}, "/a", 303, "http://web.default:8443/a"),
        (
            {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"}, "statusCode": 307},
            "/old/x",
            307,
            "http://web.default/new",
        ),
        (
            {
                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"},
                "statusCode": 308,
            },
            "/old/x",
            308,
            "http://web.default/v2/x",
        ),
    ],
)
async def test_redirects(
    mesh: MeshEnv, redirect: dict[str, Any], path: str, status: int, location: str
) -> None:
    await mesh.serve("web")
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/old"}}]
            if "path" in redirect
            else [],
            "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}],
        }
    ]
    if not rules[0]["matches"]:
        del rules[0]["matches"]
    await mesh.cluster.apply(route_obj("web", parent="web", rules=rules))
    reply = await mesh.until(
        "web.default", lambda r: r.status == status, path, message=f"{status} redirect"
    )
    assert reply.headers["Location"] == location
    assert reply.backend is None  # answered by the listener, the backend never asked


@pytest.mark.parametrize(
    ("rewrite", "path", "forwarded"),
    [
        ({"path": {"type": "ReplaceFullPath", "replaceFullPath": "/full"}}, "/api/x", "/full"),
        (
            {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}},
            "/api/x/y",
            "/v2/x/y",
        ),
        ({"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}, "/api/x", "/x"),
    ],
)
async def test_path_rewrites(
    mesh: MeshEnv, rewrite: dict[str, Any], path: str, forwarded: str
) -> None:
    await mesh.serve("web")
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
            "filters": [{"type": "URLRewrite", "urlRewrite": rewrite}],
            "backendRefs": [ref("web")],
        }
    ]
    await mesh.cluster.apply(route_obj("web", parent="web", rules=rules))
    reply = await mesh.until(
        "web.default",
        lambda r: r.backend == "web" and r.echo["path"] == forwarded,
        path,
        message=f"{path} rewritten to {forwarded}",
    )
    assert reply.status == 200


async def test_a_host_rewrite_reaches_the_backend(mesh: MeshEnv) -> None:
    await mesh.serve("web")
    rules = [
        {
            "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "internal.example"}}],
            "backendRefs": [ref("web")],
        }
    ]
    await mesh.cluster.apply(route_obj("web", parent="web", rules=rules))
    await mesh.until(
        "web.default",
        lambda r: r.backend == "web" and r.echo["headers"]["host"] == "internal.example",
        message="Host rewritten",
    )


async def test_a_request_timeout_answers_504(mesh: MeshEnv) -> None:
    never = asyncio.Event()

    async def stall(request: web.Request) -> web.Response:
        if request.path == "/slow":
            await never.wait()
        return web.Response(text="fast", headers={"X-Echo": "stall"})

    app = web.Application()
    app.router.add_get("/{tail:.*}", stall)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, ENDPOINT_HOST, 0).start()
    try:
        await mesh.cluster.apply(service_obj("stall", "default", (80,)))
        await mesh.cluster.apply(ws_slice("stall", runner.addresses[0][1]))
        marker = header_filter("ResponseHeaderModifier", set=[{"name": "X-Route", "value": "1"}])
        rules = [
            {"timeouts": {"request": "1s"}, "filters": [marker], "backendRefs": [ref("stall")]}
        ]
        await mesh.cluster.apply(route_obj("stall", parent="stall", rules=rules))
        # The route is in force once the fast path's answer carries its header (before it, the
        # Default route has no timeout and /slow would stall the client); the slow path stalls
        # forever, so only the listener's timeout can end it.
        await mesh.until(
            "stall.default",
            lambda r: r.headers.get("X-Route") == "1",
            "/fast",
            message="the route with the timeout is in force",
        )
        reply = await mesh.until(
            "stall.default", lambda r: r.status == 504, "/slow", message="504 on a stall"
        )
        assert reply.headers["X-Interlock-Reason"] == "upstream-timeout"
    finally:
        never.set()
        await runner.cleanup()


async def test_cors_preflight_and_response_headers(mesh: MeshEnv) -> None:
    web_echo = (await mesh.serve("web"))[80]
    cors = {
        "allowOrigins": ["https://app.example"],
        "allowMethods": ["GET", "POST"],
        "exposeHeaders": ["X-Echo"],
        "maxAge": 30,
    }
    rules = [{"filters": [{"type": "CORS", "cors": cors}], "backendRefs": [ref("web")]}]
    await mesh.cluster.apply(route_obj("web", parent="web", rules=rules))
    origin = {"Origin": "https://app.example"}
    actual = await mesh.until(
        "web.default",
        lambda r: r.headers.get("Access-Control-Allow-Origin") == "https://app.example",
        "/api",
        message="the CORS rule is in force",
        headers=origin,
    )
    assert actual.backend == "web"
    assert actual.headers["Access-Control-Expose-Headers"] == "X-Echo"
    before = len(web_echo.received)
    preflight = await mesh.call(
        "web.default",
        "/api",
        method="OPTIONS",
        headers={**origin, "Access-Control-Request-Method": "POST"},
    )
    assert (preflight.status, preflight.headers["X-Interlock-Reason"]) == (200, "cors-preflight")
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert preflight.headers["Access-Control-Max-Age"] == "30"
    assert len(web_echo.received) == before, "a preflight is answered by the listener"
    stranger = await mesh.call("web.default", "/api", headers={"Origin": "https://evil.example"})
    assert stranger.backend == "web"
    assert "Access-Control-Allow-Origin" not in stranger.headers
