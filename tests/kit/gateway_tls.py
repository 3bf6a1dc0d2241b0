"""HTTPS listeners of a Gateway in the end-to-end tests: a TLS Secret with a self-signed
certificate for a host, a listener terminating TLS with it, and a client that calls the
Gateway's address by server name and trusts only that certificate."""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp

from tests.kit.gateway_env import Env
from tests.kit.tls_certs import self_signed, tls_secret


def self_signed_secret(
    name: str, host: str, *, namespace: str = "default"
) -> tuple[dict[str, Any], str]:
    """A ``kubernetes.io/tls`` Secret for ``host``, and its certificate (what a client trusts)."""
    cert, key = self_signed(host)
    return tls_secret(name, cert, key, namespace=namespace), cert


def https_listener(name: str, hostname: str, *refs: dict[str, Any]) -> dict[str, Any]:
    """A listener on 443 terminating TLS with the Secrets ``refs`` name."""
    return {
        "name": name,
        "port": 443,
        "protocol": "HTTPS",
        "hostname": hostname,
        "tls": {"mode": "Terminate", "certificateRefs": list(refs)},
    }


async def https_backend(env: Env, address: str, host: str, cert: str) -> object:
    """The backend (``X-Echo``) that answers ``https://host/`` on ``address`` when the server
    presents ``cert``; else the status, or the error the client met."""
    context = ssl.create_default_context(cadata=cert)
    try:
        async with env.http.get(
            f"https://{address}/", headers={"Host": host}, ssl=context, server_hostname=host
        ) as response:
            return response.headers.get("X-Echo") or response.status
    except (aiohttp.ClientError, ssl.SSLError) as error:
        return repr(error)
