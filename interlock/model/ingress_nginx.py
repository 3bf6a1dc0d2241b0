"""ingress-nginx's ``nginx.ingress.kubernetes.io/*`` annotations, translated to interlock's modules.

ingress-nginx was retired with thousands of Ingresses carrying its annotations. Rewriting them
all before switching controllers is the work that keeps a platform team on a retired
controller, so interlock reads the common ones with ingress-nginx's meaning and defaults, mapped
onto the modules it already has (``ipRestriction``, ``basicAuth``, ``rateLimit``) and onto one
module of its own, :class:`IngressNginxModule`, for what no ModuleSet module does (redirects,
rewrites, CORS, body size, timeouts, the upstream's ``Host`` and protocol, canaries).

Why a pure function: what an annotation means is decided here once, from the Ingress alone, and
tested as a table (``tests/model/test_ingress_nginx.py``); the IngressActor only feeds it and
reports what it refused. Nothing is ignored silently: every ``nginx.ingress.kubernetes.io/*``
annotation is either served or comes back as a :class:`Refusal` naming it and saying why (every
``*-snippet`` is refused: raw nginx configuration has no meaning outside nginx, and running it
was ingress-nginx's worst class of vulnerability). A malformed value is a refusal too, and the
rest of the Ingress is still served — except where serving without it would be *less safe* than
the author wrote (an allow-list, authentication): then the routes get a permanent module error
and answer 503 (fail closed), as an invalid ModuleSet would.

Which Ingresses are translated is opt-in (``docs/ingress-nginx.md``): the IngressClass they use
carries ``interlock.dev/ingress-nginx-annotations: "true"``, or interlock runs with
``--ingress-nginx-annotations``. Without it nothing here runs and the annotations mean nothing.

How annotations and ModuleSets combine (one rule): the annotations act as a ModuleSet listed
*before* those of ``interlock.dev/modules``, so a ModuleSet module of the same type replaces the
annotation's (per module type, the last one wins) — and that annotation is reported as
overridden (:func:`overridden_by_module_sets`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import Field

from interlock.model.ingress import (
    DEFAULT_CLASS_ANNOTATION,
    LEGACY_CLASS_ANNOTATION,
    Ingress,
    IngressClass,
)
from interlock.model.meta import KubeModel

PREFIX = "nginx.ingress.kubernetes.io/"
"""ingress-nginx's annotation prefix (its ``--annotations-prefix`` default)."""

CLASS_ANNOTATION = "interlock.dev/ingress-nginx-annotations"
"""On an IngressClass of ours, ``"true"``: its Ingresses' ingress-nginx annotations are served."""

__all__ = [
    "CLASS_ANNOTATION",
    "PREFIX",
    "IngressNginxModule",
    "NginxCanary",
    "NginxCors",
    "NginxTranslation",
    "Refusal",
    "annotations_enabled",
    "nginx_annotations_of",
    "overridden_by_module_sets",
    "regex_route",
    "translate",
]


# --- what the edge runs --------------------------------------------------------------------------


class NginxCors(KubeModel):
    """``enable-cors`` and the ``cors-*`` family, with ingress-nginx's defaults."""

    allow_origins: tuple[str, ...] = Field(("*",), alias="allowOrigins")
    allow_methods: str = Field("GET, PUT, POST, DELETE, PATCH, OPTIONS", alias="allowMethods")
    allow_headers: str = Field(
        "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,"
        "Content-Type,Range,Authorization",
        alias="allowHeaders",
    )
    expose_headers: str = Field("", alias="exposeHeaders")
    allow_credentials: bool = Field(True, alias="allowCredentials")
    max_age: int = Field(1728000, alias="maxAge")


class NginxCanary(KubeModel):
    """Where a share of a route's requests goes instead (``canary-*`` of a canary Ingress).

    ``header``: a request whose header is ``always`` (or ``header_value``) goes to the canary,
    ``never`` to the main backend; otherwise ``weight`` out of ``weight_total`` go to it."""

    namespace: str
    service: str
    port: int
    exists: bool = True
    ingress: str = ""
    """The canary Ingress (``namespace/name``), for ``/debug/edges``."""
    weight: int = 0
    weight_total: int = Field(100, alias="weightTotal")
    header: str | None = None
    header_value: str | None = Field(None, alias="headerValue")


class IngressNginxModule(KubeModel):
    """What an Ingress's ingress-nginx annotations ask of one route beyond the ModuleSet modules.

    Not a ModuleSet module: only the translation sets it (a ModuleSet naming it is invalid), and
    the edge runs it first, as nginx runs its rewrite phase before its access phase: the
    body-size check, the redirects and the CORS preflight answer come before ipRestriction and
    basicAuth, exactly as they did behind ingress-nginx.
    """

    path_pattern: str | None = Field(None, alias="pathPattern")
    """The route's path as a regular expression (``use-regex``/``rewrite-target``), matched
    case-insensitively from the start of the path; a request it does not match gets 404."""
    rewrite_target: str | None = Field(None, alias="rewriteTarget")
    """The path sent upstream; ``$1``…``$9`` are ``path_pattern``'s groups."""
    redirect: str | None = None
    """``permanent-redirect`` / ``temporal-redirect``: every request is answered with it."""
    redirect_status: int = Field(301, alias="redirectStatus")
    app_root: str | None = Field(None, alias="appRoot")
    """A request for ``/`` is redirected (302) here."""
    ssl_redirect: bool = Field(False, alias="sslRedirect")
    """A plain-HTTP request is redirected (308) to ``https://`` on the same host and path."""
    cors: NginxCors | None = None
    max_body_size: int | None = Field(None, alias="maxBodySize")
    """Bytes; a request declaring a longer body is refused with 413."""
    connect_timeout: float | None = Field(None, alias="connectTimeout")
    read_timeout: float | None = Field(None, alias="readTimeout")
    backend_protocol: Literal["HTTP", "HTTPS", "GRPC", "GRPCS"] = Field(
        "HTTP", alias="backendProtocol"
    )
    """How the upstream is spoken to: HTTP/1.1 or h2c, over TLS for HTTPS and GRPCS (the
    upstream's certificate not verified, as ingress-nginx's ``proxy-ssl-verify: off``)."""
    upstream_vhost: str | None = Field(None, alias="upstreamVhost")
    connection_limit: int | None = Field(None, alias="connectionLimit")
    """Requests in flight per client address; more are refused with 503."""
    canary: NginxCanary | None = None


# --- the translation ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """An annotation interlock does not serve (as written), and why."""

    annotation: str
    """The full annotation name."""
    reason: str

    def __str__(self) -> str:
        return f"{self.annotation}: {self.reason}"


class NginxTranslation(KubeModel):
    """What an Ingress's ingress-nginx annotations mean for interlock (:func:`translate`)."""

    ip_restriction: dict[str, list[str]] | None = None
    """``{"allow": [...], "deny": [...]}`` in the ipRestriction module's form."""
    basic_auth: dict[str, object] | None = None
    """The basicAuth module's form (realm, secretRef)."""
    rate_limit: dict[str, object] | None = None
    """The rateLimit module's form (requests, period)."""
    route: IngressNginxModule = Field(default_factory=IngressNginxModule)
    """Every route's part; :func:`regex_route` adds each route's path pattern."""
    regex_paths: bool = False
    """The Ingress's paths are regular expressions (``use-regex`` or ``rewrite-target``)."""
    ssl_redirect: bool = True
    """Redirect plain HTTP to HTTPS on hosts with TLS (``ssl-redirect``, default true)."""
    force_ssl_redirect: bool = False
    canary: NginxCanary | None = None
    """Set for a canary Ingress (``canary: "true"``): its routes join the main Ingress's
    routes of the same host and path instead of serving on their own (backend left blank
    here, filled in from the canary's own route)."""
    present: tuple[str, ...] = ()
    """The ingress-nginx annotations the Ingress carries (without the prefix), sorted."""
    refusals: tuple[Refusal, ...] = ()
    fail_closed: tuple[Refusal, ...] = ()
    """Refusals whose annotation would make the routes less safe if left out (an allow-list,
    authentication): the routes serve nothing until it is fixed."""

    def secret_names(self) -> tuple[str, ...]:
        """The Secrets (in the Ingress's namespace) the annotations' modules read."""
        ref = None if self.basic_auth is None else self.basic_auth.get("secretRef")
        return (str(ref["name"]),) if isinstance(ref, dict) else ()

    def module_overlay(self) -> dict[str, object]:
        """The ModuleSet modules (by field name) the annotations configure."""
        found: dict[str, object] = {}
        if self.ip_restriction is not None:
            found["ip_restriction"] = self.ip_restriction
        if self.basic_auth is not None:
            found["basic_auth"] = self.basic_auth
        if self.rate_limit is not None:
            found["rate_limit"] = self.rate_limit
        return found


def nginx_annotations_of(annotations: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ingress-nginx annotations among ``annotations``, sorted (for change detection)."""
    return tuple(sorted((k, v) for k, v in annotations.items() if k.startswith(PREFIX)))


def annotations_enabled(ingress: Ingress, classes: Iterable[IngressClass], *, flag: bool) -> bool:
    """Whether ``ingress``'s ingress-nginx annotations are served: ``flag``
    (``--ingress-nginx-annotations``) or :data:`CLASS_ANNOTATION` on the class it uses (found
    as :func:`~interlock.model.ingress.is_ours` finds it)."""
    if flag:
        return True
    classes = [c for c in classes if c.is_ours]
    named = ingress.spec.ingress_class_name or ingress.metadata.annotations.get(
        LEGACY_CLASS_ANNOTATION
    )
    for ingress_class in classes:
        if named:
            chosen = ingress_class.metadata.name == named
        else:
            chosen = ingress_class.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"
        if chosen and ingress_class.metadata.annotations.get(CLASS_ANNOTATION) == "true":
            return True
    return False


_UPSTREAM_TLS = (
    "not served: backend-protocol HTTPS/GRPCS speaks TLS without client certificates or "
    "verification"
)

NOT_SERVED: Mapping[str, str] = {
    "affinity": "session affinity by cookie is not served: the edge balances round-robin",
    "affinity-mode": "session affinity by cookie is not served",
    "affinity-canary-behavior": "session affinity by cookie is not served",
    "session-cookie-name": "session affinity by cookie is not served",
    "session-cookie-path": "session affinity by cookie is not served",
    "session-cookie-max-age": "session affinity by cookie is not served",
    "session-cookie-expires": "session affinity by cookie is not served",
    "session-cookie-samesite": "session affinity by cookie is not served",
    "session-cookie-secure": "session affinity by cookie is not served",
    "session-cookie-change-on-failure": "session affinity by cookie is not served",
    "session-cookie-conditional-samesite-none": "session affinity by cookie is not served",
    "auth-url": "external authentication is not served; use the oauth or oidc module "
    "(docs/modules.md)",
    "auth-method": "external authentication is not served",
    "auth-signin": "external authentication is not served; use the oauth or oidc module",
    "auth-signin-redirect-param": "external authentication is not served",
    "auth-response-headers": "external authentication is not served",
    "auth-proxy-set-headers": "external authentication is not served",
    "auth-request-redirect": "external authentication is not served",
    "auth-cache-key": "external authentication is not served",
    "auth-cache-duration": "external authentication is not served",
    "auth-always-set-cookie": "external authentication is not served",
    "enable-global-auth": "external authentication is not served",
    "auth-tls-secret": "client certificates are verified per route by the mutualTLS module; "
    "write a ModuleSet (docs/modules.md)",
    "auth-tls-verify-client": "use the mutualTLS module",
    "auth-tls-verify-depth": "use the mutualTLS module",
    "auth-tls-error-page": "use the mutualTLS module",
    "auth-tls-pass-certificate-to-upstream": "use the mutualTLS module",
    "auth-tls-match-cn": "use the mutualTLS module",
    "canary-by-header-pattern": "not served: use canary-by-header-value",
    "canary-by-cookie": "canary by cookie is not served; use canary-by-header or canary-weight",
    "client-body-buffer-size": "the edge streams request bodies; there is no buffer to size",
    "custom-http-errors": "custom error pages are not served",
    "default-backend": "not served: use the Ingress's spec.defaultBackend",
    "from-to-www-redirect": "not served: add an Ingress for the other host with permanent-redirect",
    "http2-push-preload": "HTTP/2 server push is not served (browsers removed it)",
    "global-rate-limit": "not served: rate limits are per edge replica (use limit-rps/limit-rpm)",
    "global-rate-limit-window": "not served",
    "global-rate-limit-key": "not served",
    "global-rate-limit-ignored-cidrs": "not served",
    "limit-burst-multiplier": "not served: the rateLimit module's bucket holds one period's "
    "requests",
    "limit-rate": "response bandwidth limits are not served",
    "limit-rate-after": "response bandwidth limits are not served",
    "limit-whitelist": "not served: rate limits apply to every client",
    "limit-allowlist": "not served: rate limits apply to every client",
    "permanent-redirect-code": "",
    "preserve-trailing-slash": "not served: the HTTPS redirect keeps the path as requested",
    "proxy-cookie-domain": "rewriting Set-Cookie is not served",
    "proxy-cookie-path": "rewriting Set-Cookie is not served",
    "proxy-next-upstream": "retries are configured by the backend Service's routes "
    "(docs/policy-api.md)",
    "proxy-next-upstream-timeout": "retries are configured by the backend Service's routes",
    "proxy-next-upstream-tries": "retries are configured by the backend Service's routes",
    "proxy-request-buffering": "the edge streams request bodies",
    "proxy-buffering": "the edge streams responses",
    "proxy-buffers-number": "the edge streams responses",
    "proxy-buffer-size": "the edge streams responses",
    "proxy-max-temp-file-size": "the edge streams responses",
    "proxy-redirect-from": "rewriting Location is not served",
    "proxy-redirect-to": "rewriting Location is not served",
    "proxy-http-version": "the edge speaks HTTP/1.1 upstream (HTTP/2 for GRPC)",
    "proxy-send-timeout": "not served per route: the edge bounds the time between two reads of "
    "a request body for every route (--edge-body-timeout)",
    "proxy-ssl-secret": _UPSTREAM_TLS,
    "proxy-ssl-ciphers": _UPSTREAM_TLS,
    "proxy-ssl-name": _UPSTREAM_TLS,
    "proxy-ssl-protocols": _UPSTREAM_TLS,
    "proxy-ssl-verify": _UPSTREAM_TLS,
    "proxy-ssl-verify-depth": _UPSTREAM_TLS,
    "proxy-ssl-server-name": _UPSTREAM_TLS,
    "enable-rewrite-log": "nginx's rewrite log has no equivalent; the trace shows each route",
    "satisfy": "not served: every configured check must pass",
    "server-alias": "not served: list each host in the Ingress's rules",
    "service-upstream": "the edge always balances over the endpoints",
    "ssl-passthrough": "TLS passthrough is not served by Ingresses (use a TLSRoute)",
    "ssl-ciphers": "the edge's TLS settings are not configured per Ingress",
    "ssl-prefer-server-ciphers": "the edge's TLS settings are not configured per Ingress",
    "upstream-hash-by": "consistent hashing is not served: the edge balances round-robin",
    "upstream-hash-by-subset": "consistent hashing is not served",
    "upstream-hash-by-subset-size": "consistent hashing is not served",
    "load-balance": "the edge balances round-robin",
    "x-forwarded-prefix": "not served",
    "connection-proxy-header": "the edge manages the upstream connection",
    "enable-access-log": "the access log is configured for the whole edge (--access-log)",
    "enable-opentelemetry": "tracing is configured for the whole controller",
    "opentelemetry-trust-incoming-span": "tracing is configured for the whole controller",
    "enable-opentracing": "tracing is configured for the whole controller",
    "opentracing-trust-incoming-span": "tracing is configured for the whole controller",
    "enable-influxdb": "not served",
    "influxdb-measurement": "not served",
    "influxdb-port": "not served",
    "influxdb-host": "not served",
    "influxdb-server-name": "not served",
    "enable-modsecurity": "ModSecurity is not served",
    "enable-owasp-core-rules": "ModSecurity is not served",
    "modsecurity-transaction-id": "ModSecurity is not served",
    "mirror-target": "request mirroring is not served",
    "mirror-request-body": "request mirroring is not served",
    "mirror-host": "request mirroring is not served",
    "custom-headers": "not served: use the headers module (docs/modules.md)",
    "denylist-source-range": "",
}
"""Annotations interlock knows and does not serve, with why (``""``: served, see
:func:`translate`). Every ``*-snippet`` is refused too; any other name is refused as unknown."""

SERVED = (
    "app-root",
    "auth-realm",
    "auth-secret",
    "auth-secret-type",
    "auth-type",
    "backend-protocol",
    "canary",
    "canary-by-header",
    "canary-by-header-value",
    "canary-weight",
    "canary-weight-total",
    "cors-allow-credentials",
    "cors-allow-headers",
    "cors-allow-methods",
    "cors-allow-origin",
    "cors-expose-headers",
    "cors-max-age",
    "denylist-source-range",
    "enable-cors",
    "force-ssl-redirect",
    "limit-connections",
    "limit-rpm",
    "limit-rps",
    "permanent-redirect",
    "permanent-redirect-code",
    "proxy-body-size",
    "proxy-connect-timeout",
    "proxy-read-timeout",
    "rewrite-target",
    "ssl-redirect",
    "temporal-redirect",
    "upstream-vhost",
    "use-regex",
    "whitelist-source-range",
)
"""The annotations :func:`translate` serves (without the prefix)."""

_SNIPPET_REASON = (
    "snippets are raw nginx configuration, which has no meaning outside nginx (and running them "
    "let Ingress authors read the controller's Secrets: CVE-2021-25742, CVE-2025-1974); never "
    "served"
)
_TRUE = "true"
_NUMBER = re.compile(r"[0-9]{1,10}")
"""A whole number as ingress-nginx reads one (``str.isdigit`` also takes ``²``)."""
_SIZE = re.compile(r"(?i)(\d+)([kmg]?)")
_ORIGIN = re.compile(r"(?i)(https?)://(\*\.)?[a-z0-9.-]+(:\d{1,5})?")
_METHOD_LIST = re.compile(r"[A-Za-z]+(\s*,\s*[A-Za-z]+)*")
_HEADER_LIST = re.compile(r"[A-Za-z0-9_-]+(\s*,\s*[A-Za-z0-9_-]+)*")
_EXPOSE_LIST = re.compile(r"[A-Za-z0-9_*-]+(\s*,\s*[A-Za-z0-9_*-]+)*")
_HOST = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:\d{1,5})?")
_SECRET_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_BAD_REALM = re.compile(r'["\\\x00-\x1f\x7f]')
_BAD_URL = re.compile(r"[\x00-\x20\x7f]")


def translate(ingress: Ingress) -> NginxTranslation:
    """What ``ingress``'s ``nginx.ingress.kubernetes.io/*`` annotations mean for interlock.

    Pure and total: never raises; a value it cannot serve is a :class:`Refusal` naming the
    annotation. Served (``docs/ingress-nginx.md`` has the table of every annotation):

    * ``whitelist-source-range`` / ``denylist-source-range`` → ipRestriction allow / deny;
    * ``auth-type: basic``, ``auth-secret`` (key ``auth``, an htpasswd file), ``auth-realm``
      → basicAuth;
    * ``limit-rps`` / ``limit-rpm`` → rateLimit per client address (``limit-rpm`` wins when
      both are set, being the stricter bucket of the two in ingress-nginx's own order);
      ``limit-connections`` → requests in flight per client address;
    * the rest → :class:`IngressNginxModule` fields.
    """
    values = {
        k[len(PREFIX) :]: v for k, v in ingress.metadata.annotations.items() if k.startswith(PREFIX)
    }
    namespace = ingress.metadata.namespace
    refusals: list[Refusal] = []
    fail_closed: list[Refusal] = []
    route: dict[str, object] = {}
    result: dict[str, object] = {}

    def refuse(name: str, reason: str, *, closed: bool = False) -> None:
        refusal = Refusal(PREFIX + name, reason)
        refusals.append(refusal)
        if closed:
            fail_closed.append(refusal)

    def flag(name: str, default: bool) -> bool:
        raw = values.get(name)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in ("true", "false"):
            return text == _TRUE
        refuse(
            name, f'"{raw}" is not "true" or "false"; the default ({str(default).lower()}) applies'
        )
        return default

    def seconds(name: str) -> float | None:
        raw = values.get(name)
        if raw is None:
            return None
        text = raw.strip()
        if not _NUMBER.fullmatch(text) or int(text) == 0:
            refuse(name, f'"{raw}" is not a whole number of seconds above zero')
            return None
        return float(text)

    for name in sorted(values):
        if name.endswith("-snippet"):
            refuse(name, _SNIPPET_REASON)
        elif name not in SERVED:
            reason = NOT_SERVED.get(name)
            refuse(name, reason or "not an ingress-nginx annotation interlock knows; not served")

    # --- access: ipRestriction, basicAuth, rate limits ---
    allow = _cidrs(values, "whitelist-source-range", refuse)
    deny = _cidrs(values, "denylist-source-range", refuse)
    if allow or deny:
        result["ip_restriction"] = {"allow": allow, "deny": deny}

    auth_type = values.get("auth-type")
    if auth_type is not None:
        result["basic_auth"] = _basic_auth(values, namespace, refuse)
        if result["basic_auth"] is None:
            del result["basic_auth"]
    else:
        for name in ("auth-secret", "auth-realm", "auth-secret-type"):
            if name in values:
                refuse(name, "has no effect without auth-type: basic")

    rps = _count(values, "limit-rps", refuse)
    rpm = _count(values, "limit-rpm", refuse)
    if rpm is not None:
        result["rate_limit"] = {"requests": rpm, "period": "1m"}
        if rps is not None:
            refuse(
                "limit-rps",
                "limit-rpm is set too; interlock applies one rate limit per "
                "route, and limit-rpm wins",
            )
    elif rps is not None:
        result["rate_limit"] = {"requests": rps, "period": "1s"}
    connections = _count(values, "limit-connections", refuse)
    if connections is not None:
        route["connection_limit"] = connections

    # --- paths, rewrites, redirects ---
    regex = flag("use-regex", False)
    rewrite = values.get("rewrite-target")
    if rewrite is not None:
        if not rewrite.startswith("/") or _BAD_URL.search(rewrite):
            refuse(
                "rewrite-target",
                f'"{rewrite}" must be a path starting with "/", '
                "without spaces or control characters",
                closed=False,
            )
        else:
            route["rewrite_target"] = rewrite
            regex = True
    redirect_code = 301
    if "permanent-redirect-code" in values:
        raw = values["permanent-redirect-code"].strip()
        if raw in ("301", "302", "303", "307", "308"):
            redirect_code = int(raw)
        else:
            refuse(
                "permanent-redirect-code",
                f'"{raw}" is not a redirect status (301, 302, 303, 307 or 308); 301 applies',
            )
    for name, status in (("permanent-redirect", redirect_code), ("temporal-redirect", 302)):
        target = values.get(name)
        if target is None:
            continue
        if _BAD_URL.search(target) or not target:
            refuse(name, f'"{target}" is not a URL (no spaces or control characters)')
        elif "redirect" in route:
            refuse(name, "permanent-redirect is set too, and wins (as in ingress-nginx)")
        else:
            route["redirect"] = target
            route["redirect_status"] = status
    app_root = values.get("app-root")
    if app_root is not None:
        if not app_root.startswith("/") or _BAD_URL.search(app_root):
            refuse("app-root", f'"{app_root}" must be a path starting with "/"')
        else:
            route["app_root"] = app_root
    ssl_redirect = flag("ssl-redirect", True)
    force_ssl_redirect = flag("force-ssl-redirect", False)

    # --- CORS ---
    if flag("enable-cors", False):
        route["cors"] = _cors(values, refuse)
    else:
        for name in sorted(values):
            if name.startswith("cors-"):
                refuse(name, 'has no effect without enable-cors: "true"')

    # --- forwarding ---
    size = values.get("proxy-body-size")
    if size is not None:
        parsed = _SIZE.fullmatch(size.strip())
        if parsed is None:
            refuse(
                "proxy-body-size", f'"{size}" is not a size (a number, optionally with k, m or g)'
            )
        else:
            number = (
                int(parsed.group(1))
                * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[parsed.group(2).lower()]
            )
            # 0 disables the check, as client_max_body_size 0 does.
            if number:
                route["max_body_size"] = number
    connect = seconds("proxy-connect-timeout")
    read = seconds("proxy-read-timeout")
    if connect is not None:
        route["connect_timeout"] = connect
    if read is not None:
        route["read_timeout"] = read
    protocol = values.get("backend-protocol")
    if protocol is not None:
        upper = protocol.strip().upper()
        if upper in ("HTTP", "HTTPS", "GRPC", "GRPCS"):
            route["backend_protocol"] = upper
        else:
            refuse("backend-protocol", f'"{protocol}" is not served (HTTP, HTTPS, GRPC, GRPCS are)')
    vhost = values.get("upstream-vhost")
    if vhost is not None:
        if _HOST.fullmatch(vhost.strip()):
            route["upstream_vhost"] = vhost.strip()
        else:
            refuse("upstream-vhost", f'"{vhost}" is not a host name')

    canary = None
    if flag("canary", False):
        canary = _canary(values, refuse)
    else:
        for name in sorted(values):
            if name.startswith("canary-"):
                refuse(name, 'has no effect without canary: "true"')

    return NginxTranslation(
        **result,
        route=IngressNginxModule.model_validate(route),
        regex_paths=regex,
        ssl_redirect=ssl_redirect,
        force_ssl_redirect=force_ssl_redirect,
        canary=canary,
        present=tuple(sorted(values)),
        refusals=tuple(refusals),
        fail_closed=tuple(fail_closed),
    )


def _cidrs(values: Mapping[str, str], name: str, refuse: _Refuse) -> list[str]:
    import ipaddress

    raw = values.get(name)
    if raw is None:
        return []
    found: list[str] = []
    for index, entry in enumerate(e.strip() for e in raw.split(",")):
        if not entry:
            continue
        try:
            # nginx's allow/deny take an address or a network with host bits set alike.
            found.append(str(ipaddress.ip_network(entry, strict=False)))
        except ValueError:
            refuse(
                name,
                f'entry {index + 1}, "{entry}", is not an address or CIDR; the routes '
                "serve nothing until it is fixed",
                closed=True,
            )
    return found


class _Refuse(Protocol):
    def __call__(self, name: str, reason: str, *, closed: bool = False) -> None: ...


def _count(values: Mapping[str, str], name: str, refuse: _Refuse) -> int | None:
    raw = values.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not _NUMBER.fullmatch(text):
        refuse(name, f'"{raw}" is not a whole number')
        return None
    # 0 turns the limit off in ingress-nginx.
    return int(text) or None


def _basic_auth(
    values: Mapping[str, str], namespace: str, refuse: _Refuse
) -> dict[str, object] | None:
    kind = values["auth-type"].strip().lower()
    if kind != "basic":
        refuse(
            "auth-type",
            f'"{values["auth-type"]}" is not served (basic is); the routes '
            "serve nothing until it is fixed",
            closed=True,
        )
        return None
    secret = (values.get("auth-secret") or "").strip()
    secret_namespace, _, secret_name = secret.rpartition("/")
    if not secret:
        refuse(
            "auth-type",
            "basic needs auth-secret (a Secret with an htpasswd file in key "
            '"auth"); the routes serve nothing until it is set',
            closed=True,
        )
        return None
    if secret_namespace and secret_namespace != namespace:
        refuse(
            "auth-secret",
            f'"{secret}": a Secret of another namespace is not read (an '
            "Ingress author could use any Secret of the cluster); the routes serve nothing "
            "until it names one in the Ingress's namespace",
            closed=True,
        )
        return None
    if not _SECRET_NAME.fullmatch(secret_name):
        refuse(
            "auth-secret",
            f'"{secret}" is not a Secret name; the routes serve nothing until it is fixed',
            closed=True,
        )
        return None
    secret_type = (values.get("auth-secret-type") or "auth-file").strip()
    if secret_type != "auth-file":
        refuse(
            "auth-secret-type",
            f'"{secret_type}" is not served (auth-file is); the routes '
            "serve nothing until it is fixed",
            closed=True,
        )
        return None
    realm = values.get("auth-realm", "")
    if _BAD_REALM.search(realm):
        refuse(
            "auth-realm",
            "must not contain quotes, backslashes or control characters; "
            "interlock's default realm applies",
        )
        realm = ""
    config: dict[str, object] = {"secretRef": {"name": secret_name, "key": "auth"}}
    if realm:
        config["realm"] = realm
    return config


def _cors(values: Mapping[str, str], refuse: _Refuse) -> NginxCors:
    config: dict[str, object] = {}
    origins = values.get("cors-allow-origin")
    if origins is not None:
        entries = [o.strip() for o in origins.split(",") if o.strip()]
        good = [o for o in entries if o == "*" or _ORIGIN.fullmatch(o)]
        for bad in (o for o in entries if o not in good):
            refuse(
                "cors-allow-origin",
                f'"{bad}" is not an origin (http(s)://host[:port], '
                "with an optional *. subdomain wildcard); left out",
            )
        if good:
            config["allowOrigins"] = tuple(good)
    for name, field, pattern in (
        ("cors-allow-methods", "allowMethods", _METHOD_LIST),
        ("cors-allow-headers", "allowHeaders", _HEADER_LIST),
        ("cors-expose-headers", "exposeHeaders", _EXPOSE_LIST),
    ):
        raw = values.get(name)
        if raw is None:
            continue
        if pattern.fullmatch(raw.strip()):
            config[field] = raw.strip()
        else:
            refuse(name, f'"{raw}" is not a comma-separated list of names; the default applies')
    credentials = values.get("cors-allow-credentials")
    if credentials is not None:
        if credentials.strip().lower() in ("true", "false"):
            config["allowCredentials"] = credentials.strip().lower() == _TRUE
        else:
            refuse("cors-allow-credentials", f'"{credentials}" is not "true" or "false"')
    max_age = values.get("cors-max-age")
    if max_age is not None:
        if _NUMBER.fullmatch(max_age.strip()):
            config["maxAge"] = int(max_age.strip())
        else:
            refuse("cors-max-age", f'"{max_age}" is not a whole number of seconds')
    return NginxCors.model_validate(config)


def _canary(values: Mapping[str, str], refuse: _Refuse) -> NginxCanary:
    weight = 0
    total = 100
    raw_total = values.get("canary-weight-total")
    if raw_total is not None:
        if _NUMBER.fullmatch(raw_total.strip()) and int(raw_total) > 0:
            total = int(raw_total)
        else:
            refuse(
                "canary-weight-total",
                f'"{raw_total}" is not a whole number above zero; 100 applies',
            )
    raw_weight = values.get("canary-weight")
    if raw_weight is not None:
        if _NUMBER.fullmatch(raw_weight.strip()) and int(raw_weight) <= total:
            weight = int(raw_weight)
        else:
            refuse(
                "canary-weight",
                f'"{raw_weight}" is not a whole number from 0 to {total}; '
                "no request goes to the canary by weight",
            )
    header = values.get("canary-by-header")
    header_value = values.get("canary-by-header-value")
    if header is not None and not _HEADER_LIST.fullmatch(header.strip()):
        refuse("canary-by-header", f'"{header}" is not a header name')
        header = None
    if header_value is not None and header is None:
        refuse("canary-by-header-value", "has no effect without canary-by-header")
        header_value = None
    return NginxCanary(
        namespace="",
        service="",
        port=0,
        weight=weight,
        weightTotal=total,
        header=None if header is None else header.strip(),
        headerValue=header_value,
    )


# --- per route ----------------------------------------------------------------------

_META = re.compile(r"[.^$*+?()\[\]{}|\\]")
_SEGMENT_END = ("(/|$)", "(?:/|$)", "/", "$", "(/.*)", "(/.*)?", "/?")


@dataclass(frozen=True, slots=True)
class RegexRoute:
    """A regular-expression path as the edge routes it: the literal prefix it starts with
    (routed as a Prefix) and the pattern a request under it must match."""

    prefix: str
    pattern: str
    problem: str = ""
    """Why the path cannot be served ("" when it can)."""


def regex_route(path: str) -> RegexRoute:
    """How a path written as a regular expression is routed.

    The edge routes by whole path segments, so the route is the longest literal prefix of the
    pattern that ends at a segment boundary; a request under it that the pattern does not
    match (case-insensitively, from the start, as nginx's ``location ~*``) is answered 404.
    ``/something(/|$)(.*)`` is the prefix ``/something``; ``/api/v[0-9]+/(.*)`` is ``/api``.
    """
    try:
        re.compile(path)
    except re.error as exc:
        return RegexRoute(
            prefix=path, pattern=path, problem=f"is not a valid regular expression ({exc})"
        )
    if _repeats_a_repetition(path):
        return RegexRoute(
            prefix=path,
            pattern=path,
            problem="repeats a group that itself repeats or alternates (as in (a+)+ or (a|b)*): "
            "matching it can take exponential time on a crafted path, on an edge every host "
            "shares; write it without the outer repetition",
        )
    found = _META.search(path)
    literal = path if found is None else path[: found.start()]
    rest = "" if found is None else path[found.start() :]
    if not (rest == "" or rest.startswith(_SEGMENT_END) or literal.endswith("/")):
        literal = literal[: literal.rfind("/") + 1]
    prefix = literal.rstrip("/") or "/"
    return RegexRoute(prefix=prefix, pattern=path)


def _repeats_a_repetition(pattern: str) -> bool:
    """Whether a group that holds a repetition (``*``, ``+``, ``{n,m}``) or an alternation is
    itself repeated: the shape of backtracking blow-ups (ReDoS). Character classes and escapes
    are skipped; ``?`` is not a repetition."""
    risky: list[bool] = []  # per open group: holds a repetition or an alternation
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            end = index + 1
            if end < len(pattern) and pattern[end] == "^":
                end += 1
            if end < len(pattern) and pattern[end] == "]":
                end += 1
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            index = end + 1
            continue
        following = pattern[index + 1] if index + 1 < len(pattern) else ""
        if char == "(":
            risky.append(False)
        elif char == ")" and risky:
            inner = risky.pop()
            if inner and following in ("*", "+", "{"):
                return True
            if risky and (inner or following in ("*", "+", "{")):
                risky[-1] = True
        elif char in "*+{|" and risky:
            risky[-1] = True
        index += 1
    return False


def overridden_by_module_sets(
    translation: NginxTranslation, module_sets: Sequence[tuple[str, Iterable[str]]]
) -> list[Refusal]:
    """The annotations a ModuleSet replaces: ``module_sets`` is ``(name, module types)`` of
    each usable ModuleSet the Ingress names; a module type both configure is the ModuleSet's."""
    by_type = {
        "ipRestriction": ("whitelist-source-range", "denylist-source-range"),
        "basicAuth": ("auth-type", "auth-secret", "auth-realm"),
        "rateLimit": ("limit-rps", "limit-rpm"),
    }
    present = {
        "ipRestriction": translation.ip_restriction is not None,
        "basicAuth": translation.basic_auth is not None,
        "rateLimit": translation.rate_limit is not None,
    }
    found: list[Refusal] = []
    for module_type, names in by_type.items():
        if not present[module_type]:
            continue
        owners = [name for name, types in module_sets if module_type in set(types)]
        if owners:
            for name in (n for n in names if n in translation.present):
                found.append(
                    Refusal(
                        PREFIX + name,
                        f"overridden by the {module_type} module of ModuleSet {owners[-1]} "
                        "(a ModuleSet's module replaces the annotation's)",
                    )
                )
    return found
