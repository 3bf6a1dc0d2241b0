"""Gateway API inputs: TLSRoute and TCPRoute (``gateway.networking.k8s.io/v1``, Gateway API v1.6.1).

Linkerd routes opaque (non-HTTP) mesh traffic with these: a TCPRoute sends every connection to
a Service port to weighted backends, a TLSRoute does the same for TLS connections by their SNI
hostname, without terminating them. Both have exactly one rule of weighted backendRefs and no
matches or filters. They are parsed as the v1.6.1 standard CRDs check them (a TLSRoute needs at
least one hostname, no IP address among them, a wildcard only as the first label).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pydantic import Field, field_validator

from interlock.model.gateway import (
    DNS_SUBDOMAIN,
    BackendRef,
    CommonRouteSpec,
    RouteStatus,
    check_hostnames,
    invalid,
)
from interlock.model.meta import (
    KubeModel,
    KubeObject,
    parse_namespaced,
)


class StreamRouteRule(KubeModel):
    """The one rule of a TLSRoute or TCPRoute: weighted backends, nothing else."""

    name: str | None = Field(None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    backend_refs: tuple[BackendRef, ...] = Field(alias="backendRefs", min_length=1, max_length=16)


class _StreamRouteSpec(CommonRouteSpec):
    rules: tuple[StreamRouteRule, ...] = Field(min_length=1, max_length=1)


class TCPRouteSpec(_StreamRouteSpec):
    pass


class TLSRouteSpec(_StreamRouteSpec):
    hostnames: tuple[str, ...] = Field(min_length=1, max_length=1024)

    @field_validator("hostnames")
    @classmethod
    def _hostnames(cls, hostnames: tuple[str, ...]) -> tuple[str, ...]:
        for hostname in hostnames:
            try:
                ipaddress.ip_address(hostname)
            except ValueError:
                continue
            raise invalid("hostname", f"{hostname!r}: TLSRoute hostnames cannot be IP addresses")
        return check_hostnames(hostnames)


class TCPRoute(KubeObject):
    """A TCPRoute (v1); use :func:`parse_tcp_route`."""

    spec: TCPRouteSpec
    status: RouteStatus = Field(default_factory=RouteStatus)


class TLSRoute(KubeObject):
    """A TLSRoute (v1); use :func:`parse_tls_route`."""

    spec: TLSRouteSpec
    status: RouteStatus = Field(default_factory=RouteStatus)


def parse_tcp_route(raw: dict[str, Any]) -> TCPRoute:
    """A TCPRoute from API JSON; raises :class:`InvalidObject` naming the bad field."""
    return parse_namespaced(TCPRoute, "TCPRoute", raw)


def parse_tls_route(raw: dict[str, Any]) -> TLSRoute:
    """A TLSRoute from API JSON; raises :class:`InvalidObject` naming the bad field."""
    return parse_namespaced(TLSRoute, "TLSRoute", raw)
