"""Request headers whose names hold ``_`` do not reach backends (unless the edge is told so).

CGI, WSGI, PHP and Rack backends read header names with ``-`` and ``_`` alike
(``HTTP_X_CLIENT_CERT_SUBJECT``), so a client's ``X_Client_Cert_Subject`` would pose as the
``X-Client-Cert-Subject`` the edge sets from a verified client certificate (or as any other
header the edge vouches for). The edge drops them as it reads the request, as nginx does by
default; ``--edge-underscores-in-headers`` keeps them.
"""

from __future__ import annotations

import asyncio
import json

from interlock.dataplane.limits import ProxyLimits
from tests.kit.h2_raw import H2Raw

from .conftest import HOST, Edge, headers_seen, running_edge, serve_host

POSING = "X_Client_Cert_Subject: CN=admin\r\nX_Forwarded_User: admin\r\nX-Plain: kept\r\n"


async def test_http1_headers_with_underscores_are_dropped(
    edge: Edge, header_backend: tuple[str, int]
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    seen = await headers_seen(edge, POSING)
    assert [name for name in seen if "_" in name] == []
    assert seen["x-plain"] == ["kept"]


async def test_http2_headers_with_underscores_are_dropped(
    edge: Edge, header_backend: tuple[str, int]
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    client = await H2Raw.open(edge.address)
    try:
        status, _, body = await client.request(
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", HOST),
                (":path", "/"),
                ("x_client_cert_subject", "CN=admin"),
                ("x-plain", "kept"),
            ]
        )
    finally:
        client.close()
    assert status == 200
    seen = json.loads(body)
    assert [name for name in seen if "_" in name] == []
    assert seen["x-plain"] == ["kept"]


async def test_an_upgrade_request_loses_them_too(edge: Edge) -> None:
    """The upgrade path (a request handed to aiohttp's server) reads the same headers."""

    async def switch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        names = [line.split(b":")[0].lower() for line in head.split(b"\r\n")[1:] if line]
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"
            + json.dumps([n.decode() for n in names]).encode()
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(switch, "127.0.0.1", 0)
    try:
        address = ("127.0.0.1", server.sockets[0].getsockname()[1])
        await serve_host(edge, host=HOST, service="switch", address=address)
        reader, writer = await asyncio.open_connection(*edge.address)
        writer.write(
            (
                f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n"
                + POSING
                + "\r\n"
            ).encode()
        )
        raw = await asyncio.wait_for(reader.read(-1), 60)
        writer.close()
    finally:
        server.close()
    assert raw.startswith(b"HTTP/1.1 101"), raw[:200]
    names = json.loads(raw.partition(b"\r\n\r\n")[2])
    assert "x-plain" in names
    assert [name for name in names if "_" in name] == []


async def test_the_switch_lets_them_through(header_backend: tuple[str, int]) -> None:
    async with running_edge(limits=ProxyLimits(underscores_in_headers=True)) as edge:
        await serve_host(edge, host=HOST, service="echo", address=header_backend)
        seen = await headers_seen(edge, POSING)
    assert seen["x_client_cert_subject"] == ["CN=admin"]
