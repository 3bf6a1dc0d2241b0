"""A route's compiled modules, applied in one fixed order: :class:`ModuleChain`.

Everything that can be wrong with a configuration is found by :func:`compile_modules`, before
the chain exists: CIDRs parsed, htpasswd and bcrypt hashes loaded, the JWKS loaded, durations and
header names checked, Secrets looked up. So applying a chain to a request can refuse the request
but never fail half-way, and the edge can install a chain atomically: a route switching from
basicAuth to jwt goes from one complete chain to the other, never through a chain without auth.

A compiled chain does not change afterwards, except the counters of rateLimit and
circuitBreaker. The order modules run in is :data:`ORDER`; see ``docs/modules.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from interlock.edge.modules.addresses import UNKNOWN_CLIENT, TrustedProxies
from interlock.edge.modules.basic_auth import BasicAuth, PasswordCheck
from interlock.edge.modules.circuit_breaker import CircuitBreaker
from interlock.edge.modules.compression import should_compress
from interlock.edge.modules.errors import MissingSecretError, ModuleConfigError
from interlock.edge.modules.headers import Headers
from interlock.edge.modules.identity import IdentityGate, build_identity
from interlock.edge.modules.ip_restriction import IpRestriction
from interlock.edge.modules.jwt_auth import JwtAuth
from interlock.edge.modules.mutual_tls import MutualTls, strip_client_cert_headers
from interlock.edge.modules.rate_limit import RateLimit
from interlock.edge.modules.view import Rejection, RequestView
from interlock.edge.modules.webhook import WebhookVerification
from interlock.model.moduleset import Modules, SecretValue

if TYPE_CHECKING:
    from interlock.edge.passwords import PasswordChecker

C = TypeVar("C")
M = TypeVar("M")

ORDER = (
    "ipRestriction",
    "mutualTLS",
    "rateLimit",
    "basicAuth",
    "jwt",
    "webhookVerification",
    "circuitBreaker",
    "oauth",
    "oidc",
    "headers",
    "compression",
)
"""The order modules run in: cheap refusals first, auth before anything reaches the upstream,
header changes around the proxy, compression last (it needs the final response headers)."""


class ModuleChain:
    """The compiled modules of one route. Build it with :func:`compile_modules`."""

    __slots__ = (
        "_basic_auth",
        "_circuit_breaker",
        "_clock",
        "_compress",
        "_headers",
        "_identity",
        "_ip_restriction",
        "_jwt",
        "_mutual_tls",
        "_rate_limit",
        "_trusted",
        "_webhook",
    )

    def __init__(
        self,
        *,
        trusted: TrustedProxies,
        clock: Callable[[], float],
        ip_restriction: IpRestriction | None = None,
        mutual_tls: MutualTls | None = None,
        rate_limit: RateLimit | None = None,
        basic_auth: BasicAuth | None = None,
        jwt: JwtAuth | None = None,
        webhook: WebhookVerification | None = None,
        circuit_breaker: CircuitBreaker | None = None,
        headers: Headers | None = None,
        compress: bool = False,
        identity: IdentityGate | None = None,
    ) -> None:
        self._trusted = trusted
        self._clock = clock
        self._ip_restriction = ip_restriction
        self._mutual_tls = mutual_tls
        self._rate_limit = rate_limit
        self._basic_auth = basic_auth
        self._jwt = jwt
        self._webhook = webhook
        self._circuit_breaker = circuit_breaker
        self._headers = headers
        self._compress = compress
        self._identity = identity

    @property
    def identity(self) -> IdentityGate | None:
        """The oauth or oidc module: the server asks it (asynchronously) after
        :meth:`check_request` admitted the request; see ``identity.py``."""
        return self._identity

    async def prepare(self) -> None:
        """Contact what the chain needs before it serves (the oauth/oidc provider).

        Raises ``ModuleConfigError`` or ``ProviderUnavailableError`` (transient).
        """
        if self._identity is not None:
            await self._identity.prepare()

    @property
    def needs_body(self) -> bool:
        """Whether :meth:`check_request` needs ``RequestView.body`` (webhookVerification)."""
        return self._webhook is not None

    @property
    def needs_peer_certificate(self) -> bool:
        """Whether :meth:`check_request` needs ``RequestView.peer_certificate`` (mutualTLS)."""
        return self._mutual_tls is not None

    @property
    def client_ca_bundle(self) -> str | None:
        """mutualTLS's CA certificates (PEM), which the host's TLS context must trust."""
        return None if self._mutual_tls is None else self._mutual_tls.ca_bundle

    @property
    def compress(self) -> bool:
        """Whether the compression module is on (see :meth:`should_compress`)."""
        return self._compress

    @property
    def names(self) -> tuple[str, ...]:
        """The configured modules, in the order they run."""
        present = {
            "ipRestriction": self._ip_restriction,
            "mutualTLS": self._mutual_tls,
            "rateLimit": self._rate_limit,
            "basicAuth": self._basic_auth,
            "jwt": self._jwt,
            "webhookVerification": self._webhook,
            "circuitBreaker": self._circuit_breaker,
            "oauth": self._identity if self._identity and self._identity.kind == "oauth" else None,
            "oidc": self._identity if self._identity and self._identity.kind == "oidc" else None,
            "headers": self._headers,
            "compression": True if self._compress else None,
        }
        return tuple(name for name in ORDER if present[name] is not None)

    def __repr__(self) -> str:
        return f"ModuleChain({', '.join(self.names) or 'no modules'})"

    def client_ip(self, view: RequestView) -> str:
        """The client's address: the peer's, or from X-Forwarded-For if the peer is trusted.

        ``"unknown"`` when it cannot be parsed; ipRestriction refuses such a client.
        """
        address = self._trusted.client_address(peer_ip=view.peer_ip, headers=view.headers)
        return UNKNOWN_CLIENT if address is None else str(address)

    def check_request(
        self, view: RequestView, *, now: float | None = None, breaker: bool = True
    ) -> Rejection | None:
        """Run the request-side modules in :data:`ORDER`; the first refusal is returned.

        ``None`` means the request may go to the upstream; the caller must then report its
        outcome with :meth:`record_upstream` (the circuit breaker counts on it). bcrypt runs
        inline here; the edge server uses :meth:`admit`, which runs it off the event loop.
        With ``breaker=False`` the circuit breaker is left out, for the caller to run it with
        :meth:`check_breaker` after the (asynchronous) oauth/oidc module admitted the request.
        """
        when = self._clock() if now is None else now
        rejection = self._check_before_auth(view, now=when)
        if rejection is None and self._basic_auth is not None:
            rejection = self._basic_auth.check(view.headers)
        if rejection is not None:
            return rejection
        return self._check_after_auth(view, now=when, breaker=breaker)

    async def admit(
        self,
        view: RequestView,
        *,
        passwords: PasswordChecker,
        now: float | None = None,
        breaker: bool = True,
    ) -> Rejection | None:
        """:meth:`check_request`, with basicAuth's bcrypt checks run by ``passwords`` (a
        bounded thread pool) so that a password guesser cannot stall every other host."""
        when = self._clock() if now is None else now
        rejection = self._check_before_auth(view, now=when)
        if rejection is None and self._basic_auth is not None:
            found = self._basic_auth.lookup(view.headers)
            if isinstance(found, PasswordCheck):
                rejection = await passwords.check(self._basic_auth, found)
            else:
                rejection = found
        if rejection is not None:
            return rejection
        return self._check_after_auth(view, now=when, breaker=breaker)

    def _check_before_auth(self, view: RequestView, *, now: float) -> Rejection | None:
        if self._ip_restriction is None and self._rate_limit is None:
            address = None  # only these two read it: no address parsing on other routes
        else:
            address = self._trusted.client_address(peer_ip=view.peer_ip, headers=view.headers)
        if self._ip_restriction is not None:
            rejection = self._ip_restriction.check(address)
            if rejection is not None:
                return rejection
        if self._mutual_tls is not None:
            rejection = self._mutual_tls.check(view.peer_certificate)
            if rejection is not None:
                return rejection
        if self._rate_limit is not None:
            client = UNKNOWN_CLIENT if address is None else str(address)
            return self._rate_limit.check(client, now=now)
        return None

    def _check_after_auth(
        self, view: RequestView, *, now: float, breaker: bool = True
    ) -> Rejection | None:
        if self._jwt is not None:
            rejection = self._jwt.check(view.headers)
            if rejection is not None:
                return rejection
        if self._webhook is not None:
            rejection = self._webhook.check(view.headers, view.body)
            if rejection is not None:
                return rejection
        if breaker and self._circuit_breaker is not None:
            return self._circuit_breaker.check(now=now)
        return None

    def check_breaker(self, *, now: float | None = None) -> Rejection | None:
        """The circuit breaker alone (see :meth:`check_request`)."""
        if self._circuit_breaker is None:
            return None
        return self._circuit_breaker.check(now=self._clock() if now is None else now)

    def upstream_request_headers(
        self, headers: MutableMapping[str, str], *, peer_certificate: bytes | None = None
    ) -> None:
        """Apply ``headers.request`` (remove, then add) to the headers sent upstream.

        A client's copies of mutualTLS's identity headers never pass, on any route (a backend
        behind a route with mutualTLS and one without must not believe a forged subject from
        the second). With mutualTLS they are set last, so that neither a client nor ``headers``
        can set them; ``peer_certificate`` is the one the request was admitted with.
        """
        if self._mutual_tls is None:
            strip_client_cert_headers(headers)
        if self._headers is not None:
            self._headers.request.apply(headers)
        if self._mutual_tls is not None:
            self._mutual_tls.upstream_headers(headers, peer_certificate)

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        """Report an upstream outcome: a status, or None for a connection error or timeout."""
        if self._circuit_breaker is not None:
            self._circuit_breaker.record(status, now=self._clock() if now is None else now)

    def response_headers(self, headers: MutableMapping[str, str]) -> None:
        """Apply ``headers.response`` (remove, then add) to the response sent to the client."""
        if self._headers is not None:
            self._headers.response.apply(headers)

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool:
        """Whether to gzip this response: compression is on and the policy allows it."""
        return self._compress and should_compress(request_headers, response_headers)

    def summary(self) -> dict[str, object]:
        """Module names in order and their non-secret configuration, for ``/debug/edges``."""
        modules: dict[str, object] = {}
        for name, module in (
            ("ipRestriction", self._ip_restriction),
            ("mutualTLS", self._mutual_tls),
            ("rateLimit", self._rate_limit),
            ("basicAuth", self._basic_auth),
            ("jwt", self._jwt),
            ("webhookVerification", self._webhook),
            ("headers", self._headers),
        ):
            if module is not None:
                modules[name] = module.summary()
        if self._circuit_breaker is not None:
            modules["circuitBreaker"] = self._circuit_breaker.summary(now=self._clock())
        if self._compress:
            modules["compression"] = {"enabled": True}
        if self._identity is not None:
            modules[self._identity.kind] = self._identity.summary()
        return {
            "order": list(self.names),
            "trustedProxies": self._trusted.cidrs(),
            "modules": modules,
        }


def compile_modules(
    modules: Modules,
    secrets: Mapping[tuple[str, str], SecretValue],
    *,
    trusted_proxies: Sequence[str] = (),
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> ModuleChain:
    """Validate and compile ``modules`` into a chain, or raise before any request sees it.

    ``secrets`` maps ``(secret name, key)`` in the ModuleSet's namespace to values. ``clock``
    (monotonic seconds) drives rateLimit and circuitBreaker; ``wall_clock`` (Unix seconds) the
    JWT time claims and webhook timestamps.

    Raises :class:`ModuleConfigError` (permanent) when any module is invalid, else
    :class:`MissingSecretError` (transient) when a referenced Secret key is absent: a permanent
    error is reported first because waiting for the Secret would not fix it.
    """
    if modules.basic_auth is not None and modules.jwt is not None:
        raise ModuleConfigError(
            "basicAuth, jwt", "both read the Authorization header; configure only one of them"
        )
    missing: list[MissingSecretError] = []

    def unless_missing(build: Callable[[], M]) -> M | None:
        """Build a Secret-backed module; a missing Secret is noted and raised only at the end,
        so that a permanent error in a later module still wins."""
        try:
            return build()
        except MissingSecretError as exc:
            missing.append(exc)
            return None

    trusted = TrustedProxies(trusted_proxies)
    ip_restriction = _build(IpRestriction, modules.ip_restriction)
    rate_limit = _build(RateLimit, modules.rate_limit)
    circuit_breaker = _build(CircuitBreaker, modules.circuit_breaker)
    headers = _build(Headers, modules.headers)
    basic_auth = jwt = webhook = mutual_tls = None
    if (mutual_tls_config := modules.mutual_tls) is not None:
        mutual_tls = unless_missing(
            lambda: MutualTls(mutual_tls_config, secrets, wall_clock=wall_clock)
        )
    if (basic_auth_config := modules.basic_auth) is not None:
        basic_auth = unless_missing(lambda: BasicAuth(basic_auth_config, secrets))
    if (jwt_config := modules.jwt) is not None:
        jwt = unless_missing(lambda: JwtAuth(jwt_config, secrets, wall_clock=wall_clock))
    if (webhook_config := modules.webhook_verification) is not None:
        webhook = unless_missing(
            lambda: WebhookVerification(webhook_config, secrets, wall_clock=wall_clock)
        )
    identity = unless_missing(
        lambda: build_identity(modules, secrets, clock=clock, wall_clock=wall_clock)
    )
    if missing:
        raise missing[0]
    return ModuleChain(
        trusted=trusted,
        clock=clock,
        ip_restriction=ip_restriction,
        mutual_tls=mutual_tls,
        rate_limit=rate_limit,
        basic_auth=basic_auth,
        jwt=jwt,
        webhook=webhook,
        circuit_breaker=circuit_breaker,
        headers=headers,
        compress=modules.compression is not None and modules.compression.enabled,
        identity=identity,
    )


def _build(module: Callable[[C], M], config: C | None) -> M | None:
    return None if config is None else module(config)
