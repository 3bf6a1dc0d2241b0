"""The edge enforces the policy of its backend Service port on the wire (both lanes).

An Ingress sends ``dp.test`` to the Service ``web``; a producer HTTPRoute on ``web`` splits,
filters, rewrites, redirects and times out. Echo backends report what reached them, so each
test checks both what the backend received and what the client got.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest

from tests.kit.dataplane_env import (
    EdgeEnv,
    backend_edits,
    header_filter,
    ref,
    service_obj,
    slice_obj,
)
from tests.kit.dataplane_env import edge as edge
from tests.kit.e2e_clients import eventually
from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.outbound_objects import ACCRUAL


async def test_request_and_response_header_modifiers_rule_and_backend_level(
    edge: EdgeEnv,
) -> None:
    await edge.route(
        "headers",
        {
            "filters": [
                header_filter(
                    "RequestHeaderModifier",
                    set=[{"name": "X-Set", "value": "by-rule"}],
                    add=[{"name": "X-Add", "value": "added"}],
                    remove=["X-Remove"],
                ),
                header_filter(
                    "ResponseHeaderModifier",
                    set=[{"name": "X-Echo-Seen", "value": "yes"}],
                    add=[{"name": "X-Resp-Add", "value": "r"}],
                    remove=["X-Drop"],
                ),
            ],
            "backendRefs": [ref("v1", filters=backend_edits("v1"))],
        },
    )
    reply = await edge.get("/h", headers={"X-Set": "client", "X-Add": "client", "X-Remove": "gone"})
    received = reply.echo["headers"]
    assert received["x-set"] == ["by-rule"]
    assert received["x-add"] == ["client", "added"]
    assert "x-remove" not in received
    assert received["x-backend"] == ["v1"]
    assert reply.echo["backend"] == "v1"
    assert reply.headers["X-Echo-Seen"] == "yes"
    assert reply.headers["X-Resp-Add"] == "r"
    assert reply.headers["X-From"] == "v1"
    assert "X-Drop" not in reply.headers


async def test_url_rewrite_hostname_prefix_and_full_path(edge: EdgeEnv) -> None:
    await edge.route(
        "rewrite",
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {
                        "hostname": "rewritten.example",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"},
                    },
                }
            ],
            "backendRefs": [ref("v1")],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/full"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/one"}},
                }
            ],
            "backendRefs": [ref("v2")],
        },
        {"backendRefs": [ref("web")]},
    )
    prefix = (await edge.get("/old/page?x=1")).echo
    assert (prefix["backend"], prefix["path"], prefix["query"]) == ("v1", "/new/page", "x=1")
    assert prefix["headers"]["host"] == ["rewritten.example"]
    full = (await edge.get("/full/anything/else")).echo
    assert (full["backend"], full["path"]) == ("v2", "/one")
    assert full["headers"]["host"] == ["dp.test"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_request_redirect_answers_its_status_and_location(edge: EdgeEnv, status: int) -> None:
    await edge.route(
        f"redirect-{status}",
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/moved"}}],
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {
                        "scheme": "https",
                        "hostname": "elsewhere.example",
                        "statusCode": status,
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/here"},
                    },
                }
            ],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/port"}}],
            "filters": [
                {"type": "RequestRedirect", "requestRedirect": {"port": 8080, "statusCode": status}}
            ],
        },
        {"backendRefs": [ref("web")]},
    )
    before = sum(len(e.received) for e in edge.echoes.values())
    moved = await edge.get("/moved/a/b?q=1")
    assert (moved.status, moved.reason) == (status, "redirect")
    assert moved.headers["Location"] == "https://elsewhere.example/here/a/b?q=1"
    port = await edge.get("/port/x")
    assert port.status == status
    assert port.headers["Location"] == "http://dp.test:8080/port/x"
    assert sum(len(e.received) for e in edge.echoes.values()) == before, "no backend contacted"


async def test_backend_request_timeout_answers_504(edge: EdgeEnv) -> None:
    await edge.route(
        "timeout",
        {"backendRefs": [ref("v1")], "timeouts": {"request": "5s", "backendRequest": "300ms"}},
    )
    reply = await edge.get("/stall")
    assert edge.echoes["v1"].stalled.is_set()
    assert (reply.status, reply.reason) == (504, "upstream-timeout")
    assert "Server" not in reply.headers


async def test_request_timeout_answers_504(edge: EdgeEnv) -> None:
    await edge.route(
        "request-timeout", {"backendRefs": [ref("v2")], "timeouts": {"request": "300ms"}}
    )
    reply = await edge.get("/stall")
    assert (reply.status, reply.reason) == (504, "upstream-timeout")


async def test_weights_all_or_nothing_exactly_and_half_within_a_wide_bound(
    edge: EdgeEnv,
) -> None:
    await edge.route("all-v1", {"backendRefs": [ref("v1", weight=100), ref("v2", weight=0)]})
    assert {(await edge.get("/w")).echo["backend"] for _ in range(20)} == {"v1"}
    await edge.route("all-v2", {"backendRefs": [ref("v1", weight=0), ref("v2", weight=100)]})
    assert {(await edge.get("/w")).echo["backend"] for _ in range(20)} == {"v2"}
    await edge.route("half", {"backendRefs": [ref("v1", weight=50), ref("v2", weight=50)]})
    counts = Counter([(await edge.get("/w")).echo["backend"] for _ in range(200)])
    # Binomial(200, 0.5): standard deviation ≈ 7.1; ±35 is five of them (p ≈ 6e-7 to fail).
    assert set(counts) == {"v1", "v2"}
    assert 65 <= counts["v1"] <= 135, counts


async def test_a_missing_backend_answers_its_failure_injector(edge: EdgeEnv) -> None:
    await edge.route(
        "missing",
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/gone"}}],
            "backendRefs": [ref("does-not-exist")],
        },
        {"backendRefs": [ref("web")]},
    )
    reply = await edge.get("/gone")
    assert (reply.status, reply.reason) == (500, "backend-not-found")
    assert b"does-not-exist" not in reply.body, "cluster names stay out of edge answers"
    assert "Server" not in reply.headers


async def test_answers_say_why_without_a_banner(edge: EdgeEnv) -> None:
    async with edge.http.get(edge.url + "/", headers={"Host": "nobody.test"}) as response:
        assert response.status == 404
        assert response.headers["X-Interlock-Reason"] == "unknown-host"
        assert "Server" not in response.headers
        assert (await response.text()).startswith("unknown-host: ")
    await edge.route(
        "no-match",
        {"matches": [{"path": {"type": "Exact", "value": "/only"}}], "backendRefs": [ref("v1")]},
        probe="/only",
    )
    reply = await edge.get("/else")
    assert (reply.status, reply.reason) == (404, "no-route")


async def test_a_101_nobody_asked_for_never_reaches_the_client(edge: EdgeEnv) -> None:
    async def switch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        )
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            await reader.read()  # hold the connection until the edge drops it
        writer.close()

    server = await asyncio.start_server(switch, ENDPOINT_HOST, 0)
    try:
        port = server.sockets[0].getsockname()[1]
        await edge.cluster.apply(service_obj("switcher"))
        await edge.cluster.apply(slice_obj("switcher", port))
        await edge.route(
            "switch",
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/switch"}}],
                "backendRefs": [ref("switcher")],
            },
            {"backendRefs": [ref("web")]},
        )

        async def answers_502() -> bool:
            return (await edge.get("/switch")).status == 502

        await eventually(answers_502, message="the switcher's endpoints are known")
        reply = await edge.get("/switch")
        assert (reply.status, reply.reason) == (502, "upgrade-not-asked")
    finally:
        server.close()
        await server.wait_closed()


async def test_cors_preflight_and_response_headers(edge: EdgeEnv) -> None:
    await edge.route(
        "cors",
        {
            "filters": [
                {
                    "type": "CORS",
                    "cors": {
                        "allowOrigins": ["https://app.example"],
                        "allowMethods": ["GET", "POST"],
                        "allowHeaders": ["X-Token"],
                        "exposeHeaders": ["X-Echo"],
                        "maxAge": 30,
                    },
                }
            ],
            "backendRefs": [ref("v1")],
        },
    )
    before = len(edge.echoes["v1"].received)
    preflight = await edge.get(
        "/api",
        method="OPTIONS",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
    )
    assert (preflight.status, preflight.reason) == (200, "cors-preflight")
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert preflight.headers["Access-Control-Max-Age"] == "30"
    assert len(edge.echoes["v1"].received) == before, "a preflight is answered by the edge"
    actual = await edge.get("/api", headers={"Origin": "https://app.example"})
    assert actual.echo["backend"] == "v1"
    assert actual.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert actual.headers["Access-Control-Expose-Headers"] == "X-Echo"
    stranger = await edge.get("/api", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in stranger.headers


async def test_retries_from_linkerd_annotations(edge: EdgeEnv) -> None:
    await edge.route(
        "retry",
        {"backendRefs": [ref("v1")]},
        annotations={"retry.linkerd.io/http": "503", "retry.linkerd.io/limit": "2"},
    )
    v1 = edge.echoes["v1"]
    assert (await edge.get("/r?fail_first=2")).status == 200
    assert v1.seen["fail_first=2"] == 3
    assert (await edge.get("/r?fail_first=9")).status == 503, "the last answer is relayed"
    assert v1.seen["fail_first=9"] == 3
    assert (await edge.get("/r?status=500")).status == 500, "500 is not listed"
    assert v1.seen["status=500"] == 1


async def test_failure_accrual_takes_a_failing_endpoint_out(edge: EdgeEnv) -> None:
    await edge.cluster.apply(
        service_obj(
            "web",
            ACCRUAL,
        )
    )
    await edge.route("accrual", {"backendRefs": [ref("v2")]})
    v2 = edge.echoes["v2"]

    async def ejected() -> bool:
        # Until the policy has the annotation, a 500 is only relayed; then two in a row eject.
        return (await edge.get("/a?status=500")).reason == "endpoints-failing"

    await eventually(ejected, message="two failures in a row take v2's endpoint out")
    before = len(v2.received)
    reply = await edge.get("/a")
    assert (reply.status, reply.reason) == (503, "endpoints-failing")
    assert len(v2.received) == before, "the ejected endpoint gets nothing"


async def test_header_query_and_method_matches_choose_the_rule(edge: EdgeEnv) -> None:
    await edge.route(
        "matches",
        {
            "matches": [{"headers": [{"name": "X-Canary", "value": "yes"}]}],
            "backendRefs": [ref("v1")],
        },
        {
            "matches": [
                {"queryParams": [{"type": "RegularExpression", "name": "v", "value": "^2.*"}]}
            ],
            "backendRefs": [ref("v2")],
        },
        {
            "matches": [{"method": "DELETE", "path": {"type": "PathPrefix", "value": "/items"}}],
            "backendRefs": [ref("v1")],
            "filters": [
                header_filter("RequestHeaderModifier", set=[{"name": "X-Rule", "value": "delete"}])
            ],
        },
        {"backendRefs": [ref("web")]},
    )
    assert (await edge.get("/a", headers={"X-Canary": "yes"})).echo["backend"] == "v1"
    assert (await edge.get("/a", headers={"X-Canary": "no"})).echo["backend"] == "web"
    assert (await edge.get("/a?v=2.1")).echo["backend"] == "v2"
    assert (await edge.get("/a?v=1&w=2")).echo["backend"] == "web"
    deleted = (await edge.get("/items/7", method="DELETE")).echo
    assert (deleted["backend"], deleted["method"], deleted["headers"]["x-rule"]) == (
        "v1",
        "DELETE",
        ["delete"],
    )
    fetched = (await edge.get("/items/7")).echo
    assert (fetched["backend"], "x-rule" in fetched["headers"]) == ("web", False)
