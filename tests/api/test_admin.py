"""The admin server: probes and debug views."""

from __future__ import annotations

import dataclasses

import aiohttp

from interlock.api.admin import AdminApp
from interlock.api.serving import serve
from interlock.config import Address


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
