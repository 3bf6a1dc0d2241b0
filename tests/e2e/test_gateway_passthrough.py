"""TLS passthrough on a Gateway: TLSRoutes on a ``protocol: TLS`` listener (both lanes).

The listener holds no certificate: a real ``ssl`` client reaches a TLS backend through the
Gateway's address by its server name and verifies the BACKEND's certificate (issued by a test
CA for that name) — proof the Gateway did not terminate TLS. The most specific TLSRoute
hostname wins; a server name no TLSRoute takes has its connection closed before any byte
reaches a backend. A TLS listener in mode Terminate is refused with the spec's reason while the
Gateway's other listeners serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kit.e2e_clients import eventually
from tests.kit.echo_backends import local_slice
from tests.kit.gateway_env import GROUP, Env, gateway_obj
from tests.kit.gateway_env import env as env
from tests.kit.mesh_env import service_obj
from tests.kit.stream_backends import StreamEcho
from tests.kit.tls_certs import TestCa

PORT = 5432


def tls_route(name: str, hostnames: list[str], backend: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "TLSRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "one"}],
            "hostnames": hostnames,
            "rules": [{"backendRefs": [{"name": backend, "port": PORT}]}],
        },
    }


async def tls_backend(env: Env, ca: TestCa, tmp: Path, name: str, dns: str) -> StreamEcho:
    """A Service ``name`` whose one endpoint is a TLS server with a certificate for ``dns``."""
    issued = ca.issue(name, dns=(dns,))
    (tmp / f"{name}.crt").write_text(issued.cert_pem)
    (tmp / f"{name}.key").write_text(issued.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp / f"{name}.crt", tmp / f"{name}.key")
    echo = StreamEcho(name, context)
    await echo.start()
    await env.cluster.apply(service_obj(name, "default", (PORT,)))
    await env.cluster.apply(local_slice(name, {f"p{PORT}": echo.port}, name=f"{name}-tls"))
    return echo


async def test_tls_routes_pass_through_by_server_name(env: Env, tmp_path: Path) -> None:
    ca = TestCa("passthrough test CA")
    backends = [
        await tls_backend(env, ca, tmp_path, "db", "db.example"),
        await tls_backend(env, ca, tmp_path, "wild", "cache.example"),
    ]
    try:
        await check_passthrough(env, ca, backends)
    finally:
        for backend in backends:
            await backend.stop()


async def check_passthrough(env: Env, ca: TestCa, backends: list[StreamEcho]) -> None:
    await env.cluster.apply(
        gateway_obj(
            "one",
            {
                "name": "tls",
                "port": 443,
                "protocol": "TLS",
                "hostname": "*.example",
                "tls": {"mode": "Passthrough"},
            },
            {
                "name": "terminate",
                "port": 8443,
                "protocol": "TLS",
                "tls": {"mode": "Terminate", "certificateRefs": [{"name": "no-such-cert"}]},
            },
        )
    )
    await env.cluster.apply(tls_route("db", ["db.example"], "db"))
    await env.cluster.apply(tls_route("wild", ["*.example"], "wild"))
    await env.cluster.apply(tls_route("elsewhere", ["db.other"], "db"))
    address = await env.address("one")
    trusted = ssl.create_default_context(cadata=ca.pem)

    async def handshake(server_name: str) -> str:
        reader, writer = await asyncio.open_connection(
            address, 443, ssl=trusted, server_hostname=server_name
        )
        try:
            greeting = await asyncio.wait_for(reader.readline(), 10)
            writer.write(b"select 1\n")
            assert await asyncio.wait_for(reader.readline(), 10) == b"select 1\n"
            # The certificate verified for the name is the backend's own: no termination.
            tls = writer.get_extra_info("ssl_object")
            assert isinstance(tls, ssl.SSLObject)
            common_name = dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]
            return f"{greeting.decode().strip()} ({common_name})"
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    def routed(server_name: str, expected: str) -> Callable[[], Awaitable[bool]]:
        async def reaches() -> bool:
            with contextlib.suppress(
                ssl.SSLError, ConnectionError, asyncio.IncompleteReadError, TimeoutError
            ):
                return await handshake(server_name) == expected
            return False

        return reaches

    await eventually(routed("db.example", "hello from db (db)"), message="db.example reaches db")
    await eventually(
        routed("cache.example", "hello from wild (wild)"), message="cache.example reaches wild"
    )
    # Both served: the exact hostname wins over the wildcard for its name.
    assert await handshake("db.example") == "hello from db (db)"

    # A server name no TLSRoute takes: closed before any byte reaches a backend.
    before = sum(b.connections for b in backends)
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        await handshake("nothing.example")
    assert sum(b.connections for b in backends) == before

    # What the user reads: the routes' parents and the listeners.
    seen: list[object] = []

    async def statuses() -> bool:
        parents = {}
        for name in ("db", "wild", "elsewhere"):
            obj = await env.read("TLSRoute", name)
            for entry in (obj or {}).get("status", {}).get("parents", []):
                found = {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
                parents[name] = found.get("Accepted")
        gateway = await env.read("Gateway", "one")
        listeners = {
            entry["name"]: (
                entry["attachedRoutes"],
                {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}["Accepted"],
            )
            for entry in (gateway or {}).get("status", {}).get("listeners", [])
        }
        seen[:] = [parents, listeners]
        return parents == {
            "db": ("True", "Accepted"),
            "wild": ("True", "Accepted"),
            "elsewhere": ("False", "NoMatchingListenerHostname"),
        } and listeners == {
            "tls": (2, ("True", "Accepted")),
            "terminate": (0, ("False", "UnsupportedValue")),
        }

    await eventually(statuses, message=lambda: f"TLSRoute parents and listener statuses {seen}")
    for name in ("db", "wild", "elsewhere"):
        obj = await env.read("TLSRoute", name)
        if obj is not None:
            await env.cluster.delete(obj)
