"""The informer router: where Kubernetes events enter the actor system.

Informers call a synchronous sink; ``controller/app.py`` turns each event into an
:class:`ObjectChanged` and tells it to this actor with the event's identity (``Upserted Service
default/web rv=12``) as the correlation id. Everything the router then sends inherits that
correlation, so the trace shows which external event caused which messages. Messages are keyed
by object, so a burst of events on one object that arrive faster than they are handled coalesces
to the last one.

It is spawned with a durable mailbox (:mod:`interlock.actors.durable`): an event it was handling
when it crashed is handled again by the restarted router, so none is lost.

Where a kind goes is the composition root's kinds table (``controller/kinds.py``): the router
handles the kinds it parses itself (Service, Namespace, ReferenceGrant, the four route kinds)
by a table of its own, and tells every change to the receivers ``forward`` names for its kind
(the directories of the other halves, built from the same table). It parses with the model's
``parse_*`` functions: a bad object is logged with the object and the field (and an HTTPRoute
gets ``Accepted: False`` on its status through its RouteActor); it never stops the controller.
A route or Ingress whose deletion has begun (``deletionTimestamp`` set, held by a finalizer)
is routed as deleted: ``interlock.model.meta.going_away``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from loguru import logger

from interlock.actors.messages import (
    GRANTS_DIRECTORY,
    ROUTE_KEY,
    SERVICE_DIRECTORY,
    GrantDeleted,
    GrantUpserted,
    NamespaceOpaquePorts,
    ObjectChanged,
    ObjectParsed,
    RouteRejected,
    RouteSpecified,
    ServiceDeleted,
    ServiceUpserted,
    route_address,
)
from interlock.actors.route import RouteActor, RouteOutputs
from interlock.actors.topics import (
    ROUTE,
    KindKey,
)
from interlock.mailbox import Actor
from interlock.model.gateway import parse_http_route, parse_reference_grant
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import InvalidObject, ObjectKey, going_away
from interlock.model.outbound import MeshRoute
from interlock.model.policy_annotations import OPAQUE_PORTS
from interlock.model.service import parse_service
from interlock.model.stream_routes import parse_tcp_route, parse_tls_route

RouteFactory = Callable[[str, str, RouteOutputs], Actor]
"""Builds a RouteActor for ``(namespace, name, outputs)``; ``outputs`` outlives restarts."""

ROUTE_PARSERS: Mapping[str, Callable[[dict[str, Any]], MeshRoute]] = {
    "HTTPRoute": parse_http_route,
    "GRPCRoute": parse_grpc_route,
    "TLSRoute": parse_tls_route,
    "TCPRoute": parse_tcp_route,
}
"""The route kinds served on Service parents, each with its parser."""


class InformerRouter(Actor):
    """Receives :class:`ObjectChanged`; feeds the directories and spawns route actors."""

    def __init__(
        self,
        *,
        route_factory: RouteFactory | None = None,
        grpc_route_factory: RouteFactory | None = None,
        route_factories: Mapping[str, RouteFactory] | None = None,
        forward: Mapping[str, Sequence[Callable[[ObjectChanged], None]]] | None = None,
    ) -> None:
        """``forward``: by kind, who else is told each change (after the router's own handling,
        if the kind is one it parses)."""
        self.route_factory: RouteFactory = route_factory or (
            lambda namespace, name, outputs: RouteActor(
                namespace=namespace, name=name, outputs=outputs
            )
        )
        self.grpc_route_factory: RouteFactory = grpc_route_factory or (
            lambda namespace, name, outputs: RouteActor(
                namespace=namespace, name=name, outputs=outputs, kind="GRPCRoute"
            )
        )
        self.factories: dict[str, RouteFactory] = {
            kind: _route_actor_factory(kind) for kind in ROUTE_PARSERS
        }
        self.factories.update(
            {"HTTPRoute": self.route_factory, "GRPCRoute": self.grpc_route_factory},
        )
        self.factories.update(route_factories or {})
        self.forward = {kind: tuple(receivers) for kind, receivers in (forward or {}).items()}
        self.parses: dict[str, Callable[[ObjectChanged], None]] = {
            "Service": self._service,
            "Namespace": self._namespace,
            "ReferenceGrant": self._grant,
        }
        """The kinds the router parses and hands on itself."""
        self.parses.update(dict.fromkeys(ROUTE_PARSERS, self._route))

    async def receive(self, message: object) -> object | None:
        if not isinstance(message, ObjectChanged):
            return None
        if not message.deleted and going_away(message.kind, message.obj):
            message = dataclasses.replace(message, deleted=True)
        parse = self.parses.get(message.kind)
        if parse is not None:
            parse(message)
        for receiver in self.forward.get(message.kind, ()):
            receiver(message)
        return None

    def _service(self, change: ObjectChanged) -> None:
        if change.deleted:
            key = ObjectKey(namespace=change.namespace, name=change.name)
            self.tell(SERVICE_DIRECTORY, ServiceDeleted(key))
            return
        try:
            service = parse_service(change.obj)
        except InvalidObject as error:
            logger.warning("{}; ignored until it is fixed", error)
            return
        self.tell(SERVICE_DIRECTORY, ServiceUpserted(service))

    def _namespace(self, change: ObjectChanged) -> None:
        # Only its opaque-ports annotation matters (to the Services in it).
        value: str | None = None
        if not change.deleted:
            metadata = change.obj.get("metadata")
            annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
            found = annotations.get(OPAQUE_PORTS) if isinstance(annotations, dict) else None
            value = found if isinstance(found, str) else None
        self.tell(SERVICE_DIRECTORY, NamespaceOpaquePorts(change.name, value))

    def _grant(self, change: ObjectChanged) -> None:
        grant = None
        if not change.deleted:
            try:
                grant = parse_reference_grant(change.obj)
            except InvalidObject as error:
                # A grant we cannot read permits nothing: withdraw the one we knew, if any.
                logger.warning("{}; ignored until it is fixed", error)
        if grant is None:
            key = ObjectKey(namespace=change.namespace, name=change.name)
            self.tell(GRANTS_DIRECTORY, GrantDeleted(key))
        else:
            self.tell(GRANTS_DIRECTORY, GrantUpserted(grant))

    def _route(self, change: ObjectChanged) -> None:
        kind = change.kind
        topic = ROUTE.topic(KindKey(kind, ObjectKey(namespace=change.namespace, name=change.name)))
        if change.deleted:
            # The route actor sees the value go, unpublishes from its parents and stops.
            self.unpublish(topic, ROUTE_KEY)
            return
        value: RouteSpecified | RouteRejected
        try:
            value = RouteSpecified(ROUTE_PARSERS[kind](change.obj))
        except InvalidObject as error:
            if _names_a_service(change.obj):
                logger.warning("{}; ignored until it is fixed", error)
            else:
                # Only Gateway parents: the Gateway half reads the route its own way (it takes
                # interlock's ExtensionRef filters out first) and reports what it refuses.
                logger.debug("{} (as a mesh route)", error)
            value = RouteRejected(change.obj, error, change.resource_version)
        self.publish(topic, ROUTE_KEY, value)
        address = route_address(change.namespace, change.name, kind=kind)
        if not self.system.exists(address):
            # A partial, not a closure: the system keeps each actor's factory for restarts, and
            # a lambda with its four cells took about 200 bytes more a route.
            factory = partial(self.factories[kind], change.namespace, change.name, RouteOutputs())
            self.system.spawn(address, factory)


def parse_change(change: ObjectChanged, parser: Callable[[dict[str, Any]], object]) -> ObjectParsed:
    """``change`` parsed with its kind's ``parser`` for a directory: an object that cannot be
    read is logged with the object and the field, and handed on as absent (fail closed: a
    directory never publishes a half-understood ModuleSet)."""
    key = ObjectKey(namespace=change.namespace, name=change.name)
    try:
        value = parser(change.obj)
    except InvalidObject as error:
        if not change.deleted:
            logger.warning("{}; it is ignored until it is fixed", error)
        value = None
    return ObjectParsed(change.kind, key, value, change.deleted, change.resource_version)


def _names_a_service(raw: dict[str, Any]) -> bool:
    """Whether a raw route's parentRefs name a Service (a mesh route)."""
    spec = raw.get("spec")
    refs = spec.get("parentRefs") if isinstance(spec, dict) else None
    return any(
        isinstance(ref, dict) and ref.get("kind") == "Service"
        for ref in (refs if isinstance(refs, list) else ())
    )


def _route_actor_factory(kind: str) -> RouteFactory:
    def factory(namespace: str, name: str, outputs: RouteOutputs) -> Actor:
        return RouteActor(namespace=namespace, name=name, outputs=outputs, kind=kind)

    return factory
