"""An :class:`~interlock.model.outbound.OutboundPolicy` in Linkerd's proxy API encoding.

interlock computes one policy per Service port and client namespace (``model/outbound_policy.py``);
the JSON API serves it in interlock's shape, and this module writes the same policy as the
``io.linkerd.proxy.outbound.OutboundPolicy`` message a Linkerd proxy reads from Linkerd's own policy
controller. It is a second encoding, never a second computation: everything here is a pure function
of the policy, so both APIs always tell the same story.

Where Linkerd's controller makes a choice that the proxy relies on, the encoding makes the same
one (``docs/policy-api.md``, "Linkerd's proxy API"): the policy's metadata names the parent
Service port; the parent's own backend is a ``BalanceP2c`` whose ``Destination`` path is the
Service's authority (``name.ns.svc.cluster.local:port``, resolved by the proxy through the
destination API); a port of unknown protocol is served with ``Detect`` (10 s), an opaque
fallback and the same HTTP routes for HTTP/1 and HTTP/2; a backend that cannot carry traffic is
a backend without a balancer, named ``invalid``, with a failure-injector filter (HTTP 500, or a
gRPC status for gRPC routes, or an ``Invalid`` filter for TLS and opaque routes); retries get
Linkerd's backoff (25 ms to 250 ms, full jitter) and 64 KiB of replay buffer; the queue is
Linkerd's (100 requests, fail fast after 3 s). What the proto has no field for (URLRewrite, CORS
and RequestMirror filters, a gRPC response header modifier, ``timeouts.backendRequest``, gRPC
method matches by regular expression) is left out here and listed in the docs.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from typing import Any

from interlock.api.grpc.proto import (
    destination_pb2,
    grpc_route_pb2,
    http_route_pb2,
    http_types_pb2,
    meta_pb2,
    net_pb2,
    opaque_route_pb2,
    outbound_pb2,
    tls_route_pb2,
)
from interlock.model.durations import InvalidDuration, parse_duration
from interlock.model.gateway import (
    HTTPHeader,
    HTTPHeaderFilter,
    HTTPHeaderMatch,
    HTTPRequestRedirectFilter,
    HTTPRouteFilter,
    HTTPRouteMatch,
)
from interlock.model.grpc_route import GRPCRouteMatch
from interlock.model.outbound import (
    DEFAULT_ROUTE_KIND,
    Backend,
    OutboundPolicy,
    OutboundRoute,
    ResolvedRule,
    RouteFilter,
)
from interlock.model.policy_annotations import FailureAccrual, Retry

DEFAULT_CLUSTER_DOMAIN = "cluster.local"

DETECT_TIMEOUT = timedelta(seconds=10)
"""How long a proxy waits for a client's first bytes to tell HTTP from opaque (Linkerd's)."""
QUEUE_CAPACITY = 100
QUEUE_FAILFAST = timedelta(seconds=3)
EWMA_DEFAULT_RTT = timedelta(milliseconds=30)
EWMA_DECAY = timedelta(seconds=10)
RETRY_MIN_BACKOFF = timedelta(milliseconds=25)
RETRY_MAX_BACKOFF = timedelta(milliseconds=250)
RETRY_MAX_REQUEST_BYTES = 64 * 1024
"""Linkerd's retry settings: what a proxy buffers to replay a request, and its backoff."""

_METHODS = {
    name: http_types_pb2.HttpMethod.Registered.Value(name)
    for name in ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "HEAD", "TRACE")
}

_GRPC_CONDITIONS = {
    "cancelled": "cancelled",
    "deadline-exceeded": "deadine_exceeded",  # sic: the proto's field name
    "internal": "internal",
    "resource-exhausted": "resource_exhausted",
    "unavailable": "unavailable",
}


def authority(namespace: str, name: str, port: int, cluster_domain: str) -> str:
    """The name a proxy resolves a Service port by (the destination API's path)."""
    return f"{name}.{namespace}.svc.{cluster_domain}:{port}"


def _resource(group: str, kind: str, namespace: str, name: str, port: int = 0) -> meta_pb2.Metadata:
    return meta_pb2.Metadata(
        resource=meta_pb2.Resource(
            group=group or "core", kind=kind, namespace=namespace, name=name, port=port
        )
    )


def _queue() -> outbound_pb2.Queue:
    return outbound_pb2.Queue(capacity=QUEUE_CAPACITY, failfast_timeout=QUEUE_FAILFAST)


def _service_backend(
    namespace: str, name: str, port: int, cluster_domain: str
) -> outbound_pb2.Backend:
    Backend_ = outbound_pb2.Backend
    return Backend_(
        metadata=_resource("core", "Service", namespace, name, port),
        queue=_queue(),
        balancer=Backend_.BalanceP2c(
            discovery=Backend_.EndpointDiscovery(
                dst=Backend_.EndpointDiscovery.DestinationGet(
                    path=authority(namespace, name, port, cluster_domain)
                )
            ),
            peak_ewma=Backend_.BalanceP2c.PeakEwma(default_rtt=EWMA_DEFAULT_RTT, decay=EWMA_DECAY),
        ),
    )


def _invalid_backend() -> outbound_pb2.Backend:
    return outbound_pb2.Backend(metadata=meta_pb2.Metadata(default="invalid"), queue=_queue())


def _duration(text: str | None) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except InvalidDuration:
        return None  # validated where it was read; nothing a proxy could use


# ----------------------------------------------------------------------------------------------
# The policy


def encode_policy(
    policy: OutboundPolicy, *, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> outbound_pb2.OutboundPolicy:
    """``policy`` as Linkerd's controller would serve it to a proxy."""
    encoder = _Encoder(policy, cluster_domain)
    return outbound_pb2.OutboundPolicy(
        metadata=_resource("core", "Service", policy.namespace, policy.service, policy.port),
        protocol=encoder.protocol(),
    )


class _Encoder:
    """One policy's encoding; holds what every part of it shares (the parent's backend)."""

    def __init__(self, policy: OutboundPolicy, cluster_domain: str) -> None:
        self.policy = policy
        self.cluster_domain = cluster_domain
        self.parent = _service_backend(
            policy.namespace, policy.service, policy.port, cluster_domain
        )
        self.accrual = _failure_accrual(policy.failure_accrual)

    def protocol(self) -> outbound_pb2.ProxyProtocol:
        policy, P = self.policy, outbound_pb2.ProxyProtocol
        routes = policy.routes
        kind = routes[0].kind if routes else DEFAULT_ROUTE_KIND
        if policy.protocol == "opaque" and kind != "TCPRoute":
            # The model serves an opaque port its TCPRoute or its Default route (never HTTP,
            # gRPC or TLS routes); the Default route of an opaque port is Linkerd's opaque one.
            return P(opaque=P.Opaque(routes=[self.default_opaque_route()]))
        if kind == "GRPCRoute":
            grpc = [self.grpc_route(r) for r in routes]
            return P(grpc=P.Grpc(routes=grpc, failure_accrual=self.accrual))
        if kind == "TLSRoute":
            return P(tls=P.Tls(routes=[self.tls_route(r) for r in routes]))
        if kind == "TCPRoute":
            return P(opaque=P.Opaque(routes=[self.opaque_route(r) for r in routes]))
        http = [self.http_route(r) for r in routes]
        if policy.protocol == "http1":
            return P(http1=P.Http1(routes=http, failure_accrual=self.accrual))
        if policy.protocol == "http2":
            return P(http2=P.Http2(routes=http, failure_accrual=self.accrual))
        return P(
            detect=P.Detect(
                timeout=DETECT_TIMEOUT,
                opaque=P.Opaque(routes=[self.default_opaque_route()]),
                http1=P.Http1(routes=http, failure_accrual=self.accrual),
                http2=P.Http2(routes=http, failure_accrual=self.accrual),
            )
        )

    def route_metadata(self, route: OutboundRoute, default: str) -> meta_pb2.Metadata:
        if route.kind == DEFAULT_ROUTE_KIND:
            return meta_pb2.Metadata(default=default)
        return _resource(route.group, route.kind, route.namespace, route.name)

    def is_parent(self, backend: Backend) -> bool:
        policy = self.policy
        return (backend.kind, backend.namespace, backend.name, backend.port) == (
            "Service",
            policy.namespace,
            policy.service,
            policy.port,
        )

    def backend(self, backend: Backend) -> outbound_pb2.Backend | None:
        """The backend when it can carry traffic, else None (the caller adds its failure).

        The parent Service port is always a balancer on its authority, as in Linkerd: asked
        for a Service that does not exist (yet), a proxy resolves the name itself.
        """
        if self.is_parent(backend):
            return self.parent
        if not backend.exists or backend.port is None:
            return None
        return _service_backend(backend.namespace, backend.name, backend.port, self.cluster_domain)

    # -- HTTP

    def http_route(self, route: OutboundRoute) -> outbound_pb2.HttpRoute:
        return outbound_pb2.HttpRoute(
            metadata=self.route_metadata(route, "http"),
            hosts=[_host_match(h) for h in route.hostnames],
            rules=[self.http_rule(rule) for rule in route.rules],
        )

    def http_rule(self, rule: ResolvedRule) -> outbound_pb2.HttpRoute.Rule:
        R = outbound_pb2.HttpRoute
        timeouts, request = _timeouts(rule)
        return R.Rule(
            matches=[_http_match(m) for m in rule.matches],
            filters=[f for f in (_http_filter(f) for f in rule.filters) if f is not None],
            backends=self.http_distribution(rule),
            requestTimeout=request,
            timeouts=timeouts,
            retry=_http_retry(rule.effective_retry),
        )

    def http_distribution(self, rule: ResolvedRule) -> outbound_pb2.HttpRoute.Distribution:
        D = outbound_pb2.HttpRoute.Distribution
        backends = [self.http_backend(b) for b in rule.backends]
        if not backends:
            return D(empty=D.Empty())
        if rule.distribution == "FirstAvailable":
            return D(first_available=D.FirstAvailable(backends=[b.backend for b in backends]))
        return D(random_available=D.RandomAvailable(backends=backends))

    def http_backend(self, backend: Backend) -> outbound_pb2.HttpRoute.WeightedRouteBackend:
        R = outbound_pb2.HttpRoute
        encoded = self.backend(backend)
        filters = [f for f in (_http_filter(f) for f in backend.filters) if f is not None]
        if encoded is None:
            encoded = _invalid_backend()
            status = 500 if backend.failure_injector is None else backend.failure_injector.status
            filters = [
                R.Filter(
                    failure_injector=http_route_pb2.HttpFailureInjector(
                        status=status, message=_failure_message(backend)
                    )
                )
            ]
        return R.WeightedRouteBackend(
            weight=backend.weight, backend=R.RouteBackend(backend=encoded, filters=filters)
        )

    # -- gRPC

    def grpc_route(self, route: OutboundRoute) -> outbound_pb2.GrpcRoute:
        return outbound_pb2.GrpcRoute(
            metadata=self.route_metadata(route, "grpc"),
            hosts=[_host_match(h) for h in route.hostnames],
            rules=[r for r in (self.grpc_rule(rule) for rule in route.rules) if r is not None],
        )

    def grpc_rule(self, rule: ResolvedRule) -> outbound_pb2.GrpcRoute.Rule | None:
        """The rule, or None when every match it has is one the proto cannot carry (served
        without them it would match every call)."""
        R = outbound_pb2.GrpcRoute
        D = R.Distribution
        timeouts, request = _timeouts(rule)
        backends = [self.grpc_backend(b) for b in rule.backends]
        distribution = (
            D(random_available=D.RandomAvailable(backends=backends))
            if backends
            else D(empty=D.Empty())
        )
        matches = [m for m in (_grpc_match(m) for m in rule.grpc_matches or ()) if m is not None]
        if rule.grpc_matches and not matches:
            return None
        return R.Rule(
            matches=matches or [grpc_route_pb2.GrpcRouteMatch()],
            filters=[f for f in (_grpc_filter(f) for f in rule.filters) if f is not None],
            backends=distribution,
            requestTimeout=request,
            timeouts=timeouts,
            retry=_grpc_retry(rule.effective_retry),
        )

    def grpc_backend(self, backend: Backend) -> outbound_pb2.GrpcRoute.WeightedRouteBackend:
        R = outbound_pb2.GrpcRoute
        encoded = self.backend(backend)
        filters = [f for f in (_grpc_filter(f) for f in backend.filters) if f is not None]
        if encoded is None:
            encoded = _invalid_backend()
            injector = backend.failure_injector
            code = 14 if injector is None or injector.grpc_status is None else injector.grpc_status
            filters = [
                R.Filter(
                    failure_injector=grpc_route_pb2.GrpcFailureInjector(
                        code=code, message=_failure_message(backend)
                    )
                )
            ]
        return R.WeightedRouteBackend(
            weight=backend.weight, backend=R.RouteBackend(backend=encoded, filters=filters)
        )

    # -- TLS and opaque

    def tls_route(self, route: OutboundRoute) -> outbound_pb2.TlsRoute:
        return outbound_pb2.TlsRoute(
            metadata=self.route_metadata(route, "tls"),
            snis=[_sni_match(h) for h in route.hostnames],
            rules=self.stream_rules(route, outbound_pb2.TlsRoute),
        )

    def opaque_route(self, route: OutboundRoute) -> outbound_pb2.OpaqueRoute:
        return outbound_pb2.OpaqueRoute(
            metadata=self.route_metadata(route, "opaq"),
            rules=self.stream_rules(route, outbound_pb2.OpaqueRoute),
        )

    def stream_rules(self, route: OutboundRoute, message: Any) -> list[Any]:
        """The rules of a TLS or opaque route (``message``: ``TlsRoute`` or ``OpaqueRoute``,
        alike but for their names): weighted backends, an ``Invalid`` filter on those that
        cannot carry traffic."""
        D = message.Distribution
        rules = []
        for rule in route.rules:
            backends = []
            for backend in rule.backends:
                encoded = self.backend(backend)
                filters = []
                if encoded is None:
                    encoded = _invalid_backend()
                    invalid = opaque_route_pb2.Invalid(message=_failure_message(backend))
                    filters = [message.Filter(invalid=invalid)]
                backends.append(
                    message.WeightedRouteBackend(
                        weight=backend.weight,
                        backend=message.RouteBackend(backend=encoded, filters=filters),
                    )
                )
            distribution = D(random_available=D.RandomAvailable(backends=backends))
            rules.append(message.Rule(backends=distribution))
        return rules

    def default_opaque_route(self) -> outbound_pb2.OpaqueRoute:
        O = outbound_pb2.OpaqueRoute  # noqa: E741 (the proto's name)
        D = O.Distribution
        first = D.FirstAvailable(backends=[O.RouteBackend(backend=self.parent)])
        return O(
            metadata=meta_pb2.Metadata(default="opaq"),
            rules=[O.Rule(backends=D(first_available=first))],
        )


def _failure_message(backend: Backend) -> str:
    if backend.failure_injector is not None:
        return backend.failure_injector.message
    return f"backend {backend.kind} {backend.namespace}/{backend.name} cannot carry traffic"


# ----------------------------------------------------------------------------------------------
# Matches, filters, timeouts, retries, accrual


def _host_match(hostname: str) -> http_route_pb2.HostMatch:
    if hostname.startswith("*."):
        labels = list(reversed(hostname[2:].split(".")))
        return http_route_pb2.HostMatch(
            suffix=http_route_pb2.HostMatch.Suffix(reverse_labels=labels)
        )
    return http_route_pb2.HostMatch(exact=hostname)


def _sni_match(hostname: str) -> tls_route_pb2.SniMatch:
    if hostname.startswith("*."):
        labels = list(reversed(hostname[2:].split(".")))
        return tls_route_pb2.SniMatch(suffix=tls_route_pb2.SniMatch.Suffix(reverse_labels=labels))
    return tls_route_pb2.SniMatch(exact=hostname)


def _header_match(match: HTTPHeaderMatch) -> http_route_pb2.HeaderMatch:
    if match.type == "Exact":
        return http_route_pb2.HeaderMatch(name=match.name, exact=match.value.encode())
    return http_route_pb2.HeaderMatch(name=match.name, regex=match.value)


def _http_match(match: HTTPRouteMatch) -> http_route_pb2.HttpRouteMatch:
    path = match.path
    if path.type == "Exact":
        path_match = http_route_pb2.PathMatch(exact=path.value)
    elif path.type == "PathPrefix":
        path_match = http_route_pb2.PathMatch(prefix=path.value)
    else:
        path_match = http_route_pb2.PathMatch(regex=path.value)
    method = None
    if match.method is not None:
        method = http_types_pb2.HttpMethod(registered=_METHODS[match.method])
    return http_route_pb2.HttpRouteMatch(
        path=path_match,
        headers=[_header_match(h) for h in match.headers],
        query_params=[
            http_route_pb2.QueryParamMatch(name=q.name, exact=q.value)
            if q.type == "Exact"
            else http_route_pb2.QueryParamMatch(name=q.name, regex=q.value)
            for q in match.query_params
        ],
        method=method,
    )


def _grpc_match(match: GRPCRouteMatch) -> grpc_route_pb2.GrpcRouteMatch | None:
    """The match, or None for a method match by regular expression (no field for it)."""
    rpc = None
    if match.method is not None:
        if match.method.type != "Exact":
            return None
        rpc = grpc_route_pb2.GrpcRpcMatch(
            service=match.method.service or "", method=match.method.method or ""
        )
    return grpc_route_pb2.GrpcRouteMatch(rpc=rpc, headers=[_header_match(h) for h in match.headers])


def _header_list(pairs: tuple[HTTPHeader, ...]) -> http_types_pb2.Headers:
    return http_types_pb2.Headers(
        headers=[http_types_pb2.Headers.Header(name=h.name, value=h.value.encode()) for h in pairs]
    )


def _request_headers(modifier: HTTPHeaderFilter) -> http_route_pb2.RequestHeaderModifier:
    return http_route_pb2.RequestHeaderModifier(
        add=_header_list(modifier.add), set=_header_list(modifier.set), remove=modifier.remove
    )


def _redirect(redirect: HTTPRequestRedirectFilter) -> http_route_pb2.RequestRedirect:
    scheme = None
    if redirect.scheme is not None:
        scheme = http_types_pb2.Scheme(registered=redirect.scheme.upper())
    path = None
    if redirect.path is not None:
        if redirect.path.type == "ReplaceFullPath":
            path = http_route_pb2.PathModifier(full=redirect.path.replace_full_path or "")
        else:
            path = http_route_pb2.PathModifier(prefix=redirect.path.replace_prefix_match or "")
    return http_route_pb2.RequestRedirect(
        scheme=scheme,
        host=redirect.hostname or "",
        path=path,
        port=redirect.port or 0,
        status=redirect.status_code,
    )


def _http_filter(
    filter_: RouteFilter,
) -> outbound_pb2.HttpRoute.Filter | None:
    """The filter, or None for a type Linkerd's proxy API has no filter for."""
    F = outbound_pb2.HttpRoute.Filter
    if filter_.type == "RequestHeaderModifier" and filter_.request_header_modifier is not None:
        return F(request_header_modifier=_request_headers(filter_.request_header_modifier))
    if filter_.type == "ResponseHeaderModifier" and filter_.response_header_modifier is not None:
        modifier = filter_.response_header_modifier
        response = http_route_pb2.ResponseHeaderModifier(
            add=_header_list(modifier.add), set=_header_list(modifier.set), remove=modifier.remove
        )
        return F(response_header_modifier=response)
    if (
        isinstance(filter_, HTTPRouteFilter)
        and filter_.type == "RequestRedirect"
        and filter_.request_redirect is not None
    ):
        return F(redirect=_redirect(filter_.request_redirect))
    return None


def _grpc_filter(
    filter_: RouteFilter,
) -> outbound_pb2.GrpcRoute.Filter | None:
    F = outbound_pb2.GrpcRoute.Filter
    if filter_.type == "RequestHeaderModifier" and filter_.request_header_modifier is not None:
        return F(request_header_modifier=_request_headers(filter_.request_header_modifier))
    return None


def _timeouts(rule: ResolvedRule) -> tuple[http_route_pb2.Timeouts, timedelta | None]:
    """The rule's timeouts, and the request timeout again for proxies that read the
    deprecated ``requestTimeout`` field (as Linkerd's controller writes it)."""
    annotated = dict(rule.annotated_timeouts)
    own = rule.timeouts
    request = _duration((own.request if own is not None else None) or annotated.get("request"))
    response = _duration(annotated.get("response"))
    idle = _duration(annotated.get("idle"))
    return http_route_pb2.Timeouts(request=request, response=response, idle=idle), request


def _backoff(retry: Retry) -> outbound_pb2.ExponentialBackoff:
    low = _duration(retry.backoff) or RETRY_MIN_BACKOFF
    return outbound_pb2.ExponentialBackoff(
        min_backoff=low, max_backoff=max(low, RETRY_MAX_BACKOFF), jitter_ratio=1.0
    )


def _http_retry(retry: Retry | None) -> outbound_pb2.HttpRoute.Retry | None:
    if retry is None:
        return None
    R = outbound_pb2.HttpRoute.Retry
    ranges = [R.Conditions.StatusRange(start=r.min, end=r.max) for r in retry.status_ranges]
    ranges += [R.Conditions.StatusRange(start=code, end=code) for code in retry.codes]
    if not ranges and not retry.grpc_codes:
        ranges = [R.Conditions.StatusRange(start=500, end=599)]  # Linkerd's default condition
    return R(
        max_retries=retry.attempts or 0,
        max_request_bytes=RETRY_MAX_REQUEST_BYTES,
        conditions=R.Conditions(status_ranges=ranges),
        timeout=_duration(retry.timeout),
        backoff=_backoff(retry),
    )


def _grpc_retry(retry: Retry | None) -> outbound_pb2.GrpcRoute.Retry | None:
    if retry is None:
        return None
    R = outbound_pb2.GrpcRoute.Retry
    codes = retry.grpc_codes or ("cancelled", "deadline-exceeded", "resource-exhausted")
    conditions = R.Conditions(**{_GRPC_CONDITIONS[c]: True for c in codes if c in _GRPC_CONDITIONS})
    return R(
        max_retries=retry.attempts or 0,
        max_request_bytes=RETRY_MAX_REQUEST_BYTES,
        conditions=conditions,
        timeout=_duration(retry.timeout),
        backoff=_backoff(retry),
    )


def _failure_accrual(accrual: FailureAccrual | None) -> outbound_pb2.FailureAccrual | None:
    if accrual is None:
        return None
    F = outbound_pb2.FailureAccrual
    return F(
        consecutive_failures=F.ConsecutiveFailures(
            max_failures=accrual.max_failures,
            backoff=outbound_pb2.ExponentialBackoff(
                min_backoff=accrual.min_penalty,
                max_backoff=accrual.max_penalty,
                jitter_ratio=accrual.jitter_ratio,
            ),
        )
    )


def serialized(message: object) -> bytes:
    """A message's wire bytes, deterministic (the same policy, the same bytes)."""
    data: bytes = message.SerializeToString(deterministic=True)  # type: ignore[attr-defined]
    return data


# ----------------------------------------------------------------------------------------------
# Answers for targets that are not a Service port


def _tcp_address(ip: str, port: int) -> net_pb2.TcpAddress:
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv4Address):
        return net_pb2.TcpAddress(ip=net_pb2.IPAddress(ipv4=int(address)), port=port)
    bits = int(address)
    ipv6 = net_pb2.IPv6(first=bits >> 64, last=bits & ((1 << 64) - 1))
    return net_pb2.TcpAddress(ip=net_pb2.IPAddress(ipv6=ipv6), port=port)


def egress_fallback(ip: str, port: int) -> outbound_pb2.OutboundPolicy:
    """An address outside the cluster's networks: forward to it as is (Linkerd's
    ``egress-fallback``), HTTP detected, so a proxy keeps its egress."""
    P = outbound_pb2.ProxyProtocol
    metadata = meta_pb2.Metadata(default="egress-fallback")
    backend = outbound_pb2.Backend(
        metadata=metadata,
        queue=_queue(),
        forward=destination_pb2.WeightedAddr(addr=_tcp_address(ip, port), weight=1),
    )
    O = outbound_pb2.OpaqueRoute  # noqa: E741 (the proto's name)
    opaque = O(
        metadata=metadata,
        rules=[
            O.Rule(
                backends=O.Distribution(
                    first_available=O.Distribution.FirstAvailable(
                        backends=[O.RouteBackend(backend=backend)]
                    )
                )
            )
        ],
    )
    H = outbound_pb2.HttpRoute
    http = H(
        metadata=metadata,
        rules=[
            H.Rule(
                matches=[http_route_pb2.HttpRouteMatch()],
                backends=H.Distribution(
                    first_available=H.Distribution.FirstAvailable(
                        backends=[H.RouteBackend(backend=backend)]
                    )
                ),
            )
        ],
    )
    return outbound_pb2.OutboundPolicy(
        metadata=metadata,
        protocol=P(
            detect=P.Detect(
                timeout=DETECT_TIMEOUT,
                opaque=P.Opaque(routes=[opaque]),
                http1=P.Http1(routes=[http]),
                http2=P.Http2(routes=[http]),
            )
        ),
    )


def undefined_port(namespace: str, name: str, port: int) -> outbound_pb2.OutboundPolicy:
    """A Service's cluster IP on a port the Service does not have: connections are refused
    (Linkerd's ``undefined-port``: an opaque route with a ``Forbidden`` filter)."""
    O = outbound_pb2.OpaqueRoute  # noqa: E741 (the proto's name)
    P = outbound_pb2.ProxyProtocol
    route = O(
        metadata=meta_pb2.Metadata(default="undefined-port"),
        rules=[
            O.Rule(
                backends=O.Distribution(empty=O.Distribution.Empty()),
                filters=[O.Filter(forbidden=opaque_route_pb2.Forbidden())],
            )
        ],
    )
    return outbound_pb2.OutboundPolicy(
        metadata=_resource("core", "Service", namespace, name, port),
        protocol=P(opaque=P.Opaque(routes=[route])),
    )
