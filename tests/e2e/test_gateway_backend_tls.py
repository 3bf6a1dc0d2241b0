"""BackendTLSPolicy and a Gateway's backend client certificate (both lanes, the real CRDs).

A Service named by a BackendTLSPolicy is reached over TLS, verified: the backend's chain must
end in the policy's CA (a ConfigMap's ``ca.crt``), its certificate must be valid for the
policy's hostname (sent as SNI) or carry one of its subject alternative names; a backend that
fails the check is never sent the request (502). A policy whose CA cannot be read is refused
with the spec's reasons and its backend answers 500, never contacted; the policy's status
names the Gateway (``status.ancestors``), and changes to the ConfigMap are followed. A Gateway's
``spec.tls.backend.clientCertificateRef`` is the certificate presented to such backends; a
reference that cannot be used is reported on the Gateway (``ResolvedRefs`` False).
"""

from __future__ import annotations

import json
import ssl
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from aiohttp import web

from tests.kit.e2e_clients import eventually
from tests.kit.echo_backends import local_slice
from tests.kit.gateway_env import GROUP, Env, conditions, gateway_obj, http_listener
from tests.kit.gateway_env import env as env
from tests.kit.grpc_backends import SERVICE, greeter, until_said
from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.tls_certs import TestCa, tls_secret

CRD = (
    Path(__file__).resolve().parents[3]
    / "shared/gateway-api/v1.6.1/standard/gateway.networking.k8s.io_backendtlspolicies.yaml"
)
HOST = "abc.example.com"
SPIFFE = "spiffe://abc.example.com/test-identity"


class TlsEcho:
    """An HTTPS backend with a certificate from ``ca`` that answers with the server name it was
    sent and the client certificate's common name (when ``client_ca`` asks for one)."""

    def __init__(self, ca: TestCa, *, client_ca: TestCa | None = None) -> None:
        self.ca = ca
        self.client_ca = client_ca
        self.requests = 0
        self.paths: list[tuple[str, str | None]] = []
        """Each request's path and the server name it came with."""
        self.port = 0
        self._names: dict[int, str | None] = {}
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        issued = self.ca.issue(HOST, dns=(HOST, "other.example.com"), uris=(SPIFFE,))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as folder:
            cert, key = Path(folder, "crt"), Path(folder, "key")
            cert.write_text(issued.cert_pem)
            key.write_text(issued.key_pem)
            context.load_cert_chain(str(cert), str(key))
        if self.client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=self.client_ca.pem)

        def sni(ssl_object: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> None:
            self._names[id(ssl_object)] = name

        context.sni_callback = sni  # type: ignore[assignment]
        app = web.Application()
        app.router.add_get("/ws", self._websocket)
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, ENDPOINT_HOST, 0, ssl_context=context)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        """A WebSocket that says the server name it was sent, then echoes."""
        self.requests += 1
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        transport = request.transport
        ssl_object = None if transport is None else transport.get_extra_info("ssl_object")
        await socket.send_str(str(None if ssl_object is None else self._names.get(id(ssl_object))))
        async for message in socket:
            await socket.send_str(message.data)
        return socket

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        transport = request.transport
        ssl_object = None if transport is None else transport.get_extra_info("ssl_object")
        peer = None if ssl_object is None else ssl_object.getpeercert()
        client = None
        if peer:
            client = dict(item for rdn in peer["subject"] for item in rdn).get("commonName")
        name = None if ssl_object is None else self._names.get(id(ssl_object))
        self.paths.append((request.path, name))
        return web.json_response({"sni": name, "client": client})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> TlsEcho:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP"}]},
    }


def config_map(name: str, ca_pem: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {} if ca_pem is None else {"ca.crt": ca_pem},
    }


def policy(name: str, target: str, ca: str, **validation: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": target}],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}],
                "hostname": HOST,
                **validation,
            },
        },
    }


def route(paths: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "secure", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "one"}],
            "hostnames": [HOST],
            "rules": [
                {
                    "matches": [{"path": {"type": "Exact", "value": path}}],
                    "backendRefs": [{"name": backend, "port": 443}],
                }
                for path, backend in paths.items()
            ],
        },
    }


async def verified_and_stranger(
    env: Env, port: int, ca: TestCa, *, verified: str, strange: str
) -> None:
    """Gateway ``one`` and two Services of the backend on the local ``port``, each named by a
    policy: ``verified``'s trusts ``ca``, ``strange``'s another CA (its backend fails)."""
    stranger = TestCa("another CA")
    for name, authority in ((verified, "ca"), (strange, "stranger")):
        await env.cluster.apply(service(name))
        await env.cluster.apply(local_slice(name, {"https": port}, name=f"{name}-slice"))
        await env.cluster.apply(policy(name, name, authority))
    await env.cluster.apply(config_map("ca", ca.pem))
    await env.cluster.apply(config_map("stranger", stranger.pem))
    await env.cluster.apply(gateway_obj("one", http_listener("http")))


async def policy_conditions(env: Env, name: str) -> dict[str, tuple[str, str]]:
    obj = await env.read("BackendTLSPolicy", name)
    for entry in (obj or {}).get("status", {}).get("ancestors", []):
        if entry["ancestorRef"]["name"] == "one" and entry["ancestorRef"]["kind"] == "Gateway":
            generation = (obj or {})["metadata"]["generation"]
            if any(c["observedGeneration"] != generation for c in entry["conditions"]):
                return {}
            return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
    return {}


async def answer(env: Env, address: str, path: str) -> tuple[int, Any]:
    async with env.http.get(f"http://{address}{path}", headers={"Host": HOST}) as response:
        body = await response.read()
        if response.status == 200:
            return 200, json.loads(body)
        return response.status, None


async def answered(env: Env, address: str, path: str, status: int) -> bool:
    return (await answer(env, address, path))[0] == status


async def test_policies_verify_backends_and_invalid_ones_fail_closed(env: Env) -> None:
    await env.cluster.apply_manifests([CRD])
    ca, stranger = TestCa("backend CA"), TestCa("another CA")
    async with TlsEcho(ca) as echo:
        names = ("verified", "wrong-host", "wrong-ca", "san-uri", "san-miss", "no-ca", "plain")
        for name in names:
            await env.cluster.apply(service(name))
            await env.cluster.apply(local_slice(name, {"https": echo.port}, name=f"{name}-slice"))
        await env.cluster.apply(config_map("ca", ca.pem))
        await env.cluster.apply(config_map("stranger", stranger.pem))
        await env.cluster.apply(policy("verified", "verified", "ca"))
        await env.cluster.apply(policy("wrong-host", "wrong-host", "ca", hostname="x.example"))
        await env.cluster.apply(policy("wrong-ca", "wrong-ca", "stranger"))
        uri = [{"type": "URI", "uri": SPIFFE}]
        await env.cluster.apply(policy("san-uri", "san-uri", "ca", subjectAltNames=uri))
        miss = [{"type": "Hostname", "hostname": "dce.example.com"}]
        await env.cluster.apply(policy("san-miss", "san-miss", "ca", subjectAltNames=miss))
        await env.cluster.apply(policy("no-ca", "no-ca", "ca-later"))
        await env.cluster.apply(gateway_obj("one", http_listener("http")))
        await env.cluster.apply(route({f"/{name}": name for name in names}))
        address = await env.address("one")

        async def verified() -> bool:
            return (await answer(env, address, "/verified")) == (
                200,
                {"sni": HOST, "client": None},
            )

        await eventually(verified, message="the verified backend answers over TLS with its SNI")
        assert (await answer(env, address, "/san-uri"))[0] == 200
        # Traffic follows the policies before their statuses are written (the status writer
        # runs beside the data plane, on the leader): wait for each one.
        for name in ("verified", "wrong-host", "wrong-ca", "san-uri", "san-miss"):

            async def accepted(name: str = name) -> bool:
                return await policy_conditions(env, name) == {
                    "Accepted": ("True", "Accepted"),
                    "ResolvedRefs": ("True", "ResolvedRefs"),
                }

            await eventually(accepted, message=f"{name} is accepted")
        served = echo.requests
        for path in ("/wrong-host", "/wrong-ca", "/san-miss"):
            assert (await answer(env, address, path))[0] == 502, path
        assert echo.requests == served  # refused during the handshake: nothing was sent
        # A backend no policy names is sent to in clear (and a TLS backend refuses that).
        assert (await answer(env, address, "/plain"))[0] != 200

        # A policy whose ConfigMap does not exist: refused, its backend never contacted.
        async def refused() -> bool:
            return await policy_conditions(env, "no-ca") == {
                "Accepted": ("False", "NoValidCACertificate"),
                "ResolvedRefs": ("False", "InvalidCACertificateRef"),
            }

        await eventually(refused, message="no-ca is refused")
        await eventually(
            lambda: answered(env, address, "/no-ca", 500),
            message="no-ca answers 500, its backend never contacted",
        )
        assert env.controller.gateways is not None
        shown = env.controller.gateways.debug()["backendTLSPolicies"]  # /debug/gateways
        assert shown["default/verified"]["appliesTo"] == ["default/verified:443"]
        assert shown["default/verified"]["usable"] and not shown["default/no-ca"]["usable"]
        assert shown["default/no-ca"]["accepted"] == "NoValidCACertificate"
        assert "BEGIN" not in json.dumps(shown)
        assert echo.requests == served

        # The ConfigMap appears: accepted and served; emptied: refused again.
        await env.cluster.apply(config_map("ca-later", ca.pem))

        async def resolved() -> bool:
            return (await answer(env, address, "/no-ca"))[0] == 200

        await eventually(resolved, message="no-ca is served once its ConfigMap exists")
        await env.cluster.apply(config_map("ca-later", None))
        await eventually(refused, message="no-ca is refused once its ConfigMap has no ca.crt")
        await eventually(
            lambda: answered(env, address, "/no-ca", 500), message="no-ca answers 500 again"
        )


async def test_the_gateway_presents_its_client_certificate_and_reports_a_bad_one(
    env: Env,
) -> None:
    await env.cluster.apply_manifests([CRD])
    ca, clients = TestCa("backend CA"), TestCa("client CA")
    async with TlsEcho(ca, client_ca=clients) as echo:
        issued = clients.issue("gateway-one")
        await env.cluster.apply(tls_secret("client", issued.cert_pem, issued.key_pem))
        await env.cluster.apply(service("mtls"))
        await env.cluster.apply(local_slice("mtls", {"https": echo.port}, name="mtls-slice"))
        await env.cluster.apply(config_map("ca", ca.pem))
        await env.cluster.apply(policy("mtls", "mtls", "ca"))
        gateway = gateway_obj("one", http_listener("http"))
        gateway["spec"]["tls"] = {"backend": {"clientCertificateRef": {"name": "client"}}}
        await env.cluster.apply(gateway)
        await env.cluster.apply(route({"/": "mtls"}))
        address = await env.address("one")

        async def presented() -> bool:
            return (await answer(env, address, "/")) == (
                200,
                {"sni": HOST, "client": "gateway-one"},
            )

        await eventually(presented, message="the backend sees the Gateway's client certificate")
        gateway_conditions = conditions(await env.read("Gateway", "one"))
        assert gateway_conditions["ResolvedRefs"] == ("True", "ResolvedRefs")
        assert gateway_conditions["Accepted"] == ("True", "Accepted")

        gateway["spec"]["tls"] = {"backend": {"clientCertificateRef": {"name": "missing"}}}
        await env.cluster.apply(gateway)

        async def reported() -> bool:
            found = conditions(await env.read("Gateway", "one"))
            return found.get("ResolvedRefs") == (
                "False",
                "InvalidClientCertificateRef",
            ) and found.get("Accepted") == ("True", "Accepted")

        await eventually(reported, message="the missing client certificate is reported")
        # Without a certificate to present, the backend (which requires one) refuses.
        await eventually(
            lambda: answered(env, address, "/", 502),
            message="without a client certificate the backend refuses",
        )


async def test_grpc_calls_reach_a_verified_tls_backend_over_h2(env: Env) -> None:
    await env.cluster.apply_manifests([CRD])
    ca = TestCa("backend CA")
    issued = ca.issue(HOST, dns=(HOST,))
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((greeter("greeter"),))
    credentials = grpc.ssl_server_credentials([(issued.key_pem.encode(), issued.cert_pem.encode())])
    port = server.add_secure_port(f"{ENDPOINT_HOST}:0", credentials)
    await server.start()
    try:
        await verified_and_stranger(
            env, port, ca, verified="grpc-verified", strange="grpc-stranger"
        )
        rules = [
            {
                "matches": [{"method": {"service": SERVICE, "method": method}}],
                "backendRefs": [{"name": backend, "port": 443}],
            }
            for method, backend in (("Say", "grpc-verified"), ("Count", "grpc-stranger"))
        ]
        await env.cluster.apply(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GRPCRoute",
                "metadata": {"name": "greeter", "namespace": "default"},
                "spec": {"parentRefs": [{"name": "one"}], "hostnames": [HOST], "rules": rules},
            }
        )
        address = await env.address("one")
        options = [("grpc.default_authority", HOST)]
        async with grpc.aio.insecure_channel(f"{address}:80", options=options) as channel:
            await until_said(channel, "greeter", message="Say reaches the verified TLS greeter")
            count = channel.unary_stream(f"/{SERVICE}/Count")
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                async for _ in count(b"3", timeout=10):
                    pass
            # The greeter's certificate is not from the policy's CA: never reached.
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(None)


async def test_websockets_reach_a_verified_tls_backend(env: Env) -> None:
    await env.cluster.apply_manifests([CRD])
    ca = TestCa("backend CA")
    async with TlsEcho(ca) as echo:
        await verified_and_stranger(
            env, echo.port, ca, verified="ws-verified", strange="ws-stranger"
        )
        route_to = route({"/ws": "ws-verified"})
        await env.cluster.apply(route_to)
        address = await env.address("one")

        async def upgraded() -> bool:
            try:
                async with env.http.ws_connect(
                    f"http://{address}/ws", headers={"Host": HOST}
                ) as socket:
                    said = await socket.receive_str(timeout=5)
                    await socket.send_str("ping")
                    return said == HOST and await socket.receive_str(timeout=5) == "ping"
            except aiohttp.ClientError:
                return False

        await eventually(upgraded, message="the WebSocket reaches the verified TLS backend")
        route_to["spec"]["rules"][0]["backendRefs"][0]["name"] = "ws-stranger"
        await env.cluster.apply(route_to)

        async def refused() -> bool:
            try:
                async with env.http.ws_connect(f"http://{address}/ws", headers={"Host": HOST}):
                    return False  # still the verified backend: the route change is on its way
            except aiohttp.WSServerHandshakeError as error:
                return error.status == 502

        await eventually(refused, message="a backend the policy's CA did not sign is refused")
        served = echo.requests
        assert await refused()
        assert echo.requests == served  # refused in the handshake: the backend saw nothing


async def test_request_mirror_copies_go_verified_to_a_tls_backend(env: Env) -> None:
    await env.cluster.apply_manifests([CRD])
    ca = TestCa("backend CA")
    async with TlsEcho(ca) as echo:
        await verified_and_stranger(
            env, echo.port, ca, verified="copies", strange="copies-stranger"
        )
        mirror_to = {
            f"/{name}": {
                "type": "RequestMirror",
                "requestMirror": {"backendRef": {"name": name, "port": 443}},
            }
            for name in ("copies", "copies-stranger")
        }
        route_to = route({"/copies": "blue", "/copies-stranger": "blue"})
        for rule in route_to["spec"]["rules"]:
            rule["backendRefs"][0]["port"] = 80
            rule["filters"] = [mirror_to[rule["matches"][0]["path"]["value"]]]
        await env.cluster.apply(route_to)
        address = await env.address("one")

        async def copied() -> bool:
            answered = await env.backend_of(address, HOST, "/copies")
            return answered == "blue" and ("/copies", HOST) in echo.paths

        await eventually(copied, message="blue answers and the TLS backend gets a copy")
        # Copies to a backend whose certificate the policy's CA did not sign are never sent:
        # three of them, then one more good copy, which arrives after them.
        for _ in range(3):
            assert await env.backend_of(address, HOST, "/copies-stranger") == "blue"
        before = echo.paths.count(("/copies", HOST))
        assert await env.backend_of(address, HOST, "/copies") == "blue"
        await eventually(
            lambda: echo.paths.count(("/copies", HOST)) > before,
            message="the last good copy arrived",
        )
        assert all(path == "/copies" for path, _ in echo.paths)
