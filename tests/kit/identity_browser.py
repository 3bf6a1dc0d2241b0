"""A browser stand-in for the identity tests: an aiohttp ClientSession that follows redirects,
keeps cookies, resolves the test host names to loopback, and fills the provider's login form.

The app's URLs carry no port (``http://app.test/...``): the resolver sends port 80 to the edge of
the test at hand. So the callback URL the provider must know is the same for every test, and one
provider process serves them all (its redirect URIs are fixed when it starts).
"""

from __future__ import annotations

import re
import socket
from html import unescape
from typing import Any
from urllib.parse import urljoin

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from tests.kit.identity_idp import User


class LoopbackResolver(AbstractResolver):
    """Every name is 127.0.0.1: ``app.test`` (port 80) reaches the edge, ``localhost:PORT`` the
    provider."""

    def __init__(self, edge_port: int) -> None:
        self._edge_port = edge_port

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            {
                "hostname": host,
                "host": "127.0.0.1",
                "port": self._edge_port if port == 80 else port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None


def browser(edge_port: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(resolver=LoopbackResolver(edge_port), force_close=True),
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        timeout=aiohttp.ClientTimeout(total=30),
    )


_HIDDEN_ID = re.compile(r'<input type="hidden" name="id" value="([^"]*)">')
_FORM_ACTION = re.compile(r'<form method="POST" action="([^"]*)"')


class Page:
    def __init__(self, status: int, url: str, text: str, history: list[str]) -> None:
        self.status = status
        self.url = url
        self.text = text
        self.history = history

    @classmethod
    async def read(cls, response: aiohttp.ClientResponse) -> Page:
        """The page a (redirect-following) response ends on, and the URLs it went through."""
        history = [str(r.url) for r in response.history]
        return cls(response.status, str(response.url), await response.text(), history)

    @property
    def is_login_form(self) -> bool:
        return _HIDDEN_ID.search(self.text) is not None


async def get(session: aiohttp.ClientSession, url: str, **kwargs: Any) -> Page:
    async with session.get(url, **kwargs) as response:
        return await Page.read(response)


async def submit_login(session: aiohttp.ClientSession, form: Page, user: User) -> Page:
    """Fill and post the provider's login form; redirects are followed back to the app."""
    found = _HIDDEN_ID.search(form.text)
    action = _FORM_ACTION.search(form.text)
    assert found is not None and action is not None, form.text[:500]
    data = {"id": unescape(found.group(1)), "username": user.username, "password": user.password}
    async with session.post(urljoin(form.url, unescape(action.group(1))), data=data) as response:
        return await Page.read(response)


async def sign_in(session: aiohttp.ClientSession, url: str, user: User) -> Page:
    form = await get(session, url)
    assert form.status == 200 and form.is_login_form, (form.status, form.url, form.text[:300])
    return await submit_login(session, form, user)
