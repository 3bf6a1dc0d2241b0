"""What can change a mesh route's resolution: the Services and namespaces a route actor follows.

A route actor subscribes to exactly these (:func:`route_service_dependencies`,
:func:`route_grant_namespaces`), so a Service or ReferenceGrant event reaches only the routes it
can affect; :func:`service_parents` is the route's Service parentRefs, which both queries and
the resolution (:mod:`interlock.model.route_resolution`) start from.
"""

from __future__ import annotations

from collections.abc import Iterable

from interlock.model.gateway import (
    ParentReference,
)
from interlock.model.meta import ObjectKey
from interlock.model.outbound import MeshRoute, ServiceParent


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
