"""Client certificate validation on a Gateway's HTTPS listeners (``spec.tls.frontend``, both lanes).

A Gateway names CA certificates in ConfigMaps (``ca.crt``): a default for every HTTPS listener
and per-port overrides. A listener validating with ``AllowValidOnly`` serves only clients whose
certificate one of its CAs issued; ``AllowInsecureFallback`` serves everyone and the Gateway
says so. A reference that cannot be used is reported on the listeners it concerns with the
spec's reasons, and a listener with no usable CA serves nobody rather than everybody.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

import aiohttp

from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import (
    GROUP,
    Env,
    conditions,
    gateway_obj,
    http_listener,
    listener_set_obj,
    route_obj,
)
from tests.kit.gateway_env import env as env
from tests.kit.tls_certs import Issued, TestCa, tls_secret


def config_map(name: str, ca_pem: str, *, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"ca.crt": ca_pem},
    }


HOSTS = ("a.example", "b.example", "m.example", "k.example", "g.example")


def server_secret(name: str) -> tuple[dict[str, Any], str]:
    """A TLS Secret for every host of :data:`HOSTS`, and the CA a client trusts it by."""
    server_ca = TestCa("gateway-server")
    issued = server_ca.issue("gateway", dns=HOSTS)
    return tls_secret(name, issued.cert_pem, issued.key_pem), server_ca.pem


def https_listener(name: str, port: int, hostname: str, secret: str) -> dict[str, Any]:
    return {
        "name": name,
        "port": port,
        "protocol": "HTTPS",
        "hostname": hostname,
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": secret}]},
    }


def ca_ref(name: str, *, kind: str = "ConfigMap", namespace: str | None = None) -> dict[str, Any]:
    ref = {"group": "", "kind": kind, "name": name}
    if namespace is not None:
        ref["namespace"] = namespace
    return ref


def validation(*refs: dict[str, Any], mode: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"caCertificateRefs": list(refs)}
    if mode is not None:
        found["mode"] = mode
    return {"validation": found}


def with_frontend(
    gateway: dict[str, Any], default: dict[str, Any], per_port: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    frontend: dict[str, Any] = {"default": default}
    if per_port:
        frontend["perPort"] = [{"port": port, "tls": tls} for port, tls in per_port.items()]
    gateway["spec"]["tls"] = {"frontend": frontend}
    return gateway


async def https_get(
    env: Env, address: str, port: int, host: str, server_cert: str, client: Issued | None
) -> object:
    """The backend that answered (its ``X-Echo``), or the error the client met."""
    context = ssl.create_default_context(cadata=server_cert)
    with tempfile.TemporaryDirectory() as folder:
        if client is not None:
            cert_path, key_path = os.path.join(folder, "c.crt"), os.path.join(folder, "c.key")
            with open(cert_path, "w") as file:
                file.write(client.cert_pem)
            with open(key_path, "w") as file:
                file.write(client.key_pem)
            context.load_cert_chain(cert_path, key_path)
    try:
        async with env.http.get(
            f"https://{address}:{port}/",
            headers={"Host": host},
            ssl=context,
            server_hostname=host,
        ) as response:
            return response.headers.get("X-Echo") or response.status
    except (aiohttp.ClientError, ssl.SSLError, ConnectionError) as error:
        return repr(error)


def listener_conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, tuple[str, str]]]:
    return {
        entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
        for entry in (obj or {}).get("status", {}).get("listeners", [])
    }


async def test_listeners_serve_only_clients_their_cas_issued(env: Env) -> None:
    team_a, team_b = TestCa("team-a"), TestCa("team-b")
    client_a, client_b = team_a.issue("client-a"), team_b.issue("client-b")
    secret, server_cert = server_secret("frontend-cert")
    await env.cluster.apply(secret)
    await env.cluster.apply(config_map("ca-a", team_a.pem))
    await env.cluster.apply(config_map("ca-b", team_b.pem))
    gateway = gateway_obj(
        "one",
        https_listener("default-port", 443, "a.example", "frontend-cert"),
        https_listener("own-port", 8443, "b.example", "frontend-cert"),
    )
    await env.cluster.apply(
        with_frontend(gateway, validation(ca_ref("ca-a")), {8443: validation(ca_ref("ca-b"))})
    )
    await env.cluster.apply(route_obj("frontend-route", [{"name": "one"}], "blue"))
    address = await env.address("one")

    async def a_served() -> bool:
        return await https_get(env, address, 443, "a.example", server_cert, client_a) == "blue"

    await eventually(a_served, message="port 443 serves a client of team-a (the default CA)")
    # The default's CA only: another CA's client and a client without a certificate are refused.
    assert await https_get(env, address, 443, "a.example", server_cert, client_b) != "blue"
    assert await https_get(env, address, 443, "a.example", server_cert, None) != "blue"

    async def b_served() -> bool:
        return await https_get(env, address, 8443, "b.example", server_cert, client_b) == "blue"

    await eventually(b_served, message="port 8443 serves a client of team-b (its override)")
    assert await https_get(env, address, 8443, "b.example", server_cert, client_a) != "blue"
    assert "InsecureFrontendValidationMode" not in conditions(await env.read("Gateway", "one"))

    # The ConfigMap is followed: once ca-a holds team-b's CA, port 443 serves team-b's client.
    await env.cluster.apply(config_map("ca-a", team_b.pem))

    async def a_swapped() -> bool:
        return await https_get(env, address, 443, "a.example", server_cert, client_b) == "blue"

    await eventually(a_swapped, message="port 443 trusts what ca-a holds now")
    assert await https_get(env, address, 443, "a.example", server_cert, client_a) != "blue"


async def test_unusable_references_are_reported_and_serve_nobody(env: Env) -> None:
    team_a = TestCa("team-a")
    client_a = team_a.issue("client-a")
    secret, server_cert = server_secret("frontend-cert")
    await env.cluster.apply(secret)
    await env.cluster.apply(config_map("ca-a", team_a.pem))
    await env.cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "frontend-cas"}}
    )
    await env.cluster.apply(config_map("elsewhere", team_a.pem, namespace="frontend-cas"))
    gateway = gateway_obj(
        "one",
        https_listener("valid", 443, "a.example", "frontend-cert"),
        https_listener("missing", 7443, "m.example", "frontend-cert"),
        https_listener("wrong-kind", 8443, "k.example", "frontend-cert"),
        https_listener("not-granted", 6443, "g.example", "frontend-cert"),
        http_listener("plain", port=80),
    )
    await env.cluster.apply(
        with_frontend(
            gateway,
            validation(ca_ref("ca-a")),
            {
                7443: validation(ca_ref("ca-later")),
                8443: validation(ca_ref("blue", kind="Service")),
                6443: validation(ca_ref("elsewhere", namespace="frontend-cas")),
                80: validation(ca_ref("ca-later")),
            },
        )
    )
    await env.cluster.apply(route_obj("frontend-route", [{"name": "one"}], "blue"))
    address = await env.address("one")
    expected = {
        "missing": "InvalidCACertificateRef",
        "wrong-kind": "InvalidCACertificateKind",
        "not-granted": "RefNotPermitted",
    }

    async def reported() -> bool:
        listeners = listener_conditions(await env.read("Gateway", "one"))
        return all(
            listeners.get(name, {}).get("ResolvedRefs") == ("False", reason)
            and listeners[name].get("Accepted") == ("False", "NoValidCACertificate")
            and listeners[name].get("Programmed", ("", ""))[0] == "False"
            for name, reason in expected.items()
        ) and all(
            listeners.get(name, {}).get(kind, ("", ""))[0] == "True"
            for name in ("valid", "plain")
            for kind in ("Accepted", "ResolvedRefs", "Programmed")
        )

    await eventually(reported, message="each listener says what is wrong with its CA reference")
    # A listener without a usable CA serves nobody, not everybody; the others keep serving.
    assert await https_get(env, address, 7443, "m.example", server_cert, client_a) != "blue"
    assert await https_get(env, address, 7443, "m.example", server_cert, None) != "blue"
    assert await https_get(env, address, 443, "a.example", server_cert, client_a) == "blue"
    assert await env.backend_of(address, "a.example") == "blue"

    # The missing ConfigMap appears and a grant permits the other namespace's: both serve.
    await env.cluster.apply(config_map("ca-later", team_a.pem))
    await env.cluster.apply(
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "gateways-read-cas", "namespace": "frontend-cas"},
            "spec": {
                "from": [{"group": GROUP, "kind": "Gateway", "namespace": "default"}],
                "to": [{"group": "", "kind": "ConfigMap"}],
            },
        }
    )

    async def resolved() -> bool:
        listeners = listener_conditions(await env.read("Gateway", "one"))
        return all(
            listeners.get(name, {}).get("ResolvedRefs") == ("True", "ResolvedRefs")
            for name in ("missing", "not-granted")
        )

    await eventually(resolved, message="the listeners resolve once the references can be used")

    async def served() -> bool:
        return await https_get(env, address, 7443, "m.example", server_cert, client_a) == "blue"

    await eventually(served, message="the listener serves team-a's client once ca-later exists")


async def test_insecure_fallback_serves_everyone_and_says_so(env: Env) -> None:
    team_a, team_b = TestCa("team-a"), TestCa("team-b")
    secret, server_cert = server_secret("frontend-cert")
    await env.cluster.apply(secret)
    await env.cluster.apply(config_map("ca-a", team_a.pem))
    gateway = gateway_obj("one", https_listener("open", 443, "a.example", "frontend-cert"))
    await env.cluster.apply(
        with_frontend(gateway, validation(ca_ref("ca-a"), mode="AllowInsecureFallback"), {})
    )
    await env.cluster.apply(route_obj("frontend-route", [{"name": "one"}], "blue"))
    address = await env.address("one")

    async def said() -> bool:
        found = conditions(await env.read("Gateway", "one"))
        return found.get("InsecureFrontendValidationMode") == ("True", "ConfigurationChanged")

    await eventually(said, message="the Gateway says clients are let in unchecked")
    for client in (team_a.issue("client-a"), team_b.issue("client-b"), None):

        async def served(client: Issued | None = client) -> bool:
            return await https_get(env, address, 443, "a.example", server_cert, client) == "blue"

        await eventually(served, message="every client is served in AllowInsecureFallback")

    # Back to AllowValidOnly: the condition goes and a client without a certificate is refused.
    await env.cluster.apply(with_frontend(gateway, validation(ca_ref("ca-a")), {}))

    async def secured() -> bool:
        found = conditions(await env.read("Gateway", "one"))
        refused = await https_get(env, address, 443, "a.example", server_cert, None) != "blue"
        return "InsecureFrontendValidationMode" not in found and refused

    await eventually(secured, message="AllowValidOnly again: the condition is gone")


async def test_a_listener_sets_https_listener_validates_clients_as_its_gateway_says(
    env: Env,
) -> None:
    team_a = TestCa("team-a")
    client_a = team_a.issue("client-a")
    secret, server_cert = server_secret("frontend-cert")
    await env.cluster.apply(secret)
    await env.cluster.apply(config_map("ca-a", team_a.pem))
    gateway = gateway_obj("one", https_listener("own", 443, "a.example", "frontend-cert"))
    gateway["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    await env.cluster.apply(with_frontend(gateway, validation(ca_ref("ca-a")), {}))
    listener_set = listener_set_obj(
        "team", "one", https_listener("team", 443, "b.example", "frontend-cert")
    )
    try:
        await env.cluster.apply(listener_set)
        set_ref = {"group": GROUP, "kind": "ListenerSet", "name": "team"}
        await env.cluster.apply(route_obj("to-green", [set_ref], "green"))
        address = await env.address("one")

        async def served() -> bool:
            return await https_get(env, address, 443, "b.example", server_cert, client_a) == "green"

        await eventually(served, message="the ListenerSet's listener serves team-a's client")
        # The Gateway's default applies on its port: no certificate, no request.
        assert await https_get(env, address, 443, "b.example", server_cert, None) != "green"
    finally:
        found = await env.read("ListenerSet", "team")
        if found is not None:
            await env.cluster.delete(found)
