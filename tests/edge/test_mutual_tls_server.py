"""mutualTLS over real TLS: one listener for a host with mutualTLS and one without, client
certificates from a CA made in the test, a real TLS client (aiohttp)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.modules.client_cert_headers import SUBJECT_HEADER
from interlock.edge.server import EdgeServer
from interlock.model.moduleset import Modules, SecretValue
from tests.kit.edge_routes import serve_route
from tests.kit.tls_certs import Issued, TestCa, self_signed

from .conftest import BACKEND, HOST, Backend, body_json

MTLS_HOST = "secure.example.com"
CA = TestCa("Team CA")
OTHER_CA = TestCa("Other CA")
MUTUAL_TLS = Modules.model_validate({"mutualTLS": {"caSecretRef": {"name": "ca", "key": "ca.crt"}}})
CA_SECRET = {("ca", "ca.crt"): SecretValue(CA.pem.encode())}


@dataclass
class TlsEdge:
    edge: InProcessEdge
    https: str
    http: str
    trust: str
    """PEM of both hosts' (self-signed) server certificates."""
    folder: Path

    def client(self, certificate: Issued | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.trust)
        if certificate is not None:
            cert = self.folder / "client.crt"
            key = self.folder / "client.key"
            cert.write_text(certificate.cert_pem)
            key.write_text(certificate.key_pem)
            context.load_cert_chain(cert, key)
        return context

    async def get(
        self,
        path: str,
        *,
        host: str = MTLS_HOST,
        sni: str | None = None,
        certificate: Issued | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                self.https + path,
                headers={"Host": host, **(headers or {})},
                ssl=self.client(certificate),
                server_hostname=sni or host,
            ) as response,
        ):
            return response.status, await response.read()


@pytest.fixture
async def tls_edge(backend: Backend, tmp_path: Path) -> AsyncIterator[TlsEdge]:
    edge = InProcessEdge()
    server = EdgeServer(
        edge=edge, upstreams=StaticUpstreams({("default", "web", 80): [backend.address]})
    )
    addresses = await server.start(addr="127.0.0.1:0", tls_addr="127.0.0.1:0")
    assert addresses.https is not None and addresses.http is not None
    trust = ""
    for host in (HOST, MTLS_HOST):
        cert, key = self_signed(host)
        trust += cert
        await edge.set_tls(
            host=host, cert_pem=SecretValue(cert.encode()), key_pem=SecretValue(key.encode())
        )
    routes = [(HOST, "r", "/", Modules()), (MTLS_HOST, "public", "/public", Modules())]
    routes.append((MTLS_HOST, "r", "/", MUTUAL_TLS))
    for host, route_id, path, modules in routes:
        await serve_route(
            edge,
            host=host,
            route_id=route_id,
            path=path,
            modules=modules,
            secrets=CA_SECRET,
            backend=BACKEND,
        )
    yield TlsEdge(
        edge,
        https=f"https://127.0.0.1:{addresses.https[1]}",
        http=f"http://127.0.0.1:{addresses.http[1]}",
        trust=trust,
        folder=tmp_path,
    )
    await server.stop()


async def test_a_certificate_from_the_routes_ca_reaches_the_backend_with_its_subject(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    alice = CA.issue("alice", organization="Example")
    status, body = await tls_edge.get(
        "/echo", certificate=alice, headers={SUBJECT_HEADER: "CN=ceo"}
    )
    assert status == 200, body
    headers = body_json(body)["headers"]
    assert isinstance(headers, dict)
    assert headers[SUBJECT_HEADER.lower()] == ["O=Example,CN=alice"]


async def test_without_a_certificate_the_handshake_completes_and_the_route_answers_403(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    status, body = await tls_edge.get("/echo")
    assert status == 403
    assert b"requires a client certificate" in body
    # The same host's route without mutualTLS serves a client without a certificate.
    status, _ = await tls_edge.get("/public")
    assert status == 200
    # Plain HTTP never carries a certificate.
    async with (
        aiohttp.ClientSession() as session,
        session.get(tls_edge.http + "/echo", headers={"Host": MTLS_HOST}) as response,
    ):
        assert response.status == 403
    assert [seen.path for seen in backend.seen] == ["/public"]


async def test_a_host_without_mutual_tls_on_the_same_listener_serves_clients_without_one(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    status, _ = await tls_edge.get("/", host=HOST)
    assert status == 200


async def test_sni_of_another_host_does_not_lend_its_handshake_to_the_mutual_tls_host(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    status, _ = await tls_edge.get("/echo", sni=HOST)
    assert status == 403
    assert backend.seen == []


async def test_a_certificate_of_another_ca_fails_the_handshake(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    with pytest.raises(aiohttp.ClientError):
        await tls_edge.get("/echo", certificate=OTHER_CA.issue("mallory"))
    assert backend.seen == []


async def test_a_host_without_mutual_tls_never_asks_for_a_certificate(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    """A client that would send one (curl --cert) still reaches a host without mutualTLS on
    the shared listener: its TLS context is chosen from the ClientHello, before the handshake."""
    status, _ = await tls_edge.get("/", host=HOST, certificate=CA.issue("alice"))
    assert status == 200
    status, _ = await tls_edge.get("/", host=HOST, certificate=OTHER_CA.issue("mallory"))
    assert status == 200


async def test_a_client_hello_without_a_known_name_is_refused(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    with pytest.raises(aiohttp.ClientError):
        await tls_edge.get("/", host="unknown.example.com")
    assert backend.seen == []


async def test_a_ca_change_applies_to_the_handshake_and_the_route(
    tls_edge: TlsEdge, backend: Backend
) -> None:
    alice = CA.issue("alice")
    assert (await tls_edge.get("/echo", certificate=alice))[0] == 200
    await serve_route(
        tls_edge.edge,
        host=MTLS_HOST,
        route_id="r",
        modules=MUTUAL_TLS,
        secrets={("ca", "ca.crt"): SecretValue(OTHER_CA.pem.encode())},
    )
    status, _ = await tls_edge.get("/echo", certificate=OTHER_CA.issue("bob"))
    assert status == 200
    with pytest.raises(aiohttp.ClientError):
        await tls_edge.get("/echo", certificate=alice)
