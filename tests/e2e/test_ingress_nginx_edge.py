"""Ingresses written for ingress-nginx behave the same through interlock (both lanes).

Each Ingress keeps ``ingressClassName: nginx`` and its ``nginx.ingress.kubernetes.io/*``
annotations, with the values of ingress-nginx's own documentation (the rewrite, app-root, auth
and CORS examples); the migration is one IngressClass ``nginx`` of interlock's controller that
opts in (``docs/ingress-nginx.md``). Requests go through the edge to echo backends, which
report what reached them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import grpc
import pytest
from aiohttp import web

from interlock.config import EdgeConfig
from interlock.model.ingress_nginx import CLASS_ANNOTATION, PREFIX
from tests.kit.dataplane_env import EdgeEnv, Reply, edge_env, service_obj, slice_obj
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually, object_events
from tests.kit.echo_backends import Echo
from tests.kit.grpc_backends import greeter, until_said
from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.tls_certs import self_signed

NGINX_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "nginx", "annotations": {CLASS_ANNOTATION: "true"}},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}

NOT_SERVING = {"unknown-host", "no-backend-attached"}


@pytest.fixture
async def edge(cluster: Cluster, start_controller: StartController) -> AsyncIterator[EdgeEnv]:
    async with edge_env(cluster, start_controller) as env:
        await cluster.apply(NGINX_CLASS)
        yield env


def ingress_obj(
    name: str,
    host: str,
    annotations: dict[str, str],
    *,
    path: str = "/",
    path_type: str = "Prefix",
    service: str = "web",
    class_name: str = "nginx",
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {PREFIX + k: v for k, v in annotations.items()},
        },
        "spec": {
            "ingressClassName": class_name,
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": path,
                                "pathType": path_type,
                                "backend": {"service": {"name": service, "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }


async def serve(env: EdgeEnv, obj: dict[str, Any], probe: str = "/", **headers: str) -> Reply:
    """Apply ``obj`` and wait until its host answers ``probe`` with anything but "not served
    yet"; that answer."""
    await env.cluster.apply(obj)
    host = obj["spec"]["rules"][0]["host"]
    last: list[Reply] = []

    async def served() -> bool:
        last[:] = [await env.get(probe, headers={"Host": host, **headers})]
        return last[0].reason not in NOT_SERVING

    await eventually(served, message=f"{host} is served")
    return last[0]


async def get(env: EdgeEnv, host: str, path: str, **kwargs: Any) -> Reply:
    headers = {"Host": host, **kwargs.pop("headers", {})}
    return await env.get(path, headers=headers, **kwargs)


async def post(env: EdgeEnv, host: str, path: str, body: bytes) -> Reply:
    async with env.http.post(env.url + path, data=body, headers={"Host": host}) as response:
        return Reply(response.status, dict(response.headers), await response.read())


async def test_rewrite_target_with_capture_groups_as_in_the_rewrite_example(
    edge: EdgeEnv,
) -> None:
    await serve(
        edge,
        ingress_obj(
            "rewrite",
            "rewrite.bar.com",
            {"use-regex": "true", "rewrite-target": "/$2"},
            path="/something(/|$)(.*)",
            path_type="ImplementationSpecific",
        ),
        probe="/something",
    )
    # The example's table: rewrite.bar.com/something → /, /something/ → /, /something/new → /new
    for asked, forwarded in (("/something", "/"), ("/something/", "/"), ("/something/new", "/new")):
        reply = await get(edge, "rewrite.bar.com", asked)
        assert reply.echo["path"] == forwarded, asked
        assert reply.echo["backend"] == "web"
    # Past the literal prefix the pattern decides: /somethingelse is not under /something.
    assert (await get(edge, "rewrite.bar.com", "/somethingelse")).status == 404


async def test_app_root_and_redirects(edge: EdgeEnv) -> None:
    first = await serve(edge, ingress_obj("approot", "approot.bar.com", {"app-root": "/app1"}))
    assert first.status == 302
    assert first.headers["Location"] == "http://approot.bar.com/app1"
    assert (await get(edge, "approot.bar.com", "/app1")).echo["path"] == "/app1"

    moved = await serve(
        edge,
        ingress_obj(
            "moved",
            "moved.bar.com",
            {"permanent-redirect": "https://www.google.com", "permanent-redirect-code": "308"},
        ),
    )
    assert (moved.status, moved.headers["Location"]) == (308, "https://www.google.com")
    temporal = await serve(
        edge,
        ingress_obj(
            "temporal", "temporal.bar.com", {"temporal-redirect": "https://www.google.com"}
        ),
    )
    assert (temporal.status, temporal.headers["Location"]) == (302, "https://www.google.com")
    https = await serve(
        edge, ingress_obj("forced", "force.bar.com", {"force-ssl-redirect": "true"}), "/a?b=1"
    )
    assert (https.status, https.headers["Location"]) == (308, "https://force.bar.com/a?b=1")
    assert not any(
        r["headers"].get("host") in ("approot.bar.com/", "moved.bar.com", "force.bar.com")
        for echo in edge.echoes.values()
        for r in echo.received
    )


async def test_whitelist_and_basic_auth_from_the_auth_example(edge: EdgeEnv) -> None:
    refused = await serve(
        edge,
        ingress_obj(
            "office", "office.bar.com", {"whitelist-source-range": "10.0.0.0/24,172.10.0.1"}
        ),
    )
    assert refused.status == 403
    allowed = await serve(
        edge, ingress_obj("local", "local.bar.com", {"whitelist-source-range": "127.0.0.1"})
    )
    assert allowed.echo["backend"] == "web"

    hashed = bcrypt.hashpw(b"bar", bcrypt.gensalt(rounds=4)).decode()
    await edge.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "basic-auth", "namespace": "default"},
            "stringData": {"auth": f"foo:{hashed}\n"},
        }
    )
    challenged = await serve(
        edge,
        ingress_obj(
            "auth",
            "foo.bar.com",
            {
                "auth-type": "basic",
                "auth-secret": "basic-auth",
                "auth-realm": "Authentication Required - foo",
            },
        ),
    )
    assert challenged.status == 401
    assert 'realm="Authentication Required - foo"' in challenged.headers["WWW-Authenticate"]
    token = "Basic " + base64.b64encode(b"foo:bar").decode()
    admitted = await get(edge, "foo.bar.com", "/", headers={"Authorization": token})
    assert admitted.echo["backend"] == "web"


async def test_cors_with_the_documented_values(edge: EdgeEnv) -> None:
    origin = "https://origin-site.com:4443"
    await serve(
        edge,
        ingress_obj(
            "cors",
            "cors.bar.com",
            {
                "enable-cors": "true",
                "cors-allow-methods": "PUT, GET, POST, OPTIONS",
                "cors-allow-headers": "X-Forwarded-For, X-app123-XPTO",
                "cors-expose-headers": "*, X-CustomResponseHeader",
                "cors-allow-origin": (
                    "https://origin-site.com:4443, http://origin-site.com, https://example.org:1199"
                ),
                "cors-allow-credentials": "false",
                "cors-max-age": "600",
            },
        ),
    )
    preflight = await get(
        edge,
        "cors.bar.com",
        "/api",
        method="OPTIONS",
        headers={"Origin": origin, "Access-Control-Request-Method": "PUT"},
    )
    assert preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == origin
    assert preflight.headers["Access-Control-Allow-Methods"] == "PUT, GET, POST, OPTIONS"
    assert preflight.headers["Access-Control-Allow-Headers"] == "X-Forwarded-For, X-app123-XPTO"
    assert preflight.headers["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in preflight.headers
    actual = await get(edge, "cors.bar.com", "/api", headers={"Origin": origin})
    assert actual.echo["backend"] == "web"
    assert actual.headers["Access-Control-Allow-Origin"] == origin
    assert actual.headers["Access-Control-Expose-Headers"] == "*, X-CustomResponseHeader"
    stranger = await get(edge, "cors.bar.com", "/api", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in stranger.headers


async def test_forwarding_body_size_vhost_and_read_timeout(edge: EdgeEnv) -> None:
    await serve(
        edge,
        ingress_obj(
            "forward",
            "forward.bar.com",
            {
                "proxy-body-size": "8m",
                "upstream-vhost": "internal.example.com",
                "proxy-read-timeout": "1",
            },
        ),
    )
    reply = await get(edge, "forward.bar.com", "/x")
    assert reply.echo["headers"]["host"] == ["internal.example.com"]
    too_large = await post(edge, "forward.bar.com", "/upload", b"x" * (8 * 1024 * 1024 + 1))
    assert too_large.status == 413
    small = await post(edge, "forward.bar.com", "/upload?read", b"hello")
    assert small.echo["bodyLength"] == 5
    stalled = await get(edge, "forward.bar.com", "/stall")
    assert (stalled.status, stalled.reason) == (504, "upstream-timeout")


async def test_canary_by_header_and_weight(edge: EdgeEnv) -> None:
    await serve(edge, ingress_obj("main", "canary.bar.com", {}, service="web"))
    await edge.cluster.apply(
        ingress_obj(
            "main-canary",
            "canary.bar.com",
            {"canary": "true", "canary-by-header": "X-Canary", "canary-weight": "0"},
            service="v1",
        )
    )

    async def joined() -> bool:
        reply = await get(edge, "canary.bar.com", "/", headers={"X-Canary": "always"})
        return reply.headers.get("X-Echo") == "v1"

    await eventually(joined, message="the canary joined the main route")
    never = await get(edge, "canary.bar.com", "/", headers={"X-Canary": "never"})
    assert never.echo["backend"] == "web"
    other = await get(edge, "canary.bar.com", "/", headers={"X-Canary": "maybe"})
    assert other.echo["backend"] == "web"
    await edge.cluster.apply(
        ingress_obj(
            "main-canary",
            "canary.bar.com",
            {"canary": "true", "canary-weight": "100"},
            service="v1",
        )
    )

    async def weighted() -> bool:
        return (await get(edge, "canary.bar.com", "/")).headers.get("X-Echo") == "v1"

    await eventually(weighted, message="canary-weight 100 sends every request to the canary")


async def test_annotations_not_served_get_a_warning_event_naming_them(edge: EdgeEnv) -> None:
    await serve(
        edge,
        ingress_obj(
            "snippet",
            "snippet.bar.com",
            {
                "configuration-snippet": 'more_set_headers "Request-Id: $req_id";',
                "affinity": "cookie",
            },
        ),
    )
    found: list[dict[str, Any]] = []

    async def warned() -> bool:
        found[:] = await object_events(edge.cluster.api, "snippet", "AnnotationNotServed")
        return len(found) >= 2

    await eventually(warned, message="AnnotationNotServed Events on default/snippet")
    messages = sorted(e["message"] for e in found)
    assert all(e["type"] == "Warning" for e in found)
    assert messages[0].startswith(PREFIX + "affinity: ")
    assert messages[1].startswith(PREFIX + "configuration-snippet: ")


async def test_without_the_opt_in_nothing_changes_but_a_warning(edge: EdgeEnv) -> None:
    reply = await serve(
        edge,
        ingress_obj("plain", "plain.bar.com", {"app-root": "/app1"}, class_name="interlock"),
    )
    assert reply.echo["path"] == "/"
    found: list[dict[str, Any]] = []

    async def warned() -> bool:
        found[:] = await object_events(edge.cluster.api, "plain", "AnnotationsIgnored")
        return bool(found)

    await eventually(warned, message="AnnotationsIgnored on default/plain")
    assert PREFIX + "app-root" in found[0]["message"]


class TlsEcho(Echo):
    """An echo backend that speaks only HTTPS (a self-signed certificate, as in-cluster
    backends mostly have)."""

    async def start(self) -> None:
        cert, key = self_signed("secure.default.svc")
        with tempfile.TemporaryDirectory() as folder:
            cert_file, key_file = Path(folder, "tls.crt"), Path(folder, "tls.key")
            cert_file.write_text(cert)
            key_file.write_text(key)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert_file, key_file)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self.runner.setup()
        await web.TCPSite(self.runner, ENDPOINT_HOST, 0, ssl_context=context).start()
        self.port = int(self.runner.addresses[0][1])


async def test_backend_protocol_https_speaks_tls_to_the_upstream(edge: EdgeEnv) -> None:
    secure = TlsEcho("secure")
    await secure.start()
    edge.echoes["secure"] = secure  # stopped with the others
    await edge.cluster.apply(service_obj("secure"))
    await edge.cluster.apply(slice_obj("secure", secure.port))
    reply = await serve(
        edge,
        ingress_obj("secure", "secure.bar.com", {"backend-protocol": "HTTPS"}, service="secure"),
        "/over-tls",
    )
    assert reply.echo["backend"] == "secure"
    assert reply.echo["path"] == "/over-tls"


async def test_backend_protocol_grpcs_speaks_h2_over_tls_to_a_grpc_server(edge: EdgeEnv) -> None:
    cert, key = self_signed("greeter.default.svc")
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((greeter("greeter-tls"),))
    port = server.add_secure_port(
        f"{ENDPOINT_HOST}:0", grpc.ssl_server_credentials([(key.encode(), cert.encode())])
    )
    await server.start()
    try:
        await edge.cluster.apply(service_obj("greeter-tls"))
        await edge.cluster.apply(slice_obj("greeter-tls", port))
        await edge.cluster.apply(
            ingress_obj(
                "greeter-tls",
                "grpcs.bar.com",
                {"backend-protocol": "GRPCS"},
                service="greeter-tls",
            )
        )
        target = edge.url.removeprefix("http://")
        options = (("grpc.default_authority", "grpcs.bar.com"),)
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            reply = await until_said(
                channel, "greeter-tls", message="Say reaches the TLS greeter through the edge"
            )
            assert reply == b"greeter-tls: hello ann (-)"
    finally:
        await server.stop(None)


async def test_ssl_redirect_by_default_on_a_host_with_tls(
    cluster: Cluster, start_controller: StartController
) -> None:
    host = "secure-site.bar.com"
    async with edge_env(
        cluster, start_controller, edge=EdgeConfig(addr=LOCAL, tls_addr=LOCAL)
    ) as edge:
        await cluster.apply(NGINX_CLASS)
        cert, key = self_signed(host)
        await cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": "site-tls", "namespace": "default"},
                "stringData": {"tls.crt": cert, "tls.key": key},
            }
        )
        obj = ingress_obj("site", host, {"enable-cors": "true"})
        obj["spec"]["tls"] = [{"hosts": [host], "secretName": "site-tls"}]
        redirected = await serve(edge, obj, "/a?b=1")
        assert (redirected.status, redirected.headers["Location"]) == (
            308,
            f"https://{host}/a?b=1",
        )
        inspected = edge.controller.inspect().edge
        assert inspected is not None and inspected.tls_address is not None
        url = f"https://127.0.0.1:{inspected.tls_address.port}/a"
        context = ssl.create_default_context(cadata=cert)
        replies: list[int] = []

        async def over_https() -> bool:
            try:
                async with edge.http.get(
                    url, headers={"Host": host}, ssl=context, server_hostname=host
                ) as response:
                    replies.append(response.status)
                    return response.headers.get("X-Echo") == "web"
            except (OSError, aiohttp.ClientError):
                return False  # until the certificate is served

        await eventually(over_https, message=f"https://{host}/ reaches web")
        off = ingress_obj("site", host, {"ssl-redirect": "false"})
        off["spec"]["tls"] = obj["spec"]["tls"]
        await cluster.apply(off)

        async def plain_served() -> bool:
            return (await get(edge, host, "/a")).headers.get("X-Echo") == "web"

        await eventually(plain_served, message='ssl-redirect: "false" serves plain HTTP')


async def test_limit_connections_refuses_a_second_request_in_flight(edge: EdgeEnv) -> None:
    await serve(edge, ingress_obj("limited", "limited.bar.com", {"limit-connections": "1"}))
    stalled = asyncio.create_task(get(edge, "limited.bar.com", "/stall"))
    try:
        await eventually(edge.echoes["web"].stalled.is_set, message="the first request stalls")
        second = await get(edge, "limited.bar.com", "/x")
        assert second.status == 503
        assert second.reason == "module"
    finally:
        stalled.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stalled

    async def released() -> bool:
        return (await get(edge, "limited.bar.com", "/x")).headers.get("X-Echo") == "web"

    await eventually(released, message="the slot is given back once the first request ends")
