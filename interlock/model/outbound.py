"""The outbound (mesh) policy: resolved routes, the policy of one Service port, request routing.

This is the core of the Linkerd fix interlock is built around. A backend that cannot carry
traffic (its Service is missing, it is not a Service, its port is wrong, or a producer route's
cross-namespace reference has no ReferenceGrant) is **kept with all its reference data**, marked
``exists=False`` and given a :class:`FailureInjector` that answers 500. Linkerd used to collapse
such a backend into an opaque ``Backend::Invalid``, which lost what was needed to bring it back
when the Service appeared. Here a backend is a pure function of the route and the current
Services and grants, so whenever any of them changes the route actor recomputes
:func:`resolve_route` and the result is right whatever order the events came in.

Everything here is pure and deterministic: outputs are frozen dataclasses, collections are
tuples in a defined order, and no result depends on the order of an input collection. Equal
inputs give equal outputs, which is what lets every actor "send only when modified".

Functions, in the order data flows through them:

- :func:`route_service_dependencies` / :func:`route_grant_namespaces`: what a route actor
  subscribes to.
- :func:`resolve_route` / :func:`resolve_route_by_parent`: an HTTPRoute plus Services and
  grants → :class:`ResolvedRoute` (per parent: producer and consumer routes differ on grants).
- :func:`build_outbound_policy`: resolved routes → the :class:`OutboundPolicy` of one Service
  port as seen from one client namespace (the JSON contract of ``docs/policy-api.md``).
- :func:`select_match` (:func:`select_route`) and :func:`pick_backend`: how a data plane applies
  a policy to a request (``interlock/dataplane/`` does, on the wire).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from interlock.model.gateway import (
    CORE_GROUP,
    GATEWAY_GROUP,
    HTTPBackendRef,
    HTTPPathMatch,
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRetry,
    HTTPRouteTimeouts,
    ParentReference,
    ReferenceGrant,
)
from interlock.model.grpc_route import (
    GRPC_UNAVAILABLE,
    GRPCBackendRef,
    GRPCRoute,
    GRPCRouteFilter,
    GRPCRouteMatch,
    GRPCRouteRule,
    grpc_matches_as_http,
)
from interlock.model.meta import ObjectKey
from interlock.model.policy_annotations import (
    OPAQUE_PORTS,
    AnnotationProblem,
    FailureAccrual,
    PolicyAnnotations,
    Protocol,
    Retry,
    opaque_ports,
    parse_failure_accrual,
    parse_policy_annotations,
    port_protocol,
)
from interlock.model.route_kinds import age_order, served_routes
from interlock.model.service import Service
from interlock.model.stream_routes import StreamRouteRule, TCPRoute, TLSRoute

if TYPE_CHECKING:
    from interlock.model.backend_tls import BackendTLS

BackendReason = Literal["BackendNotFound", "InvalidKind", "RefNotPermitted"]
"""Why a backend cannot carry traffic; the Gateway API ``ResolvedRefs`` reasons."""

MeshRoute = HTTPRoute | GRPCRoute | TLSRoute | TCPRoute
"""A route kind served on Service parents: rules of weighted backends (with matches for HTTP
and gRPC, SNI hostnames for TLS)."""

StreamRoute = TLSRoute | TCPRoute
"""The route kinds of connections rather than requests (no matches, no filters)."""

RouteFilter = HTTPRouteFilter | GRPCRouteFilter

DEFAULT_ROUTE_KIND = "Default"
"""The kind of the route synthesized for a Service port that no HTTPRoute attaches to."""

Distribution = Literal["FirstAvailable", "RandomWeighted"]
"""How a rule's backends share traffic: the first that can take it (the synthesized Default
route's single backend), or at random in proportion to their weights (route backendRefs)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureInjector:
    """Answer every request sent to this backend with ``status`` (a backend that cannot work)."""

    status: int = 500
    message: str
    grpc_status: int | None = None
    """For gRPC routes: the gRPC status calls get (UNAVAILABLE), beside the HTTP ``status``."""
    refuse_connection: bool = False
    """For TLS and TCP routes: the connection is refused (closed before any byte is forwarded),
    as Linkerd's proxy does for an opaque or TLS route's invalid backend; there is no response
    to carry a status. ``status`` stays for clients that read only it."""

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"status": self.status, "message": self.message}
        if self.grpc_status is not None:
            found["grpcStatus"] = self.grpc_status
        if self.refuse_connection:
            found["refuseConnection"] = True
        return found


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """One backendRef of a rule, resolved against the current Services and grants.

    ``exists`` is True exactly when ``failure_injector`` is None: the reference names a core
    Service that exists, may be referenced and has the port. Otherwise ``reason`` is the
    ``ResolvedRefs`` reason and the failure injector's message says what is wrong, naming the
    Service. A weight-0 backend is kept (it is never picked by :func:`pick_backend`).
    """

    kind: str
    group: str
    namespace: str
    name: str
    port: int | None
    weight: int
    exists: bool
    failure_injector: FailureInjector | None = None
    reason: BackendReason | None = None
    filters: tuple[RouteFilter, ...] = ()
    """The backendRef's own filters: applied only to requests sent to this backend."""
    tls: BackendTLS | None = None
    """How a Gateway speaks TLS to it (its BackendTLSPolicy, :mod:`interlock.model.backend_tls`);
    None: plain. Not part of the outbound policy API."""

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(namespace=self.namespace, name=self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "port": self.port,
            "weight": self.weight,
            "exists": self.exists,
            "failureInjector": (
                self.failure_injector.to_json() if self.failure_injector is not None else None
            ),
            "filters": filters_json(self.filters),
        }


def filters_json(filters: Iterable[RouteFilter]) -> list[dict[str, Any]]:
    """Filters in API spelling, each with its ``type`` and the one config field it uses."""
    return [f.model_dump(mode="json", by_alias=True, exclude_none=True) for f in filters]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceParent:
    """A parentRef naming a core Service (a mesh route), with its namespace filled in."""

    namespace: str
    name: str
    port: int | None = None
    section_name: str | None = None
    spec_ref: ParentReference | None = field(default=None, compare=False)
    """The parentRef as the spec wrote it (``group: core`` stays ``core``), for the status to
    echo (:meth:`ParentReference.as_written`): clients pair ``status.parents`` with
    ``spec.parentRefs`` by value. The route's own part, not a copy of its fields: every
    resolved route keeps its parents for as long as it lives."""

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(namespace=self.namespace, name=self.name)

    def is_producer_of(self, route_namespace: str) -> bool:
        """Whether a route in ``route_namespace`` is a producer route for this parent.

        A producer route lives in its parent Service's namespace and applies to every client
        (the edge included); a consumer route applies only to clients in its own namespace.
        """
        return self.namespace == route_namespace


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedRule:
    """A route rule whose backendRefs are resolved; ``matches`` is never empty."""

    name: str | None
    matches: tuple[HTTPRouteMatch, ...]
    filters: tuple[RouteFilter, ...]
    timeouts: HTTPRouteTimeouts | None
    backends: tuple[Backend, ...]
    retry: HTTPRouteRetry | None = None
    """The rule's own ``retry`` field."""
    distribution: Distribution = "RandomWeighted"
    annotated_timeouts: tuple[tuple[str, str], ...] = ()
    """Timeouts from annotations (route over Service), applied where the rule sets none."""
    annotated_retry: Retry | None = None
    """The retry from annotations (route over Service), used when the rule sets none."""
    grpc_matches: tuple[GRPCRouteMatch, ...] | None = None
    """A GRPCRoute rule's matches in gRPC terms (``matches`` holds their HTTP equivalent)."""

    @property
    def effective_retry(self) -> Retry | None:
        """The retry a data plane applies: the rule's field, else the annotations'."""
        if self.retry is None:
            return self.annotated_retry
        return Retry(
            source="rule",
            codes=self.retry.codes,
            attempts=self.retry.attempts,
            backoff=self.retry.backoff,
        )

    def to_json(self) -> dict[str, Any]:
        timeouts = self.timeouts or HTTPRouteTimeouts()
        annotated = dict(self.annotated_timeouts)
        retry = self.effective_retry
        return {
            "name": self.name,
            "matches": [m.model_dump(mode="json", by_alias=True) for m in self.matches],
            "filters": filters_json(self.filters),
            "timeouts": {
                "request": timeouts.request or annotated.get("request"),
                "backendRequest": timeouts.backend_request,
                "response": annotated.get("response"),
                "idle": annotated.get("idle"),
            },
            "retry": None if retry is None else retry.to_json(),
            "distribution": self.distribution,
            "backends": [b.to_json() for b in self.backends],
            **(
                {}
                if self.grpc_matches is None
                else {
                    "grpcMatches": [
                        m.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for m in self.grpc_matches
                    ]
                }
            ),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteAttachment:
    """What another route needs to know of a route to tell whether it loses a port to it: its
    kind, identity, age and Service parents (:func:`interlock.model.route_status.route_conflict`).
    It changes far less often than the resolution (never when a backend comes or goes)."""

    kind: str
    namespace: str
    name: str
    creation_timestamp: datetime | None
    parents: tuple[ServiceParent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedRoute:
    """An HTTPRoute with every backend resolved: what a route actor publishes to its parents.

    ``parents`` holds only the Service parents (Gateway parents belong to other controllers),
    in spec order without duplicates. :attr:`unresolved_backends` is the per-backend reason
    list that :func:`interlock.model.route_status.route_status` reports.
    """

    kind: str
    group: str
    namespace: str
    name: str
    creation_timestamp: datetime | None
    generation: int
    parents: tuple[ServiceParent, ...]
    hostnames: tuple[str, ...]
    rules: tuple[ResolvedRule, ...]
    annotations: PolicyAnnotations = field(default_factory=PolicyAnnotations)
    """The route's ``retry.linkerd.io/*`` and ``timeout.linkerd.io/*`` annotations, parsed."""

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(namespace=self.namespace, name=self.name)

    @property
    def attachment(self) -> RouteAttachment:
        return RouteAttachment(
            kind=self.kind,
            namespace=self.namespace,
            name=self.name,
            creation_timestamp=self.creation_timestamp,
            parents=self.parents,
        )

    @property
    def unresolved_backends(self) -> tuple[Backend, ...]:
        """Backends that cannot carry traffic, in rule and backendRef order."""
        return tuple(b for rule in self.rules for b in rule.backends if not b.exists)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboundRoute:
    """A route as it appears in one Service port's policy."""

    kind: str
    group: str
    namespace: str
    name: str
    creation_timestamp: datetime | None
    hostnames: tuple[str, ...]
    rules: tuple[ResolvedRule, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "group": self.group,
            "namespace": self.namespace,
            "name": self.name,
            "creationTimestamp": _rfc3339(self.creation_timestamp),
            "hostnames": list(self.hostnames),
            "rules": [rule.to_json() for rule in self.rules],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboundPolicy:
    """The policy of one Service port as seen by clients in ``client_namespace``."""

    namespace: str
    service: str
    port: int
    client_namespace: str
    routes: tuple[OutboundRoute, ...]
    protocol: Protocol = "detect"
    failure_accrual: FailureAccrual | None = None

    def to_json(self) -> dict[str, Any]:
        """The policy in the wire shape of ``docs/policy-api.md`` (camelCase keys)."""
        return {
            "namespace": self.namespace,
            "service": self.service,
            "port": self.port,
            "clientNamespace": self.client_namespace,
            "protocol": self.protocol,
            "failureAccrual": None
            if self.failure_accrual is None
            else self.failure_accrual.to_json(),
            "routes": [route.to_json() for route in self.routes],
        }


def service_exists(policy: OutboundPolicy) -> bool:
    """Whether the policy's Service exists: only a missing one has a Default route whose
    backend (the Service itself) does not exist."""
    routes = policy.routes
    if len(routes) != 1 or routes[0].kind != "Default":
        return True
    return all(b.exists for rule in routes[0].rules for b in rule.backends)


def _rfc3339(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def service_parents(
    parent_refs: Iterable[ParentReference], *, route_namespace: str
) -> tuple[ServiceParent, ...]:
    """The Service parents among ``parent_refs``, in order, without duplicates."""
    parents: list[ServiceParent] = []
    for ref in parent_refs:
        if not ref.is_service:
            continue
        parent = ServiceParent(
            namespace=ref.namespace or route_namespace,
            name=ref.name,
            port=ref.port,
            section_name=ref.section_name,
            spec_ref=ref,
        )
        if parent not in parents:
            parents.append(parent)
    return tuple(parents)


def route_service_dependencies(route: MeshRoute) -> frozenset[ObjectKey]:
    """Every Service whose existence or ports can change this route's output.

    The backend Services (any namespace, permitted or not: a grant may appear later) and the
    Service parents. A route actor subscribes to exactly these, so a Service event reaches only
    the routes it can affect.
    """
    keys = {
        parent.key
        for parent in service_parents(
            route.spec.parent_refs, route_namespace=route.metadata.namespace
        )
    }
    for rule in route.spec.rules:
        for ref in rule.backend_refs:
            if ref.is_service:
                keys.add(
                    ObjectKey(namespace=ref.namespace or route.metadata.namespace, name=ref.name)
                )
    return frozenset(keys)


def route_grant_namespaces(route: MeshRoute) -> frozenset[str]:
    """Namespaces whose ReferenceGrants can change this route: those of cross-namespace backends.

    Empty for a route that is a consumer route for all its Service parents: such a route needs
    no grant (see :func:`resolve_route`).
    """
    own = route.metadata.namespace
    parents = service_parents(route.spec.parent_refs, route_namespace=own)
    if parents and not any(p.is_producer_of(own) for p in parents):
        return frozenset()
    return frozenset(
        ref.namespace
        for rule in route.spec.rules
        for ref in rule.backend_refs
        if ref.is_service and ref.namespace is not None and ref.namespace != own
    )


def route_kind(route: MeshRoute) -> str:
    """``HTTPRoute``, ``GRPCRoute``, ``TLSRoute`` or ``TCPRoute``: the kind a route is served
    and granted as."""
    if isinstance(route, GRPCRoute):
        return "GRPCRoute"
    if isinstance(route, TLSRoute):
        return "TLSRoute"
    if isinstance(route, TCPRoute):
        return "TCPRoute"
    return "HTTPRoute"


def _resolve_backend(
    *,
    route: MeshRoute,
    kind: str,
    group: str,
    namespace: str,
    name: str,
    port: int | None,
    services: Mapping[ObjectKey, Service],
    grants: tuple[ReferenceGrant, ...],
    needs_grant: bool,
) -> tuple[BackendReason, str] | None:
    """Why this reference cannot carry traffic (reason and message), or None when it can."""
    if not (group == CORE_GROUP and kind == "Service"):
        shown_group = group or "core"
        return (
            "InvalidKind",
            f"backend {kind} {namespace}/{name}: kind {kind!r} in group {shown_group!r} is not "
            "supported; only core Services can be backends",
        )
    if port is None:
        return ("BackendNotFound", f"backend Service {namespace}/{name}: port is required")
    if (
        needs_grant
        and namespace != route.metadata.namespace
        and not any(
            grant.permits(
                from_group=GATEWAY_GROUP,
                from_kind=route_kind(route),
                from_namespace=route.metadata.namespace,
                to_group=CORE_GROUP,
                to_kind="Service",
                to_namespace=namespace,
                to_name=name,
            )
            for grant in grants
        )
    ):
        return (
            "RefNotPermitted",
            f"backend Service {namespace}/{name}: no ReferenceGrant in namespace {namespace} "
            f"permits references from {route_kind(route)}s in namespace {route.metadata.namespace}",
        )
    service = services.get(ObjectKey(namespace=namespace, name=name))
    if service is None:
        return ("BackendNotFound", f"backend Service {namespace}/{name} does not exist")
    if service.port_by_number(port) is None:
        return ("BackendNotFound", f"backend Service {namespace}/{name} has no port {port}")
    return None


def resolve_route(
    route: MeshRoute,
    services: Mapping[ObjectKey, Service],
    grants: Iterable[ReferenceGrant],
    *,
    parents: Iterable[ServiceParent] | None = None,
    require_grants: bool = True,
) -> ResolvedRoute:
    """Resolve every backendRef of ``route`` against the current Services and grants.

    The result serves ``parents`` (default: every Service parent of the route). Whether a
    cross-namespace backend needs a ReferenceGrant depends on them (GEP-1294, and the rule of
    ``docs/policy-api.md`` "ReferenceGrants"): a consumer route applies only to clients in its
    own namespace, which could reach the backend Service directly anyway, so it needs none; a
    producer route applies to every client, the edge included, so a cross-namespace backend
    would expose that namespace's Service to everyone who reaches the parent — the broader
    scope GEP-1294 excepts — and needs a grant. The grant is required as soon as one of
    ``parents`` is a producer parent (use :func:`resolve_route_by_parent` to keep the two
    apart), and when there is no Service parent at all. ``require_grants=False`` is Linkerd's
    reading (``--lax-reference-grants``): a producer route's cross-namespace backend needs none.

    Only ``services`` entries for the route's dependencies matter, so a caller may pass just
    those (see :func:`route_service_dependencies`). Backends keep their rule and list order.
    """
    own = route.metadata.namespace
    served = (
        service_parents(route.spec.parent_refs, route_namespace=own)
        if parents is None
        else tuple(parents)
    )
    needs_grant = require_grants and (not served or any(p.is_producer_of(own) for p in served))
    grant_list = tuple(grants)
    kind = route_kind(route)
    grpc = isinstance(route, GRPCRoute)
    stream = isinstance(route, StreamRoute)
    rules: list[ResolvedRule] = []
    for rule in route.spec.rules:
        backends: list[Backend] = []
        for ref in rule.backend_refs:
            namespace = ref.namespace or own
            problem = _resolve_backend(
                route=route,
                kind=ref.kind,
                group=ref.group,
                namespace=namespace,
                name=ref.name,
                port=ref.port,
                services=services,
                grants=grant_list,
                needs_grant=needs_grant,
            )
            backends.append(
                Backend(
                    kind=ref.kind,
                    group=ref.group,
                    namespace=namespace,
                    name=ref.name,
                    port=ref.port,
                    weight=ref.weight,
                    exists=problem is None,
                    failure_injector=None
                    if problem is None
                    else FailureInjector(
                        message=problem[1],
                        grpc_status=GRPC_UNAVAILABLE if grpc else None,
                        refuse_connection=stream,
                    ),
                    reason=None if problem is None else problem[0],
                    filters=ref.filters if isinstance(ref, HTTPBackendRef | GRPCBackendRef) else (),
                )
            )
        if isinstance(rule, StreamRouteRule):
            # One rule of weighted backends for every connection: as a match, everything.
            resolved_rule = ResolvedRule(
                name=rule.name,
                matches=(HTTPRouteMatch(),),
                filters=(),
                timeouts=None,
                backends=tuple(backends),
            )
        elif isinstance(rule, GRPCRouteRule):
            resolved_rule = ResolvedRule(
                name=rule.name,
                matches=grpc_matches_as_http(rule.matches),
                filters=rule.filters,
                timeouts=None,
                backends=tuple(backends),
                grpc_matches=rule.matches,
            )
        else:
            resolved_rule = ResolvedRule(
                name=rule.name,
                matches=rule.matches,
                filters=rule.filters,
                timeouts=rule.timeouts,
                backends=tuple(backends),
                retry=rule.retry,
            )
        rules.append(resolved_rule)
    return ResolvedRoute(
        kind=kind,
        group=GATEWAY_GROUP,
        namespace=own,
        name=route.metadata.name,
        creation_timestamp=route.metadata.creation_timestamp,
        generation=route.metadata.generation,
        parents=served,
        hostnames=() if isinstance(route, TCPRoute) else route.spec.hostnames,
        rules=tuple(rules),
        annotations=parse_policy_annotations(
            route.metadata.annotations,
            owner=f"{kind} {own}/{route.metadata.name}",
            source="route",
        ),
    )


def resolve_route_by_parent(
    route: MeshRoute,
    services: Mapping[ObjectKey, Service],
    grants: Iterable[ReferenceGrant],
    *,
    require_grants: bool = True,
) -> dict[ObjectKey, ResolvedRoute]:
    """The resolution each Service parent of ``route`` gets, by parent Service.

    A route can be a producer route for one parent (in its namespace) and a consumer route for
    another; the two resolve cross-namespace backends differently (:func:`resolve_route`), so
    each group of parents gets its own :class:`ResolvedRoute`, holding only that group's parents.
    """
    own = route.metadata.namespace
    grant_list = tuple(grants)
    everyone = service_parents(route.spec.parent_refs, route_namespace=own)
    by_parent: dict[ObjectKey, ResolvedRoute] = {}
    for producer in (True, False):
        group = tuple(p for p in everyone if p.is_producer_of(own) == producer)
        if not group:
            continue
        resolved = resolve_route(
            route, services, grant_list, parents=group, require_grants=require_grants
        )
        for parent in group:
            by_parent[parent.key] = resolved
    return by_parent


def parent_problem(parent: ServiceParent, service: Service | None) -> str | None:
    """Why ``service`` cannot take routes through ``parent`` (a NoMatchingParent message), or None.

    ``service`` is the Service the parentRef names (None when it does not exist). A headless or
    ExternalName Service has no cluster IP whose traffic a mesh could route.
    """
    where = f"parent Service {parent.namespace}/{parent.name}"
    if service is None:
        return f"{where} does not exist"
    if service.is_headless:
        return f"{where} is headless (clusterIP: None)"
    if service.is_external_name:
        return f"{where} is of type ExternalName"
    if parent.port is not None and service.port_by_number(parent.port) is None:
        return f"{where} has no port {parent.port}"
    if parent.section_name is not None:
        named = service.port_by_name(parent.section_name)
        if named is None:
            return f"{where} has no port named {parent.section_name!r}"
        if parent.port is not None and named.port != parent.port:
            return f"{where}: port {parent.section_name!r} is {named.port}, not {parent.port}"
    return None


def _attaches(
    parent: ServiceParent, *, service: Service, namespace: str, name: str, port: int
) -> bool:
    if (parent.namespace, parent.name) != (namespace, name):
        return False
    if parent_problem(parent, service) is not None:
        return False
    if parent.port is not None and parent.port != port:
        return False
    if parent.section_name is not None:
        named = service.port_by_name(parent.section_name)
        return named is not None and named.port == port
    return True


def attached_ports(parent: ServiceParent, service: Service) -> tuple[int, ...]:
    """The ports of ``service`` (the Service ``parent`` names) that a route attaches to through
    ``parent``, in the Service's order; none when the Service cannot take routes."""
    return tuple(
        p.port
        for p in service.spec.ports
        if _attaches(
            parent, service=service, namespace=parent.namespace, name=parent.name, port=p.port
        )
    )


def _route_order(route: ResolvedRoute | OutboundRoute) -> tuple[bool, datetime, str, str]:
    # Oldest first (a route without a timestamp sorts last), then namespace/name: Linkerd's and
    # the Gateway API's tie-break, and a total order so the output never depends on input order.
    return age_order(route)


def _parent_backend(service: Service | None, *, namespace: str, name: str, port: int) -> Backend:
    """The backend that sends traffic to the parent Service port itself."""
    problem: str | None = None
    if service is None:
        problem = f"Service {namespace}/{name} does not exist"
    elif service.spec.ports and service.port_by_number(port) is None:
        problem = f"Service {namespace}/{name} has no port {port}"
    return Backend(
        kind="Service",
        group=CORE_GROUP,
        namespace=namespace,
        name=name,
        port=port,
        weight=1,
        exists=problem is None,
        failure_injector=None if problem is None else FailureInjector(message=problem),
        reason=None if problem is None else "BackendNotFound",
    )


def _handles_request_itself(rule: ResolvedRule) -> bool:
    return any(f.type == "RequestRedirect" for f in rule.filters)


def build_outbound_policy(
    service: Service | None,
    namespace: str,
    name: str,
    port: int,
    client_namespace: str,
    routes: Iterable[ResolvedRoute],
) -> OutboundPolicy:
    """The policy of Service ``namespace/name`` port ``port`` for clients in ``client_namespace``.

    ``service`` is the Service itself (None when it does not exist); ``routes`` may hold any
    resolved routes, those not attached to this port are ignored. A route attaches through a
    Service parentRef naming this Service with this port, with this port's name as its
    sectionName, or with neither. Producer routes (in the Service's namespace) apply to every
    client; consumer routes (in another namespace) only to clients in the route's own namespace,
    and a client namespace with consumer routes for the port uses only those
    (:func:`consumer_precedence`).
    Routes are ordered oldest first, then by namespace/name. A rule without backendRefs sends
    traffic to the parent Service port (unless it redirects). With no attached route, one
    synthesized route of kind ``Default`` forwards everything to the Service port.
    """
    parent_backend = _parent_backend(service, namespace=namespace, name=name, port=port)
    service_annotations = service_policy_annotations(service)
    attached: list[ResolvedRoute] = []
    if service is not None:
        for route in routes:
            if route.namespace != namespace and route.namespace != client_namespace:
                continue
            if any(
                _attaches(p, service=service, namespace=namespace, name=name, port=port)
                for p in route.parents
            ):
                attached.append(route)
    attached = consumer_precedence(attached, namespace=namespace, client_namespace=client_namespace)
    protocol, accrual, _ = service_port_settings(service, port)
    kinds = PORT_ROUTE_KINDS.get(protocol)
    if kinds is not None:
        # Linkerd: a port's appProtocol (or opaque-ports) decides which route kinds can apply;
        # the others' status says so (route_status.route_conflict).
        attached = [route for route in attached if route.kind in kinds]
    # Linkerd's precedence between kinds on one port (GRPCRoute > HTTPRoute > TLSRoute >
    # TCPRoute, one TCPRoute): a client speaks one protocol; the losers' status says so.
    attached = served_routes(attached)
    outbound = tuple(
        OutboundRoute(
            kind=route.kind,
            group=route.group,
            namespace=route.namespace,
            name=route.name,
            creation_timestamp=route.creation_timestamp,
            hostnames=route.hostnames,
            rules=tuple(
                _annotated(
                    replace(rule, backends=(parent_backend,))
                    if not rule.backends and not _handles_request_itself(rule)
                    else rule,
                    route.annotations,
                    service_annotations,
                )
                for rule in route.rules
            ),
        )
        for route in attached
    )
    if not outbound:
        outbound = (
            OutboundRoute(
                kind=DEFAULT_ROUTE_KIND,
                group=CORE_GROUP,
                namespace=namespace,
                name=name,
                creation_timestamp=None,
                hostnames=(),
                rules=(
                    _annotated(
                        ResolvedRule(
                            name=None,
                            matches=(HTTPRouteMatch(),),
                            filters=(),
                            timeouts=None,
                            backends=(parent_backend,),
                            distribution="FirstAvailable",
                        ),
                        PolicyAnnotations(),
                        service_annotations,
                    ),
                ),
            ),
        )
    if protocol != "opaque" and attached:
        protocol = _ROUTE_PROTOCOLS.get(attached[0].kind, protocol)
    return OutboundPolicy(
        namespace=namespace,
        service=name,
        port=port,
        client_namespace=client_namespace,
        routes=outbound,
        protocol=protocol,
        failure_accrual=accrual,
    )


def consumer_precedence(
    routes: list[ResolvedRoute], *, namespace: str, client_namespace: str
) -> list[ResolvedRoute]:
    """The routes that apply to clients in ``client_namespace`` among those attached to a
    Service port of ``namespace``: GEP-1294 — a namespace with consumer routes for the Service
    uses only those; producer routes apply where it has none. (Linkerd's controller, and
    interlock before issue 28, served the union ordered by age, so an older producer route beat
    the consumer's own.)"""
    if client_namespace == namespace:
        return routes
    consumer = [route for route in routes if route.namespace == client_namespace]
    return consumer if consumer else routes


PORT_ROUTE_KINDS: dict[Protocol, frozenset[str]] = {
    "opaque": frozenset({"TCPRoute"}),
    "http1": frozenset({"HTTPRoute"}),
    "http2": frozenset({"GRPCRoute", "HTTPRoute"}),
}
"""The route kinds a port serves when its protocol is known (Linkerd's outbound index): an
opaque port (``appProtocol: linkerd.io/opaque``, opaque-ports) is never parsed, so only a
TCPRoute; ``appProtocol: http`` is HTTP/1, which carries no gRPC; ``kubernetes.io/h2c`` HTTP/2.
A ``detect`` port serves every kind (by the kind precedence)."""

PORT_PROTOCOL_WHY: dict[Protocol, str] = {
    "opaque": "opaque (appProtocol linkerd.io/opaque or config.linkerd.io/opaque-ports)",
    "http1": "HTTP/1 (appProtocol http)",
    "http2": "HTTP/2 (appProtocol kubernetes.io/h2c)",
}


def port_route_kinds(service: Service, port: int) -> tuple[Protocol, frozenset[str] | None]:
    """The Service port's protocol and the route kinds it serves (None: every kind)."""
    protocol = service_port_settings(service, port)[0]
    return protocol, PORT_ROUTE_KINDS.get(protocol)


_ROUTE_PROTOCOLS: dict[str, Protocol] = {
    "GRPCRoute": "grpc",
    "TLSRoute": "tls",
    "TCPRoute": "opaque",
}
"""The protocol a port's clients speak when its routes are of this kind (HTTPRoute: the
port's own, from its ``appProtocol``)."""


def service_policy_annotations(service: Service | None) -> PolicyAnnotations:
    """The Service's retry and timeout annotations (none when the Service does not exist)."""
    if service is None:
        return PolicyAnnotations()
    return parse_policy_annotations(
        service.metadata.annotations, owner=f"Service {service.key}", source="service"
    )


def service_port_settings(
    service: Service | None, port: int
) -> tuple[Protocol, FailureAccrual | None, tuple[AnnotationProblem, ...]]:
    """A Service port's protocol and the Service's failure accrual, with annotation problems."""
    if service is None:
        return "detect", None, ()
    owner = f"Service {service.key}"
    if OPAQUE_PORTS in service.metadata.annotations or service.namespace_opaque_ports is None:
        opaque, opaque_problems = opaque_ports(service.metadata.annotations, owner=owner)
    else:
        # Linkerd's rule: the Namespace's annotation, unless the Service has its own.
        opaque, opaque_problems = opaque_ports(
            {OPAQUE_PORTS: service.namespace_opaque_ports},
            owner=f"Namespace {service.metadata.namespace}",
        )
    accrual, accrual_problems = parse_failure_accrual(service.metadata.annotations, owner=owner)
    service_port = service.port_by_number(port)
    protocol = port_protocol(
        app_protocol=None if service_port is None else service_port.app_protocol,
        opaque=port in opaque,
    )
    return protocol, accrual, opaque_problems + accrual_problems


def service_annotation_problems(service: Service | None) -> tuple[AnnotationProblem, ...]:
    """Every malformed policy annotation on the Service (reported on its routes' status)."""
    if service is None:
        return ()
    _, _, port_problems = service_port_settings(service, 0)
    return service_policy_annotations(service).problems + port_problems


def _annotated(
    rule: ResolvedRule, route: PolicyAnnotations, service: PolicyAnnotations
) -> ResolvedRule:
    # Route annotations over Service annotations, per timeout key; a retry whole (module doc
    # of policy_annotations). The rule's own fields win over both when served (to_json).
    timeouts = {**dict(service.timeouts), **dict(route.timeouts)}
    retry = route.retry or service.retry
    if not timeouts and retry is None:
        return rule
    return replace(rule, annotated_timeouts=tuple(sorted(timeouts.items())), annotated_retry=retry)


def _path_rank(path: HTTPPathMatch) -> tuple[int, int]:
    # Gateway API: an exact path beats any prefix, a longer prefix beats a shorter one. The
    # rank of regular expressions is left to implementations; like Linkerd we put them last.
    if path.type == "Exact":
        return (2, len(path.value))
    if path.type == "PathPrefix":
        return (1, len(path.value.rstrip("/")))
    return (0, len(path.value))


def _path_matches(path: HTTPPathMatch, request_path: str) -> bool:
    if path.type == "Exact":
        return request_path == path.value
    if path.type == "PathPrefix":
        # Whole segments only: "/foo" matches "/foo" and "/foo/bar", never "/foobar"; a
        # trailing slash on the prefix is not significant.
        prefix = path.value.rstrip("/")
        return not prefix or request_path == prefix or request_path.startswith(prefix + "/")
    return re.fullmatch(path.value, request_path) is not None


def _value_matches(kind: str, expected: str, actual: str | None) -> bool:
    if actual is None:
        return False
    if kind == "Exact":
        return actual == expected
    return re.fullmatch(expected, actual) is not None


def _match_applies(
    match: HTTPRouteMatch,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> bool:
    if match.method is not None and match.method != method.upper():
        return False
    if not _path_matches(match.path, path):
        return False
    if not all(_value_matches(h.type, h.value, headers.get(h.name.lower())) for h in match.headers):
        return False
    return all(_value_matches(q.type, q.value, query.get(q.name)) for q in match.query_params)


def select_route(
    policy: OutboundPolicy,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> tuple[OutboundRoute, ResolvedRule] | None:
    """The route and rule a request is sent by (:func:`select_match` without the match)."""
    found = select_match(policy, method=method, path=path, headers=headers, query=query)
    return None if found is None else (found[0], found[1])


def select_match(
    policy: OutboundPolicy,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> tuple[OutboundRoute, ResolvedRule, HTTPRouteMatch] | None:
    """The route, rule and match a request is sent by, using the Gateway API's precedence.

    The match is returned because a ``ReplacePrefixMatch`` rewrite or redirect replaces the
    path prefix of the match that selected the rule.

    Across all routes and rules, the matching ``match`` with: an exact path, else the longest
    path prefix, then a method, then the most header matches, then the most query parameter
    matches wins; ties go to the oldest route, then by namespace/name, then to the first rule.
    Header names compare case-insensitively, query parameter names exactly. None when nothing
    matches (a data plane answers 404).
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    best: tuple[tuple[Any, ...], OutboundRoute, ResolvedRule, HTTPRouteMatch] | None = None
    for route in policy.routes:
        order = _route_order(route)
        for rule_index, rule in enumerate(route.rules):
            for match in rule.matches:
                if not _match_applies(
                    match, method=method, path=path, headers=lowered, query=query
                ):
                    continue
                kind_rank, length = _path_rank(match.path)
                rank = (
                    -kind_rank,
                    -length,
                    match.method is None,
                    -len(match.headers),
                    -len(match.query_params),
                    order,
                    rule_index,
                )
                if best is None or rank < best[0]:
                    best = (rank, route, rule, match)
    return None if best is None else (best[1], best[2], best[3])


def pick_backend(rule: ResolvedRule, rng_value: float) -> Backend | None:
    """The backend a request goes to, given a uniform random number in [0, 1).

    Each backend gets a share of traffic proportional to its weight, including backends that do
    not exist (their share answers 500, as the Gateway API requires). Weight-0 backends are never
    picked; None when every weight is 0 (or there are no backends).
    """
    if not 0.0 <= rng_value < 1.0:
        raise ValueError(f"rng_value must be in [0, 1), got {rng_value}")
    total = sum(b.weight for b in rule.backends)
    if total == 0:
        return None
    target = rng_value * total
    cumulative = 0
    chosen: Backend | None = None
    for backend in rule.backends:
        if backend.weight == 0:
            continue
        cumulative += backend.weight
        chosen = backend
        if target < cumulative:
            return backend
    # Only reached through float rounding at the very top of the range.
    return chosen
