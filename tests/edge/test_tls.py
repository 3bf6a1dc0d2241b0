"""HTTPS with the certificate of each host, chosen by SNI."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest

from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import PermanentEdgeError
from interlock.edge.server import EdgeServer
from interlock.model.moduleset import SecretValue
from tests.kit.edge_routes import serve_route
from tests.kit.tls_certs import self_signed as self_signed_text

from .conftest import BACKEND, HOST, Backend, body_json


def self_signed(host: str) -> tuple[bytes, bytes]:
    cert, key = self_signed_text(host)
    return cert.encode(), key.encode()


@pytest.fixture
async def tls_edge(backend: Backend) -> AsyncIterator[tuple[InProcessEdge, str]]:
    edge = InProcessEdge()
    server = EdgeServer(
        edge=edge, upstreams=StaticUpstreams({("default", "web", 80): [backend.address]})
    )
    addresses = await server.start(addr="127.0.0.1:0", tls_addr="127.0.0.1:0")
    assert addresses.https is not None
    await serve_route(edge, host=HOST, route_id="r", backend=BACKEND)
    yield edge, f"https://127.0.0.1:{addresses.https[1]}"
    await server.stop()


async def _certify(edge: InProcessEdge) -> bytes:
    """Serve ``HOST`` with a fresh self-signed certificate: its PEM, for the client to trust."""
    cert, key = self_signed(HOST)
    await edge.set_tls(host=HOST, cert_pem=SecretValue(cert), key_pem=SecretValue(key))
    return cert


async def test_each_host_gets_its_certificate_by_sni(
    tls_edge: tuple[InProcessEdge, str], backend: Backend
) -> None:
    edge, url = tls_edge
    cert = await _certify(edge)
    trust = ssl.create_default_context(cadata=cert.decode())
    async with (
        aiohttp.ClientSession() as client,
        client.get(
            url + "/echo", headers={"Host": HOST}, ssl=trust, server_hostname=HOST
        ) as response,
    ):
        assert response.status == 200
        headers = body_json(await response.read())["headers"]
    assert isinstance(headers, dict)
    assert headers["x-forwarded-proto"] == ["https"]
    snapshot_host = edge.snapshot_now().host(HOST)
    assert snapshot_host is not None
    assert snapshot_host.tls


async def test_host_without_certificate_is_refused_in_the_handshake(
    tls_edge: tuple[InProcessEdge, str], backend: Backend
) -> None:
    edge, url = tls_edge
    await _certify(edge)
    await edge.set_tls(host=HOST, cert_pem=None, key_pem=None)
    async with aiohttp.ClientSession() as client:
        with pytest.raises(aiohttp.ClientError):
            async with client.get(url, ssl=False, server_hostname=HOST):
                pass
    assert backend.seen == []


async def test_unusable_certificates_are_permanent_errors() -> None:
    edge = InProcessEdge()
    cert, _ = self_signed(HOST)
    _, other_key = self_signed("other.example.com")
    with pytest.raises(PermanentEdgeError, match="cannot be loaded"):
        await edge.set_tls(host=HOST, cert_pem=SecretValue(cert), key_pem=SecretValue(other_key))
    with pytest.raises(PermanentEdgeError, match=r"tls\.key is required"):
        await edge.set_tls(host=HOST, cert_pem=SecretValue(cert), key_pem=None)
    assert edge.snapshot_now().hosts == ()
