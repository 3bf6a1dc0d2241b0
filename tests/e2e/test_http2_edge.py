"""HTTP/2 at the edge (``docs/design.md``, "One engine, two front doors"), on both lanes: h2c with
prior knowledge on the plain port and h2 by ALPN on the TLS port, decided by the edge's steps —
host, route, modules (fail closed), the engine — as HTTP/1.1 is. A stream reaches an HTTP/1.1
backend as HTTP/1.1 and a gRPC backend (a GRPCRoute's Service) over h2c, with its trailers."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import bcrypt
import grpc
import pytest

from interlock.config import EdgeConfig
from tests.kit.dataplane_env import (
    HOST,
    EdgeEnv,
    backend_edits,
    edge_env,
    header_filter,
    ref,
    service_obj,
    slice_obj,
)
from tests.kit.dataplane_env import edge as edge  # the fixture
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.edge_env import secret
from tests.kit.edge_objects import ingress, module_set
from tests.kit.grpc_backends import (
    SERVICE,
    check_grpc_retries,
    greeter_servers,
    say_route,
    until_said,
)
from tests.kit.h2_client import H2Client, H2Reply, h2_get
from tests.kit.outbound_objects import ACCRUAL
from tests.kit.tls_certs import self_signed, tls_secret

GRPC_HOST = "grpc.test"


async def get(edge: EdgeEnv, path: str = "/", **kwargs: Any) -> H2Reply:
    kwargs.setdefault("authority", HOST)
    return await h2_get(edge.url, path=path, **kwargs)


async def test_an_h2c_stream_is_routed_filtered_and_reaches_an_http1_backend(
    edge: EdgeEnv,
) -> None:
    await edge.route(
        "h2",
        {
            "filters": [
                header_filter("RequestHeaderModifier", set=[{"name": "X-Set", "value": "rule"}]),
                header_filter(
                    "ResponseHeaderModifier",
                    set=[{"name": "X-Seen", "value": "yes"}],
                    remove=["X-Drop"],
                ),
            ],
            "backendRefs": [{"name": "v1", "port": 80}],
        },
    )
    reply = await get(edge, "/some/path?q=1", headers={"x-client": "c", "x-set": "client"})
    assert reply.status == 200, reply
    report = edge_report(reply)
    assert report["backend"] == "v1"
    assert (report["method"], report["path"], report["query"]) == ("GET", "/some/path", "q=1")
    received = report["headers"]
    assert received["host"] == [HOST]
    assert received["x-client"] == ["c"]
    assert received["x-set"] == ["rule"]
    assert received["x-forwarded-proto"] == ["http"]
    assert (reply.headers["x-seen"], reply.headers.get("x-drop")) == ("yes", None)
    # A body goes upstream byte for byte.
    posted = await get(edge, "/post", method="POST", body=b"x" * 100_000)
    assert edge_report(posted)["method"] == "POST"
    # The edge's own answers, in the answer format, over HTTP/2 too.
    unknown = await get(edge, authority="nobody.test")
    assert (unknown.status, unknown.reason) == (404, "unknown-host")
    assert unknown.body.startswith(b"unknown-host: ")
    # One connection carries several streams; HTTP/1.1 keeps working on the same port.
    host, _, port = edge.url.removeprefix("http://").rpartition(":")
    client = await H2Client.connect(host, int(port))
    try:
        replies = [await client.request(authority=HOST, path=f"/n/{n}") for n in range(3)]
    finally:
        await client.close()
    assert [edge_report(r)["path"] for r in replies] == ["/n/0", "/n/1", "/n/2"]
    assert (await edge.get("/")).echo["backend"] == "v1"


def edge_report(reply: H2Reply) -> dict[str, Any]:
    assert "x-echo" in reply.headers, (reply.status, reply.headers, reply.body[:300])
    report: dict[str, Any] = json.loads(reply.body)
    return report


async def test_modules_apply_to_h2_streams_and_fail_closed(edge: EdgeEnv) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    await edge.cluster.apply(secret("users", {"htpasswd": f"ann:{hashed}\n"}))
    await edge.cluster.apply(
        module_set(
            "guard",
            {
                "basicAuth": {"realm": "dp", "secretRef": {"name": "users", "key": "htpasswd"}},
                "headers": {
                    "request": {"add": {"X-Team": "blue"}},
                    "response": {"add": {"X-Frame-Options": "DENY"}},
                },
            },
        )
    )
    await edge.cluster.apply(ingress("dp", HOST, modules="guard"))

    async def refused() -> bool:
        return (await get(edge)).status == 401

    await eventually(refused, message="basicAuth refuses an h2 stream without credentials")
    refusal = await get(edge)
    assert refusal.reason == "module"
    assert "www-authenticate" in refusal.headers
    token = base64.b64encode(b"ann:s3cret").decode()
    admitted = await get(edge, headers={"authorization": f"Basic {token}"})
    assert admitted.status == 200, admitted
    assert edge_report(admitted)["headers"]["x-team"] == ["blue"]
    assert admitted.headers["x-frame-options"] == "DENY"
    # ipRestriction refuses the client's address over HTTP/2 as over HTTP/1.1.
    await edge.cluster.apply(module_set("guard", {"ipRestriction": {"deny": ["0.0.0.0/0"]}}))

    async def denied() -> bool:
        return (await get(edge)).status == 403

    await eventually(denied, message="ipRestriction refuses the h2 stream")
    # Fail closed: a new host whose modules cannot be applied serves nothing.
    await edge.cluster.apply(module_set("typo", {"ipRestriction": {"allow": ["10.0.0.0/33"]}}))
    await edge.cluster.apply(ingress("closed", "closed.test", modules="typo"))

    async def unattached() -> bool:
        reply = await get(edge, authority="closed.test")
        return reply.status == 503

    await eventually(unattached, message="a route whose modules failed answers 503")
    reply = await get(edge, authority="closed.test")
    assert reply.reason == "no-backend-attached"
    assert "x-echo" not in reply.headers


@pytest.fixture
async def tls_edge(cluster: Cluster, start_controller: StartController) -> AsyncIterator[EdgeEnv]:
    async with edge_env(
        cluster, start_controller, edge=EdgeConfig(addr=LOCAL, tls_addr=LOCAL)
    ) as env:
        yield env


async def test_tls_negotiates_h2_by_alpn_and_keeps_http1(tls_edge: EdgeEnv) -> None:
    edge = tls_edge
    cert, key = self_signed(HOST)
    await edge.cluster.apply(tls_secret("dp-tls", cert, key))
    secured = ingress("dp", HOST)
    secured["spec"]["tls"] = [{"hosts": [HOST], "secretName": "dp-tls"}]
    await edge.cluster.apply(secured)
    inspected = edge.controller.inspect().edge
    assert inspected is not None and inspected.tls_address is not None
    url = f"https://127.0.0.1:{inspected.tls_address.port}"
    context = ssl.create_default_context(cadata=cert)
    context.set_alpn_protocols(["h2", "http/1.1"])
    replies: list[H2Reply] = []

    async def served() -> bool:
        try:
            client = await H2Client.connect(
                "127.0.0.1", inspected.tls_address.port, tls=context, server_hostname=HOST
            )
        except (OSError, ssl.SSLError):
            return False  # until the certificate is served
        try:
            assert client.alpn == "h2"
            replies.append(await client.request(authority=HOST, path="/tls", scheme="https"))
        finally:
            await client.close()
        return replies[-1].status == 200

    await eventually(served, message="https://dp.test/ answers over h2")
    report = edge_report(replies[-1])
    assert report["headers"]["x-forwarded-proto"] == ["https"]
    # A client that offers only HTTP/1.1 gets HTTP/1.1.
    plain = ssl.create_default_context(cadata=cert)
    async with edge.http.get(
        url + "/h1", headers={"Host": HOST}, ssl=plain, server_hostname=HOST
    ) as response:
        assert response.status == 200
        assert response.version.major == 1
        assert (await response.json())["path"] == "/h1"


@pytest.fixture
async def greeters(edge: EdgeEnv) -> AsyncIterator[None]:
    async with greeter_servers() as ports:
        for name, port in ports.items():
            await edge.cluster.apply(service_obj(name))
            await edge.cluster.apply(slice_obj(name, port))
        await edge.cluster.apply(ingress("grpc", GRPC_HOST, backend="greeter"))
        yield


async def test_a_grpc_route_through_the_edge_reaches_an_h2c_backend_with_trailers(
    edge: EdgeEnv, greeters: None
) -> None:
    await edge.cluster.apply(say_route(say="greeter-v2", rest="greeter"))
    target = edge.url.removeprefix("http://")
    options = (("grpc.default_authority", GRPC_HOST),)
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        await until_said(channel, "greeter-v2", message="Say goes to greeter-v2 through the edge")
        say = channel.unary_unary(f"/{SERVICE}/Say")
        call = say(b"bob", metadata=(("x-team", "blue"),), timeout=30)
        assert await call == b"greeter-v2: hello bob (blue)"
        assert ("x-served-by", "greeter-v2") in tuple(await call.initial_metadata())
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await say(b"deny", timeout=30)
        # Status and details travel in the trailers.
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert denied.value.details() == "greeter-v2 says no"
        count = channel.unary_stream(f"/{SERVICE}/Count")
        messages = [m async for m in count(b"5", timeout=30)]
        assert [m.split(b" ")[:2] for m in messages] == [
            [b"greeter", str(i).encode()] for i in range(5)
        ]


async def test_retries_and_failure_accrual_apply_to_h2_streams(edge: EdgeEnv) -> None:
    await edge.route("retry", {"backendRefs": [ref("v1")]}, annotations=HTTP_RETRY)
    v1 = edge.echoes["v1"]
    assert (await get(edge, "/r?fail_first=2")).status == 200
    assert v1.seen["fail_first=2"] == 3
    exhausted = await get(edge, "/r?fail_first=9")
    assert exhausted.status == 503, "the last answer is relayed"
    assert v1.seen["fail_first=9"] == 3
    # A body the client sent whole is sent again; one past the retry buffer is not.
    small = await get(edge, "/p?read&fail_first=1", method="POST", body=b"s" * 1000)
    assert (small.status, edge_report(small)["bodyLength"]) == (200, 1000)
    assert v1.seen["read&fail_first=1"] == 2
    large = await get(edge, "/p?read&fail_first=1&large", method="POST", body=b"l" * 100_000)
    assert (large.status, edge_report(large)["bodyLength"]) == (503, 100_000)
    assert v1.seen["read&fail_first=1&large"] == 1
    # Failure accrual: two 500s in a row take the endpoint out, for HTTP/2 streams too.
    await edge.cluster.apply(service_obj("web", ACCRUAL))
    await edge.route("accrual", {"backendRefs": [ref("v2")]})
    v2 = edge.echoes["v2"]

    async def ejected() -> bool:
        return (await get(edge, "/a?status=500")).reason == "endpoints-failing"

    await eventually(ejected, message="two failures in a row take v2's endpoint out")
    before = len(v2.received)
    reply = await get(edge, "/a")
    assert (reply.status, reply.reason) == (503, "endpoints-failing")
    assert len(v2.received) == before, "the ejected endpoint gets nothing"


HTTP_RETRY = {"retry.linkerd.io/http": "503", "retry.linkerd.io/limit": "2"}


async def test_grpc_calls_are_retried_on_the_routes_grpc_statuses(
    edge: EdgeEnv, greeters: None
) -> None:
    await edge.cluster.apply(say_route(say="greeter-v2", rest="greeter", retry=True))
    target = edge.url.removeprefix("http://")
    options = (("grpc.default_authority", GRPC_HOST),)
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        await check_grpc_retries(channel)


def _prefix(value: str) -> list[dict[str, Any]]:
    return [{"path": {"type": "PathPrefix", "value": value}}]


async def test_the_routes_filters_weights_timeouts_and_injector_apply_to_h2_streams(
    edge: EdgeEnv,
) -> None:
    rewrite = {"hostname": "rewritten.example", "path": {"type": "ReplacePrefixMatch"}}
    rewrite["path"]["replacePrefixMatch"] = "/new"
    redirect = {"scheme": "https", "hostname": "elsewhere.example", "statusCode": 308}
    cors = {"allowOrigins": ["https://app.example"], "allowMethods": ["GET"], "maxAge": 30}
    await edge.route(
        "h2-filters",
        {
            "matches": _prefix("/old"),
            "filters": [{"type": "URLRewrite", "urlRewrite": rewrite}],
            "backendRefs": [ref("v1")],
        },
        {
            "matches": _prefix("/moved"),
            "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}],
        },
        {"matches": _prefix("/gone"), "backendRefs": [ref("does-not-exist")]},
        {
            "matches": _prefix("/stall"),
            "timeouts": {"request": "5s", "backendRequest": "300ms"},
            "backendRefs": [ref("v1")],
        },
        {
            "matches": _prefix("/api"),
            "filters": [{"type": "CORS", "cors": cors}],
            "backendRefs": [ref("v1")],
        },
        {"backendRefs": [ref("v1", weight=0), ref("v2", weight=100)]},
    )
    rewritten = edge_report(await get(edge, "/old/page?x=1"))
    assert (rewritten["backend"], rewritten["path"], rewritten["query"]) == (
        "v1",
        "/new/page",
        "x=1",
    )
    assert rewritten["headers"]["host"] == ["rewritten.example"]
    moved = await get(edge, "/moved/a?q=1")
    assert (moved.status, moved.reason) == (308, "redirect")
    assert moved.headers["location"] == "https://elsewhere.example/moved/a?q=1"
    gone = await get(edge, "/gone")
    assert (gone.status, gone.reason) == (500, "backend-not-found")
    stalled = await get(edge, "/stall")
    assert (stalled.status, stalled.reason) == (504, "upstream-timeout")
    preflight = await get(
        edge,
        "/api",
        method="OPTIONS",
        headers={"origin": "https://app.example", "access-control-request-method": "GET"},
    )
    assert (preflight.status, preflight.reason) == (200, "cors-preflight")
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert {edge_report(await get(edge, "/w"))["backend"] for _ in range(10)} == {"v2"}


async def test_header_edits_redirect_port_and_path_full_rewrite_cors_and_request_timeout_on_h2(
    edge: EdgeEnv,
) -> None:
    redirect = {
        "port": 8080,
        "statusCode": 302,
        "path": {"type": "ReplaceFullPath", "replaceFullPath": "/there"},
    }
    full = {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/one"}}
    cors = {"allowOrigins": ["https://app.example"], "exposeHeaders": ["X-Echo"]}
    await edge.route(
        "h2-more",
        {
            "matches": _prefix("/edit"),
            "filters": [
                header_filter(
                    "RequestHeaderModifier",
                    add=[{"name": "X-Add", "value": "added"}],
                    remove=["X-Remove"],
                )
            ],
            "backendRefs": [ref("v1")],
        },
        {
            "matches": _prefix("/port"),
            "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}],
        },
        {
            "matches": _prefix("/full"),
            "filters": [{"type": "URLRewrite", "urlRewrite": full}],
            "backendRefs": [ref("v2")],
        },
        {
            "matches": _prefix("/api"),
            "filters": [{"type": "CORS", "cors": cors}],
            "backendRefs": [ref("v1")],
        },
        {
            "matches": _prefix("/backend"),
            "backendRefs": [ref("v2", filters=backend_edits("v2"))],
        },
        {
            "matches": _prefix("/slow"),
            "timeouts": {"request": "300ms"},
            "backendRefs": [ref("v1")],
        },
        {"backendRefs": [ref("web")]},
    )
    edited = edge_report(
        await get(edge, "/edit", headers={"x-add": "client", "x-remove": "gone", "x-keep": "k"})
    )
    assert edited["backend"] == "v1"
    assert edited["headers"]["x-add"] == ["client", "added"]
    assert "x-remove" not in edited["headers"]
    assert edited["headers"]["x-keep"] == ["k"]
    before = sum(len(e.received) for e in edge.echoes.values())
    moved = await get(edge, "/port/x?q=1")
    assert (moved.status, moved.reason) == (302, "redirect")
    assert moved.headers["location"] == f"http://{HOST}:8080/there?q=1"
    assert sum(len(e.received) for e in edge.echoes.values()) == before, "no backend contacted"
    rewritten = edge_report(await get(edge, "/full/anything/else?x=1"))
    assert (rewritten["backend"], rewritten["path"], rewritten["query"]) == ("v2", "/one", "x=1")
    allowed = await get(edge, "/api", headers={"origin": "https://app.example"})
    assert edge_report(allowed)["backend"] == "v1"
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert allowed.headers["access-control-expose-headers"] == "X-Echo"
    stranger = await get(edge, "/api", headers={"origin": "https://evil.example"})
    assert edge_report(stranger)["backend"] == "v1"
    assert "access-control-allow-origin" not in stranger.headers
    backend = await get(edge, "/backend")
    assert edge_report(backend)["headers"]["x-backend"] == ["v2"]
    assert backend.headers["x-from"] == "v2"
    stalled = await get(edge, "/slow?stall=1")
    assert edge.echoes["v1"].stalled.is_set()
    assert (stalled.status, stalled.reason) == (504, "upstream-timeout")


async def test_protocol_http1_and_the_idle_timeout_apply_to_h2_streams(edge: EdgeEnv) -> None:
    # An idle timeout cuts a body whose HTTP/1.1 upstream stops sending; the proxy's own read
    # timeout is 60 s, past the client's 30 s, so only the policy's can end the stream.
    await edge.route(
        "idle", {"backendRefs": [ref("v1")]}, annotations={"timeout.linkerd.io/idle": "300ms"}
    )
    cut = await get(edge, "/t?trickle=1")
    assert edge.echoes["v1"].stalled.is_set()
    assert (cut.status, cut.reset, len(cut.body)) == (200, True, 10)
    # appProtocol http makes the port's protocol http1: even a gRPC call goes upstream as
    # HTTP/1.1 (under detect it would go as h2c, which the HTTP/1.1 echo cannot answer).
    web = service_obj("web")
    web["spec"]["ports"][0]["appProtocol"] = "http"
    await edge.cluster.apply(web)
    grpc_call = {"content-type": "application/grpc", "te": "trailers"}
    replies: list[H2Reply] = []

    async def as_http1() -> bool:
        replies.append(await get(edge, "/g", method="POST", headers=grpc_call, body=b"\0" * 5))
        return replies[-1].status == 200 and "x-echo" in replies[-1].headers

    await eventually(as_http1, message="a gRPC call to an http1 port goes upstream as HTTP/1.1")
    report = edge_report(replies[-1])
    assert (report["backend"], report["method"]) == ("v1", "POST")
    assert report["headers"]["content-type"] == ["application/grpc"]
