"""The informer router: where Kubernetes events enter the actor system.

Informers call a synchronous sink; app.py turns each event into an :class:`ObjectChanged` and
tells it to this actor with the event's identity (``Upserted Service default/web rv=12``) as the
correlation id. Everything the router then sends inherits that correlation, so the trace shows
which external event caused which messages. Messages are keyed by object, so a burst of events
on one object that arrive faster than they are handled coalesces to the last one.

It parses with the model's ``parse_*`` functions: a bad object is logged with the object and
the field (and an HTTPRoute gets ``Accepted: False`` on its status through its RouteActor);
it never stops the controller. Kinds it does not know are handed to ``extra`` handlers, so other
halves of the controller (Ingress, ModuleSet …) can add their own routing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from loguru import logger

from interlock.actors.messages import (
    GRANTS_DIRECTORY,
    ROUTE_KEY,
    SERVICE_DIRECTORY,
    GrantDeleted,
    GrantUpserted,
    ObjectChanged,
    RouteRejected,
    RouteSpecified,
    ServiceDeleted,
    ServiceUpserted,
    httproute_topic,
    route_address,
)
from interlock.actors.redelivery import KeyedMessage, Redelivery
from interlock.actors.route import RouteActor, RouteOutputs
from interlock.mailbox import Actor
from interlock.model.gateway import parse_http_route, parse_reference_grant
from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.service import parse_service

RouteFactory = Callable[[str, str, RouteOutputs], Actor]
"""Builds a RouteActor for ``(namespace, name, outputs)``; ``outputs`` outlives restarts."""


class InformerRouter(Actor):
    """Receives :class:`ObjectChanged`; feeds the directories and spawns route actors."""

    def __init__(
        self,
        *,
        route_factory: RouteFactory | None = None,
        extra: Mapping[str, Callable[[ObjectChanged], None]] | None = None,
        redelivery: Redelivery | None = None,
    ) -> None:
        self.route_factory: RouteFactory = route_factory or (
            lambda namespace, name, outputs: RouteActor(
                namespace=namespace, name=name, outputs=outputs
            )
        )
        self.extra = dict(extra or {})
        self.redelivery = redelivery
        """Journal of the events told to this router and of what it tells the directories, so
        that a crash loses none of them (see :mod:`interlock.actors.redelivery`)."""

    async def started(self) -> None:
        if self.redelivery is not None:
            self.redelivery.started(self.system, self.address)

    async def receive(self, message: object) -> object | None:
        if not isinstance(message, ObjectChanged):
            return None
        if message.kind == "Service":
            self._service(message)
        elif message.kind == "HTTPRoute":
            self._route(message)
        elif message.kind == "ReferenceGrant":
            self._grant(message)
        else:
            handler = self.extra.get(message.kind)
            if handler is not None:
                handler(message)
        if self.redelivery is not None:
            self.redelivery.handled(self.address, message)
        return None

    def _send(self, address: str, message: KeyedMessage, change: ObjectChanged) -> None:
        if self.redelivery is not None:
            self.redelivery.send(self.system, address, message, correlation_id=change.identity)
        else:
            self.tell(address, message)

    def _service(self, change: ObjectChanged) -> None:
        if change.deleted:
            key = ObjectKey(namespace=change.namespace, name=change.name)
            self._send(SERVICE_DIRECTORY, ServiceDeleted(key), change)
            return
        try:
            service = parse_service(change.obj)
        except InvalidObject as error:
            logger.warning("{}; ignored until it is fixed", error)
            return
        self._send(SERVICE_DIRECTORY, ServiceUpserted(service), change)

    def _grant(self, change: ObjectChanged) -> None:
        if change.deleted:
            key = ObjectKey(namespace=change.namespace, name=change.name)
            self._send(GRANTS_DIRECTORY, GrantDeleted(key), change)
            return
        try:
            grant = parse_reference_grant(change.obj)
        except InvalidObject as error:
            logger.warning("{}; ignored until it is fixed", error)
            # A grant we cannot read permits nothing: withdraw the one we knew, if any.
            self._send(
                GRANTS_DIRECTORY,
                GrantDeleted(ObjectKey(namespace=change.namespace, name=change.name)),
                change,
            )
            return
        self._send(GRANTS_DIRECTORY, GrantUpserted(grant), change)

    def _route(self, change: ObjectChanged) -> None:
        topic = httproute_topic(change.namespace, change.name)
        if change.deleted:
            # The route actor sees the value go, unpublishes from its parents and stops.
            self.unpublish(topic, ROUTE_KEY)
            return
        value: RouteSpecified | RouteRejected
        try:
            value = RouteSpecified(parse_http_route(change.obj))
        except InvalidObject as error:
            logger.warning("{}; ignored until it is fixed", error)
            value = RouteRejected(change.obj, error, change.resource_version)
        self.publish(topic, ROUTE_KEY, value)
        address = route_address(change.namespace, change.name)
        if not self.system.exists(address):
            namespace, name, outputs = change.namespace, change.name, RouteOutputs()
            self.system.spawn(address, lambda: self.route_factory(namespace, name, outputs))
