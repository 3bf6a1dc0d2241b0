"""The outbound (mesh) policy's types: resolved routes and backends, the policy of one Service port.

This is the core of the Linkerd fix interlock is built around. A backend that cannot carry
traffic (its Service is missing, it is not a Service, its port is wrong, or a producer route's
cross-namespace reference has no ReferenceGrant) is **kept with all its reference data**, marked
``exists=False`` and given a :class:`FailureInjector` that answers 500. Linkerd used to collapse
such a backend into an opaque ``Backend::Invalid``, which lost what was needed to bring it back
when the Service appeared. Here a backend is a pure function of the route and the current
Services and grants, so whenever any of them changes the route actor recomputes
:func:`~interlock.model.route_resolution.resolve_route` and the result is right whatever order
the events came in.

Outputs are frozen dataclasses, collections are tuples in a defined order, and no result
depends on the order of an input collection. Equal inputs give equal outputs, which is what
lets every actor "send only when modified".

The outbound policy, by job, in the order data flows through it:

- :mod:`interlock.model.outbound` (here): the types.
- :mod:`interlock.model.route_dependencies`: what a route actor subscribes to.
- :mod:`interlock.model.route_resolution`: a route plus Services and grants →
  :class:`ResolvedRoute` (per parent: producer and consumer routes differ on grants).
- :mod:`interlock.model.outbound_policy`: resolved routes → the :class:`OutboundPolicy` of one
  Service port as seen from one client namespace.
- :mod:`interlock.api.policy_json`: the policy in the JSON of ``docs/policy-api.md``, beside
  its schema.
- :mod:`interlock.dataplane.matching`: how a data plane applies a policy to a request (the
  route, rule and match it is sent by, and its backend).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from interlock.model.gateway import (
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRetry,
    HTTPRouteTimeouts,
    ParentReference,
)
from interlock.model.grpc_route import (
    GRPCRoute,
    GRPCRouteFilter,
    GRPCRouteMatch,
)
from interlock.model.meta import ObjectKey
from interlock.model.policy_annotations import (
    FailureAccrual,
    PolicyAnnotations,
    Protocol,
    Retry,
)
from interlock.model.stream_routes import TCPRoute, TLSRoute

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


def service_exists(policy: OutboundPolicy) -> bool:
    """Whether the policy's Service exists: only a missing one has a Default route whose
    backend (the Service itself) does not exist."""
    routes = policy.routes
    if len(routes) != 1 or routes[0].kind != "Default":
        return True
    return all(b.exists for rule in routes[0].rules for b in rule.backends)
