"""mutualTLS end to end: API server (either lane) → controller → HTTPS edge → backend.

The test makes a CA and client certificates (``tests/kit/tls_certs.py``), puts the CA in a Secret
named by a ModuleSet, and talks to the edge's TLS listener with a real TLS client presenting (or
not) a certificate. Fail closed: a route whose CA Secret is missing or unusable serves nothing;
once served, a route keeps its last good CAs when the Secret goes away.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from interlock.config import EdgeConfig
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.edge_env import CRDS, Env, edge_env, secret
from tests.kit.edge_objects import ingress, module_set
from tests.kit.module_checks import until_refused_naming
from tests.kit.tls_certs import Issued, TestCa, self_signed, tls_secret

HOST = "secure.test"
CA = TestCa("Team CA")
OTHER_CA = TestCa("Other CA")
MUTUAL_TLS = {"mutualTLS": {"caSecretRef": {"name": "client-ca", "key": "ca.crt"}}}


class Https:
    """A real TLS client of the edge's TLS listener, with or without a client certificate."""

    def __init__(self, env: Env, server_cert: str, folder: Path) -> None:
        edge = env.controller.edge
        assert edge is not None and edge.tls_address is not None
        self.url = f"https://127.0.0.1:{edge.tls_address.port}"
        self._trust = server_cert
        self._folder = folder

    def _context(self, certificate: Issued | None) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self._trust)
        if certificate is not None:
            (self._folder / "client.crt").write_text(certificate.cert_pem)
            (self._folder / "client.key").write_text(certificate.key_pem)
            context.load_cert_chain(self._folder / "client.crt", self._folder / "client.key")
        return context

    async def get(
        self, certificate: Issued | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str] | None:
        """(status, body), or None when the handshake (or the connection) failed."""
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
                session.get(
                    self.url + "/",
                    headers={"Host": HOST, **(headers or {})},
                    ssl=self._context(certificate),
                    server_hostname=HOST,
                ) as response,
            ):
                return response.status, await response.text()
        except aiohttp.ClientError:
            return None

    async def until(self, expected: int, certificate: Issued | None = None) -> None:
        async def check() -> bool:
            answer = await self.get(certificate)
            return answer is not None and answer[0] == expected

        await eventually(check, message=f"https://{HOST}/ answers {expected}")


@pytest.fixture
async def tls_env(cluster: Cluster, start_controller: StartController) -> AsyncIterator[Env]:
    await cluster.apply_manifests([CRDS])
    controller = await start_controller(
        identity="mtls-replica", edge=EdgeConfig(addr=LOCAL, tls_addr=LOCAL)
    )
    async with edge_env(cluster, controller) as env:
        yield env


async def publish(env: Env, tmp_path: Path, *, ca_pem: str | None) -> Https:
    """The host's TLS Secret, the CA Secret (unless None), the ModuleSet and the Ingress."""
    cert, key = self_signed(HOST)
    await env.kube.apply(tls_secret("tls-cert", cert, key))
    if ca_pem is not None:
        await env.kube.apply(secret("client-ca", {"ca.crt": ca_pem}))
    await env.kube.apply(module_set("mtls", MUTUAL_TLS))
    obj = ingress("secure", HOST, modules="mtls")
    obj["spec"]["tls"] = [{"hosts": [HOST], "secretName": "tls-cert"}]
    await env.kube.apply(obj)
    return Https(env, cert, tmp_path)


async def test_client_certificates_are_required_verified_and_named_to_the_backend(
    tls_env: Env, tmp_path: Path
) -> None:
    env = tls_env
    https = await publish(env, tmp_path, ca_pem=CA.pem)
    alice = CA.issue("alice", organization="Example", emails=("alice@example.com",))
    await https.until(200, alice)
    backend = env.backends["web"]

    forged = {"X-Client-Cert-Subject": "CN=ceo", "X-Client-Cert-SAN": "email:ceo@example.com"}
    answer = await https.get(alice, headers=forged)
    assert answer is not None and answer[0] == 200
    seen = backend.requests[-1]
    assert seen["X-Client-Cert-Subject"] == "O=Example,CN=alice"
    assert seen["X-Client-Cert-SAN"] == "email:alice@example.com"
    reached = len(backend.requests)

    # No certificate: the handshake completes and the answer says why.
    answer = await https.get()
    assert answer is not None and answer[0] == 403 and "client certificate" in answer[1]
    # Plain HTTP carries none.
    assert await env.status_of(HOST) == 403
    # A certificate of another CA fails the handshake.
    assert await https.get(OTHER_CA.issue("mallory")) is None
    assert len(backend.requests) == reached

    # The CA Secret goes away: the route keeps its last good configuration (still enforced).
    await env.kube.delete(secret("client-ca", {}))
    await env.until_route_error(HOST, "client-ca")
    answer = await https.get(alice)
    assert answer is not None and answer[0] == 200
    answer = await https.get()
    assert answer is not None and answer[0] == 403
    assert "BEGIN" not in json.dumps(env.controller.edge.debug(), default=str)  # type: ignore[union-attr]


async def test_a_missing_or_unusable_ca_serves_nothing_until_fixed(
    tls_env: Env, tmp_path: Path
) -> None:
    env = tls_env
    https = await publish(env, tmp_path, ca_pem=None)
    alice = CA.issue("alice")
    await env.until_event("secure", "ModulesFailed")
    await https.until(503, alice)  # fail closed: no backend attached

    # A certificate that is not a CA is a permanent error, named without the bytes.
    not_a_ca = CA.issue("leaf")
    await env.kube.apply(secret("client-ca", {"ca.crt": not_a_ca.cert_pem}))
    await env.until_route_error(HOST, "is not a CA certificate")
    answer = await https.get(alice)
    assert answer is not None and answer[0] == 503 and "no backend attached" in answer[1]
    events: list[str] = []

    async def reported() -> bool:  # the Event is written after the route's state changes
        events[:] = [json.dumps(await env.kube.events("secure"))]
        return "is not a CA" in events[0]

    await eventually(reported, message="an Event names the CA problem")
    assert "BEGIN" not in events[0]
    assert env.backends["web"].requests == []

    await env.kube.apply(secret("client-ca", {"ca.crt": CA.pem}))
    await https.until(200, alice)


@pytest.mark.parametrize(
    ("modules", "field"),
    [
        ({"mutualTLS": {}}, "spec.modules.mutualTLS.caSecretRef"),
        (
            {"mutualTLS": {"caSecretRef": {"name": "Bad_Name", "key": "ca.crt"}}},
            "spec.modules.mutualTLS.caSecretRef.name",
        ),
    ],
)
async def test_invalid_mutual_tls_is_refused_naming_the_field(
    tls_env: Env, modules: dict[str, Any], field: str
) -> None:
    env = tls_env
    await until_refused_naming(env, modules, field)
