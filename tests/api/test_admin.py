"""The admin server: probes and debug views."""

from __future__ import annotations

import dataclasses

import aiohttp

from interlock.api.admin import AdminApp
from interlock.api.serving import serve
from interlock.config import Address
from tests.kit.lanes import _local_address


@dataclasses.dataclass
class Stats:
    actors: int
    kinds: frozenset[str]


async def test_probes_and_debug_views():
    ready = False
    admin = AdminApp(is_ready=lambda: ready)
    admin.add_debug("actors", lambda: {"stats": Stats(actors=3, kinds=frozenset({"route"}))})
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{site.url}/healthz") as r:
                assert r.status == 200
            async with http.get(f"{site.url}/readyz") as r:
                assert r.status == 503
            ready = True
            async with http.get(f"{site.url}/readyz") as r:
                assert r.status == 200
            async with http.get(f"{site.url}/debug/actors") as r:
                assert await r.json() == {"stats": {"actors": 3, "kinds": ["route"]}}
            async with http.get(f"{site.url}/debug/") as r:
                assert await r.json() == ["/debug/actors"]
            async with http.get(f"{site.url}/debug/nothing") as r:
                assert r.status == 404
    finally:
        await site.stop()


async def test_debug_views_can_read_the_query_string():
    admin = AdminApp(is_ready=lambda: True)
    admin.add_debug_query("echo", lambda query: {"prefix": query.get("prefix")})
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{site.url}/debug/echo?prefix=route/") as r,
        ):
            assert await r.json() == {"prefix": "route/"}
    finally:
        await site.stop()


async def _get_from(source: str, url: str) -> tuple[int, str]:
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with aiohttp.ClientSession(connector=connector) as http, http.get(url) as r:
        return r.status, await r.text()


async def test_debug_views_are_served_to_loopback_and_named_networks_only():
    # /debug/ lists every namespace's routes and modules; the admin port is open to the cluster
    # (probes, Prometheus), so the views answer loopback (kubectl port-forward) and --debug-from.
    local = _local_address()
    assert local != "127.0.0.1", "this test needs a non-loopback address on this machine"
    for debug_from, remote_status in (((), 403), ((f"{local}/32",), 200)):
        admin = AdminApp(is_ready=lambda: True, debug_from=debug_from)
        admin.add_debug("edges", lambda: {"hosts": ["private.example"]})
        site = await serve(admin.app, Address("0.0.0.0", 0))
        try:
            port = site.address.port
            for path in ("/debug/", "/debug/edges"):
                status, text = await _get_from(local, f"http://{local}:{port}{path}")
                assert status == remote_status, (debug_from, path, text)
                if status == 403:
                    assert "private.example" not in text and "--debug-from" in text
                status, _ = await _get_from("127.0.0.1", f"http://127.0.0.1:{port}{path}")
                assert status == 200
            # Probes and metrics are for the cluster: served to everyone.
            status, _ = await _get_from(local, f"http://{local}:{port}/healthz")
            assert status == 200
        finally:
            await site.stop()
