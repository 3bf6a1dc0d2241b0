"""The policy of one Service port for one client namespace, built from resolved routes.

:func:`build_outbound_policy` is what a ServicePortWatch runs on every change of its Service or
of the routes attached to it: which routes attach to the port (:func:`attached_ports`, a
parentRef's port or sectionName), which of them a client namespace sees
(:func:`consumer_precedence`), which kinds the port's protocol serves
(:data:`PORT_ROUTE_KINDS`), and the Service's and routes' policy annotations folded into the
rules. Its JSON is :mod:`interlock.api.policy_json`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from interlock.model.gateway import (
    CORE_GROUP,
    HTTPRouteMatch,
)
from interlock.model.outbound import (
    DEFAULT_ROUTE_KIND,
    Backend,
    FailureInjector,
    OutboundPolicy,
    OutboundRoute,
    ResolvedRoute,
    ResolvedRule,
    ServiceParent,
)
from interlock.model.policy_annotations import (
    OPAQUE_PORTS,
    AnnotationProblem,
    FailureAccrual,
    PolicyAnnotations,
    Protocol,
    opaque_ports,
    parse_failure_accrual,
    parse_policy_annotations,
    port_protocol,
)
from interlock.model.route_kinds import served_routes
from interlock.model.service import Service


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
    # of policy_annotations). The rule's own fields win over both when served
    # (interlock.api.policy_json.rule_json).
    timeouts = {**dict(service.timeouts), **dict(route.timeouts)}
    retry = route.retry or service.retry
    if not timeouts and retry is None:
        return rule
    return replace(rule, annotated_timeouts=tuple(sorted(timeouts.items())), annotated_retry=retry)
