"""oauth and oidc end to end: API server (either lane) → controller → edge → real provider.

A browser stand-in (``identity_browser.py``) follows redirects, keeps cookies and fills the
provider's login form; the provider is zitadel's example OpenID provider (``identity_idp.py``),
one process for the whole session (the ``idp`` fixture starts it again for a test if an earlier
one stopped it). The first test is the seed pull request's example with a generic provider
standing in for Google.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
from aiohttp import web

from interlock.config import EdgeConfig
from interlock.edge.modules.session import REVOKED_SESSIONS
from tests.kit.e2e_clients import LOCAL, StartController, eventually
from tests.kit.edge_env import Env, secret
from tests.kit.edge_env import env as env  # the fixture: an edge, the IngressClass, a backend
from tests.kit.edge_objects import ingress, module_set
from tests.kit.h2_client import H2Client, H2Reply, h2_get
from tests.kit.identity_browser import browser, get, sign_in
from tests.kit.identity_idp import ALICE, CLIENT_ID, CLIENT_SECRET, MALLORY, TestIdp
from tests.kit.module_checks import until_refused_naming
from tests.kit.tls_certs import self_signed, tls_secret

HOST = "app.test"
CALLBACK_URI = f"http://{HOST}/_interlock/auth/callback"
OTHER_HOST = "other.test"
"""A second host on the same provider and client (sessions must not cross between them)."""


@pytest.fixture(scope="session")
def shared_idp() -> Iterator[TestIdp]:
    other = f"http://{OTHER_HOST}/_interlock/auth/callback"
    provider = TestIdp(redirect_uris=[CALLBACK_URI, other])
    yield provider
    provider.close_now()


@pytest.fixture
async def idp(shared_idp: TestIdp) -> TestIdp:
    """The session's provider, running (a test may stop or restart it)."""
    if not shared_idp.running:
        await shared_idp.start()
    return shared_idp


def app_url(path: str = "/") -> str:
    """The app as the browser asks for it: no port, so the provider's redirect URI is fixed
    (the browser sends port 80 to the test's edge)."""
    return f"http://{HOST}{path}"


def open_browser(env: Env) -> aiohttp.ClientSession:
    port = urlsplit(env.edge_url).port
    assert port is not None
    return browser(port)


def generic_oauth(idp: TestIdp, **settings: Any) -> dict[str, Any]:
    """The seed pull request's oauth module, the generic provider standing in for Google."""
    return {
        "oauth": {
            "generic": {
                "optionsPassthrough": True,
                "inactivityTimeout": "10m",
                "maximumDuration": "24h",
                "authCheckInterval": "20m",
                "clientId": CLIENT_ID,
                "clientSecret": {"name": "auth", "key": "client-secret"},
                "emailDomains": ["example.com"],
                "authorizeUrl": f"{idp.issuer}auth",
                "tokenUrl": f"{idp.issuer}oauth/token",
                "userinfoUrl": f"{idp.issuer}userinfo",
                **settings,
            }
        }
    }


def oidc(idp: TestIdp, **settings: Any) -> dict[str, Any]:
    return {
        "oidc": {
            "issuer": idp.issuer,
            "clientId": CLIENT_ID,
            "clientSecret": {"name": "auth", "key": "client-secret"},
            "emailDomains": ["example.com"],
            "identityHeaders": {"X-Auth-Name": "given_name"},
            **settings,
        }
    }


async def publish(env: Env, modules: dict[str, Any], *, client_secret: str = CLIENT_SECRET) -> None:
    await env.kube.apply(secret("auth", {"client-secret": client_secret}))
    await env.kube.apply(module_set("auth", modules))
    await env.kube.apply(ingress("game", HOST, modules="auth"))


async def until_redirects_to_provider(env: Env, idp: TestIdp) -> None:
    async def check() -> bool:
        status, headers, _ = await env.request(HOST, "/", allow_redirects=False)
        return status == 302 and headers.get("Location", "").startswith(idp.issuer)

    await eventually(check, message=f"{HOST} redirects to the provider")


async def test_seed_oauth_example_is_enforced_with_a_generic_provider(
    env: Env, idp: TestIdp
) -> None:
    await publish(env, generic_oauth(idp))
    await until_redirects_to_provider(env, idp)
    backend = env.backends["web"]
    assert not backend.requests, "no request reaches the backend before a login"

    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/play?level=2"), ALICE)
        assert page.status == 200, page.text[:300]
        assert page.url == app_url("/play?level=2")
        seen = backend.requests[-1]
        assert seen["X-Forwarded-Email"] == ALICE.email
        assert seen["X-Forwarded-User"] == ALICE.id
        assert "__interlock" not in seen.get("Cookie", ""), "the backend never sees the session"

        # Client-sent identity headers are replaced, not passed on.
        forged = {"X-Forwarded-Email": "ceo@example.com", "X-Forwarded-User": "ceo"}
        page = await get(session, app_url("/again"), headers=forged)
        assert page.status == 200
        assert backend.requests[-1]["X-Forwarded-Email"] == ALICE.email
        assert backend.requests[-1]["X-Forwarded-User"] == ALICE.id

        # Logout ends the session: the next request starts a new login.
        page = await get(session, app_url("/_interlock/auth/logout"))
        assert page.status == 200
        page = await get(session, app_url("/"))
        assert page.is_login_form

    # A user whose email is outside emailDomains gets 403 and no session.
    async with open_browser(env) as session:
        before = len(backend.requests)
        page = await sign_in(session, app_url("/"), MALLORY)
        assert page.status == 403
        assert "not allowed" in page.text
        assert len(backend.requests) == before

    # optionsPassthrough: a CORS preflight reaches the backend without a session, and a
    # client-sent identity header is still removed.
    status, _, _ = await env.request(
        HOST, "/api", method="OPTIONS", headers={"X-Forwarded-Email": "ceo@example.com"}
    )
    assert status == 200
    assert "X-Forwarded-Email" not in backend.requests[-1]
    # Any other method without a session is refused, never redirected.
    status, _, _ = await env.request(HOST, "/api", method="POST", data=b"x")
    assert status == 401


async def test_oidc_login_state_replay_rotation_and_provider_down(env: Env, idp: TestIdp) -> None:
    await publish(env, oidc(idp, authCheckInterval="1s"))
    await until_redirects_to_provider(env, idp)
    backend = env.backends["web"]

    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/"), ALICE)
        assert page.status == 200, page.text[:300]
        assert backend.requests[-1]["X-Forwarded-Email"] == ALICE.email
        assert backend.requests[-1]["X-Auth-Name"] == "Alice"
        callback = next(url for url in page.history if "/_interlock/auth/callback" in url)

        # The same callback again (a replayed code) is refused.
        replay = await get(session, callback)
        assert replay.status == 400

    # A callback whose state does not match the login cookie is refused.
    async with open_browser(env) as session:
        async with session.get(app_url("/"), allow_redirects=False) as response:
            assert response.status == 302
            authorize = response.headers["Location"]
        query = parse_qs(urlsplit(authorize).query)
        assert query["code_challenge_method"] == ["S256"] and query["nonce"]
        wrong = {"state": "not-" + query["state"][0], "code": "whatever"}
        page = await get(session, CALLBACK_URI + "?" + urlencode(wrong))
        assert page.status == 400
        assert "state" in page.text

    # Key rotation: the provider restarts with a new signing key; a new login still works.
    await idp.restart()
    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/"), ALICE)
        assert page.status == 200, page.text[:300]

        # Provider down: the session keeps working (the re-check is postponed) ...
        await idp.stop()
        await asyncio.sleep(1.1)  # past authCheckInterval, so the next request re-checks
        page = await get(session, app_url("/still"))
        assert page.status == 200
        assert backend.requests[-1]["X-Forwarded-Email"] == ALICE.email

    # ... and a new login gets a clear error page instead of a redirect into nowhere.
    async with open_browser(env) as session:
        page = await get(session, app_url("/"))
        assert page.status == 503
        assert "identity provider is unavailable" in page.text


async def test_expired_session_starts_a_new_login(env: Env, idp: TestIdp) -> None:
    # 5 s, not the shortest a test could use: the sign-in itself (a few redirects) must finish
    # within it on a loaded machine. Sleeping past it only gets longer under load: safe.
    await publish(env, oidc(idp, maximumDuration="5s"))
    await until_redirects_to_provider(env, idp)
    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/"), ALICE)
        assert page.status == 200
        await asyncio.sleep(5.1)  # past maximumDuration: nothing can make the session valid
        page = await get(session, app_url("/"))
        assert page.is_login_form


async def test_bad_client_secret_is_permanent_with_status_and_event(env: Env, idp: TestIdp) -> None:
    await publish(env, oidc(idp), client_secret="not-the-secret")
    await env.until_route_error(HOST, "refused the client credentials")
    await env.until_event("game", "ModulesFailed")
    status, _, _ = await env.request(HOST, "/")
    assert status == 503, "fail closed: no backend is attached"
    events = json.dumps(await env.kube.events("game"))
    assert "not-the-secret" not in events

    # Fixed: the route serves (the Secret change re-applies the modules).
    await env.kube.apply(secret("auth", {"client-secret": CLIENT_SECRET}))
    await until_redirects_to_provider(env, idp)


async def test_provider_down_at_creation_serves_nothing_then_recovers(
    env: Env, idp: TestIdp
) -> None:
    await idp.stop()
    await publish(env, oidc(idp))
    await env.until_route_error(HOST, "could not be reached")
    status, _, _ = await env.request(HOST, "/")
    assert status == 503
    await idp.start()  # the transient error is retried with backoff
    await until_redirects_to_provider(env, idp)


@pytest.mark.parametrize(
    ("modules", "field"),
    [
        ({"oauth": {}}, "spec.modules.oauth"),
        (
            {
                "oidc": {
                    "issuer": "ftp://x",
                    "clientId": "c",
                    "clientSecret": {"name": "a", "key": "k"},
                }
            },
            "spec.modules.oidc.issuer",
        ),
    ],
)
async def test_invalid_identity_modules_are_refused_naming_the_field(
    env: Env, modules: dict[str, Any], field: str
) -> None:
    await until_refused_naming(env, modules, field)


# --- sessions: bound to what admitted them, re-checked, ended by a logout (issue 26) ----------


def session_cookie(session: aiohttp.ClientSession, host: str) -> tuple[str, str]:
    """The edge's session cookie the browser holds for ``host``: (name, sealed value)."""
    for cookie in session.cookie_jar:
        if cookie.key.startswith("__interlock_session_") and cookie["domain"] in ("", host):
            return cookie.key, cookie.value
    raise AssertionError(f"the browser holds no session cookie for {host}")


async def session_name_on(env: Env, host: str) -> str:
    """The session cookie name ``host`` would set: its login cookie names it (one suffix)."""
    status, headers, _ = await env.request(host, "/", allow_redirects=False)
    assert status == 302, status
    login = headers["Set-Cookie"].partition("=")[0]
    assert login.startswith("__interlock_login_"), login
    return login.replace("__interlock_login_", "__interlock_session_")


async def test_a_session_from_one_host_is_refused_on_another_with_the_same_provider(
    env: Env, idp: TestIdp
) -> None:
    # Issue 26 item 1: both hosts name the same issuer, client and client secret (so the same
    # session keys); only the second restricts who may sign in.
    await env.kube.apply(secret("auth", {"client-secret": CLIENT_SECRET}))
    await env.kube.apply(module_set("open", oidc(idp, emailDomains=[])))
    await env.kube.apply(
        module_set("strict", oidc(idp, emailDomains=[], emailAddresses=[ALICE.email]))
    )
    await env.kube.apply(ingress("game", HOST, modules="open"))
    await env.kube.apply(ingress("other", OTHER_HOST, modules="strict"))
    await until_redirects_to_provider(env, idp)
    await env.until_status(OTHER_HOST, 302, allow_redirects=False)
    backend = env.backends["web"]

    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/"), MALLORY)
        assert page.status == 200, page.text[:300]
        assert backend.requests[-1]["X-Forwarded-Email"] == MALLORY.email
        _, sealed = session_cookie(session, HOST)

    # The cookie, replayed on the second host under the name that host reads: no session there.
    name = await session_name_on(env, OTHER_HOST)
    before = len(backend.requests)
    status, headers, _ = await env.request(
        OTHER_HOST, "/", headers={"Cookie": f"{name}={sealed}"}, allow_redirects=False
    )
    assert status == 302, "refused: a new sign-in is required"
    assert headers["Location"].startswith(idp.issuer)
    assert len(backend.requests) == before, "the backend never sees the replayed session"

    # A fresh sign-in there is refused as well: Mallory is not on its list.
    async with open_browser(env) as session:
        page = await sign_in(session, f"http://{OTHER_HOST}/", MALLORY)
        assert page.status == 403
    assert len(backend.requests) == before


async def alice_signed_in(env: Env, idp: TestIdp, *, logout: bool = False) -> str:
    """Alice signs in to HOST's oidc route (and logs out when ``logout``): a copy of her session
    cookie (``Cookie`` header) taken before any logout."""
    await publish(env, oidc(idp))
    await until_redirects_to_provider(env, idp)
    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/"), ALICE)
        assert page.status == 200, page.text[:300]
        name, sealed = session_cookie(session, HOST)
        if logout:
            page = await get(session, app_url("/_interlock/auth/logout"))
            assert page.status == 200
    return f"{name}={sealed}"


async def test_tightening_the_allow_list_refuses_live_sessions(env: Env, idp: TestIdp) -> None:
    # Issue 26 item 4: the lists are checked on every request, not only at the callback.
    cookie = await alice_signed_in(env, idp)
    backend = env.backends["web"]
    await env.kube.apply(
        module_set("auth", oidc(idp, emailDomains=[], emailAddresses=["bob@example.com"]))
    )

    async def refused() -> bool:
        status, _, body = await env.request(
            HOST, "/", headers={"Cookie": cookie}, allow_redirects=False
        )
        return status == 403 and b"not allowed" in body

    await eventually(refused, message="Alice's live session is refused once she is not listed")
    before = len(backend.requests)
    status, headers, _ = await env.request(
        HOST, "/", headers={"Cookie": cookie}, allow_redirects=False
    )
    assert status == 403
    assert "Max-Age=0" in headers["Set-Cookie"], "the refused session's cookie is cleared"
    assert len(backend.requests) == before


async def test_a_logged_out_session_is_refused_even_from_a_copied_cookie(
    env: Env, idp: TestIdp
) -> None:
    # Issue 26 item 14: the logout records the session as ended (docs/modules.md, Sessions).
    cookie = await alice_signed_in(env, idp, logout=True)
    backend = env.backends["web"]
    before = len(backend.requests)
    status, headers, _ = await env.request(
        HOST, "/", headers={"Cookie": cookie}, allow_redirects=False
    )
    assert status == 302 and headers["Location"].startswith(idp.issuer)
    assert len(backend.requests) == before


async def test_the_redirect_uri_names_the_http2_authority(
    env: Env, idp: TestIdp, start_controller: StartController
) -> None:
    # Issue 26 item 3: HTTP/2 requests carry :authority, no Host. First h2c (prior knowledge).
    await publish(env, oidc(idp))
    await until_redirects_to_provider(env, idp)
    reply = await h2_get(env.edge_url, authority=HOST)
    assert reply.status == 302, reply
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["redirect_uri"] == [CALLBACK_URI]

    # With a port, the port is kept (the browser comes back to where it started).
    reply = await h2_get(env.edge_url, authority=f"{HOST}:8080")
    assert reply.status == 302, reply
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["redirect_uri"] == [f"http://{HOST}:8080/_interlock/auth/callback"]

    # An authority that is not a host and port is no redirect target.
    reply = await h2_get(env.edge_url, authority=f"{HOST}:x@evil.test")
    assert reply.status in (400, 404), reply

    # Then h2 over TLS, chosen by ALPN: a second controller with a TLS listener.
    tls_controller = await start_controller(
        identity="tls-replica", edge=EdgeConfig(addr=LOCAL, tls_addr=LOCAL)
    )
    assert tls_controller.edge is not None and tls_controller.edge.tls_address is not None
    port = tls_controller.edge.tls_address.port
    cert, key = self_signed(HOST)
    await env.kube.apply(tls_secret("app-tls", cert, key))
    secured = ingress("game", HOST, modules="auth")
    secured["spec"]["tls"] = [{"hosts": [HOST], "secretName": "app-tls"}]
    await env.kube.apply(secured)
    context = ssl.create_default_context(cadata=cert)
    context.set_alpn_protocols(["h2"])
    replies: list[H2Reply] = []

    async def redirected() -> bool:
        try:
            client = await H2Client.connect("127.0.0.1", port, tls=context, server_hostname=HOST)
        except (OSError, ssl.SSLError):
            return False  # until the certificate is served
        try:
            assert client.alpn == "h2"
            replies.append(await client.request(authority=HOST, scheme="https"))
        finally:
            await client.close()
        return replies[-1].status == 302

    await eventually(redirected, message=f"https://{HOST}/ redirects over h2")
    query = parse_qs(urlsplit(replies[-1].headers["location"]).query)
    assert query["redirect_uri"] == [f"https://{HOST}/_interlock/auth/callback"]


async def test_identity_headers_from_a_client_never_reach_a_backend_without_identity_module(
    env: Env,
) -> None:
    # Issue 26 item 12: on a host with no identity module (here: no modules at all).
    await env.kube.apply(ingress("plain", "plain.test"))
    await env.until_status("plain.test", 200)
    backend = env.backends["web"]
    forged = {"X-Forwarded-User": "ceo", "x-forwarded-email": "ceo@example.com"}
    status, _, _ = await env.request("plain.test", "/", headers=forged)
    assert status == 200
    seen = {name.lower() for name in backend.requests[-1]}
    assert not seen & {"x-forwarded-user", "x-forwarded-email"}
    reply = await h2_get(env.edge_url, authority="plain.test", headers=forged)
    assert reply.status == 200
    seen = {name.lower() for name in backend.requests[-1]}
    assert not seen & {"x-forwarded-user", "x-forwarded-email"}


class EndlessProvider:
    """An OpenID provider whose answer at one endpoint (``endless``) goes on for 64 MiB: a JSON
    object opened and then whitespace. ``sent`` counts the bytes it managed to write."""

    SIZE = 64 << 20

    def __init__(self, endless: str) -> None:
        self.endless = endless
        self.sent = 0
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/jwks", self._jwks)
        app.router.add_post("/token", self._token)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _answer(self, request: web.Request, name: str, document: dict[str, Any]) -> Any:
        if name != self.endless:
            status = 400 if name == "token" else 200
            return web.json_response(document, status=status)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b" " * (64 << 10)
        with contextlib.suppress(ConnectionError):
            await response.write(b'{"keys": [')
            while self.sent < self.SIZE:
                await response.write(chunk)
                self.sent += len(chunk)
        return response

    async def _discovery(self, request: web.Request) -> Any:
        return await self._answer(
            request,
            "discovery",
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}auth",
                "token_endpoint": f"{self.issuer}token",
                "jwks_uri": f"{self.issuer}jwks",
            },
        )

    async def _jwks(self, request: web.Request) -> Any:
        return await self._answer(request, "jwks", {"keys": []})

    async def _token(self, request: web.Request) -> Any:
        return await self._answer(request, "token", {"error": "invalid_grant"})


@pytest.mark.parametrize(
    ("endless", "path"),
    [
        ("discovery", ".well-known/openid-configuration"),
        ("jwks", "jwks"),
        ("token", "token"),
    ],
)
async def test_an_endless_provider_answer_is_refused_past_the_bound(
    env: Env, endless: str, path: str
) -> None:
    # Issue 26 item 9: every body read from a provider is bounded (1 MiB).
    provider = EndlessProvider(endless)
    await provider.start()
    try:
        await publish(env, {"oidc": {**oidc(provider)["oidc"], "issuer": provider.issuer}})
        url = f"{provider.issuer}{path}"
        await env.until_route_error(HOST, f"{url} answered with more than 1048576 bytes")
        state = env.route_state(HOST)
        assert state is not None and "oidc.issuer" in (state.last_error or "")
        assert provider.sent < 16 << 20, f"the edge read on: {provider.sent} bytes sent"
        status, _, _ = await env.request(HOST, "/")
        assert status == 503, "fail closed"
    finally:
        await provider.stop()


async def test_a_logout_ends_the_session_on_other_replicas_at_their_next_recheck(
    env: Env, idp: TestIdp, start_controller: StartController
) -> None:
    # Issue 26 item 14, with two replicas: the logout on one revokes the session's tokens at
    # the provider, so the other refuses the copied cookie at its next authCheckInterval.
    await publish(env, oidc(idp, authCheckInterval="1s"))
    await until_redirects_to_provider(env, idp)
    replica = await start_controller(identity="second-replica", edge=EdgeConfig(addr=LOCAL))
    assert replica.edge is not None and replica.edge.url is not None
    second = replica.edge.url
    async with open_browser(env) as session:
        page = await sign_in(session, app_url("/"), ALICE)
        assert page.status == 200, page.text[:300]
        name, sealed = session_cookie(session, HOST)
        copied = {"Host": HOST, "Cookie": f"{name}={sealed}"}

        async def status_on_second() -> int:
            async with env.http.get(second, headers=copied, allow_redirects=False) as response:
                return response.status

        async def served() -> bool:
            return await status_on_second() == 200

        # The other replica accepts the session (same keys).
        await eventually(served, message="the second replica serves Alice")
        page = await get(session, app_url("/_interlock/auth/logout"))
        assert page.status == 200

    # Both replicas run in this test's process, where the logout's record is shared; a real
    # second replica is another process, which never saw it.
    REVOKED_SESSIONS._until.clear()
    await asyncio.sleep(1.1)  # past authCheckInterval: the next request re-checks
    assert await status_on_second() == 302, "the provider no longer knows the session's tokens"
