"""The provider side of oauth and oidc: endpoints, discovery, the JWKS and ID-token validation.

The edge talks to an identity provider at three moments: when the route's modules are applied
(:func:`discover` reads ``/.well-known/openid-configuration`` and the JWKS, and
:func:`probe_client` checks the client secret), at each login callback (the code exchange), and
every ``authCheckInterval`` (userinfo, or a refresh). Each failure is classified the way edge
actors need it: a provider that cannot be reached, times out or answers 5xx/429 is
:class:`~interlock.edge.modules.errors.ProviderUnavailableError` (transient: retried, and
sessions that can still be validated keep working); a provider that answers but refuses the
configuration (a 4xx on discovery, an issuer that does not match, ``invalid_client`` for the
client secret) is a :class:`~interlock.edge.modules.errors.ModuleConfigError` (permanent).

ID tokens are checked with PyJWT against the JWKS: the key is chosen by ``kid``, an unknown
``kid`` fetches the JWKS again, once per token (the provider rotated its keys; ID tokens come
from the token endpoint, never from the browser, so a client cannot make the edge fetch at
will), only asymmetric algorithms are accepted and each key allows only
its own, and ``iss``, ``aud`` (and ``azp`` when there are several audiences), ``exp``, ``iat``
and ``nonce`` are checked against the injected wall clock. Error texts are fixed phrases: never a
token, a code or a secret.

Every answer of a provider is read with a bound, :data:`MAX_PROVIDER_ANSWER_BYTES`: the module
runs inside the shared controller (or edge) process, and anyone who may write a ModuleSet names
the issuer, so an endless discovery document or JWKS must not take the process's memory. Past
the bound the read stops and :class:`ProviderAnswerTooLarge` names the URL. The answers are
asked for uncompressed and never inflated (a small gzip body could inflate past any bound
before it is counted).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote_plus

import aiohttp
import jwt
from jwt import PyJWK
from jwt.exceptions import PyJWKError, PyJWTError

from interlock.edge.modules.errors import ModuleConfigError, ProviderUnavailableError
from interlock.edge.modules.session import same_secret

PROVIDER_TIMEOUT_SECONDS = 10.0
MAX_PROVIDER_ANSWER_BYTES = 1 << 20
"""The largest answer read from a provider: discovery, JWKS, token and userinfo. Real ones are a
few KiB (a JWKS with a dozen RSA keys is under 20 KiB, a token answer with large tokens under
16 KiB), so 1 MiB leaves room for any provider and bounds what one can make the process hold."""
LEEWAY_SECONDS = 30.0
ID_TOKEN_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class ProviderRefusedError(Exception):
    """The provider answered a request with an OAuth error (``error`` is its code)."""

    def __init__(self, status: int, error: str) -> None:
        self.status = status
        self.error = error
        super().__init__(f"the identity provider answered {status} {error}")


class ProviderAnswerTooLarge(Exception):
    """A provider's answer was longer than :data:`MAX_PROVIDER_ANSWER_BYTES` (not read further)."""

    def __init__(self, url: str, limit: int) -> None:
        self.url = _where(url)
        super().__init__(
            f"{self.url} answered with more than {limit} bytes, the most read from an identity "
            "provider; point the module at the provider's own endpoints"
        )


class InvalidIdToken(Exception):
    """The ID token failed validation; the message is a fixed phrase."""


@dataclass(frozen=True, slots=True)
class ProviderEndpoints:
    """Where a provider's endpoints are and how it wants the client to authenticate."""

    authorize_url: str
    token_url: str
    userinfo_url: str | None
    issuer: str | None = None
    jwks_uri: str | None = None
    token_auth: Literal["basic", "post"] = "basic"
    revocation_url: str | None = None
    """RFC 7009's endpoint (discovery's ``revocation_endpoint``): a logout revokes the
    session's tokens there, so that every replica's next re-check refuses the session."""


async def provider_request(
    url: str,
    *,
    data: Mapping[str, str] | None = None,
    bearer: str | None = None,
    client: tuple[str, str] | None = None,
    limit: int = MAX_PROVIDER_ANSWER_BYTES,
) -> tuple[int, Any]:
    """GET (or POST ``data``) ``url``; (status, parsed JSON or None).

    Raises :class:`ProviderUnavailableError` on a connection error, a timeout, 5xx or 429, and
    :class:`ProviderAnswerTooLarge` past ``limit`` bytes of body.
    """
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    if client is not None:
        # RFC 6749 2.3.1: the id and secret are form-encoded before the Basic encoding.
        pair = f"{quote_plus(client[0])}:{quote_plus(client[1])}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    timeout = aiohttp.ClientTimeout(total=PROVIDER_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session,
            session.request(
                "POST" if data is not None else "GET",
                url,
                data=data,
                headers=headers,
                allow_redirects=False,
            ) as response,
        ):
            body = await _read_bounded(response, url, limit)
            status = response.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise ProviderUnavailableError(
            f"{_where(url)} could not be reached ({type(exc).__name__})"
        ) from None
    if status >= 500 or status == 429:
        raise ProviderUnavailableError(f"{_where(url)} answered {status}")
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    return status, parsed


async def _read_bounded(response: aiohttp.ClientResponse, url: str, limit: int) -> bytes:
    """The body, or :class:`ProviderAnswerTooLarge` as soon as it is longer than ``limit``."""
    if response.content_length is not None and response.content_length > limit:
        raise ProviderAnswerTooLarge(url, limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise ProviderAnswerTooLarge(url, limit)
        parts.append(chunk)
    return b"".join(parts)


def _where(url: str) -> str:
    # The URL without its query: a query could hold a code or a token.
    return url.partition("?")[0]


async def discover(issuer: str, *, field: str) -> ProviderEndpoints:
    """The endpoints of ``issuer`` from its discovery document (OpenID Connect Discovery 1.0)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        status, document = await provider_request(url)
    except ProviderAnswerTooLarge as exc:
        raise ModuleConfigError(field, f"discovery: {exc}") from None
    if status != 200 or not isinstance(document, dict):
        raise ModuleConfigError(field, f"discovery at {url} answered {status}, not a document")
    if document.get("issuer") != issuer:
        raise ModuleConfigError(
            field, f"discovery at {url} names issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    endpoints = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(name)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise ModuleConfigError(field, f"discovery at {url} has no {name}")
        endpoints[name] = value
    userinfo = document.get("userinfo_endpoint")
    revocation = document.get("revocation_endpoint")
    return ProviderEndpoints(
        authorize_url=endpoints["authorization_endpoint"],
        token_url=endpoints["token_endpoint"],
        userinfo_url=userinfo if isinstance(userinfo, str) else None,
        issuer=issuer,
        jwks_uri=endpoints["jwks_uri"],
        revocation_url=(
            revocation
            if isinstance(revocation, str) and revocation.startswith(("https://", "http://"))
            else None
        ),
    )


async def token_request(
    endpoints: ProviderEndpoints, form: dict[str, str], *, client_id: str, client_secret: str
) -> dict[str, Any]:
    """POST ``form`` to the token endpoint with the client's credentials; the JSON answer.

    Raises :class:`ProviderRefusedError` when the provider answers with an OAuth error.
    """
    status, answer = await _client_post(
        endpoints, endpoints.token_url, form, client_id=client_id, client_secret=client_secret
    )
    error = answer.get("error") if isinstance(answer, dict) else None
    if status != 200 or error is not None or not isinstance(answer, dict):
        raise ProviderRefusedError(status, str(error or "no_token"))
    return answer


async def revoke_token(
    endpoints: ProviderEndpoints, token: str, hint: str, *, client_id: str, client_secret: str
) -> bool:
    """Revoke ``token`` (RFC 7009; ``hint``: ``refresh_token`` or ``access_token``); whether
    the provider said it is done (200). Raises what :func:`provider_request` raises."""
    assert endpoints.revocation_url is not None
    status, _ = await _client_post(
        endpoints,
        endpoints.revocation_url,
        {"token": token, "token_type_hint": hint},
        client_id=client_id,
        client_secret=client_secret,
    )
    return status == 200


async def _client_post(
    endpoints: ProviderEndpoints,
    url: str,
    form: dict[str, str],
    *,
    client_id: str,
    client_secret: str,
) -> tuple[int, Any]:
    """POST ``form`` to ``url`` authenticated as the client, the way the provider wants it."""
    client: tuple[str, str] | None = None
    if endpoints.token_auth == "basic":
        client = (client_id, client_secret)
    else:
        form = {**form, "client_id": client_id, "client_secret": client_secret}
    return await provider_request(url, data=form, client=client)


CLIENT_ERRORS = frozenset({"invalid_client", "unauthorized_client", "incorrect_client_credentials"})


async def probe_client(
    endpoints: ProviderEndpoints, *, client_id: str, client_secret: str, field: str
) -> None:
    """Check the client secret without a user: a refresh grant with a random token.

    A provider authenticates the client before it looks at the grant, so a wrong secret is
    ``invalid_client`` (permanent) while right credentials give ``invalid_grant`` (fine).
    """
    try:
        await token_request(
            endpoints,
            {"grant_type": "refresh_token", "refresh_token": secrets.token_urlsafe(24)},
            client_id=client_id,
            client_secret=client_secret,
        )
    except ProviderRefusedError as exc:
        if exc.error in CLIENT_ERRORS or exc.status == 401:
            raise ModuleConfigError(
                field, f"the identity provider refused the client credentials ({exc.error})"
            ) from None


class Jwks:
    """The provider's signing keys, fetched again when a token names an unknown ``kid``."""

    def __init__(self, uri: str) -> None:
        self._uri = uri
        self._keys: dict[str, PyJWK] = {}

    @property
    def kids(self) -> list[str]:
        return sorted(self._keys)

    async def refresh(self) -> None:
        status, document = await provider_request(self._uri)
        if status != 200 or not isinstance(document, dict):
            raise ProviderUnavailableError(f"{_where(self._uri)} answered {status}")
        keys: dict[str, PyJWK] = {}
        for raw in document.get("keys") or []:
            if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
                continue
            try:
                key = PyJWK(raw)
            except PyJWKError:
                continue
            keys[str(raw.get("kid", ""))] = key
        self._keys = keys

    async def key(self, kid: str) -> PyJWK | None:
        found = self._keys.get(kid)
        if found is None:
            await self.refresh()
            found = self._keys.get(kid)
        return found


async def validate_id_token(
    token: str,
    *,
    jwks: Jwks,
    issuer: str,
    client_id: str,
    nonce: str,
    now: float,
) -> dict[str, Any]:
    """The claims of a valid ID token; :class:`InvalidIdToken` otherwise."""
    try:
        header = jwt.get_unverified_header(token)
    except PyJWTError:
        raise InvalidIdToken("the ID token is not a JWT") from None
    algorithm = header.get("alg")
    if algorithm not in ID_TOKEN_ALGORITHMS:
        raise InvalidIdToken("the ID token's algorithm is not allowed")
    key = await jwks.key(str(header.get("kid", "")))
    if key is None:
        raise InvalidIdToken("the ID token is signed with a key the provider does not publish")
    if key.algorithm_name != algorithm:
        raise InvalidIdToken("the ID token's algorithm does not match its key")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=[algorithm],
            audience=client_id,
            issuer=issuer,
            options={
                "require": ["iss", "aud", "exp", "iat", "sub"],
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except PyJWTError:
        raise InvalidIdToken("the ID token's signature, issuer or audience is not valid") from None
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or exp + LEEWAY_SECONDS < now:
        raise InvalidIdToken("the ID token has expired")
    if not isinstance(iat, int | float) or iat - LEEWAY_SECONDS > now:
        raise InvalidIdToken("the ID token was issued in the future")
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise InvalidIdToken("the ID token's authorized party is not this client")
    if not same_secret(claims.get("nonce"), nonce):
        raise InvalidIdToken("the ID token's nonce does not match the login")
    return claims
