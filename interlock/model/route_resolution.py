"""Route resolution: a mesh route plus the current Services and grants → :class:`ResolvedRoute`.

Every backendRef is kept, the ones that cannot carry traffic marked ``exists=False`` with the
``ResolvedRefs`` reason and a :class:`~interlock.model.outbound.FailureInjector` naming what is
wrong (the module docstring of :mod:`interlock.model.outbound` says why). A route actor calls
:func:`resolve_route_by_parent` whenever one of its dependencies
(:mod:`interlock.model.route_dependencies`) changes, and publishes the result to its parents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from interlock.model.gateway import (
    CORE_GROUP,
    GATEWAY_GROUP,
    HTTPBackendRef,
    HTTPRouteMatch,
    ReferenceGrant,
)
from interlock.model.grpc_route import (
    GRPC_UNAVAILABLE,
    GRPCBackendRef,
    GRPCRoute,
    GRPCRouteRule,
    grpc_matches_as_http,
)
from interlock.model.meta import ObjectKey
from interlock.model.outbound import (
    Backend,
    BackendReason,
    FailureInjector,
    MeshRoute,
    ResolvedRoute,
    ResolvedRule,
    ServiceParent,
    StreamRoute,
)
from interlock.model.policy_annotations import (
    parse_policy_annotations,
)
from interlock.model.route_dependencies import service_parents
from interlock.model.service import Service
from interlock.model.stream_routes import StreamRouteRule, TCPRoute, TLSRoute


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
