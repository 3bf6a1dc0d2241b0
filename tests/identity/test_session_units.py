"""Unit tests of how a session is bound and when it ends (issue 26), on a compiled oauth gate
whose provider is never contacted: a session sealed for one host, route or module is refused by
another; the allow lists are checked on every request; a logout is remembered until the session
would have ended; and the redirect URI comes from the request's authority (HTTP/2's
``:authority``). End to end, with a real provider: ``tests/e2e/test_identity.py``."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from multidict import CIMultiDict

from interlock.edge.modules.identity import (
    Admitted,
    IdentityGate,
    _Provider,
    build_identity,
)
from interlock.edge.modules.session import RevokedSessions, same_secret
from interlock.edge.modules.view import IdentityReply, RequestView
from interlock.model.module_settings import ModuleSettings, module_settings
from interlock.model.moduleset import Modules, SecretValue

NOW = 1_800_000_000.0
SECRETS = {("auth", "client-secret"): SecretValue(b"client-secret-value")}


def gate(revoked: RevokedSessions | None = None, **settings: Any) -> IdentityGate:
    modules = Modules.model_validate(
        {
            "oauth": {
                "generic": {
                    "clientId": "web",
                    "clientSecret": {"name": "auth", "key": "client-secret"},
                    "authorizeUrl": "https://idp.example/auth",
                    "tokenUrl": "https://idp.example/token",
                    "userinfoUrl": "https://idp.example/userinfo",
                    **settings,
                }
            }
        }
    )
    checked = module_settings(modules)
    assert isinstance(checked, ModuleSettings) and checked.login is not None
    built = build_identity(checked.login, SECRETS, wall_clock=lambda: NOW)
    assert built.settings.endpoints is not None
    built._provider = _Provider(endpoints=built.settings.endpoints)
    if revoked is not None:
        built.revoked = revoked
    return built


def session_for(
    issuer: IdentityGate, authority: str, *, email: str = "alice@example.com", path: str = "/"
) -> tuple[str, str]:
    """A session cookie as ``issuer``'s callback would have sealed it on ``authority``."""
    names = issuer._names(path.rstrip("/"), authority)
    session = {
        "b": names.binding,
        "i": "session-1",
        "u": "u-alice",
        "e": email,
        "v": True,
        "c": {},
        "l": NOW - 10,
        "s": NOW - 10,
        "k": NOW - 10,
        "a": None,
        "r": None,
    }
    return names.session, issuer.sealer.seal(session, now=NOW - 10)


def view(authority: str, cookie: tuple[str, str] | None = None, path: str = "/") -> RequestView:
    headers: CIMultiDict[str] = CIMultiDict()
    if cookie is not None:
        headers["Cookie"] = f"{cookie[0]}={cookie[1]}"
    return RequestView(method="GET", path=path, headers=headers, authority=authority)


async def decide(g: IdentityGate, v: RequestView) -> IdentityReply | Admitted:
    return await g.handle(v, scheme="https", route_path="/")


def is_login(reply: IdentityReply | Admitted) -> bool:
    return (
        isinstance(reply, IdentityReply)
        and reply.status == 302
        and dict(reply.headers)["Location"].startswith("https://idp.example/auth?")
    )


async def test_a_session_is_admitted_on_the_host_it_was_sealed_for() -> None:
    g = gate()
    admitted = await decide(g, view("app.test", session_for(g, "app.test")))
    assert isinstance(admitted, Admitted)
    assert ("X-Forwarded-Email", "alice@example.com") in admitted.headers
    # The port is not part of the binding: the same host on another port is the same site.
    assert isinstance(await decide(g, view("app.test:8443", session_for(g, "app.test"))), Admitted)


async def test_a_session_sealed_for_another_host_route_or_module_starts_a_new_login() -> None:
    g = gate()
    assert is_login(await decide(g, view("other.test", session_for(g, "app.test"))))
    # Another route (path) on the same host, same cookie name space.
    other_route = session_for(g, "app.test", path="/admin")
    cookie = (session_for(g, "app.test")[0], other_route[1])
    assert is_login(await decide(g, view("app.test", cookie)))
    # Same keys and client, other identity settings (another claim sent upstream).
    other = gate(identityHeaders={"X-Name": "name"})
    assert is_login(await decide(g, view("app.test", session_for(other, "app.test"))))


async def test_the_allow_lists_are_checked_on_every_request() -> None:
    open_gate = gate()
    cookie = session_for(open_gate, "app.test", email="mallory@evil.test")
    assert isinstance(await decide(open_gate, view("app.test", cookie)), Admitted)
    strict = gate(emailAddresses=["alice@example.com"])
    reply = await decide(strict, view("app.test", cookie))
    assert isinstance(reply, IdentityReply) and reply.status == 403
    assert any(k == "Set-Cookie" and "Max-Age=0" in v for k, v in reply.headers)
    alice = session_for(strict, "app.test")
    assert isinstance(await decide(strict, view("app.test", alice)), Admitted)


async def test_a_logout_refuses_the_same_cookie_afterwards_even_in_a_recompiled_gate() -> None:
    revoked = RevokedSessions()
    g = gate(revoked)
    cookie = session_for(g, "app.test")
    reply = await decide(g, view("app.test", cookie, path="/_interlock/auth/logout"))
    assert isinstance(reply, IdentityReply) and reply.status == 200
    assert is_login(await decide(g, view("app.test", cookie)))
    assert is_login(await decide(gate(revoked), view("app.test", cookie)))


async def test_the_redirect_uri_is_built_from_the_authority() -> None:
    g = gate()
    reply = await decide(g, view("App.Test:8443"))
    assert isinstance(reply, IdentityReply) and reply.status == 302
    query = parse_qs(urlsplit(dict(reply.headers)["Location"]).query)
    assert query["redirect_uri"] == ["https://app.test:8443/_interlock/auth/callback"]
    for bad in ("", "app.test:x@evil.test", "app.test/evil", "evil.test:80:80"):
        reply = await decide(g, view(bad))
        assert isinstance(reply, IdentityReply) and reply.status == 400, bad


def test_revoked_sessions_expire_and_stay_bounded() -> None:
    revoked = RevokedSessions(capacity=10)
    revoked.revoke("a", until=200.0, now=100.0)
    assert revoked.is_revoked("a", now=150.0)
    assert not revoked.is_revoked("a", now=200.0)
    assert len(revoked) == 0, "an expired entry is forgotten"
    for n in range(11):
        revoked.revoke(f"s{n}", until=1000.0 + n, now=100.0)
    assert len(revoked) == 9, "past the capacity, down to 90%"
    assert revoked.is_revoked("s10", now=100.0), "the soonest to end are forgotten first"
    assert not revoked.is_revoked("s0", now=100.0)


async def test_a_state_that_is_not_ascii_is_a_mismatch_not_an_error() -> None:
    g = gate()
    started = await decide(g, view("app.test"))
    assert isinstance(started, IdentityReply) and started.status == 302
    login = next(v for k, v in started.headers if k == "Set-Cookie").split(";")[0]
    state = parse_qs(urlsplit(dict(started.headers)["Location"]).query)["state"][0]
    for given in ("état", state + "é", "\udcff"):
        headers: CIMultiDict[str] = CIMultiDict(Cookie=login)
        callback = RequestView(
            method="GET",
            path="/_interlock/auth/callback",
            headers=headers,
            authority="app.test",
            query={"state": given, "code": "c"},
        )
        reply = await decide(g, callback)
        assert isinstance(reply, IdentityReply) and reply.status == 400, given
        assert "state does not match" in reply.body, given


def test_same_secret_matches_only_equal_text() -> None:
    assert same_secret("état", "état")
    assert not same_secret("état", "etat")
    assert not same_secret(None, "")  # a missing state or nonce matches nothing, not ""
    assert not same_secret("", None)
