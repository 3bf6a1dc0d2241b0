"""Directories: the edge inputs, parsed once (by the router) and published as retained topics.

Every IngressActor needs some ModuleSets, Secrets and IngressClasses; the edge's upstream
resolver needs EndpointSlices. Letting each of them watch Kubernetes would multiply API traffic
and, worse, give each its own view of when an object appeared. A directory turns the informer's
events, parsed by the router with the kinds table's parser (``controller/kinds.py``), into one
retained topic per object instead, so that a subscriber gets the current
value in the same step as it subscribes (no event can fall between "read" and "listen") and
later changes as they happen.

Each directory publishes **only when something its readers use changed**: a resourceVersion
bump, a status write or an annotation edit that no reader looks at costs nothing downstream.
Objects that cannot be parsed are logged (by the router) with the object and the field and
treated as absent: an edge never runs on a half-understood ModuleSet (fail closed). "Changed"
is judged against the retained value, not the instance's memory: a directory restarted after a
crash starts empty, and must still stay silent on what its predecessor published and withdraw
it on deletion.

The ModuleSet directory also decides each ModuleSet's ``Valid`` condition and, while the stored
one differs, publishes it on ``status:moduleset`` for the status writer, which writes it
only while this replica leads (retained, so a restarted writer gets it back).

Every directory is spawned with a durable mailbox (:mod:`interlock.actors.durable`): an event
it was handling when it crashed is handled again by the restarted directory, so a crash loses
no event (like the ServiceDirectory).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from loguru import logger

from interlock.actors.edge_messages import (
    INGRESS_KEY,
    MODULESET_API_VERSION,
    MODULESET_KEY,
    SECRET_KEY,
    DesiredModuleSetStatus,
    IngressSpecified,
    RecordEvent,
    SecretData,
    ingress_address,
    status_key,
)
from interlock.actors.messages import (
    STATUS_WRITER,
    ObjectParsed,
)
from interlock.actors.topics import (
    ENDPOINTS,
    INGRESS,
    INGRESS_CLASSES_TOPIC,
    MODULESET,
    MODULESET_STATUS_TOPIC,
    SECRET,
)
from interlock.mailbox import Actor
from interlock.model.ingress import IngressClass, StoredIngress
from interlock.model.meta import ObjectKey, ObjectMeta
from interlock.model.moduleset import (
    ModuleSet,
    Secret,
    module_set_conditions,
    module_set_event,
)
from interlock.model.service import EndpointSlice

M = TypeVar("M")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _identity_meta(meta: ObjectMeta) -> ObjectMeta:
    """Metadata without what changes on every write (resourceVersion): compare by content."""
    return meta.model_copy(update={"resource_version": ""})


class _Directory(Actor, Generic[M]):
    """Receives :class:`ObjectParsed` for one kind and keeps its topics up to date."""

    model: type[M]
    """What the kind's parser gives (anything else is taken as the object's absence)."""

    async def receive(self, message: object) -> object | None:
        if isinstance(message, ObjectParsed):
            self._handle(message)
        return None

    def _handle(self, change: ObjectParsed) -> None:
        value = change.value
        if change.deleted or not isinstance(value, self.model):
            self.deleted(change.key)
        else:
            self.upserted(value)

    @abc.abstractmethod
    def upserted(self, value: M) -> None:
        """Publish what changed of the object ``value``."""

    @abc.abstractmethod
    def deleted(self, key: ObjectKey) -> None:
        """Unpublish what the object ``key`` published (namespace '' when cluster-scoped)."""

    def _publish_changed(self, topic: str, key: str, value: object) -> None:
        """Publish ``value`` as ``key`` on ``topic`` unless it is already the retained one."""
        if self.system.retained(topic).get(key) != value:
            self.publish(topic, key, value)

    def _withdraw_retained(self, topic: str, key: str) -> None:
        """Unpublish ``key`` on ``topic`` if it has a retained value."""
        if key in self.system.retained(topic):
            self.unpublish(topic, key)


class IngressDirectory(_Directory[StoredIngress]):
    """Publishes ``ingress:<ns>/<name>`` and keeps one IngressActor per Ingress.

    The actor is spawned before the Ingress is published (it subscribes in ``started()``, so
    it receives the retained value however the two are ordered); on deletion the topic is
    unpublished and the actor, seeing it go, withdraws its hosts and stops itself.
    """

    def __init__(
        self,
        *,
        ingress_actor: Callable[[ObjectKey], Actor],
    ) -> None:
        self._ingress_actor = ingress_actor

    model = StoredIngress

    def upserted(self, value: StoredIngress) -> None:
        ingress = value.ingress
        key = ingress.key
        specified = IngressSpecified(
            ingress.model_copy(update={"metadata": _identity_meta(ingress.metadata)}),
            value.load_balancer,
        )
        topic = INGRESS.topic(key)
        if self.system.retained(topic).get(INGRESS_KEY) == specified:
            return
        self.system.spawn_or_get(
            ingress_address(key.namespace, key.name), lambda: self._ingress_actor(key)
        )
        self.publish(topic, INGRESS_KEY, specified)

    def deleted(self, key: ObjectKey) -> None:
        self._withdraw_retained(INGRESS.topic(key), INGRESS_KEY)


class IngressClassDirectory(_Directory[IngressClass]):
    """Publishes every IngressClass on ``ingressclasses``, keyed by name."""

    reconciles = "IngressClass"
    model = IngressClass

    def upserted(self, parsed: IngressClass) -> None:
        value = parsed.model_copy(update={"metadata": _identity_meta(parsed.metadata)})
        self._publish_changed(INGRESS_CLASSES_TOPIC, parsed.metadata.name, value)

    def deleted(self, key: ObjectKey) -> None:
        self._withdraw_retained(INGRESS_CLASSES_TOPIC, key.name)


class ModuleSetDirectory(_Directory[ModuleSet]):
    """Publishes ``moduleset:<ns>/<name>`` (spec only) and decides each one's Valid condition."""

    reconciles = "ModuleSet"
    model = ModuleSet

    def __init__(self, *, now: Callable[[], datetime] = _utc_now) -> None:
        self._now = now
        self._status: dict[ObjectKey, tuple[str, list[dict[str, Any]]]] = {}
        """The conditions published on ``status:moduleset``, still to be written."""

    def upserted(self, module_set: ModuleSet) -> None:
        key = module_set.key
        problems = module_set.problems
        if problems:
            logger.warning(
                "ModuleSet {} is invalid: {}; Ingresses using it serve nothing new",
                key,
                "; ".join(str(problem) for problem in problems),
            )
        conditions = module_set_conditions(module_set, now=self._now())
        event = module_set_event(module_set.status.get("conditions") or [], conditions, key=key)
        if event is not None:
            type_, reason, message = event
            reference = {
                "apiVersion": MODULESET_API_VERSION,
                "kind": "ModuleSet",
                "namespace": key.namespace,
                "name": key.name,
            }
            if module_set.metadata.uid:
                reference["uid"] = module_set.metadata.uid
            self.tell(
                STATUS_WRITER,
                RecordEvent(regarding=reference, type=type_, reason=reason, message=message),
            )
        self._want_status(
            key,
            None if module_set.status.get("conditions") == conditions else conditions,
            uid=module_set.metadata.uid,
        )
        value = module_set.model_copy(
            update={"metadata": _identity_meta(module_set.metadata), "status": {}}
        )
        self._publish_changed(MODULESET.topic(key), MODULESET_KEY, value)

    def deleted(self, key: ObjectKey) -> None:
        self._want_status(key, None)
        self._withdraw_retained(MODULESET.topic(key), MODULESET_KEY)

    def _want_status(
        self, key: ObjectKey, conditions: list[dict[str, Any]] | None, *, uid: str = ""
    ) -> None:
        """Publish ``conditions`` to be written, or withdraw what was (None: the stored status
        is already the desired one, or the ModuleSet is gone)."""
        if conditions is None:
            # Unconditionally: after a restart the retained one may be a predecessor's.
            self._status.pop(key, None)
            self.unpublish(MODULESET_STATUS_TOPIC, status_key(key))
        elif self._status.get(key) != (uid, conditions):
            # The uid too: a ModuleSet deleted and created again unseen is another object.
            self._status[key] = (uid, conditions)
            self.publish(
                MODULESET_STATUS_TOPIC,
                status_key(key),
                DesiredModuleSetStatus(key, conditions, uid),
            )


class SecretDirectory(_Directory[Secret]):
    """Publishes ``secret:<ns>/<name>``: keys and values, only when one of them changed.

    Values are never logged: a Secret that cannot be parsed is reported by name and field only.
    """

    reconciles = "Secret"
    model = Secret

    def upserted(self, secret: Secret) -> None:
        value = SecretData.from_secret(secret)
        self._publish_changed(SECRET.topic(value.key), SECRET_KEY, value)

    def deleted(self, key: ObjectKey) -> None:
        self._withdraw_retained(SECRET.topic(key), SECRET_KEY)


class EndpointsDirectory(_Directory[EndpointSlice]):
    """Publishes each EndpointSlice on ``endpoints:<ns>/<svc>`` (its Service label), by name.

    A slice without the ``kubernetes.io/service-name`` label belongs to no Service and is not
    published; a slice whose label changes moves from the old Service's topic to the new one.
    The topic of each slice is remembered to find it again; a restarted directory, which has
    not seen the slice yet, looks for it on the topic its label names.
    """

    reconciles = "EndpointSlice"
    model = EndpointSlice

    def __init__(self) -> None:
        self._published: dict[ObjectKey, tuple[str, EndpointSlice]] = {}

    def _handle(self, change: ObjectParsed) -> None:
        if change.key not in self._published and isinstance(change.value, EndpointSlice):
            self._recall(change.key, change.value)
        super()._handle(change)

    def _recall(self, key: ObjectKey, endpoint_slice: EndpointSlice) -> None:
        """Adopt what a predecessor published for ``key`` on the topic of its label."""
        service = endpoint_slice.service_key
        if service is None:
            return
        topic = ENDPOINTS.topic(service)
        value = self.system.retained(topic).get(key.name)
        if isinstance(value, EndpointSlice):
            self._published[key] = (topic, value)

    def upserted(self, endpoint_slice: EndpointSlice) -> None:
        key = endpoint_slice.key
        service = endpoint_slice.service_key
        if service is None:
            self._withdraw(key)
            return
        topic = ENDPOINTS.topic(service)
        value = endpoint_slice.model_copy(
            update={"metadata": _identity_meta(endpoint_slice.metadata)}
        )
        previous = self._published.get(key)
        if previous == (topic, value):
            return
        if previous is not None and previous[0] != topic:
            self.unpublish(previous[0], key.name)
        self._published[key] = (topic, value)
        self.publish(topic, key.name, value)

    def deleted(self, key: ObjectKey) -> None:
        self._withdraw(key)

    def _withdraw(self, key: ObjectKey) -> None:
        previous = self._published.pop(key, None)
        if previous is not None:
            self.unpublish(previous[0], key.name)
