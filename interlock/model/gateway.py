"""Gateway API inputs: HTTPRoute and ReferenceGrant (``gateway.networking.k8s.io`` v1 and v1beta1).

v1 and v1beta1 share one schema, so one model reads both. The models apply the defaults the
Gateway API CRDs would apply (parentRef group and kind, a ``PathPrefix /`` match, backend weight
1, group ``""`` and kind ``Service`` for backends) so that the rest of the model never has to ask
"was this field set?". They also do the validation the CRD schema would do (port and weight
ranges, paths starting with ``/``, one config per filter type, list and string size limits),
because objects can reach us without passing an API server's schema (embedded mode, an old CRD
version, a hand-edited test fixture), and a bad value must be reported with its field path,
never crash an actor.

Filter types this controller cannot apply (RequestMirror, ExtensionRef, anything else) are
rejected while parsing: the Gateway API forbids silently skipping a filter, and rejecting the
route with ``spec.rules[0].filters[1].type: unsupported ...`` is the honest alternative.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from interlock.model.meta import (
    KubeModel,
    KubeObject,
    ObjectKey,
    parse_namespaced,
)

GATEWAY_GROUP = "gateway.networking.k8s.io"
"""The API group of HTTPRoute, ReferenceGrant and Gateway."""

CORE_GROUP = ""
"""Kubernetes' core group (Service). ``"core"`` is accepted as a spelling of it."""

SUPPORTED_FILTER_TYPES = (
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestRedirect",
    "URLRewrite",
    "CORS",
)
"""HTTPRoute filter types interlock serves in its policy."""

UNIMPLEMENTED_FILTER_TYPES = ("RequestMirror", "ExtensionRef")
"""Valid v1.6.1 filter types interlock does not implement: parsed (so a malformed one is named
as malformed), then refused, never skipped."""

_FILTER_CONFIG_FIELD = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestRedirect": "requestRedirect",
    "URLRewrite": "urlRewrite",
    "CORS": "cors",
    "RequestMirror": "requestMirror",
    "ExtensionRef": "extensionRef",
}

# The CRDs' patterns for names, groups and kinds (Gateway API v1.6.1), each ``$`` that ends one
# written ``\Z``: KubeModel checks patterns with Python's ``re`` (``regex_engine``, model/meta.py),
# whose ``$`` also matches before a final newline ("web\n" would pass as a name, "X-A\n" as a
# header name); ``\Z`` matches only at the end, as the CRD's (and Rust's) ``$`` does.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z"
GROUP = r"^\Z|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
KIND = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?\Z"
HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+\Z"
# The characters an Exact or PathPrefix path may hold (RFC 3986 pchar and '/').
_PATH_CHARS = re.compile(r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$")

# The Gateway API's Duration format (GEP-2257): up to four number+unit parts, e.g. "1h30m".
_DURATION = re.compile(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")
_DURATION_PART = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_UNIT = {"h": timedelta(hours=1), "m": timedelta(minutes=1), "s": timedelta(seconds=1)}
_UNIT["ms"] = timedelta(milliseconds=1)


# The CRD's patterns: an HTTP header name token (RFC 7230) and a DNS hostname, optionally
# with a leading wildcard label.
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")
_HOSTNAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Path fragments the CRD refuses in Exact and PathPrefix values: they would let one path
# mean two things (a proxy normalizes them, the match does not).
_PATH_FORBIDDEN = ("//", "/./", "/../", "%2f", "%2F", "#")
_PATH_FORBIDDEN_ENDINGS = ("/..", "/.")


def _check_path(value: str) -> str:
    if not value.startswith("/"):
        raise invalid("path", f"path must start with '/', got {value!r}")
    for fragment in _PATH_FORBIDDEN:
        if fragment in value:
            raise invalid("path", f"path {value!r} must not contain {fragment!r}")
    for ending in _PATH_FORBIDDEN_ENDINGS:
        if value.endswith(ending):
            raise invalid("path", f"path {value!r} must not end with {ending!r}")
    if not _PATH_CHARS.fullmatch(value):
        raise invalid("path", f"path {value!r} holds characters a URL path cannot hold")
    return value


def _check_header_name(name: str) -> str:
    if not _HEADER_NAME.fullmatch(name):
        raise invalid("header_name", f"{name!r} is not a valid HTTP header name")
    return name


def _check_header_value(value: str) -> str:
    # A line break in a header value would let a route inject headers into proxied requests.
    if any(c in value for c in "\r\n\0"):
        raise invalid("header_value", "header value must not contain CR, LF or NUL")
    return value


def _check_hostname(hostname: str, *, wildcard: bool) -> str:
    if (
        not _HOSTNAME.fullmatch(hostname)
        or len(hostname) > 253
        or (hostname.startswith("*.") and not wildcard)
    ):
        allowed = ", optionally starting with '*.'" if wildcard else ""
        raise invalid(
            "hostname", f"{hostname!r} is not a valid hostname (a lowercase DNS name{allowed})"
        )
    return hostname


def invalid(error_type: str, message: str) -> PydanticCustomError:
    """A validation error whose text is exactly ``message`` (user values may contain braces)."""
    return PydanticCustomError(error_type, "{detail}", {"detail": message})


def parse_gateway_duration(text: str) -> timedelta:
    """The length of a Gateway API Duration such as ``"1m30s"``; ``"0s"`` means "no timeout".

    Raises ValueError for text not in the GEP-2257 format (parsed routes are already checked).
    """
    if not _DURATION.fullmatch(text):
        raise ValueError(f"invalid Gateway API duration {text!r}")
    return sum(
        (int(number) * _UNIT[unit] for number, unit in _DURATION_PART.findall(text)),
        timedelta(0),
    )


def normalize_group(group: str) -> str:
    """``"core"`` and ``""`` both name Kubernetes' core group; use ``""`` everywhere."""
    return CORE_GROUP if group == "core" else group


def check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise invalid("regex", f"invalid regular expression {pattern!r}: {exc}") from None
    return pattern


def refuse_unimplemented(what: str, supported: str = "") -> PydanticCustomError:
    """The error for a valid Gateway API field interlock does not implement (never skipped)."""
    tail = f"; supported: {supported}" if supported else ""
    return invalid("unimplemented", f"{what} is valid but not implemented by interlock{tail}")


class ParentReference(KubeModel):
    """A route's parent: a Gateway (not ours) or a Service (mesh routes, which we serve)."""

    group: str = Field(GATEWAY_GROUP, max_length=253, pattern=GROUP)
    kind: str = Field("Gateway", min_length=1, max_length=63, pattern=KIND)
    namespace: str | None = Field(None, min_length=1, max_length=63, pattern=DNS_LABEL)
    name: str = Field(min_length=1, max_length=253)
    section_name: str | None = Field(
        None, alias="sectionName", min_length=1, max_length=253, pattern=DNS_SUBDOMAIN
    )
    port: int | None = Field(None, ge=1, le=65535)

    # ``group`` is kept as written ("core" or ""): the route's status must echo each parentRef
    # by value, because clients pair status entries with spec entries by comparing them.

    @property
    def is_service(self) -> bool:
        """True for a core Service parent: the only kind of parent this controller serves."""
        return normalize_group(self.group) == CORE_GROUP and self.kind == "Service"

    def as_written(self) -> dict[str, Any]:
        """The fields the spec set, in API spelling: what ``status.parents[].parentRef`` echoes."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


PathMatchType = Literal["Exact", "PathPrefix", "RegularExpression"]


class HTTPPathMatch(KubeModel):
    type: PathMatchType = "PathPrefix"
    value: str = Field("/", max_length=1024)

    @model_validator(mode="after")
    def _check_value(self) -> HTTPPathMatch:
        if self.type == "RegularExpression":
            check_regex(self.value)
        else:
            _check_path(self.value)
        return self


class _NamedHeader(KubeModel):
    """A header's name, as a header match and a header filter write it (RFC 7230 token)."""

    name: str = Field(min_length=1, max_length=256)

    @field_validator("name")
    @classmethod
    def _header_name(cls, name: str) -> str:
        return _check_header_name(name)


class HTTPHeaderMatch(_NamedHeader):
    type: Literal["Exact", "RegularExpression"] = "Exact"
    value: str = Field(min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _check_value(self) -> HTTPHeaderMatch:
        if self.type == "RegularExpression":
            check_regex(self.value)
        return self


class HTTPQueryParamMatch(KubeModel):
    type: Literal["Exact", "RegularExpression"] = "Exact"
    name: str = Field(min_length=1, max_length=256, pattern=HEADER_NAME)
    value: str = Field(min_length=1, max_length=1024)

    @model_validator(mode="after")
    def _check_value(self) -> HTTPQueryParamMatch:
        if self.type == "RegularExpression":
            check_regex(self.value)
        return self


HTTPMethod = Literal["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]


class HTTPRouteMatch(KubeModel):
    path: HTTPPathMatch = Field(default_factory=HTTPPathMatch)
    headers: tuple[HTTPHeaderMatch, ...] = Field((), max_length=16)
    query_params: tuple[HTTPQueryParamMatch, ...] = Field((), alias="queryParams", max_length=16)
    method: HTTPMethod | None = None


class HTTPHeader(_NamedHeader):
    value: str = Field(min_length=1, max_length=4096)

    @field_validator("value")
    @classmethod
    def _header_value(cls, value: str) -> str:
        return _check_header_value(value)


class HTTPHeaderFilter(KubeModel):
    set: tuple[HTTPHeader, ...] = Field((), max_length=16)
    add: tuple[HTTPHeader, ...] = Field((), max_length=16)
    remove: tuple[str, ...] = Field((), max_length=16)

    @field_validator("remove")
    @classmethod
    def _header_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            _check_header_name(name)
        return names


class HTTPPathModifier(KubeModel):
    type: Literal["ReplaceFullPath", "ReplacePrefixMatch"]
    replace_full_path: str | None = Field(None, alias="replaceFullPath")
    replace_prefix_match: str | None = Field(None, alias="replacePrefixMatch")

    @model_validator(mode="after")
    def _check_config(self) -> HTTPPathModifier:
        value = (
            self.replace_full_path if self.type == "ReplaceFullPath" else self.replace_prefix_match
        )
        if value is None:
            field = "replaceFullPath" if self.type == "ReplaceFullPath" else "replacePrefixMatch"
            raise invalid("path_modifier", f"type {self.type} requires {field}")
        if not value.startswith("/"):
            raise invalid("path", f"path must start with '/', got {value!r}")
        return self


class HTTPRequestRedirectFilter(KubeModel):
    scheme: Literal["http", "https"] | None = None
    hostname: str | None = None
    path: HTTPPathModifier | None = None
    port: int | None = Field(None, ge=1, le=65535)
    status_code: Literal[301, 302, 303, 307, 308] = Field(302, alias="statusCode")

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, hostname: str | None) -> str | None:
        return None if hostname is None else _check_hostname(hostname, wildcard=False)


class HTTPURLRewriteFilter(KubeModel):
    hostname: str | None = None
    path: HTTPPathModifier | None = None

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, hostname: str | None) -> str | None:
        return None if hostname is None else _check_hostname(hostname, wildcard=False)


_CORS_ORIGIN = (  # the CRD's, ``$`` written ``\Z`` (see DNS_SUBDOMAIN)
    r"(^\*\Z)|(^(http(s)?):\/\/(((\*\.)?([a-zA-Z0-9\-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?)\Z)"
)


def _alone_if_wildcard(values: tuple[str, ...], what: str) -> tuple[str, ...]:
    if "*" in values and len(values) > 1:
        raise invalid("cors", f"{what} cannot contain '*' alongside other values")
    return values


class HTTPCORSFilter(KubeModel):
    """The CORS filter (GEP-1767): served as written, the data plane answers preflights."""

    allow_origins: tuple[Annotated[str, Field(max_length=253, pattern=_CORS_ORIGIN)], ...] = Field(
        (), alias="allowOrigins", max_length=64
    )
    allow_credentials: bool | None = Field(None, alias="allowCredentials")
    allow_methods: tuple[HTTPMethod | Literal["*"], ...] = Field(
        (), alias="allowMethods", max_length=9
    )
    allow_headers: tuple[Annotated[str, Field(max_length=256, pattern=HEADER_NAME)], ...] = Field(
        (), alias="allowHeaders", max_length=64
    )
    expose_headers: tuple[Annotated[str, Field(max_length=256, pattern=HEADER_NAME)], ...] = Field(
        (), alias="exposeHeaders", max_length=64
    )
    max_age: int = Field(5, alias="maxAge", ge=1)

    @field_validator("allow_origins", "allow_methods", "allow_headers")
    @classmethod
    def _wildcard_alone(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return _alone_if_wildcard(values, info.field_name or "list")


class BackendObjectReference(KubeModel):
    """A reference to a backend: a core Service unless ``group``/``kind`` say otherwise."""

    group: str = Field(CORE_GROUP, max_length=253, pattern=GROUP)
    kind: str = Field("Service", min_length=1, max_length=63, pattern=KIND)
    name: str = Field(min_length=1, max_length=253)
    namespace: str | None = Field(None, min_length=1, max_length=63, pattern=DNS_LABEL)
    port: int | None = Field(None, ge=1, le=65535)

    @field_validator("group")
    @classmethod
    def _normalize_group(cls, group: str) -> str:
        return normalize_group(group)

    @property
    def is_service(self) -> bool:
        return self.group == CORE_GROUP and self.kind == "Service"


class Fraction(KubeModel):
    numerator: int = Field(ge=0)
    denominator: int = Field(100, ge=1)

    @model_validator(mode="after")
    def _at_most_one(self) -> Fraction:
        if self.numerator > self.denominator:
            raise invalid("fraction", "numerator must be less than or equal to denominator")
        return self


class HTTPRequestMirrorFilter(KubeModel):
    backend_ref: BackendObjectReference = Field(alias="backendRef")
    percent: int | None = Field(None, ge=0, le=100)
    fraction: Fraction | None = None

    @model_validator(mode="after")
    def _percent_or_fraction(self) -> HTTPRequestMirrorFilter:
        if self.percent is not None and self.fraction is not None:
            raise invalid("mirror", "only one of percent or fraction may be specified")
        return self


class LocalObjectReference(KubeModel):
    group: str = Field(max_length=253, pattern=GROUP)
    kind: str = Field(min_length=1, max_length=63, pattern=KIND)
    name: str = Field(min_length=1, max_length=253)


class HTTPRouteFilter(KubeModel):
    """One filter; exactly the config field named by ``type`` is set (as the CRD's CEL rules)."""

    type: Literal[
        "RequestHeaderModifier",
        "ResponseHeaderModifier",
        "RequestMirror",
        "RequestRedirect",
        "URLRewrite",
        "ExtensionRef",
        "CORS",
    ]
    request_header_modifier: HTTPHeaderFilter | None = Field(None, alias="requestHeaderModifier")
    response_header_modifier: HTTPHeaderFilter | None = Field(None, alias="responseHeaderModifier")
    request_redirect: HTTPRequestRedirectFilter | None = Field(None, alias="requestRedirect")
    url_rewrite: HTTPURLRewriteFilter | None = Field(None, alias="urlRewrite")
    cors: HTTPCORSFilter | None = None
    request_mirror: HTTPRequestMirrorFilter | None = Field(None, alias="requestMirror")
    extension_ref: LocalObjectReference | None = Field(None, alias="extensionRef")

    @model_validator(mode="after")
    def _config_present(self) -> HTTPRouteFilter:
        check_filter_config(self, _FILTER_CONFIG_FIELD)
        if self.type in UNIMPLEMENTED_FILTER_TYPES:
            raise refuse_unimplemented(
                f"filter type {self.type}", ", ".join(SUPPORTED_FILTER_TYPES)
            )
        return self


def check_filter_config(filter_: KubeModel, config_fields: Mapping[str, str]) -> None:
    """The CEL rules of a filter: the config field its ``type`` names is set, no other one."""
    filter_type = getattr(filter_, "type")  # noqa: B009 - every filter model has a type
    for type_name, field in config_fields.items():
        attribute = _snake(field)
        present = getattr(filter_, attribute, None) is not None
        if type_name == filter_type and not present:
            raise invalid("filter_config", f"filter type {filter_type} requires {field}")
        if type_name != filter_type and present:
            raise invalid(
                "filter_config", f"{field} must not be set unless the filter type is {type_name}"
            )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _check_filter_list(filters: tuple[HTTPRouteFilter, ...]) -> tuple[HTTPRouteFilter, ...]:
    # The CRD's CEL rules on a filter list, rule-level or backendRef-level alike.
    types: list[str] = [f.type for f in filters]
    for filter_type in ("CORS", *SUPPORTED_FILTER_TYPES[:4]):
        if types.count(filter_type) > 1:
            raise invalid("filters", f"filter {filter_type} may appear at most once")
    if "RequestRedirect" in types and "URLRewrite" in types:
        raise invalid("filters", "RequestRedirect and URLRewrite cannot be used together")
    return filters


class BackendRef(BackendObjectReference):
    """A weighted backend (TLSRoute, TCPRoute; the base of the HTTP and gRPC ones)."""

    weight: int = Field(1, ge=0, le=1_000_000)


class HTTPBackendRef(BackendRef):
    """A rule's backend; its ``filters`` apply only to requests sent to this backend."""

    filters: tuple[HTTPRouteFilter, ...] = Field((), max_length=16)

    @field_validator("filters")
    @classmethod
    def _filter_list(cls, filters: tuple[HTTPRouteFilter, ...]) -> tuple[HTTPRouteFilter, ...]:
        return _check_filter_list(filters)


class HTTPRouteTimeouts(KubeModel):
    request: str | None = None
    backend_request: str | None = Field(None, alias="backendRequest")

    @field_validator("request", "backend_request")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        return _check_duration(value)

    @model_validator(mode="after")
    def _backend_within_request(self) -> HTTPRouteTimeouts:
        # As the CRD's CEL rule: a backend attempt cannot outlast the whole request, unless the
        # request timeout is disabled ("0s").
        if self.request is None or self.backend_request is None:
            return self
        request = parse_gateway_duration(self.request)
        if request and parse_gateway_duration(self.backend_request) > request:
            raise invalid(
                "timeouts",
                f"backendRequest {self.backend_request!r} must not be longer than "
                f"request {self.request!r}",
            )
        return self


def _check_duration(value: str | None) -> str | None:
    if value is not None and not _DURATION.fullmatch(value):
        raise invalid("duration", f"invalid duration {value!r}; use e.g. '10s', '500ms' or '1m30s'")
    return value


class HTTPRouteRetry(KubeModel):
    """The experimental ``rules[].retry`` (GEP-1731): which responses to retry, how often."""

    codes: tuple[int, ...] = ()
    attempts: int | None = Field(None, ge=1)
    backoff: str | None = None

    @field_validator("codes")
    @classmethod
    def _status_codes(cls, codes: tuple[int, ...]) -> tuple[int, ...]:
        for code in codes:
            if not 400 <= code <= 599:
                raise invalid("retry", f"retry code {code} must be in 400..599")
        if len(set(codes)) != len(codes):
            raise invalid("retry", "retry codes must not repeat (a set)")
        return codes

    @field_validator("backoff")
    @classmethod
    def _backoff(cls, value: str | None) -> str | None:
        return _check_duration(value)


_RULE_NAME = Field(None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)


def check_parent_refs(refs: tuple[ParentReference, ...]) -> tuple[ParentReference, ...]:
    """The CRDs' CEL rules on ``parentRefs``: two refs to one parent need distinct sectionNames."""
    seen: dict[tuple[str, str, str, str], list[str | None]] = {}
    for ref in refs:
        parent = (ref.group, ref.kind, ref.namespace or "", ref.name)
        seen.setdefault(parent, []).append(ref.section_name)
    for (_, kind, _, name), sections in seen.items():
        if len(sections) < 2:
            continue
        if None in sections:
            raise invalid(
                "parent_refs",
                f"sectionName must be specified when parentRefs includes 2 or more references "
                f"to {kind} {name}",
            )
        if len(set(sections)) != len(sections):
            raise invalid(
                "parent_refs",
                f"sectionName must be unique when parentRefs includes 2 or more references "
                f"to {kind} {name}",
            )
    return refs


def check_total_matches(rules: tuple[Any, ...]) -> None:
    """The CRDs' CEL rule: fewer than 128 matches across all rules of a route."""
    total = sum(len(rule.matches) for rule in rules)
    if total >= 128:
        raise invalid(
            "rules", f"a route may hold fewer than 128 matches across its rules, not {total}"
        )


def _default_matches() -> tuple[HTTPRouteMatch, ...]:
    return (HTTPRouteMatch(),)


class HTTPRouteRule(KubeModel):
    name: str | None = _RULE_NAME
    matches: tuple[HTTPRouteMatch, ...] = Field(default_factory=_default_matches, max_length=64)
    filters: tuple[HTTPRouteFilter, ...] = Field((), max_length=16)
    backend_refs: tuple[HTTPBackendRef, ...] = Field((), alias="backendRefs", max_length=16)
    timeouts: HTTPRouteTimeouts | None = None
    retry: HTTPRouteRetry | None = None
    session_persistence: dict[str, Any] | None = Field(None, alias="sessionPersistence")

    @field_validator("session_persistence")
    @classmethod
    def _session_persistence(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # Experimental in v1.6.1; a mesh client would silently lose its stickiness if skipped.
        if value is not None:
            raise refuse_unimplemented("sessionPersistence")
        return value

    @field_validator("filters")
    @classmethod
    def _filter_list(cls, filters: tuple[HTTPRouteFilter, ...]) -> tuple[HTTPRouteFilter, ...]:
        return _check_filter_list(filters)

    @field_validator("matches")
    @classmethod
    def _empty_matches_match_everything(
        cls, matches: tuple[HTTPRouteMatch, ...]
    ) -> tuple[HTTPRouteMatch, ...]:
        # Gateway API: "If no matches are specified, the default is a prefix path match on '/'".
        return matches or _default_matches()

    @model_validator(mode="after")
    def _filters_fit_the_rule(self) -> HTTPRouteRule:
        # The HTTPRoute CRD's CEL rules, so that a route we accept is one Kubernetes accepts.
        types = [f.type for f in self.filters]
        if "RequestRedirect" in types and self.backend_refs:
            raise invalid("filters", "RequestRedirect cannot be used together with backendRefs")
        for f in (*self.filters, *(f for ref in self.backend_refs for f in ref.filters)):
            config = f.request_redirect or f.url_rewrite
            path = config.path if config is not None else None
            if (
                path is not None
                and path.type == "ReplacePrefixMatch"
                and not (len(self.matches) == 1 and self.matches[0].path.type == "PathPrefix")
            ):
                raise invalid(
                    "filters",
                    f"{f.type} with ReplacePrefixMatch needs exactly one match, of type PathPrefix",
                )
        return self


def _default_rules() -> tuple[HTTPRouteRule, ...]:
    return (HTTPRouteRule(),)


def check_hostnames(hostnames: tuple[str, ...]) -> tuple[str, ...]:
    """Route hostnames: lowercase DNS names, optionally with a leading ``*.`` label."""
    for hostname in hostnames:
        _check_hostname(hostname, wildcard=True)
    return hostnames


class CommonRouteSpec(KubeModel):
    """What every route kind's spec has: its parents (checked as the CRDs' CEL rules)."""

    parent_refs: tuple[ParentReference, ...] = Field((), alias="parentRefs", max_length=32)

    @field_validator("parent_refs")
    @classmethod
    def _parent_refs(cls, refs: tuple[ParentReference, ...]) -> tuple[ParentReference, ...]:
        return check_parent_refs(refs)


class HTTPRouteSpec(CommonRouteSpec):
    hostnames: tuple[str, ...] = Field((), max_length=16)
    rules: tuple[HTTPRouteRule, ...] = Field(default_factory=_default_rules, max_length=16)

    @field_validator("hostnames")
    @classmethod
    def _hostnames(cls, hostnames: tuple[str, ...]) -> tuple[str, ...]:
        return check_hostnames(hostnames)

    @field_validator("rules")
    @classmethod
    def _rules(cls, rules: tuple[HTTPRouteRule, ...]) -> tuple[HTTPRouteRule, ...]:
        check_total_matches(rules)
        return rules


class RouteStatus(KubeModel):
    """A route's ``status`` (every route kind has the same one)."""

    # Kept as the API server sent them: other controllers' entries must be written back
    # untouched, and a parsed-and-reserialized entry would gain defaults it never had.
    parents: tuple[dict[str, Any], ...] = ()


class HTTPRoute(KubeObject):
    """An HTTPRoute (v1 or v1beta1); use :func:`parse_http_route`."""

    spec: HTTPRouteSpec = Field(default_factory=HTTPRouteSpec)
    status: RouteStatus = Field(default_factory=RouteStatus)


class ReferenceGrantFrom(KubeModel):
    group: str = Field(max_length=253, pattern=GROUP)
    kind: str = Field(min_length=1, max_length=63, pattern=KIND)
    namespace: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL)

    @field_validator("group")
    @classmethod
    def _normalize_group(cls, group: str) -> str:
        return normalize_group(group)


class ReferenceGrantTo(KubeModel):
    group: str = Field(max_length=253, pattern=GROUP)
    kind: str = Field(min_length=1, max_length=63, pattern=KIND)
    name: str | None = Field(None, min_length=1, max_length=253)

    @field_validator("group")
    @classmethod
    def _normalize_group(cls, group: str) -> str:
        return normalize_group(group)


class ReferenceGrantSpec(KubeModel):
    from_: tuple[ReferenceGrantFrom, ...] = Field(alias="from", min_length=1, max_length=16)
    to: tuple[ReferenceGrantTo, ...] = Field(min_length=1, max_length=16)


class ReferenceGrant(KubeObject):
    """A ReferenceGrant (v1 or v1beta1): lets objects in other namespaces refer into its own."""

    spec: ReferenceGrantSpec

    def permits(
        self,
        *,
        from_group: str,
        from_kind: str,
        from_namespace: str,
        to_group: str,
        to_kind: str,
        to_namespace: str,
        to_name: str,
    ) -> bool:
        """Whether this grant lets a ``from_kind`` in ``from_namespace`` refer to the target.

        A grant only speaks for its own namespace, so the target must live there; a ``to``
        entry without a name permits every object of that group and kind.
        """
        if self.metadata.namespace != to_namespace:
            return False
        from_ok = any(
            f.group == normalize_group(from_group)
            and f.kind == from_kind
            and f.namespace == from_namespace
            for f in self.spec.from_
        )
        return from_ok and any(
            t.group == normalize_group(to_group)
            and t.kind == to_kind
            and t.name in (None, "", to_name)
            for t in self.spec.to
        )


def reference_permitted(
    grants: Iterable[ReferenceGrant],
    *,
    from_kind: str,
    from_namespace: str,
    kind: str,
    target: ObjectKey,
) -> bool:
    """Whether a ``from_kind`` of the Gateway API group in ``from_namespace`` (a Gateway, a
    ListenerSet) may refer to the core object ``kind`` ``target``: one in its own namespace,
    or one a ReferenceGrant there permits."""
    return target.namespace == from_namespace or any(
        grant.permits(
            from_group=GATEWAY_GROUP,
            from_kind=from_kind,
            from_namespace=from_namespace,
            to_group=CORE_GROUP,
            to_kind=kind,
            to_namespace=target.namespace,
            to_name=target.name,
        )
        for grant in grants
    )


def parse_http_route(raw: dict[str, Any]) -> HTTPRoute:
    """An HTTPRoute from API JSON; raises :class:`InvalidObject` naming the bad field."""
    return parse_namespaced(HTTPRoute, "HTTPRoute", raw)


def parse_reference_grant(raw: dict[str, Any]) -> ReferenceGrant:
    """A ReferenceGrant from API JSON; raises :class:`InvalidObject` naming the bad field."""
    return parse_namespaced(ReferenceGrant, "ReferenceGrant", raw)
