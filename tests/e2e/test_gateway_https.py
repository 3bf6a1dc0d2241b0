"""HTTPS listeners of a Gateway: TLS terminated with the listener's certificate (both lanes).

A listener's certificate is the Secret its ``tls.certificateRefs`` names; the connection's
server name chooses the listener. A listener whose certificate is missing says so
(``ResolvedRefs`` False, ``InvalidCertificateRef``; not Programmed) while the Gateway's other
listeners keep serving; one naming a Secret in another namespace needs a ReferenceGrant
(``RefNotPermitted`` until there is one).
"""

from __future__ import annotations

import ssl
from typing import Any

from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import GROUP, Env, gateway_obj, route_obj
from tests.kit.gateway_env import env as env
from tests.kit.gateway_tls import https_backend, https_listener, self_signed_secret


def listener_conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, tuple[str, str]]]:
    return {
        entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
        for entry in (obj or {}).get("status", {}).get("listeners", [])
    }


async def test_https_listener_terminates_tls_and_a_broken_one_says_why(env: Env) -> None:
    secret, cert = self_signed_secret("secure-cert", "secure.example")
    await env.cluster.apply(secret)
    await env.cluster.apply(
        gateway_obj(
            "one",
            https_listener("secure", "secure.example", {"name": "secure-cert"}),
            https_listener("broken", "broken.example", {"name": "no-such-secret"}),
        )
    )
    await env.cluster.apply(route_obj("secure-route", [{"name": "one"}], "blue"))
    address = await env.address("one")

    async def served() -> bool:
        return await https_backend(env, address, "secure.example", cert) == "blue"

    await eventually(served, message="secure.example is served over HTTPS by its listener")

    async def broken_reported() -> bool:
        listeners = listener_conditions(await env.read("Gateway", "one"))
        return (
            listeners.get("broken", {}).get("ResolvedRefs") == ("False", "InvalidCertificateRef")
            and listeners["broken"].get("Programmed", ("", ""))[0] == "False"
            and listeners.get("secure", {}).get("Programmed") == ("True", "Programmed")
        )

    await eventually(broken_reported, message="the listener without its Secret says why")
    # The broken listener's host is never served with another listener's certificate.
    assert await https_backend(env, address, "broken.example", cert) != "blue"


async def test_certificate_in_another_namespace_needs_a_reference_grant(env: Env) -> None:
    await env.cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gw-certs"}}
    )
    secret, cert = self_signed_secret("shared-cert", "shared.example", namespace="gw-certs")
    await env.cluster.apply(secret)
    await env.cluster.apply(
        gateway_obj(
            "one",
            https_listener(
                "shared", "shared.example", {"name": "shared-cert", "namespace": "gw-certs"}
            ),
        )
    )
    await env.cluster.apply(route_obj("shared-route", [{"name": "one"}], "green"))

    async def refused() -> bool:
        listeners = listener_conditions(await env.read("Gateway", "one"))
        return listeners.get("shared", {}).get("ResolvedRefs") == ("False", "RefNotPermitted")

    await eventually(refused, message="a certificate in another namespace needs a grant")
    grant = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "gateways-read-certs", "namespace": "gw-certs"},
        "spec": {
            "from": [{"group": GROUP, "kind": "Gateway", "namespace": "default"}],
            "to": [{"group": "", "kind": "Secret"}],
        },
    }
    await env.cluster.apply(grant)
    address = await env.address("one")
    try:

        async def served() -> bool:
            return await https_backend(env, address, "shared.example", cert) == "green"

        await eventually(served, message="the granted certificate serves shared.example")
    finally:
        await env.cluster.delete(grant)
        await env.cluster.delete(secret)


async def test_a_host_of_another_listener_than_the_server_name_is_misdirected(env: Env) -> None:
    secure, secure_cert = self_signed_secret("secure-cert", "secure.example")
    other, other_cert = self_signed_secret("other-cert", "other.example")
    await env.cluster.apply(secure)
    await env.cluster.apply(other)
    await env.cluster.apply(
        gateway_obj(
            "one",
            https_listener("secure", "secure.example", {"name": "secure-cert"}),
            https_listener("other", "other.example", {"name": "other-cert"}),
            {
                "name": "any",
                "port": 443,
                "protocol": "HTTPS",
                "tls": {"certificateRefs": [{"name": "other-cert"}]},
            },
        )
    )
    route = route_obj("both", [{"name": "one"}], "blue")
    route["spec"]["hostnames"] = ["secure.example", "other.example"]
    await env.cluster.apply(route)
    address = await env.address("one")

    async def served() -> bool:
        return (
            await https_backend(env, address, "secure.example", secure_cert) == "blue"
            and await https_backend(env, address, "other.example", other_cert) == "blue"
        )

    await eventually(served, message="both listeners serve their own hosts")
    context = ssl.create_default_context(cadata=secure_cert)
    async with env.http.get(
        f"https://{address}/",
        headers={"Host": "other.example"},
        ssl=context,
        server_hostname="secure.example",
    ) as response:
        assert response.status == 421
        assert response.headers["X-Interlock-Reason"] == "misdirected-request"
    # A host no route serves, of another listener (the catch-all): misdirected too, not a 404.
    async with env.http.get(
        f"https://{address}/",
        headers={"Host": "unknown.example"},
        ssl=context,
        server_hostname="secure.example",
    ) as response:
        assert response.status == 421


def secret_grant(name: str, namespace: str, **changes: Any) -> dict[str, Any]:
    """A ReferenceGrant in ``namespace`` for Gateways of ``default`` to the Secret shared-cert,
    with ``changes`` (from_group, from_kind, from_namespace, to_group, to_kind, to_name)."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ReferenceGrant",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "from": [
                {
                    "group": changes.get("from_group", GROUP),
                    "kind": changes.get("from_kind", "Gateway"),
                    "namespace": changes.get("from_namespace", "default"),
                }
            ],
            "to": [
                {
                    "group": changes.get("to_group", ""),
                    "kind": changes.get("to_kind", "Secret"),
                    "name": changes.get("to_name", "shared-cert"),
                }
            ],
        },
    }


async def test_grants_that_do_not_permit_the_secret_leave_it_refused_after_one_that_did(
    env: Env,
) -> None:
    # Conformance's GatewaySecretInvalidReferenceGrant: grants that each miss the reference by
    # one field. The suite runs it beside GatewaySecretReferenceGrantSpecific, whose grant does
    # permit Gateways of the same namespace to read the same Secret while it exists: once that
    # grant is deleted the listener must be refused again.
    for namespace in ("gw-certs", "gw-elsewhere"):
        await env.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    secret, _ = self_signed_secret("shared-cert", "shared.example", namespace="gw-certs")
    await env.cluster.apply(secret)
    misses = [
        secret_grant("wrong-namespace", "gw-elsewhere"),
        secret_grant("wrong-from-group", "gw-certs", from_group="not-the-group"),
        secret_grant("wrong-from-kind", "gw-certs", from_kind="HTTPRoute"),
        secret_grant("wrong-from-namespace", "gw-certs", from_namespace="not-the-namespace"),
        secret_grant("wrong-to-group", "gw-certs", to_group="not-the-group", to_name="other"),
        secret_grant("wrong-to-kind", "gw-certs", to_kind="Service"),
        secret_grant("wrong-to-name", "gw-certs", to_name="not-the-certificate"),
    ]
    permits = secret_grant("specific", "gw-certs")
    try:
        for grant in misses:
            await env.cluster.apply(grant)
        await env.cluster.apply(
            gateway_obj(
                "one",
                https_listener(
                    "shared", "shared.example", {"name": "shared-cert", "namespace": "gw-certs"}
                ),
            )
        )

        def resolved(want: tuple[str, str]) -> Any:
            async def check() -> bool:
                listeners = listener_conditions(await env.read("Gateway", "one"))
                return listeners.get("shared", {}).get("ResolvedRefs") == want

            return check

        refused = ("False", "RefNotPermitted")
        await eventually(resolved(refused), message="no grant permits the Secret")
        await env.cluster.apply(permits)
        await eventually(resolved(("True", "ResolvedRefs")), message="the grant permits it")
        await env.cluster.delete(permits)
        await eventually(resolved(refused), message="refused again once its grant is deleted")
    finally:
        for grant in misses:
            await env.cluster.delete(grant)
        await env.cluster.delete(secret)
