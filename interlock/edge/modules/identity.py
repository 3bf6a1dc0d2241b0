"""oauth and oidc on the request path: sign-in with the authorization-code flow, then a session.

One :class:`IdentityGate` serves a route that has either module; they differ only in where the
user's identity comes from (oidc: the ID token, validated against the JWKS; oauth: the userinfo
endpoint of a preset or generic provider) and in how the endpoints are found (oidc: discovery).

The flow, for a route at path prefix ``P`` (``P`` is empty for ``/``):

1. A request without a valid session: GET and HEAD are redirected to the provider's
   authorization endpoint with ``state``, a PKCE ``S256`` challenge and (oidc) a ``nonce``;
   those three and the URL to return to are sealed in a short-lived login cookie. Other methods
   get 401 (a form post cannot be replayed after a login).
2. The provider sends the browser to ``P/_interlock/auth/callback`` — the reserved prefix
   ``P/_interlock/auth/`` is answered by the edge and never proxied. The edge checks ``state``
   against the login cookie, exchanges the code (with the PKCE verifier and the client secret),
   validates the identity, checks ``emailAddresses``/``emailDomains``, seals the session cookie
   and redirects back. ``P/_interlock/auth/logout`` clears the session.
3. With a session: one admitted elsewhere (another host, another route, or this route before
   its module's identity settings changed: see *Binding* below), logged out, past
   ``maximumDuration`` since the login, or past ``inactivityTimeout`` since the last request, is
   ignored and a new login starts. A user the current ``emailAddresses``/``emailDomains`` no
   longer allow gets 403 and the cookie is cleared: the lists are checked on every request, so
   tightening them takes effect at once. Every ``authCheckInterval`` the provider is asked
   again (userinfo with the access token, else a refresh); a provider that says no ends the
   session, a provider that cannot be reached does not (transient: checked again later).
4. The request goes upstream with ``X-Forwarded-User``, ``X-Forwarded-Email`` and the configured
   ``identityHeaders``; client-sent copies of all of them are removed first, and the edge's own
   cookies are removed from the ``Cookie`` header (the backend never sees the session).

**Binding.** A session (and a started login) holds a binding: a digest of the host it was
admitted on (the request's authority without its port), the route's path, and the module's
identity settings (kind, issuer or endpoints, client id, scopes, the claims read). Two hosts
with the same provider, client and even the same session keys do not accept each other's
sessions, since the sealed binding differs; the cookie cannot be edited (it is sealed).

**Logout.** ``P/_interlock/auth/logout`` clears the cookie and records the session's random id
in the process's :data:`~interlock.edge.modules.session.REVOKED_SESSIONS` until the session
would have ended anyway, so a copy of the cookie kept elsewhere is refused too (per process:
``docs/modules.md`` says what that means with several replicas).

The redirect URI is built from the request's authority (``RequestView.authority``: ``Host``
over HTTP/1.1, ``:authority`` over HTTP/2), which must be a plain host name or address with an
optional numeric port.

Error pages are fixed texts: never a token, a code, a secret or a provider's message. The
cookies are HttpOnly, SameSite=Lax (the callback is a top-level GET from the provider), Secure
on HTTPS, and named per route configuration.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import secrets as random
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any, Literal
from urllib.parse import urlencode

from loguru import logger
from multidict import CIMultiDict

from interlock.dataplane.proxy import ResponseHooks
from interlock.edge.modules.errors import (
    ModuleConfigError,
    ProviderUnavailableError,
    describe_ref,
    lookup_secret,
)
from interlock.edge.modules.identity_headers import FORWARDED_EMAIL, FORWARDED_USER
from interlock.edge.modules.oauth import OPENID_SCOPES, preset_for
from interlock.edge.modules.oidc import (
    CLIENT_ERRORS,
    InvalidIdToken,
    Jwks,
    ProviderAnswerTooLarge,
    ProviderEndpoints,
    ProviderRefusedError,
    discover,
    probe_client,
    provider_request,
    revoke_token,
    token_request,
    validate_id_token,
)
from interlock.edge.modules.session import (
    REVOKED_SESSIONS,
    RevokedSessions,
    SessionKeyError,
    SessionSealer,
    same_secret,
    session_keys,
)
from interlock.edge.modules.view import IdentityReply, RequestView
from interlock.model.module_settings import LoginSettings
from interlock.model.moduleset import OidcModule, SecretValue

RESERVED_PREFIX = "/_interlock/auth"
CALLBACK = RESERVED_PREFIX + "/callback"
LOGOUT = RESERVED_PREFIX + "/logout"
LOGIN_SECONDS = 600.0
"""How long a started login (its state, verifier and nonce) stays valid."""
DEFAULT_MAXIMUM_DURATION = 24 * 3600.0
RECHECK_RETRY_SECONDS = 30.0
"""After a failed authCheckInterval re-check (provider down), when to try again."""
SEAL_SLACK_SECONDS = 60.0
"""A sealed session is opened up to this long past ``maximumDuration`` (then checked exactly)."""
MAX_COOKIE_BYTES = 3800
KNOWN_NAMES = 256
_AUTHORITY = re.compile(r"^(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?$")
"""An authority the redirect URI may name: a host name or a bracketed IPv6 address, and an
optional numeric port (no user info, no path)."""
_ERROR_CODE = re.compile(r"^[a-z_]{1,40}$")
_HEADER_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Admitted:
    """The request may go upstream, with these identity headers (and maybe a fresh cookie)."""

    headers: tuple[tuple[str, str], ...]
    strip: frozenset[str]
    cookies: frozenset[str]
    set_cookie: str | None = None

    def apply(self, upstream: MutableMapping[str, str]) -> None:
        """Remove client-sent identity headers and the edge's cookies, then set ours."""
        for name in {n for n in upstream if n.lower() in self.strip}:
            while name in upstream:
                del upstream[name]
        cookie = upstream.get("Cookie")
        if cookie is not None:
            kept = [
                part.strip()
                for part in cookie.split(";")
                if part.strip() and part.strip().partition("=")[0] not in self.cookies
            ]
            del upstream["Cookie"]
            if kept:
                upstream["Cookie"] = "; ".join(kept)
        for name, value in self.headers:
            upstream[name] = value

    def hooks(self, chain: ResponseHooks) -> ResponseHooks:
        """The chain's response hooks, plus the refreshed session cookie if there is one."""
        return chain if self.set_cookie is None else _WithCookie(chain, self.set_cookie)


class _WithCookie:
    __slots__ = ("_chain", "_cookie")

    inert = False
    response_edit = None  # the cookie is added by response_headers

    def __init__(self, chain: ResponseHooks, cookie: str) -> None:
        self._chain = chain
        self._cookie = cookie

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool:
        return self._chain.should_compress(request_headers, response_headers)

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        self._chain.record_upstream(status, now=now)

    def response_headers(self, headers: CIMultiDict[str]) -> None:
        self._chain.response_headers(headers)
        headers.add("Set-Cookie", self._cookie)


@dataclass(frozen=True, slots=True)
class _Names:
    session: str
    login: str
    path: str
    binding: str
    """The digest of the host, the route's path and the module's identity settings, sealed in
    every login and session of this route on this host: one sealed for another is refused."""
    authority: str
    """The request's authority (lower case, port kept): the redirect URI's."""


@dataclass(slots=True)
class _Provider:
    endpoints: ProviderEndpoints
    jwks: Jwks | None = None


@dataclass(frozen=True, slots=True)
class GateSettings:
    kind: Literal["oauth", "oidc"]
    field: str
    """How errors name the module: ``oidc`` or ``oauth.google``."""
    client_id: str
    scopes: tuple[str, ...]
    emails: frozenset[str]
    domains: frozenset[str]
    options_passthrough: bool
    inactivity: float | None
    maximum: float
    check_interval: float | None
    identity_headers: tuple[tuple[str, str], ...]
    user_claim: str = "sub"
    email_claim: str = "email"
    issuer: str | None = None
    endpoints: ProviderEndpoints | None = None
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)
    digest: str = ""
    """A digest of the settings that say who a session's user is (see :func:`identity_digest`);
    part of every session's binding."""


def identity_digest(settings: GateSettings) -> str:
    """A digest of what makes a session's identity: the kind, the provider (issuer or
    endpoints), the client, the scopes and the claims read. Not the allow lists (checked on
    every request) nor the durations (checked on every request against the current ones)."""
    endpoints = settings.endpoints
    parts = [
        settings.kind,
        settings.field,
        settings.issuer or "",
        "" if endpoints is None else endpoints.authorize_url,
        "" if endpoints is None else endpoints.token_url,
        "" if endpoints is None else endpoints.userinfo_url or "",
        settings.client_id,
        " ".join(settings.scopes),
        settings.user_claim,
        settings.email_claim,
        *(f"{name}={claim}" for name, claim in settings.identity_headers),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass(slots=True, eq=False, repr=False)
class IdentityGate:
    """The compiled oauth or oidc module of one route; :meth:`prepare` before serving."""

    settings: GateSettings
    _: dataclasses.KW_ONLY
    client_secret: SecretValue
    sealer: SessionSealer
    clock: Callable[[], float]
    wall_clock: Callable[[], float]
    revoked: RevokedSessions = REVOKED_SESSIONS
    """Logged-out sessions (process-wide by default: it must outlive a recompiled module)."""
    _provider: _Provider | None = dataclasses.field(default=None, init=False)
    _unreachable: bool = dataclasses.field(default=False, init=False)
    """Set when a call to the provider failed as unavailable, cleared when one succeeds."""
    _strip: frozenset[str] = dataclasses.field(init=False)
    _known_names: dict[tuple[str, str], _Names] = dataclasses.field(
        default_factory=dict, init=False
    )
    """:meth:`_names` of the (path, authority) pairs seen lately: two digests per request
    otherwise. Cleared when it holds :data:`KNOWN_NAMES` (an authority's port is the client's)."""

    def __post_init__(self) -> None:
        self._strip = frozenset(
            {FORWARDED_USER.lower(), FORWARDED_EMAIL.lower()}
            | {name.lower() for name, _ in self.settings.identity_headers}
        )

    @property
    def kind(self) -> str:
        return self.settings.kind

    def __repr__(self) -> str:
        return f"IdentityGate({self.settings.field}, client {self.settings.client_id!r})"

    def summary(self) -> dict[str, Any]:
        """Non-secret configuration, for ``/debug/edges``."""
        out = dict(self.settings.summary)
        out["ready"] = self._provider is not None
        if self._provider is not None and self._provider.jwks is not None:
            out["jwksKeyIds"] = self._provider.jwks.kids
        return out

    # --- applying ----------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Find the endpoints (oidc: discovery and JWKS) and check the client secret.

        Raises :class:`ModuleConfigError` (permanent) or :class:`ProviderUnavailableError`.
        """
        settings = self.settings
        try:
            if settings.kind == "oidc":
                assert settings.issuer is not None
                endpoints = await discover(settings.issuer, field=f"{settings.field}.issuer")
                assert endpoints.jwks_uri is not None
                jwks: Jwks | None = Jwks(endpoints.jwks_uri)
                assert jwks is not None
                await jwks.refresh()
            else:
                assert settings.endpoints is not None
                endpoints, jwks = settings.endpoints, None
            await probe_client(
                endpoints,
                client_id=settings.client_id,
                client_secret=self._secret(),
                field=f"{settings.field}.clientSecret",
            )
        except ProviderAnswerTooLarge as exc:
            where = f"{settings.field}.issuer" if settings.kind == "oidc" else settings.field
            raise ModuleConfigError(where, str(exc)) from None
        self._provider = _Provider(endpoints=endpoints, jwks=jwks)

    def _secret(self) -> str:
        return self.client_secret.reveal().decode("utf-8", "replace").strip()

    # --- serving -----------------------------------------------------------------------------

    async def handle(
        self, view: RequestView, *, scheme: str, route_path: str
    ) -> IdentityReply | Admitted:
        """Decide one request (see the module docstring)."""
        provider = self._provider
        if provider is None:
            return _page(503, "Sign-in for this site is not ready yet.")
        authority = view.authority.lower()
        if not _AUTHORITY.match(authority):
            return _page(400, "This request's host cannot be signed in to.")
        prefix = route_path.rstrip("/")
        names = self._names(prefix, authority)
        if view.path == prefix + CALLBACK:
            return await self._callback(view, provider, names, scheme=scheme)
        if view.path == prefix + LOGOUT:
            await self._revoke(view, provider, names)
            return IdentityReply(
                200,
                (
                    *_text_type(),
                    ("Cache-Control", "no-store"),
                    ("Set-Cookie", _clear(names.session, names.path)),
                ),
                "You are signed out.\n",
            )
        if view.path.startswith(prefix + RESERVED_PREFIX + "/"):
            return _page(404, "No such sign-in page.")
        if self.settings.options_passthrough and view.method == "OPTIONS":
            return Admitted((), self._strip, frozenset({names.session, names.login}))
        now = self.wall_clock()
        session = self._open_session(view, names, now=now)
        if session is not None:
            admitted = await self._admit(session, provider, names, now=now, scheme=scheme)
            if admitted is not None:
                return admitted
        if self._unreachable and not await self._reachable(provider):
            return _page(
                503, "The identity provider is unavailable, so signing in is not possible now."
            )
        return self._start_login(view, provider, names, scheme=scheme)

    def _open_session(
        self, view: RequestView, names: _Names, *, now: float
    ) -> dict[str, Any] | None:
        """The request's session cookie, opened (None: absent, forged, damaged or too old)."""
        raw = _cookies(view.headers).get(names.session)
        if raw is None:
            return None
        return self.sealer.open(raw, now=now, max_age=self.settings.maximum + SEAL_SLACK_SECONDS)

    async def _revoke(self, view: RequestView, provider: _Provider, names: _Names) -> None:
        """Logout: the session's id is refused from now until the session would have ended, and
        its tokens are revoked at the provider when it has a revocation endpoint (so that other
        replicas refuse the session at their next ``authCheckInterval`` re-check)."""
        now = self.wall_clock()
        session = self._open_session(view, names, now=now)
        if session is None or not isinstance(session.get("i"), str):
            return
        try:
            login = float(session["l"])
        except (KeyError, TypeError, ValueError):
            return
        until = login + self.settings.maximum + SEAL_SLACK_SECONDS
        self.revoked.revoke(session["i"], until=until, now=now)
        if provider.endpoints.revocation_url is None:
            return
        for key, hint in (("r", "refresh_token"), ("a", "access_token")):
            token = session.get(key)
            if not isinstance(token, str):
                continue
            try:
                await revoke_token(
                    provider.endpoints,
                    token,
                    hint,
                    client_id=self.settings.client_id,
                    client_secret=self._secret(),
                )
            except (ProviderUnavailableError, ProviderAnswerTooLarge) as exc:
                logger.info("{}: a logout's tokens were not revoked: {}", self.settings.field, exc)
                return

    async def _reachable(self, provider: _Provider) -> bool:
        """After a failure: whether the provider answers at all again (any status will do)."""
        try:
            await provider_request(provider.endpoints.jwks_uri or provider.endpoints.token_url)
        except ProviderUnavailableError:
            return False
        except ProviderAnswerTooLarge:
            pass  # it answered
        self._unreachable = False
        return True

    def _names(self, prefix: str, authority: str) -> _Names:
        known = self._known_names.get((prefix, authority))
        if known is None:
            if len(self._known_names) >= KNOWN_NAMES:
                self._known_names.clear()
            known = self._known_names[prefix, authority] = self._digest_names(prefix, authority)
        return known

    def _digest_names(self, prefix: str, authority: str) -> _Names:
        settings = self.settings
        where = settings.issuer or (settings.endpoints.authorize_url if settings.endpoints else "")
        tag = hashlib.sha256(
            f"{settings.kind}\n{where}\n{settings.client_id}\n{prefix}".encode()
        ).hexdigest()[:12]
        host = _host_of(authority)
        binding = hashlib.sha256(f"{settings.digest}\n{host}\n{prefix}".encode()).hexdigest()
        return _Names(
            session=f"__interlock_session_{tag}",
            login=f"__interlock_login_{tag}",
            path=prefix or "/",
            binding=binding[:32],
            authority=authority,
        )

    def _start_login(
        self, view: RequestView, provider: _Provider, names: _Names, *, scheme: str
    ) -> IdentityReply:
        if view.method not in ("GET", "HEAD"):
            return _page(401, "Sign in first: open this site in a browser.")
        now = self.wall_clock()
        state = random.token_urlsafe(24)
        verifier = random.token_urlsafe(48)
        nonce = random.token_urlsafe(24)
        back = view.path + ("?" + urlencode(dict(view.query)) if view.query else "")
        login = self.sealer.seal(
            {"b": names.binding, "s": state, "v": verifier, "n": nonce, "r": back}, now=now
        )
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        params = {
            "response_type": "code",
            "client_id": self.settings.client_id,
            "redirect_uri": self._redirect_uri(names, scheme=scheme),
            "scope": " ".join(self.settings.scopes),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if "openid" in self.settings.scopes:
            params["nonce"] = nonce
        url = provider.endpoints.authorize_url
        url += ("&" if "?" in url else "?") + urlencode(params)
        cookie = _cookie(names.login, login, names.path, scheme=scheme, max_age=LOGIN_SECONDS)
        return IdentityReply(
            302, (("Location", url), ("Set-Cookie", cookie), *_text_type()), "Signing in…\n"
        )

    def _redirect_uri(self, names: _Names, *, scheme: str) -> str:
        prefix = "" if names.path == "/" else names.path
        return f"{scheme}://{names.authority}{prefix}{CALLBACK}"

    async def _callback(
        self, view: RequestView, provider: _Provider, names: _Names, *, scheme: str
    ) -> IdentityReply:
        settings = self.settings
        query = view.query
        error = query.get("error")
        if error is not None:
            shown = error if _ERROR_CODE.match(error) else "error"
            return _page(403, f"The identity provider did not sign you in ({shown}).")
        now = self.wall_clock()
        raw = _cookies(view.headers).get(names.login)
        login = None if raw is None else self.sealer.open(raw, now=now, max_age=LOGIN_SECONDS)
        if login is None or not same_secret(login.get("b"), names.binding):
            return _page(400, "This sign-in has expired or was started elsewhere; start again.")
        if not same_secret(query.get("state"), login.get("s")):
            return _page(400, "The sign-in's state does not match; start again.")
        code = query.get("code")
        if not code:
            return _page(400, "The identity provider sent no code; start again.")
        try:
            tokens = await token_request(
                provider.endpoints,
                {
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": self._redirect_uri(names, scheme=scheme),
                    "code_verifier": str(login["v"]),
                },
                client_id=settings.client_id,
                client_secret=self._secret(),
            )
            claims = await self._identity(tokens, provider, nonce=str(login["n"]), now=now)
        except ProviderUnavailableError as exc:
            self._unreachable = True
            logger.warning("{}: sign-in failed: {}", settings.field, exc)
            return _page(502, "The identity provider is unavailable; try again in a moment.")
        except ProviderRefusedError as exc:
            if exc.error in CLIENT_ERRORS:
                logger.warning(
                    "{}: the identity provider refused the client credentials", settings.field
                )
                return _page(500, "Sign-in for this site is misconfigured.")
            return _page(400, "The identity provider refused this sign-in; start again.")
        except InvalidIdToken as exc:
            logger.warning("{}: sign-in refused: {}", settings.field, exc)
            return _page(400, "The identity provider's answer could not be verified.")
        except ProviderAnswerTooLarge as exc:
            logger.warning("{}: sign-in failed: {}", settings.field, exc)
            return _page(502, "The identity provider's answer could not be read.")
        user = _claim(claims, settings.user_claim)
        email = _claim(claims, settings.email_claim)
        verified = claims.get("email_verified") is not False
        if not self._allows(user=user, email=email, verified=verified):
            return _page(403, "This account is not allowed to use this site.")
        session = {
            "b": names.binding,
            "i": random.token_urlsafe(18),
            "u": user,
            "e": email,
            "v": verified,
            "c": {claim: _claim(claims, claim) for _, claim in settings.identity_headers},
            "l": now,
            "s": now,
            "k": now,
            "a": tokens.get("access_token"),
            "r": tokens.get("refresh_token"),
        }
        back = str(login.get("r") or names.path)
        if not back.startswith("/") or back.startswith("//"):
            back = names.path
        return IdentityReply(
            302,
            (
                ("Location", back),
                ("Set-Cookie", self._session_cookie(session, names, scheme=scheme, now=now)),
                ("Set-Cookie", _clear(names.login, names.path)),
                *_text_type(),
            ),
            "Signed in.\n",
        )

    async def _identity(
        self, tokens: Mapping[str, Any], provider: _Provider, *, nonce: str, now: float
    ) -> dict[str, Any]:
        settings = self.settings
        claims: dict[str, Any] = {}
        if settings.kind == "oidc":
            id_token = tokens.get("id_token")
            if not isinstance(id_token, str):
                raise InvalidIdToken("the provider returned no ID token")
            assert provider.jwks is not None and settings.issuer is not None
            claims = await validate_id_token(
                id_token,
                jwks=provider.jwks,
                issuer=settings.issuer,
                client_id=settings.client_id,
                nonce=nonce,
                now=now,
            )
        needs_userinfo = settings.kind == "oauth" or any(
            claim not in claims for claim in (settings.email_claim, settings.user_claim)
        )
        access = tokens.get("access_token")
        if needs_userinfo and provider.endpoints.userinfo_url and isinstance(access, str):
            status, info = await provider_request(provider.endpoints.userinfo_url, bearer=access)
            if status != 200 or not isinstance(info, dict):
                raise ProviderRefusedError(status, "userinfo")
            if claims and info.get("sub") != claims.get("sub"):
                raise InvalidIdToken("userinfo names another subject than the ID token")
            claims = {**info, **claims}
        return claims

    def _allows(self, *, user: str, email: str, verified: bool) -> bool:
        """Whether the current emailAddresses/emailDomains let this user in (at the callback
        and again on every request with a session)."""
        settings = self.settings
        if not settings.emails and not settings.domains:
            return bool(user)
        email = email.lower()
        if not email or not verified:
            return False
        domain = email.rpartition("@")[2]
        return email in settings.emails or domain in settings.domains

    async def _admit(
        self,
        session: dict[str, Any],
        provider: _Provider,
        names: _Names,
        *,
        now: float,
        scheme: str,
    ) -> Admitted | IdentityReply | None:
        """The session's request admitted; a refusal (403: the user is no longer allowed); or
        None: no usable session, a new login starts."""
        settings = self.settings
        try:
            login, seen, checked = float(session["l"]), float(session["s"]), float(session["k"])
        except (KeyError, TypeError, ValueError):
            return None
        session_id = session.get("i")
        if (
            not same_secret(session.get("b"), names.binding)
            or now - login > settings.maximum
            or not isinstance(session_id, str)
        ):
            return None
        if settings.inactivity is not None and now - seen > settings.inactivity:
            return None
        if self.revoked.is_revoked(session_id, now=now):
            return None
        if not self._allows(
            user=str(session.get("u") or ""),
            email=str(session.get("e") or ""),
            verified=session.get("v") is not False,
        ):
            return IdentityReply(
                403,
                (
                    *_text_type(),
                    ("Cache-Control", "no-store"),
                    ("Set-Cookie", _clear(names.session, names.path)),
                ),
                "This account is not allowed to use this site.\n",
            )
        changed = False
        if settings.check_interval is not None and now - checked >= settings.check_interval:
            verdict = await self._recheck(session, provider)
            if verdict is False:
                return None
            if verdict is None:
                # The provider could not be asked: keep the session, ask again a little later.
                session["k"] = now - settings.check_interval + RECHECK_RETRY_SECONDS
            else:
                session["k"] = now
            changed = True
        if settings.inactivity is not None and now - seen >= min(60.0, settings.inactivity / 10):
            session["s"] = now
            changed = True
        headers = [(FORWARDED_USER, _header_value(session.get("u")))]
        if session.get("e"):
            headers.append((FORWARDED_EMAIL, _header_value(session.get("e"))))
        stored = session.get("c")
        extra: dict[str, Any] = stored if isinstance(stored, dict) else {}
        for name, claim in settings.identity_headers:
            value = _header_value(extra.get(claim))
            if value:
                headers.append((name, value))
        return Admitted(
            tuple(headers),
            self._strip,
            frozenset({names.session, names.login}),
            self._session_cookie(session, names, scheme=scheme, now=now) if changed else None,
        )

    async def _recheck(self, session: dict[str, Any], provider: _Provider) -> bool | None:
        """Ask the provider whether the session's user is still signed in.

        True: yes (tokens in ``session`` may be renewed); False: no; None: it could not be asked.
        """
        access, refresh = session.get("a"), session.get("r")
        try:
            if isinstance(access, str) and provider.endpoints.userinfo_url:
                status, info = await provider_request(
                    provider.endpoints.userinfo_url, bearer=access
                )
                if status == 200 and isinstance(info, dict):
                    if self.settings.emails or self.settings.domains:
                        email = info.get(self.settings.email_claim)
                        stored = str(session.get("e") or "").lower()
                        if email is not None and str(email).lower() != stored:
                            return False
                    return True
            if isinstance(refresh, str):
                tokens = await token_request(
                    provider.endpoints,
                    {"grant_type": "refresh_token", "refresh_token": refresh},
                    client_id=self.settings.client_id,
                    client_secret=self._secret(),
                )
                session["a"] = tokens.get("access_token")
                session["r"] = tokens.get("refresh_token", refresh)
                return True
        except ProviderUnavailableError as exc:
            self._unreachable = True
            logger.info("{}: session re-check postponed: {}", self.settings.field, exc)
            return None
        except ProviderAnswerTooLarge as exc:
            logger.warning("{}: session re-check postponed: {}", self.settings.field, exc)
            return None
        except ProviderRefusedError:
            return False
        return False

    def _session_cookie(
        self, session: dict[str, Any], names: _Names, *, scheme: str, now: float
    ) -> str:
        sealed = self.sealer.seal(session, now=now)
        if len(sealed) > MAX_COOKIE_BYTES:
            # Tokens too large for a cookie: keep the session, lose the re-check ability.
            sealed = self.sealer.seal({**session, "a": None, "r": None}, now=now)
        return _cookie(names.session, sealed, names.path, scheme=scheme, max_age=None)


# --- compiling -------------------------------------------------------------------------------


def build_identity(
    login: LoginSettings,
    secrets: Mapping[tuple[str, str], SecretValue],
    *,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> IdentityGate:
    """The gate of the oauth or oidc module, from its checked settings (``module_settings``).

    Raises :class:`ModuleConfigError` (a Secret's content) or
    :class:`~interlock.edge.modules.errors.MissingSecretError`; the provider is contacted only
    by :meth:`IdentityGate.prepare`.
    """
    config, kind, where = login.module, login.kind, login.field
    extra: dict[str, Any]
    if isinstance(config, OidcModule):
        scopes = tuple(config.scopes) or OPENID_SCOPES
        extra = {"issuer": config.issuer}
    else:
        preset = preset_for(login.provider, config)
        scopes = tuple(config.scopes) or preset.scopes
        extra = {
            "provider": login.provider,
            "endpoints": preset.endpoints,
            "user_claim": preset.user_claim,
            "email_claim": preset.email_claim,
        }
    client_secret = lookup_secret(secrets, login.client_secret, field=f"{where}.clientSecret")
    if not client_secret.reveal().strip():
        raise ModuleConfigError(
            f"{where}.clientSecret", f"{describe_ref(login.client_secret)} is empty"
        )
    if config.session_secret is not None:
        value = lookup_secret(secrets, config.session_secret, field=f"{where}.sessionSecret")
        try:
            keys = session_keys(value.reveal())
        except SessionKeyError as exc:
            raise ModuleConfigError(
                f"{where}.sessionSecret", f"{describe_ref(config.session_secret)} {exc}"
            ) from None
        sealer = SessionSealer(keys, label=b"interlock session")
    else:
        sealer = SessionSealer(
            [client_secret.reveal().strip()], label=b"interlock session from client secret"
        )
    inactivity = login.inactivity_timeout
    maximum = login.maximum_duration or DEFAULT_MAXIMUM_DURATION
    check = login.auth_check_interval
    summary: dict[str, Any] = {
        "clientId": config.client_id,
        "scopes": list(scopes),
        "emailAddresses": sorted(config.email_addresses),
        "emailDomains": sorted(config.email_domains),
        "inactivityTimeout": config.inactivity_timeout,
        "maximumDuration": config.maximum_duration,
        "authCheckInterval": config.auth_check_interval,
        "identityHeaders": dict(config.identity_headers),
        "callbackPath": CALLBACK,
        **{k: v for k, v in extra.items() if k in ("issuer", "provider")},
    }
    settings = GateSettings(
        kind=kind,
        field=where,
        client_id=config.client_id,
        scopes=scopes,
        emails=frozenset(e.lower() for e in config.email_addresses),
        domains=frozenset(d.lower() for d in config.email_domains),
        options_passthrough=config.options_passthrough,
        inactivity=inactivity,
        maximum=maximum,
        check_interval=check,
        identity_headers=tuple(config.identity_headers.items()),
        user_claim=str(extra.get("user_claim", "sub")),
        email_claim=str(extra.get("email_claim", "email")),
        issuer=extra.get("issuer"),
        endpoints=extra.get("endpoints"),
        summary=summary,
    )
    settings = dataclasses.replace(settings, digest=identity_digest(settings))
    return IdentityGate(
        settings, client_secret=client_secret, sealer=sealer, clock=clock, wall_clock=wall_clock
    )


# --- small helpers ---------------------------------------------------------------------------


def _claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _header_value(value: Any) -> str:
    return _HEADER_UNSAFE.sub("", "" if value is None else str(value))


def _cookies(headers: Mapping[str, str]) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("Cookie", ""))
    except Exception:  # a malformed Cookie header is no session, not an error
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _cookie(name: str, value: str, path: str, *, scheme: str, max_age: float | None) -> str:
    parts = [f"{name}={value}", f"Path={path}", "HttpOnly", "SameSite=Lax"]
    if max_age is not None:
        parts.append(f"Max-Age={int(max_age)}")
    if scheme == "https":
        parts.append("Secure")
    return "; ".join(parts)


def _clear(name: str, path: str) -> str:
    return f"{name}=; Path={path}; Max-Age=0; HttpOnly; SameSite=Lax"


def _text_type() -> tuple[tuple[str, str]]:
    return (("Content-Type", "text/plain; charset=utf-8"),)


def _page(status: int, text: str) -> IdentityReply:
    return IdentityReply(status, (*_text_type(), ("Cache-Control", "no-store")), text + "\n")


def _host_of(authority: str) -> str:
    """An authority without its port: ``app.test:8443`` → ``app.test``, ``[::1]:80`` → ``[::1]``."""
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.partition(":")[0].rstrip(".")
