"""A route's compiled modules, applied in one fixed order: :class:`ModuleChain`.

Everything that can be wrong with a configuration is found by :func:`compile_modules`, before
the chain exists: the settings checked and typed by the model's
:func:`~interlock.model.module_settings.module_settings` (CIDRs, durations, header names: the
same check, and wording, as a ModuleSet's status), then what only the edge sees: Secrets looked
up, htpasswd and bcrypt hashes loaded, the JWKS loaded. So applying a chain to a request can
refuse the request but never fail half-way, and the edge can install a chain atomically: a
route switching from basicAuth to jwt goes from one complete chain to the other, never through a
chain without auth.

A compiled chain does not change afterwards, except the counters of rateLimit and
circuitBreaker. The order modules run in is :data:`ORDER`; see ``docs/modules.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from interlock.dataplane.proxy import HeadEdit
from interlock.edge.modules.addresses import UNKNOWN_CLIENT, IPAddress, TrustedProxies
from interlock.edge.modules.basic_auth import BasicAuth, PasswordCheck
from interlock.edge.modules.circuit_breaker import CircuitBreaker
from interlock.edge.modules.client_cert_headers import strip_client_cert_headers
from interlock.edge.modules.compression import should_compress
from interlock.edge.modules.errors import MissingSecretError, ModuleConfigError
from interlock.edge.modules.headers import Headers
from interlock.edge.modules.identity_headers import strip_identity_headers
from interlock.edge.modules.ingress_nginx import IngressNginx
from interlock.edge.modules.ip_restriction import IpRestriction
from interlock.edge.modules.rate_limit import RateLimit
from interlock.edge.modules.view import Rejection, RequestView
from interlock.edge.modules.webhook import WebhookVerification
from interlock.model.module_settings import module_settings
from interlock.model.moduleset import ModuleProblem, Modules, SecretValue

if TYPE_CHECKING:
    # Imported by compile_modules when a ModuleSet configures them (see the package docstring).
    from interlock.edge.modules.identity import IdentityGate
    from interlock.edge.modules.jwt_auth import JwtAuth
    from interlock.edge.modules.mutual_tls import MutualTls
    from interlock.edge.passwords import PasswordChecker

C = TypeVar("C")
M = TypeVar("M")

ORDER = (
    "ingressNginx",
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
"""The order modules run in: ingress-nginx's annotations first (nginx answers its redirects and
CORS preflights before its access checks), cheap refusals next, auth before anything reaches the
upstream, header changes around the proxy, compression last (it needs the final response
headers)."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ModuleChain:
    """The compiled modules of one route. Build it with :func:`compile_modules`."""

    trusted: TrustedProxies
    clock: Callable[[], float]
    ip_restriction: IpRestriction | None
    mutual_tls: MutualTls | None
    rate_limit: RateLimit | None
    basic_auth: BasicAuth | None
    jwt: JwtAuth | None
    webhook: WebhookVerification | None
    circuit_breaker: CircuitBreaker | None
    headers: Headers | None
    compress: bool
    """Whether the compression module is on (see :meth:`should_compress`)."""
    identity: IdentityGate | None
    """The oauth or oidc module: the server asks it (asynchronously) after
    :meth:`check_request` admitted the request; see ``identity.py``."""
    nginx: IngressNginx | None = None
    """What the Ingress's ingress-nginx annotations ask (``ingress_nginx.py``)."""
    admits_all: bool = field(init=False)
    """No module looks at a request before it goes upstream (none of the checks above is
    configured): the server skips :meth:`admit` and the :class:`RequestView` it reads."""
    checks_at_once: bool = field(init=False)
    """No module that reads the body (webhookVerification), asks the identity provider
    (oauth/oidc) or holds something until the request ends (ingressNginx): the steps run the
    checks in one synchronous pass (:meth:`check_now`) and await only a bcrypt check whose
    answer basicAuth has not cached yet."""
    keeps_sorted_headers: bool = field(init=False)
    """No ingressNginx, mutualTLS or oauth/oidc module: :meth:`upstream_request_headers` only
    removes the identity headers, then applies the ``headers`` module's changes, so a request's
    headers may start from the list the server sorted while parsing (``edge.steps.HELD_BACK``)."""
    inert: bool = field(init=False)
    """No circuitBreaker, headers or compression module: :meth:`record_upstream`,
    :meth:`response_headers` and :meth:`should_compress` do nothing, and the relay skips them
    (``ResponseHooks.inert``)."""
    response_edit: HeadEdit | None = field(init=False)
    """Without a circuitBreaker or compression module, the ``headers`` module's response
    change as a head edit (``ResponseHooks.response_edit``; none to make without a ``headers``
    module or with an empty ``headers.response``): what an answer relayed from its bytes gets
    instead of :meth:`response_headers`."""
    uncompressed: UncompressedHooks | None = field(init=False)
    """With the compression module, the chain's response hooks for a request whose answer
    is not compressed whatever it is (its client accepts no gzip: ``edge.steps`` hands these
    instead of the chain), with the head edit the chain would have without compression; None
    without the module."""

    @property
    def _nginx_client(self) -> bool:
        return self.nginx is not None and self.nginx.needs_client

    def __post_init__(self) -> None:
        checks = (
            self.ip_restriction,
            self.mutual_tls,
            self.rate_limit,
            self.basic_auth,
            self.jwt,
            self.webhook,
            self.circuit_breaker,
            self.identity,
            self.nginx,
        )
        # Frozen: set once here, as the dataclass's own __init__ sets the other fields.
        object.__setattr__(self, "admits_all", all(check is None for check in checks))
        object.__setattr__(
            self,
            "checks_at_once",
            self.webhook is None and self.identity is None and self.nginx is None,
        )
        object.__setattr__(
            self,
            "keeps_sorted_headers",
            self.nginx is None and self.mutual_tls is None and self.identity is None,
        )
        object.__setattr__(
            self,
            "inert",
            self.circuit_breaker is None and self.headers is None and not self.compress,
        )
        object.__setattr__(
            self,
            "response_edit",
            self.headers.response.head_edit
            if self.headers is not None and self.circuit_breaker is None and not self.compress
            else None,
        )
        object.__setattr__(self, "uncompressed", UncompressedHooks(self) if self.compress else None)

    async def prepare(self) -> None:
        """Contact what the chain needs before it serves (the oauth/oidc provider).

        Raises ``ModuleConfigError`` or ``ProviderUnavailableError`` (transient).
        """
        if self.identity is not None:
            await self.identity.prepare()

    @property
    def needs_body(self) -> bool:
        """Whether :meth:`check_request` needs ``RequestView.body`` (webhookVerification)."""
        return self.webhook is not None

    @property
    def needs_peer_certificate(self) -> bool:
        """Whether :meth:`check_request` needs ``RequestView.peer_certificate`` (mutualTLS)."""
        return self.mutual_tls is not None

    @property
    def client_ca_bundle(self) -> str | None:
        """mutualTLS's CA certificates (PEM), which the host's TLS context must trust."""
        return None if self.mutual_tls is None else self.mutual_tls.ca_bundle

    @property
    def names(self) -> tuple[str, ...]:
        """The configured modules, in the order they run."""
        present = {
            "ingressNginx": self.nginx,
            "ipRestriction": self.ip_restriction,
            "mutualTLS": self.mutual_tls,
            "rateLimit": self.rate_limit,
            "basicAuth": self.basic_auth,
            "jwt": self.jwt,
            "webhookVerification": self.webhook,
            "circuitBreaker": self.circuit_breaker,
            "oauth": self.identity if self.identity and self.identity.kind == "oauth" else None,
            "oidc": self.identity if self.identity and self.identity.kind == "oidc" else None,
            "headers": self.headers,
            "compression": True if self.compress else None,
        }
        return tuple(name for name in ORDER if present[name] is not None)

    def __repr__(self) -> str:
        return f"ModuleChain({', '.join(self.names) or 'no modules'})"

    def client_ip(self, view: RequestView) -> str:
        """The client's address: the peer's, or from X-Forwarded-For if the peer is trusted.

        ``"unknown"`` when it cannot be parsed; ipRestriction refuses such a client.
        """
        address = self.trusted.client_address(peer_ip=view.peer_ip, headers=view.headers)
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
        when = self.clock() if now is None else now
        rejection = self._check_before_auth(view, now=when)
        if rejection is None and self.basic_auth is not None:
            rejection = self.basic_auth.check(view.headers)
        if rejection is not None:
            return rejection
        return self._check_after_auth(view.headers, view.body, now=when, breaker=breaker)

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
        when = self.clock() if now is None else now
        found = self.check_now(view, now=when, breaker=breaker)
        if isinstance(found, PasswordCheck):
            return await self.check_password(
                view, found, passwords=passwords, now=when, breaker=breaker
            )
        return found

    def check_now(
        self, view: RequestView, *, now: float, breaker: bool = True
    ) -> Rejection | PasswordCheck | None:
        """:meth:`admit`'s checks in one synchronous pass, up to a bcrypt check basicAuth has
        no cached answer for: the first refusal, None when every check admits the request, or
        that :class:`PasswordCheck`, for :meth:`check_password` to finish with (the checks
        before it, a rateLimit token among them, are then done: they must not run again)."""
        rejection = self._check_before_auth(view, now=now)
        if rejection is not None:
            return rejection
        return self._check_auth(view.headers, view.body, now=now, breaker=breaker)

    def check_fields(
        self, headers: Mapping[str, str], peer_ip: str, certificate: bytes | None, *, now: float
    ) -> Rejection | PasswordCheck | None:
        """:meth:`check_now` for a chain that :attr:`checks_at_once`, given what its modules
        read of a request: its headers, its peer's address and the client's certificate (no
        :class:`RequestView` made: ~3,000 instructions a request, compiled, a named tuple's
        ``__new__`` being interpreted)."""
        address = self._client_address(peer_ip, headers)
        rejection = self._check_address(address, certificate, now=now)
        if rejection is not None:
            return rejection
        return self._check_auth(headers, None, now=now, breaker=True)

    async def check_password(
        self,
        view: RequestView,
        check: PasswordCheck,
        *,
        passwords: PasswordChecker,
        now: float,
        breaker: bool = True,
    ) -> Rejection | None:
        """The rest of :meth:`check_now` once it returned ``check``: bcrypt off the event loop
        (``passwords``), then the checks after basicAuth, at the same ``now``."""
        assert self.basic_auth is not None  # only basicAuth makes a PasswordCheck
        rejection = await passwords.check(self.basic_auth, check)
        if rejection is not None:
            return rejection
        return self._check_after_auth(view.headers, view.body, now=now, breaker=breaker)

    def _client_address(self, peer_ip: str, headers: Mapping[str, str]) -> IPAddress | None:
        if self.ip_restriction is None and self.rate_limit is None and not self._nginx_client:
            return None  # only these read it: no address parsing on other routes
        return self.trusted.client_address(peer_ip=peer_ip, headers=headers)

    def _check_before_auth(self, view: RequestView, *, now: float) -> Rejection | None:
        address = self._client_address(view.peer_ip, view.headers)
        if self.nginx is not None:
            client = UNKNOWN_CLIENT if address is None else str(address)
            scheme = view.scheme
            if self.trusted.trusts(view.peer_ip):
                # Behind a TLS-terminating proxy the edge sees plain HTTP: the proxy says what
                # the client used (else ssl-redirect would redirect HTTPS clients forever).
                forwarded = view.headers.get("X-Forwarded-Proto", "").split(",")[0].strip()
                scheme = forwarded.lower() or scheme
            rejection = self.nginx.admit(view, client=client, scheme=scheme)
            if rejection is not None:
                return rejection
        return self._check_address(address, view.peer_certificate, now=now)

    def _check_address(
        self, address: IPAddress | None, certificate: bytes | None, *, now: float
    ) -> Rejection | None:
        if self.ip_restriction is not None:
            rejection = self.ip_restriction.check(address)
            if rejection is not None:
                return rejection
        if self.mutual_tls is not None:
            rejection = self.mutual_tls.check(certificate)
            if rejection is not None:
                return rejection
        if self.rate_limit is not None:
            client = UNKNOWN_CLIENT if address is None else str(address)
            return self.rate_limit.check(client, now=now)
        return None

    def _check_auth(
        self, headers: Mapping[str, str], body: bytes | None, *, now: float, breaker: bool
    ) -> Rejection | PasswordCheck | None:
        """basicAuth without bcrypt (its :class:`PasswordCheck` handed back), then the checks
        after it."""
        if self.basic_auth is not None:
            found = self.basic_auth.lookup(headers)
            if found is not None:
                return found
        return self._check_after_auth(headers, body, now=now, breaker=breaker)

    def _check_after_auth(
        self, headers: Mapping[str, str], body: bytes | None, *, now: float, breaker: bool = True
    ) -> Rejection | None:
        if self.jwt is not None:
            rejection = self.jwt.check(headers)
            if rejection is not None:
                return rejection
        if self.webhook is not None:
            rejection = self.webhook.check(headers, body)
            if rejection is not None:
                return rejection
        if breaker and self.circuit_breaker is not None:
            return self.circuit_breaker.check(now=now)
        return None

    def check_breaker(self, *, now: float | None = None) -> Rejection | None:
        """The circuit breaker alone (see :meth:`check_request`)."""
        if self.circuit_breaker is None:
            return None
        return self.circuit_breaker.check(now=self.clock() if now is None else now)

    def upstream_request_headers(
        self, headers: MutableMapping[str, str], *, peer_certificate: bytes | None = None
    ) -> None:
        """Apply ``headers.request`` (remove, then add) to the headers sent upstream.

        A client's copies of mutualTLS's identity headers never pass, on any route (a backend
        behind a route with mutualTLS and one without must not believe a forged subject from
        the second); nor do its copies of oauth/oidc's ``X-Forwarded-User``/``-Email`` (with
        oauth or oidc, the admitted request's ``Admitted.apply`` removes and sets them). With
        mutualTLS its headers are set last, so that neither a client nor ``headers`` can set
        them; ``peer_certificate`` is the one the request was admitted with.
        """
        if self.mutual_tls is None:
            strip_client_cert_headers(headers)
        if self.identity is None:
            strip_identity_headers(headers)
        if self.headers is not None:
            self.headers.request.apply(headers)
        if self.nginx is not None:
            self.nginx.upstream_headers(headers)
        if self.mutual_tls is not None:
            self.mutual_tls.upstream_headers(headers, peer_certificate)

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        """Report an upstream outcome: a status, or None for a connection error or timeout."""
        if self.circuit_breaker is not None:
            self.circuit_breaker.record(status, now=self.clock() if now is None else now)

    def response_headers(self, headers: MutableMapping[str, str]) -> None:
        """Apply ``headers.response`` (remove, then add) to the response sent to the client."""
        if self.headers is not None:
            self.headers.response.apply(headers)

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool:
        """Whether to gzip this response: compression is on and the policy allows it."""
        return self.compress and should_compress(request_headers, response_headers)

    def summary(self) -> dict[str, object]:
        """Module names in order and their non-secret configuration, for ``/debug/edges``."""
        modules: dict[str, object] = {}
        for name, module in (
            ("ingressNginx", self.nginx),
            ("ipRestriction", self.ip_restriction),
            ("mutualTLS", self.mutual_tls),
            ("rateLimit", self.rate_limit),
            ("basicAuth", self.basic_auth),
            ("jwt", self.jwt),
            ("webhookVerification", self.webhook),
            ("headers", self.headers),
        ):
            if module is not None:
                modules[name] = module.summary()
        if self.circuit_breaker is not None:
            modules["circuitBreaker"] = self.circuit_breaker.summary(now=self.clock())
        if self.compress:
            modules["compression"] = {"enabled": True}
        if self.identity is not None:
            modules[self.identity.kind] = self.identity.summary()
        return {
            "order": list(self.names),
            "trustedProxies": self.trusted.cidrs(),
            "modules": modules,
        }


class UncompressedHooks:
    """A :class:`ModuleChain`'s response hooks (``ResponseHooks``) for an answer that is not
    compressed whatever it is: :func:`~interlock.edge.modules.compression.should_compress`
    refuses first of all a request whose ``Accept-Encoding`` allows no gzip, before it reads
    the answer. Its other changes are the chain's, so without a circuitBreaker the answer may
    go from its bytes with the ``headers`` module's change made on them (:attr:`response_edit`)
    as on a route without compression. Whether an answer of another type or size would be
    compressed is not known before its head is parsed, which the relay from its bytes does not
    do: such answers go the usual way."""

    __slots__ = ("_chain", "inert", "response_edit")

    def __init__(self, chain: ModuleChain) -> None:
        self._chain = chain
        self.inert = chain.circuit_breaker is None and chain.headers is None
        """No circuit breaker to tell, no header to change: the relay may skip the calls."""
        self.response_edit = (
            chain.headers.response.head_edit
            if chain.headers is not None and chain.circuit_breaker is None
            else None
        )
        """As :attr:`ModuleChain.response_edit` without the compression module."""

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool:
        return False

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        self._chain.record_upstream(status, now=now)

    def response_headers(self, headers: MutableMapping[str, str]) -> None:
        self._chain.response_headers(headers)


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

    Raises :class:`ModuleConfigError` (permanent) when any module is invalid (the first of
    :func:`~interlock.model.module_settings.module_settings`'s problems, else what a Secret's
    content or a builder refuses), else :class:`MissingSecretError` (transient) when a
    referenced Secret key is absent: a permanent error is reported first because waiting for the
    Secret would not fix it.
    """
    settings = module_settings(modules)
    if isinstance(settings, list):
        raise _config_error(settings)
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
    nginx = _build(IngressNginx, settings.ingress_nginx)
    ip_restriction = _build(IpRestriction, settings.ip_restriction)
    rate_limit = _build(RateLimit, settings.rate_limit)
    circuit_breaker = _build(CircuitBreaker, settings.circuit_breaker)
    headers = _build(Headers, settings.headers)
    basic_auth = jwt = webhook = mutual_tls = identity = None
    if (mutual_tls_config := modules.mutual_tls) is not None:
        from interlock.edge.modules.mutual_tls import MutualTls  # loads cryptography

        mutual_tls = unless_missing(
            lambda: MutualTls(mutual_tls_config, secrets, wall_clock=wall_clock)
        )
    if (basic_auth_config := modules.basic_auth) is not None:
        basic_auth = unless_missing(lambda: BasicAuth(basic_auth_config, secrets))
    if (jwt_config := modules.jwt) is not None:
        from interlock.edge.modules.jwt_auth import JwtAuth  # loads PyJWT and cryptography

        jwt = unless_missing(lambda: JwtAuth(jwt_config, secrets, wall_clock=wall_clock))
    if (webhook_config := modules.webhook_verification) is not None:
        webhook = unless_missing(
            lambda: WebhookVerification(
                webhook_config,
                secrets,
                wall_clock=wall_clock,
                replay_window=settings.replay_window,
            )
        )
    if (login := settings.login) is not None:
        from interlock.edge.modules.identity import build_identity  # loads PyJWT, cryptography

        identity = unless_missing(
            lambda: build_identity(login, secrets, clock=clock, wall_clock=wall_clock)
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
        nginx=nginx,
    )


def _build(module: Callable[[C], M], config: C | None) -> M | None:
    return None if config is None else module(config)


def _config_error(problems: Sequence[ModuleProblem]) -> ModuleConfigError:
    """The first problem, named as the edge names fields (``rateLimit.period``, without the
    ModuleSet's ``spec.modules.``: the modules may come from an Ingress's annotations or a remote
    edge's admin API), in the model's wording; how many more there are."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return ModuleConfigError(first.field.removeprefix("spec.modules."), first.reason + more)
