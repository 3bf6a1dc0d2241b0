"""The kinds table: every Kubernetes kind the controller reads, how it is parsed, and where its
changes go.

An informer event becomes an :class:`~interlock.actors.messages.ObjectChanged` told to the
:class:`~interlock.actors.router.InformerRouter` (the event's identity is the trace's
correlation id). The router looks the kind up in the table the controller built from
:data:`KINDS` (only the rows of the halves that run) and nowhere else: before this table, where
a kind went was an ``if``/``elif`` in the router plus a ``router_handlers()`` in each half, and
"where does a Service change go" was answered by grepping. From a row, follow its receiver, and
from there the topic families it publishes on (:mod:`interlock.actors.topics`).

Two ways a row is delivered:

- ``ROUTER``: the router parses the object itself with the row's parser and hands the result
  on (a Service to the ServiceDirectory, a route to its topic and RouteActor, a ReferenceGrant
  to the GrantsDirectory, a Namespace's opaque-ports annotation to the ServiceDirectory).
- an actor's address: the router parses the object with the row's parser and tells that actor
  the model (:class:`~interlock.actors.messages.ObjectParsed`: every directory receives
  models, the GatewayController too). An object a parser cannot read arrives as None (the
  router logged the field), which the receiver takes as its absence; except a route for the
  Gateways, which reads routes its own way (``model/gateway_route_input.py``: interlock's
  filters taken out first) and never fails: one that does not parse arrives as a
  ``RejectedRoute``, so its Gateways report why. ``follows`` narrows which changes go there
  (the GatewayController reads only the routes that name, or named, one of its Gateways).

The path of a **Service** change: row ``Service`` → the router parses it (``parse_service``) →
``ServiceUpserted``/``ServiceDeleted`` to the ServiceDirectory → ``SERVICE`` topic, only if a
field readers use changed → each RouteActor that subscribed re-resolves its route
(``resolve_route``) and, if that changed, publishes on ``PARENT`` → the ServicePortWatch of
each watched port rebuilds its policy (``build_outbound_policy``) → the policy API streams, the
edge's and the mesh listener's upstreams.

The path of an **Ingress** change: row ``Ingress`` → parsed by the router
(``parse_stored_ingress``: the Ingress and its stored ``status.loadBalancer``) and told to the
Ingress directory, which spawns the Ingress's IngressActor and publishes on ``INGRESS`` →
the IngressActor follows its ModuleSets, Secrets and Services (``MODULESET``, ``SECRET``,
``SERVICE``), computes its routes per host (``ingress_host_routes``) and publishes a part on
``HOST`` → the EdgeActor of that host combines the parts (``edge_from_parts``) and reconciles
the data plane one step at a time (modules, then backend); status and Events go through the
StatusWriter (``STATUS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Literal

from interlock.actors.edge_messages import (
    ENDPOINTS_DIRECTORY,
    INGRESS_CLASS_DIRECTORY,
    INGRESS_DIRECTORY,
    MODULESET_DIRECTORY,
    SECRET_DIRECTORY,
)
from interlock.actors.gateway_messages import CA_BUNDLE_DIRECTORY, GATEWAY_CONTROLLER
from interlock.actors.messages import ObjectChanged, ObjectParsed
from interlock.actors.router import parse_change
from interlock.kube.resources import (
    BACKEND_TLS_POLICY,
    CONFIG_MAP,
    ENDPOINT_SLICE,
    GATEWAY,
    GATEWAY_CLASS,
    GRPC_ROUTE,
    HTTP_ROUTE_VERSIONS,
    INGRESS,
    INGRESS_CLASS,
    LISTENER_SET,
    MODULE_SET,
    NAMESPACE,
    REFERENCE_GRANT_VERSIONS,
    SECRET,
    SERVICE,
    TCP_ROUTE,
    TLS_ROUTE,
    Resource,
)
from interlock.model.gateway import parse_http_route, parse_reference_grant
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import namespace_labels
from interlock.model.service import parse_endpoint_slice, parse_service
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route


@dataclass(slots=True)
class LazyParser:
    """A parser imported on its first call: the edge's and the Gateway half's models (Ingress,
    ModuleSet, Gateway, ListenerSet, BackendTLSPolicy, …) load only in a controller that runs
    that half and reads such an object (issue 29 item 5, memory at rest:
    ``tests/controller/test_start_up_imports.py``)."""

    module: str
    name: str
    _parser: Callable[[dict[str, Any]], object] | None = field(default=None, repr=False)

    def __call__(self, obj: dict[str, Any]) -> object:
        parser = self._parser
        if parser is None:
            parser = self._parser = getattr(import_module(self.module), self.name)
        return parser(obj)


def _lazy(module: str, name: str) -> LazyParser:
    return LazyParser(f"interlock.{module}", name)


Half = Literal["outbound", "edge", "mesh", "gateway"]
"""Which part of the controller reads the kind: the outbound (mesh policy) core always runs;
the edge, the mesh listener and the Gateway half when configured."""

ROUTER = "informer-router"
"""The receiver of the kinds the router parses and hands on itself."""


@dataclass(frozen=True, slots=True)
class KindRow:
    """One kind: who reads it, which model function parses it, and where its changes go."""

    kind: str
    half: Half
    parser: Callable[..., Any] | None
    """The model function that reads the object (by the router, or by the receiver); None
    for a Namespace, of which only a label or an annotation is read."""
    receiver: str
    """:data:`ROUTER`, or the address of the actor the change is told to."""
    resources: tuple[Resource, ...]
    """The API versions its informer may watch, preferred first (the first the cluster serves;
    see :func:`watched`)."""
    follows: bool = False
    """Only the changes the half's filter accepts are told (``GatewayHalf.follows``)."""
    without: Half | None = None
    """Not delivered from this row when that half runs too (it delivers the kind itself)."""
    absent: str | None = None
    """What it means that the cluster serves none of its versions, when that is an ordinary
    setup (logged as information); None: the half's :data:`ABSENT` warning."""


KINDS: tuple[KindRow, ...] = (
    KindRow("Service", "outbound", parse_service, ROUTER, (SERVICE,)),
    KindRow("Namespace", "outbound", None, ROUTER, (NAMESPACE,)),
    KindRow("ReferenceGrant", "outbound", parse_reference_grant, ROUTER, REFERENCE_GRANT_VERSIONS),
    KindRow("HTTPRoute", "outbound", parse_http_route, ROUTER, HTTP_ROUTE_VERSIONS),
    KindRow("GRPCRoute", "outbound", parse_grpc_route, ROUTER, (GRPC_ROUTE,)),
    KindRow("TLSRoute", "outbound", parse_tls_route, ROUTER, (TLS_ROUTE,)),
    KindRow("TCPRoute", "outbound", parse_tcp_route, ROUTER, (TCP_ROUTE,)),
    KindRow(
        "Ingress",
        "edge",
        _lazy("model.ingress", "parse_stored_ingress"),
        INGRESS_DIRECTORY,
        (INGRESS,),
    ),
    KindRow(
        "IngressClass",
        "edge",
        _lazy("model.ingress", "parse_ingress_class"),
        INGRESS_CLASS_DIRECTORY,
        (INGRESS_CLASS,),
    ),
    KindRow(
        "ModuleSet",
        "edge",
        _lazy("model.moduleset", "parse_module_set"),
        MODULESET_DIRECTORY,
        (MODULE_SET,),
    ),
    KindRow(
        "Secret", "edge", _lazy("model.moduleset", "parse_secret"), SECRET_DIRECTORY, (SECRET,)
    ),
    KindRow("EndpointSlice", "edge", parse_endpoint_slice, ENDPOINTS_DIRECTORY, (ENDPOINT_SLICE,)),
    KindRow(
        "EndpointSlice",
        "mesh",
        parse_endpoint_slice,
        ENDPOINTS_DIRECTORY,
        (ENDPOINT_SLICE,),
        without="edge",
    ),
    KindRow(
        "GatewayClass",
        "gateway",
        _lazy("model.gateway_class", "parse_gateway_class"),
        GATEWAY_CONTROLLER,
        (GATEWAY_CLASS,),
    ),
    KindRow(
        "Gateway",
        "gateway",
        _lazy("model.gateway_listeners", "parse_gateway"),
        GATEWAY_CONTROLLER,
        (GATEWAY,),
    ),
    KindRow(
        "ListenerSet",
        "gateway",
        _lazy("model.listener_sets", "parse_listener_set"),
        GATEWAY_CONTROLLER,
        (LISTENER_SET,),
        absent="Gateway API v1.5 or later has it; Gateways take no ListenerSets",
    ),
    KindRow(
        "BackendTLSPolicy",
        "gateway",
        _lazy("model.backend_tls", "parse_backend_tls_policy"),
        GATEWAY_CONTROLLER,
        (BACKEND_TLS_POLICY,),
    ),
    KindRow(
        "HTTPRoute",
        "gateway",
        _lazy("model.gateway_route_input", "read_gateway_http_route"),
        GATEWAY_CONTROLLER,
        HTTP_ROUTE_VERSIONS,
        follows=True,
    ),
    KindRow(
        "GRPCRoute",
        "gateway",
        _lazy("model.gateway_route_input", "read_gateway_grpc_route"),
        GATEWAY_CONTROLLER,
        (GRPC_ROUTE,),
        follows=True,
    ),
    KindRow(
        "TLSRoute",
        "gateway",
        _lazy("model.gateway_route_input", "read_gateway_tls_route"),
        GATEWAY_CONTROLLER,
        (TLS_ROUTE,),
        follows=True,
    ),
    KindRow("Namespace", "gateway", namespace_labels, GATEWAY_CONTROLLER, (NAMESPACE,)),
    KindRow(
        "ConfigMap",
        "gateway",
        _lazy("actors.ca_bundles", "ca_bundle_of"),
        CA_BUNDLE_DIRECTORY,
        (CONFIG_MAP,),
    ),
)
"""Every kind, once per half that reads it; see the module docstring."""


ABSENT: dict[Half, str] = {
    "outbound": "Gateway API CRDs missing?",
    "edge": "the edge runs without it",
    "mesh": "the mesh listener finds no pod",
    "gateway": "install the Gateway API CRDs to use Gateways",
}
"""By half: what a kind of its that the cluster does not serve costs (a warning)."""


def watched(halves: frozenset[Half]) -> dict[str, tuple[KindRow, ...]]:
    """By kind, in table order: the rows of the halves that run that read it. One informer a
    kind (the first of its rows' :attr:`~KindRow.resources` the cluster serves) feeds them
    all; nothing else chooses what the controller watches."""
    kinds: dict[str, tuple[KindRow, ...]] = {}
    for row in rows_for(halves):
        kinds[row.kind] = (*kinds.get(row.kind, ()), row)
    return kinds


def rows_for(halves: frozenset[Half]) -> tuple[KindRow, ...]:
    """The rows of the halves that run."""
    return tuple(
        row
        for row in KINDS
        if row.half in halves and (row.without is None or row.without not in halves)
    )


def parsed(change: ObjectChanged) -> ObjectParsed:
    """``change`` as the router tells it to the directory of its kind (its row's parser)."""
    row = next(row for row in KINDS if row.kind == change.kind and row.receiver != ROUTER)
    assert row.parser is not None, f"{row.kind}: a directory's row names its parser"
    return parse_change(change, row.parser)
