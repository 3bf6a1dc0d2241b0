"""Module settings checked once, in the types the edge builds from: :func:`module_settings`.

Types alone (:class:`~interlock.model.moduleset.Modules`) cannot say that a CIDR parses, that a
duration is longer than zero or that a header name is a token. :func:`module_settings` checks
all of it in one pass and returns either every :class:`ModuleProblem` (the one wording: a
ModuleSet's status and Event, an Ingress's or route's report, the edge's refusal) or a
:class:`ModuleSettings`: the modules with what was derived from them, typed (networks parsed and
IPv4-mapped ones unmapped, durations in seconds, header names to remove lower-cased, the oauth or
oidc module's client secret known to be set). Everyone who applies modules goes through it:
:class:`~interlock.model.moduleset.ModuleSetSpec` when a ModuleSet is parsed (its problems), and
the edge's ``compile_modules`` for the modules of a route, whichever way they came (merged
ModuleSets, an Ingress's ingress-nginx annotations, the JSON of a remote edge's admin API). The
edge's builders take the typed values and check nothing of the configuration again; what they
still refuse is what only the edge sees (the content of Secrets, an identity provider's answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import Literal

from interlock.model.durations import InvalidDuration, duration_seconds
from interlock.model.ingress_nginx import IngressNginxModule, regex_route
from interlock.model.moduleset import (
    OAUTH_PROVIDERS,
    CircuitBreakerModule,
    GenericOAuthProvider,
    HeaderChanges,
    ModuleProblem,
    Modules,
    OAuthProviderSettings,
    RateLimitModule,
    SecretKeyRef,
    module_secret_ref_fields,
)

IPNetwork = IPv4Network | IPv6Network


@dataclass(frozen=True, slots=True)
class IpRestrictionSettings:
    """ipRestriction's networks, parsed (deny wins; an empty allow list allows all)."""

    allow: tuple[IPNetwork, ...]
    deny: tuple[IPNetwork, ...]


@dataclass(frozen=True, slots=True)
class RateLimitSettings:
    module: RateLimitModule
    period: float
    """``module.period`` in seconds (longer than zero)."""


@dataclass(frozen=True, slots=True)
class CircuitBreakerSettings:
    module: CircuitBreakerModule
    rolling_window: float
    """``module.rolling_window`` in seconds (longer than zero), as is ``tripped_duration``."""
    tripped_duration: float


@dataclass(frozen=True, slots=True)
class HeaderRewriteSettings:
    """One direction of the headers module: names checked, those to remove lower-cased."""

    remove: tuple[str, ...]
    add: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class HeadersSettings:
    request: HeaderRewriteSettings
    response: HeaderRewriteSettings


@dataclass(frozen=True, slots=True)
class LoginSettings:
    """The oauth module's one provider, or the oidc module (``provider`` is then ``""``)."""

    kind: Literal["oauth", "oidc"]
    provider: str
    module: OAuthProviderSettings
    client_secret: SecretKeyRef
    inactivity_timeout: float | None
    """Seconds (longer than zero) or unset, as are the two below."""
    maximum_duration: float | None
    auth_check_interval: float | None

    @property
    def field(self) -> str:
        """Where the settings are written: ``oidc`` or ``oauth.<provider>``."""
        return "oidc" if self.kind == "oidc" else f"oauth.{self.provider}"


@dataclass(frozen=True, slots=True)
class IngressNginxSettings:
    """What an Ingress's ingress-nginx annotations ask of its route (set by the annotation
    overlay, ``ingress_nginx.translate``, or a remote edge's admin API JSON)."""

    module: IngressNginxModule
    pattern: re.Pattern[str] | None
    """``module.path_pattern`` compiled, case-insensitive as nginx's ``location ~*``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleSettings:
    """Modules with no problem, and what the edge builds from (None: the module is not set)."""

    modules: Modules
    ip_restriction: IpRestrictionSettings | None = None
    rate_limit: RateLimitSettings | None = None
    circuit_breaker: CircuitBreakerSettings | None = None
    headers: HeadersSettings | None = None
    replay_window: float | None = None
    """webhookVerification's ``replayWindow`` in seconds (github only), or unset."""
    login: LoginSettings | None = None
    """The oauth or oidc module (never both)."""
    ingress_nginx: IngressNginxSettings | None = None


def module_settings(modules: Modules) -> ModuleSettings | list[ModuleProblem]:
    """``modules`` checked, typed; or every problem in them, in the order of the fields."""
    found = _Found()
    ip_restriction = None
    if modules.ip_restriction is not None:
        ip_restriction = IpRestrictionSettings(
            allow=found.networks("ipRestriction", ".allow", modules.ip_restriction.allow),
            deny=found.networks("ipRestriction", ".deny", modules.ip_restriction.deny),
        )
    for module, field, ref in module_secret_ref_fields(modules):
        for reason_field, reason in _secret_ref_problems(ref):
            found.add(module, f".{field}{reason_field}", reason)
    if modules.basic_auth is not None and _BAD_REALM.search(modules.basic_auth.realm):
        found.add(
            "basicAuth", ".realm", "must not contain quotes, backslashes or control characters"
        )
    if modules.jwt is not None:
        if not modules.jwt.issuer.strip():
            found.add("jwt", ".issuer", "must not be empty")
        for index, audience in enumerate(modules.jwt.audiences):
            if not audience.strip():
                found.add("jwt", f".audiences[{index}]", "must not be empty")
    headers = None
    if modules.headers is not None:
        headers = HeadersSettings(
            request=found.header_changes(".request", modules.headers.request),
            response=found.header_changes(".response", modules.headers.response),
        )
    circuit_breaker = None
    if (breaker := modules.circuit_breaker) is not None:
        circuit_breaker = CircuitBreakerSettings(
            module=breaker,
            rolling_window=found.seconds(
                "circuitBreaker", ".rollingWindow", breaker.rolling_window
            ),
            tripped_duration=found.seconds(
                "circuitBreaker", ".trippedDuration", breaker.tripped_duration
            ),
        )
    replay_window = None
    webhook = modules.webhook_verification
    if webhook is not None and webhook.replay_window is not None:
        if webhook.provider != "github":
            found.add(
                "webhookVerification",
                ".replayWindow",
                "applies to provider github only (stripe and slack sign a timestamp)",
            )
        replay_window = found.seconds("webhookVerification", ".replayWindow", webhook.replay_window)
    rate_limit = None
    if modules.rate_limit is not None:
        rate_limit = RateLimitSettings(
            module=modules.rate_limit,
            period=found.seconds("rateLimit", ".period", modules.rate_limit.period),
        )
    login = None
    if modules.oauth is not None:
        providers = modules.oauth.providers()
        if len(providers) != 1:
            names = ", ".join(OAUTH_PROVIDERS)
            found.add("oauth", "", f"exactly one provider is required (one of {names})")
        for name, provider in providers:
            login = found.login("oauth", name, provider)
            if isinstance(provider, GenericOAuthProvider):
                for field, url in (
                    ("authorizeUrl", provider.authorize_url),
                    ("tokenUrl", provider.token_url),
                    ("userinfoUrl", provider.userinfo_url),
                ):
                    reason = _url_problem(url)
                    if reason:
                        found.add("oauth", f".{name}.{field}", reason)
    if modules.oidc is not None:
        login = found.login("oidc", "", modules.oidc)
        reason = _url_problem(modules.oidc.issuer)
        if reason:
            found.add("oidc", ".issuer", reason)
    ingress_nginx = None
    if (nginx := modules.ingress_nginx) is not None:
        ingress_nginx = IngressNginxSettings(nginx, found.path_pattern(nginx.path_pattern))
    clash = modules_clash(modules)
    if clash:
        module = "oidc" if "oidc" in clash else "jwt"
        found.problems.append(ModuleProblem(module=module, field="spec.modules", reason=clash))
    if found.problems:
        return found.problems
    return ModuleSettings(
        modules=modules,
        ip_restriction=ip_restriction,
        rate_limit=rate_limit,
        circuit_breaker=circuit_breaker,
        headers=headers,
        replay_window=replay_window,
        login=login,
        ingress_nginx=ingress_nginx,
    )


def setting_problems(modules: Modules) -> list[ModuleProblem]:
    """The problems :func:`module_settings` finds (none: the modules can be applied)."""
    settings = module_settings(modules)
    return settings if isinstance(settings, list) else []


def parse_cidr(text: str) -> IPNetwork | str:
    """The network in ``text``, or why it is not one (quoting ``text``).

    Strict: host bits must be clear; a bare address is that address alone. An IPv4-mapped IPv6
    network is the IPv4 network it covers (the edge sees such peers as IPv4).
    """
    stripped = text.strip()
    try:
        network = ip_network(stripped)
    except ValueError:
        try:
            loose = ip_network(stripped, strict=False)
        except ValueError:
            return f'"{text}" is not a valid CIDR'
        return f'"{text}" has host bits set; did you mean "{loose}"?'
    if isinstance(network, IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            return IPv4Network(f"{mapped}/{network.prefixlen - 96}")
    return network


class _Found:
    """The problems found so far; each parser notes its own and returns a placeholder then
    (the settings are not returned when any problem was found)."""

    def __init__(self) -> None:
        self.problems: list[ModuleProblem] = []

    def add(self, module: str, field: str, reason: str) -> None:
        self.problems.append(
            ModuleProblem(module=module, field=f"spec.modules.{module}{field}", reason=reason)
        )

    def seconds(self, module: str, field: str, text: str) -> float:
        try:
            seconds = duration_seconds(text)
        except InvalidDuration as exc:
            self.add(module, field, str(exc))
            return 0.0
        if seconds <= 0:
            self.add(module, field, f'"{text}" must be longer than zero')
        return seconds

    def optional_seconds(self, module: str, field: str, text: str | None) -> float | None:
        return None if text is None else self.seconds(module, field, text)

    def networks(self, module: str, field: str, cidrs: Sequence[str]) -> tuple[IPNetwork, ...]:
        networks: list[IPNetwork] = []
        for index, cidr in enumerate(cidrs):
            parsed = parse_cidr(cidr)
            if isinstance(parsed, str):
                self.add(module, f"{field}[{index}]", parsed)
            else:
                networks.append(parsed)
        return tuple(networks)

    def path_pattern(self, text: str | None) -> re.Pattern[str] | None:
        """ingressNginx's pathPattern, refused as an Ingress's regex path is (the same
        :func:`~interlock.model.ingress_nginx.regex_route`: valid, no nested repetition)."""
        if text is None:
            return None
        problem = regex_route(text).problem
        if problem:
            self.add("ingressNginx", ".pathPattern", problem)
            return None
        return re.compile(text, re.IGNORECASE)

    def header_changes(self, direction: str, changes: HeaderChanges) -> HeaderRewriteSettings:
        for field, reason in _header_problems(changes):
            self.add("headers", f"{direction}{field}", reason)
        return HeaderRewriteSettings(
            remove=tuple(name.lower() for name in changes.remove),
            add=tuple(changes.add.items()),
        )

    def login(
        self, kind: Literal["oauth", "oidc"], provider: str, settings: OAuthProviderSettings
    ) -> LoginSettings:
        """The fields oauth providers and oidc share (``provider``: the oauth provider's name)."""
        at = f".{provider}" if provider else ""
        if not settings.client_id.strip():
            self.add(
                kind, f"{at}.clientId", "is required (interlock has no managed OAuth application)"
            )
        client_secret = settings.client_secret
        if client_secret is None:
            self.add(
                kind, f"{at}.clientSecret", "is required (a Secret holding the OAuth client secret)"
            )
            client_secret = SecretKeyRef(name="", key="")
        durations = [
            self.optional_seconds(kind, f"{at}.{field}", text)
            for field, text in (
                ("inactivityTimeout", settings.inactivity_timeout),
                ("maximumDuration", settings.maximum_duration),
                ("authCheckInterval", settings.auth_check_interval),
            )
        ]
        for index, scope in enumerate(settings.scopes):
            if not scope or any(c.isspace() or c == '"' or c == "\\" for c in scope):
                self.add(kind, f"{at}.scopes[{index}]", f'"{scope}" is not a valid scope')
        for index, address in enumerate(settings.email_addresses):
            local, sign, domain = address.rpartition("@")
            if not sign or not local or not _EMAIL_DOMAIN.fullmatch(domain.lower()):
                self.add(
                    kind, f"{at}.emailAddresses[{index}]", f'"{address}" is not an email address'
                )
        for index, domain in enumerate(settings.email_domains):
            if not _EMAIL_DOMAIN.fullmatch(domain.lower()):
                self.add(kind, f"{at}.emailDomains[{index}]", f'"{domain}" is not a domain name')
        for name, claim in settings.identity_headers.items():
            where = f'{at}.identityHeaders["{name}"]'
            for reason in _header_name_problems(name):
                self.add(kind, where, reason)
            if not claim.strip():
                self.add(kind, where, "the claim name must not be empty")
        return LoginSettings(
            kind=kind,
            provider=provider,
            module=settings,
            client_secret=client_secret,
            inactivity_timeout=durations[0],
            maximum_duration=durations[1],
            auth_check_interval=durations[2],
        )


HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP header field name: RFC 9110 token characters. Use it with ``fullmatch`` (``^…$`` with
``match`` would accept a trailing newline: ``$`` matches before one). The proxy checks a head
edit with it too (``interlock.dataplane.proxy.HeadEdit``)."""
BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""What a header value may not hold: a control character other than tab (CR and LF among them:
a value holding one could inject headers). Use it with ``search``."""
# Kubernetes Secret data keys.
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# Kubernetes object names (DNS subdomain).
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Quotes, backslashes and control characters would break out of the WWW-Authenticate realm.
_BAD_REALM = re.compile(r'["\\\x00-\x1f\x7f]')

PROXY_OWNED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)
"""Headers the headers module may not change: they frame the message or belong to one hop.

Checked with the other settings, so a ModuleSet naming one is invalid and the edge never gets it.
"""


_EMAIL_DOMAIN = re.compile(
    r"(?=.{1,253}\Z)([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?"
)


def _url_problem(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("https", "http") or not rest or rest.startswith("/"):
        return f'"{url}" is not an absolute http(s) URL'
    if any(c.isspace() for c in url):
        return f'"{url}" contains whitespace'
    return ""


def modules_clash(modules: Modules) -> str:
    """Why these modules cannot run together (``""`` when they can).

    Checked on each ModuleSet and again after merging, since two valid sets can clash.
    """
    if modules.basic_auth is not None and modules.jwt is not None:
        return "basicAuth and jwt both read the Authorization header; configure only one of them"
    if modules.oauth is not None and modules.oidc is not None:
        return "oauth and oidc both sign users in with a session cookie; configure only one of them"
    return ""


def _header_problems(changes: HeaderChanges) -> Iterator[tuple[str, str]]:
    for name, value in changes.add.items():
        where = f'.add["{name}"]'
        yield from ((where, reason) for reason in _header_name_problems(name))
        # The value itself is never quoted: header values can be credentials.
        if BAD_HEADER_VALUE.search(value):
            yield where, "the value contains a control character"
    for index, name in enumerate(changes.remove):
        yield from ((f".remove[{index}]", reason) for reason in _header_name_problems(name))


def _header_name_problems(name: str) -> Iterator[str]:
    if not HEADER_NAME.fullmatch(name):
        yield f'"{name}" is not a valid header name'
    elif name.lower() in PROXY_OWNED_HEADERS:
        yield f"{name} is managed by the proxy and cannot be changed"


def _secret_ref_problems(ref: SecretKeyRef) -> Iterator[tuple[str, str]]:
    if not _OBJECT_NAME.fullmatch(ref.name):
        yield ".name", f'"{ref.name}" is not a valid Secret name'
    if not _SECRET_KEY.fullmatch(ref.key):
        yield ".key", f'"{ref.key}" is not a valid Secret key'
