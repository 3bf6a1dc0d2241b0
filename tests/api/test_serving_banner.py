"""The policy API and the admin server never send aiohttp's version banner."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from interlock.api.serving import serve
from interlock.config import Address


async def test_served_apps_say_interlock_not_aiohttp() -> None:
    app = web.Application()

    async def ok(_request: web.Request) -> web.Response:
        return web.json_response({})

    app.router.add_get("/", ok)
    site = await serve(app, Address(host="127.0.0.1", port=0))
    try:
        async with aiohttp.ClientSession() as client:
            for path in ("/", "/missing"):
                async with client.get(site.url + path) as response:
                    assert response.headers["Server"] == "interlock"
    finally:
        await site.stop()
