"""Headers a client must not set for the backend (the addresses proxies vouch for, mutualTLS's
and oauth/oidc's identity headers, hop-by-hop ones), in any case, never reach the backend of a
route without modules — the route whose request headers go upstream as the edge's HTTP/1.1
server sorted them while parsing (``steps.HELD_BACK``)."""

from __future__ import annotations

from .conftest import HOST, Edge, headers_seen, serve_host

FORGED = (
    "X-Forwarded-For: 6.6.6.6\r\nx-forwarded-PROTO: https\r\nX-Forwarded-Host: evil.example\r\n"
    "Forwarded: for=6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\nFastly-Client-IP: 6.6.6.6\r\n"
    "X-Client-Cert-Subject: CN=admin\r\nx-client-cert-san: DNS:admin\r\n"
    "X-CLIENT-CERT-FINGERPRINT: 00\r\nX-Forwarded-User: admin\r\n"
    "x-forwarded-email: admin@example.com\r\nProxy-Authorization: Basic eDp5\r\n"
    "Keep-Alive: timeout=5\r\nTE: trailers\r\n"
)
NAMES = {line.partition(":")[0].lower() for line in FORGED.splitlines()}


async def test_forged_and_hop_by_hop_headers_do_not_reach_the_backend(
    edge: Edge, header_backend: tuple[str, int]
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    seen = await headers_seen(edge, FORGED)
    leaked = NAMES & set(seen) - {
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
    }
    assert not leaked, seen
    assert seen["x-forwarded-for"] == ["127.0.0.1"]
    assert seen["x-forwarded-proto"] == ["http"]
    assert seen["x-forwarded-host"] == [HOST]
    assert seen["host"] == [HOST]
