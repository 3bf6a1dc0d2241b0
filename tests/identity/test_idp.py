"""The test provider itself: it builds, starts, serves discovery and JWKS, and rotates its key
on restart (what the key-rotation tests rely on)."""

from __future__ import annotations

import aiohttp

from tests.kit.identity_idp import StartIdp


async def test_provider_serves_discovery_and_rotates_its_key(start_idp: StartIdp) -> None:
    idp = await start_idp(["http://app.test/_interlock/auth/callback"])
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{idp.issuer}.well-known/openid-configuration") as response:
            discovery = await response.json()
        assert discovery["issuer"] == idp.issuer
        assert "S256" in discovery["code_challenge_methods_supported"]
        async with session.get(discovery["jwks_uri"]) as response:
            before = {key["kid"] for key in (await response.json())["keys"]}
        await idp.restart()
        async with session.get(discovery["jwks_uri"]) as response:
            after = {key["kid"] for key in (await response.json())["keys"]}
    assert before and after and before.isdisjoint(after)
