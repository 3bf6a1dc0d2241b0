"""Client-supplied client-address headers reach the backend only from trusted
proxies (``X-Forwarded-*`` were already replaced; ``Forwarded``, ``X-Real-IP`` and the rest
were not)."""

from __future__ import annotations

from .conftest import HOST, Edge, headers_seen, running_edge, serve_host

CLIENT_IP_HEADERS = {
    "forwarded": "for=6.6.6.6;proto=https",
    "x-real-ip": "6.6.6.6",
    "true-client-ip": "6.6.6.6",
    "x-client-ip": "6.6.6.6",
    "cf-connecting-ip": "6.6.6.6",
}


async def test_client_address_headers_from_untrusted_peers_are_dropped(
    edge: Edge, header_backend: tuple[str, int]
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    extra = "".join(f"{name}: {value}\r\n" for name, value in CLIENT_IP_HEADERS.items())
    seen = await headers_seen(edge, extra)
    assert not set(CLIENT_IP_HEADERS) & set(seen), seen
    assert seen["x-forwarded-for"] == ["127.0.0.1"]


async def test_client_address_headers_from_a_trusted_proxy_are_kept(
    header_backend: tuple[str, int],
) -> None:
    async with running_edge(trusted_proxies=["127.0.0.0/8"]) as edge:
        await serve_host(edge, host=HOST, service="echo", address=header_backend)
        extra = "".join(f"{name}: {value}\r\n" for name, value in CLIENT_IP_HEADERS.items())
        seen = await headers_seen(edge, extra)
    assert {name: seen.get(name) for name in CLIENT_IP_HEADERS} == {
        name: [value] for name, value in CLIENT_IP_HEADERS.items()
    }
