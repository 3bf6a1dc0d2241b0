"""Gateway API input: GRPCRoute (``gateway.networking.k8s.io/v1``, as of Gateway API v1.6.1).

Linkerd serves GRPCRoutes on Service parents next to HTTPRoutes; a mesh client sends gRPC
calls by service and method, not by path, so the matches differ (a method match names a
``service`` and a ``method``) and so do the filters (no redirects or rewrites). Everything the
v1.6.1 standard schema holds is parsed and checked as the CRD would check it (patterns, sizes,
the CEL rules), for the same reason as in :mod:`interlock.model.gateway`: objects can reach us
without an API server's schema, and a bad value must be named with its field path. Valid
features interlock does not implement (RequestMirror, ExtensionRef filters, the experimental
sessionPersistence) are refused with that said, never skipped.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from interlock.model.gateway import (
    DNS_SUBDOMAIN,
    BackendRef,
    CommonRouteSpec,
    HTTPHeaderFilter,
    HTTPHeaderMatch,
    HTTPPathMatch,
    HTTPRequestMirrorFilter,
    HTTPRouteMatch,
    LocalObjectReference,
    RouteStatus,
    check_filter_config,
    check_hostnames,
    check_regex,
    check_total_matches,
    invalid,
    refuse_unimplemented,
)
from interlock.model.meta import (
    KubeModel,
    KubeObject,
    parse_namespaced,
)

GRPC_SUPPORTED_FILTER_TYPES = ("RequestHeaderModifier", "ResponseHeaderModifier")
"""GRPCRoute filter types interlock serves in its policy."""

_GRPC_FILTER_CONFIG_FIELD = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestMirror": "requestMirror",
    "ExtensionRef": "extensionRef",
}

# The CRD's CEL patterns for an Exact method match: a (possibly package-qualified) protobuf
# service name, and a method name.
_GRPC_SERVICE = re.compile(r"^\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$", re.IGNORECASE)
_GRPC_METHOD = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


class GRPCMethodMatch(KubeModel):
    """Which calls match: by ``service`` (``pkg.Service``) and/or ``method`` (``Get``)."""

    type: Literal["Exact", "RegularExpression"] = "Exact"
    service: str | None = Field(None, max_length=1024)
    method: str | None = Field(None, max_length=1024)

    @model_validator(mode="after")
    def _check(self) -> GRPCMethodMatch:
        if self.service is None and self.method is None:
            raise invalid("grpc_method", "one or both of 'service' or 'method' must be specified")
        if self.type == "RegularExpression":
            for value in (self.service, self.method):
                if value is not None:
                    check_regex(value)
            return self
        if self.service is not None and not _GRPC_SERVICE.fullmatch(self.service):
            raise invalid("grpc_method", f"service {self.service!r} is not a gRPC service name")
        if self.method is not None and not _GRPC_METHOD.fullmatch(self.method):
            raise invalid("grpc_method", f"method {self.method!r} is not a gRPC method name")
        return self


class GRPCRouteMatch(KubeModel):
    method: GRPCMethodMatch | None = None
    # The same schema as an HTTPRoute header match.
    headers: tuple[HTTPHeaderMatch, ...] = Field((), max_length=16)


class GRPCRouteFilter(KubeModel):
    """One filter; exactly the config field named by ``type`` is set (as the CRD's CEL rules)."""

    type: Literal[
        "ResponseHeaderModifier", "RequestHeaderModifier", "RequestMirror", "ExtensionRef"
    ]
    request_header_modifier: HTTPHeaderFilter | None = Field(None, alias="requestHeaderModifier")
    response_header_modifier: HTTPHeaderFilter | None = Field(None, alias="responseHeaderModifier")
    request_mirror: HTTPRequestMirrorFilter | None = Field(None, alias="requestMirror")
    extension_ref: LocalObjectReference | None = Field(None, alias="extensionRef")

    @model_validator(mode="after")
    def _config_present(self) -> GRPCRouteFilter:
        check_filter_config(self, _GRPC_FILTER_CONFIG_FIELD)
        if self.type not in GRPC_SUPPORTED_FILTER_TYPES:
            raise refuse_unimplemented(
                f"filter type {self.type}", ", ".join(GRPC_SUPPORTED_FILTER_TYPES)
            )
        return self


def _check_grpc_filters(filters: tuple[GRPCRouteFilter, ...]) -> tuple[GRPCRouteFilter, ...]:
    types: list[str] = [f.type for f in filters]
    for filter_type in GRPC_SUPPORTED_FILTER_TYPES:
        if types.count(filter_type) > 1:
            raise invalid("filters", f"filter {filter_type} may appear at most once")
    return filters


class GRPCBackendRef(BackendRef):
    """A rule's backend; its ``filters`` apply only to calls sent to this backend."""

    filters: tuple[GRPCRouteFilter, ...] = Field((), max_length=16)

    @field_validator("filters")
    @classmethod
    def _filter_list(cls, filters: tuple[GRPCRouteFilter, ...]) -> tuple[GRPCRouteFilter, ...]:
        return _check_grpc_filters(filters)


class GRPCRouteRule(KubeModel):
    name: str | None = Field(None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    # Unlike HTTPRoute there is no defaulted match: no matches means every call matches.
    matches: tuple[GRPCRouteMatch, ...] = Field((), max_length=64)
    filters: tuple[GRPCRouteFilter, ...] = Field((), max_length=16)
    backend_refs: tuple[GRPCBackendRef, ...] = Field((), alias="backendRefs", max_length=16)
    session_persistence: dict[str, Any] | None = Field(None, alias="sessionPersistence")

    @field_validator("filters")
    @classmethod
    def _filter_list(cls, filters: tuple[GRPCRouteFilter, ...]) -> tuple[GRPCRouteFilter, ...]:
        return _check_grpc_filters(filters)

    @field_validator("session_persistence")
    @classmethod
    def _session_persistence(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            raise refuse_unimplemented("sessionPersistence")
        return value


class GRPCRouteSpec(CommonRouteSpec):
    hostnames: tuple[str, ...] = Field((), max_length=16)
    rules: tuple[GRPCRouteRule, ...] = Field((), max_length=16)

    @field_validator("hostnames")
    @classmethod
    def _hostnames(cls, hostnames: tuple[str, ...]) -> tuple[str, ...]:
        return check_hostnames(hostnames)

    @field_validator("rules")
    @classmethod
    def _rules(cls, rules: tuple[GRPCRouteRule, ...]) -> tuple[GRPCRouteRule, ...]:
        check_total_matches(rules)
        return rules


class GRPCRoute(KubeObject):
    """A GRPCRoute (v1); use :func:`parse_grpc_route`."""

    spec: GRPCRouteSpec = Field(default_factory=GRPCRouteSpec)
    status: RouteStatus = Field(default_factory=RouteStatus)


def parse_grpc_route(raw: dict[str, Any]) -> GRPCRoute:
    """A GRPCRoute from API JSON; raises :class:`InvalidObject` naming the bad field."""
    return parse_namespaced(GRPCRoute, "GRPCRoute", raw)


GRPC_UNAVAILABLE = 14
"""The gRPC status a call to a backend that cannot carry traffic gets (the Gateway API's
choice for GRPCRoute, the counterpart of HTTPRoute's 500)."""


def _http_equivalent(match: GRPCRouteMatch) -> HTTPRouteMatch:
    # gRPC is HTTP/2 POST to /<service>/<method>: a method match is a path match on that.
    method = match.method
    if method is None:
        path = HTTPPathMatch(type="PathPrefix", value="/")
    elif method.type == "Exact" and method.service and method.method:
        path = HTTPPathMatch(type="Exact", value=f"/{method.service}/{method.method}")
    elif method.type == "Exact" and method.service:
        path = HTTPPathMatch(type="PathPrefix", value=f"/{method.service}")
    elif method.type == "Exact":
        path = HTTPPathMatch(
            type="RegularExpression", value=f"/[^/]+/{re.escape(method.method or '')}"
        )
    else:
        service = method.service or "[^/]+"
        name = method.method or "[^/]+"
        path = HTTPPathMatch(type="RegularExpression", value=f"/{service}/{name}")
    return HTTPRouteMatch(path=path, headers=match.headers, method="POST")


def grpc_matches_as_http(matches: tuple[GRPCRouteMatch, ...]) -> tuple[HTTPRouteMatch, ...]:
    """The HTTP matches a gRPC rule's matches amount to; no matches match every call."""
    if not matches:
        return (HTTPRouteMatch(method="POST"),)
    return tuple(_http_equivalent(m) for m in matches)
