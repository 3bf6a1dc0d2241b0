"""RouteActor: one per route of any kind; turns the route and what it references into output.

This is where interlock departs from the Linkerd fix it is modelled on. Linkerd re-walks every
watch of every Service port on every Service event; here each route subscribes to exactly the
Services it depends on (``route_service_dependencies``: its backends and Service parents) and
the ReferenceGrant namespaces of its cross-namespace backends, so a Service event wakes only the
routes that reference it. Subscriptions deliver retained values, so a Service created before,
after, or "between" the route's start and its subscription is seen either way: the outcome does
not depend on event order.

On any input change the actor recomputes
:func:`~interlock.model.route_resolution.resolve_route_by_parent` and publishes each parent's
resolution on ``parent:<ns>/<svc>`` (producer and consumer parents may differ on ReferenceGrants),
keyed by the route identity, only when it changed. When the route leaves a parent (its parentRefs
changed) it unpublishes from that parent — Linkerd issue 13280 kept routes on parents they had left.
Beside each resolution it publishes the route's
attachment (kind, age, parents) on ``attach:<Kind>:<ns>/<svc>``, and it subscribes to the
attachment topics of the kinds that can beat its own on its parents (an HTTPRoute reads
GRPCRoutes; a TCPRoute reads every other kind and older TCPRoutes; a GRPCRoute reads nothing): a
route that takes every port it attaches to makes its ``Accepted`` False
(``RouteReasonConflicted``, naming the winner), and the winner's departure makes it True again —
the same decision the policy makes (:mod:`interlock.model.route_kinds`). Attachments change
only when a route's kind, age or parents do, so a Service event still wakes only the routes
that reference the Service. It publishes its desired ``status.parents`` on
``status:route`` (retained, so a restarted StatusWriter gets it back) on its first computation
and whenever it changed, and unpublishes it when the route is deleted.

Its own route arrives as the retained value of ``httproute:<ns>/<name>`` (published by the
router), so a restarted actor rebuilds everything from subscriptions alone. A restart does not
unpublish (that would make every watch of its parents flap): the fresh instance republishes
the same values, which the service-port watches see as unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from interlock.actors.gateway_messages import (
    GatewayParentEntries,
)
from interlock.actors.messages import (
    SERVICE_KEY,
    DesiredRouteStatus,
    RouteRejected,
    RouteSpecified,
    route_identity,
)
from interlock.actors.topics import (
    ATTACH,
    GATEWAY_PARENTS,
    GRANTS,
    PARENT,
    ROUTE,
    ROUTE_STATUS_TOPIC,
    SERVICE,
    KindKey,
)
from interlock.mailbox import Actor, Published, Unpublished
from interlock.model.gateway import ReferenceGrant
from interlock.model.meta import ObjectKey
from interlock.model.outbound import MeshRoute, ResolvedRoute, RouteAttachment
from interlock.model.route_dependencies import (
    route_grant_namespaces,
    route_service_dependencies,
    service_parents,
)
from interlock.model.route_kinds import kinds_that_beat
from interlock.model.route_resolution import resolve_route_by_parent
from interlock.model.route_status import (
    CONTROLLER_NAME,
    GATEWAY_CONTROLLER_NAME,
    rejected_route_status,
    route_status,
    status_equal_ignoring_timestamps,
)
from interlock.model.service import Service


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False, slots=True)
class RouteOutputs:
    """What a route has published, by parent Service, kept outside the actor instance.

    A restarted RouteActor reads it to know where its predecessor published: it withdraws
    parents left while it was down, republishes nothing that is unchanged, and — when its
    predecessor crashed handling the route's deletion, so no retained route is left to tell
    it anything — withdraws everything and stops.
    """

    parents: dict[ObjectKey, ResolvedRoute] = field(default_factory=dict)
    attachments: dict[ObjectKey, RouteAttachment] = field(default_factory=dict)
    """What it published on its parents' attachment topics."""


MAX_DEFERRED = 64
"""How many input changes a RouteActor lets wait for the messages behind them (``_changed``)."""


class RouteActor(Actor):
    """Keeps one route's (HTTPRoute or GRPCRoute) resolved output and status up to date."""

    require_grants = True
    """False with ``--lax-reference-grants`` (set on the instance only then: no per-actor cost
    in the default)."""

    def __init__(
        self,
        *,
        namespace: str,
        name: str,
        controller_name: str = CONTROLLER_NAME,
        now: Callable[[], datetime] = _utc_now,
        outputs: RouteOutputs | None = None,
        kind: str = "HTTPRoute",
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.kind = kind
        self.reconciles = kind
        self.route_topic = ROUTE.topic(KindKey(kind, ObjectKey(namespace=namespace, name=name)))
        self.identity = route_identity(namespace, name, kind=kind)
        self.controller_name = controller_name
        self.now = now
        self.route: MeshRoute | None = None
        self.services: dict[ObjectKey, Service] = {}
        self.grants: dict[str, dict[str, ReferenceGrant]] = {}
        self.competitors: dict[str, dict[str, RouteAttachment]] = {}
        """By attachment topic: the routes of kinds that can beat this one, on each parent."""
        self.input_topics: tuple[str, ...] = ()
        """What it subscribes to beside its route (a tuple: a set of five takes 728 bytes)."""
        self.deferred = 0
        """Input changes not yet recomputed: more messages were waiting (see ``_changed``)."""
        outputs = outputs or RouteOutputs()
        self.published = outputs.parents
        """What this route last published, by parent Service (shared with later instances)."""
        self.attached = outputs.attachments
        self.sent_status: list[dict[str, Any]] | None = None
        self.sent_stored: list[dict[str, Any]] | None = None
        self.gateway_entries: tuple[dict[str, Any], ...] = ()
        """Its ``status.parents`` entries for interlock's Gateways (from the GatewayController),
        written with its own: one writer per route status."""
        self.rejected: RouteRejected | None = None

    async def started(self) -> None:
        topic = self.route_topic
        specified = self.subscribe(topic)
        if self.kind in ("HTTPRoute", "GRPCRoute", "TLSRoute"):
            # Retained values only for routes naming one of interlock's Gateways: an empty
            # topic costs nothing until published.
            key = ObjectKey(namespace=self.namespace, name=self.name)
            self.subscribe(GATEWAY_PARENTS.topic(KindKey(self.kind, key)))
        if not specified:
            # The route is gone, and its deletion was never handled (the predecessor crashed
            # on it, or the route went before this actor started).
            self._route_deleted()

    async def receive(self, message: object) -> object | None:
        if isinstance(message, Published):
            self._published(message.topic, message.key, message.value)
        elif isinstance(message, Unpublished):
            self._unpublished(message.topic, message.key)
        if self.deferred and not self.mail_waiting():
            self._recompute()
        return None

    # ---------------------------------------------------------------------------------------
    # Inputs

    def _published(self, topic: str, key: str, value: object) -> None:
        if topic in GATEWAY_PARENTS:
            entries = value.entries if isinstance(value, GatewayParentEntries) else ()
            self._gateway_entries_changed(entries)
            return
        if topic == self.route_topic:
            if isinstance(value, RouteSpecified):
                self._route_changed(value.route)
            elif isinstance(value, RouteRejected):
                self._route_rejected(value)
            return
        if topic in SERVICE and isinstance(value, Service):
            if self.services.get(value.key) is value:
                return  # the retained value this actor already read when it subscribed
            self.services[value.key] = value
        elif topic in GRANTS and isinstance(value, ReferenceGrant):
            namespace_grants = self.grants.setdefault(value.metadata.namespace, {})
            if namespace_grants.get(key) is value:
                return
            namespace_grants[key] = value
        elif topic in ATTACH and isinstance(value, RouteAttachment):
            if key == self.identity:
                return  # its own publication (a TCPRoute reads other TCPRoutes)
            routes = self.competitors.setdefault(topic, {})
            if routes.get(key) is value:
                return
            routes[key] = value
        else:
            return
        self._changed()

    def _unpublished(self, topic: str, key: str) -> None:
        if topic in GATEWAY_PARENTS:
            self._gateway_entries_changed(())
            return
        if topic == self.route_topic:
            self._route_deleted()
            return
        if (service := SERVICE.key_of(topic)) is not None:
            if self.services.pop(service, None) is None:
                return
        elif (namespace := GRANTS.key_of(topic)) is not None:
            if self.grants.get(namespace, {}).pop(key, None) is None:
                return
        elif topic in ATTACH:
            if self.competitors.get(topic, {}).pop(key, None) is None:
                return
        else:
            return
        self._changed()

    def _gateway_entries_changed(self, entries: tuple[dict[str, Any], ...]) -> None:
        if entries == self.gateway_entries:
            return
        self.gateway_entries = entries
        if self.route is not None:
            self._changed()
        elif self.rejected is not None:
            self._route_rejected(self.rejected)

    def _route_changed(self, route: MeshRoute) -> None:
        self.rejected = None
        self.route = route
        wanted = {SERVICE.topic(key) for key in route_service_dependencies(route)} | {
            GRANTS.topic(namespace) for namespace in route_grant_namespaces(route)
        }
        # The routes on its parents that may take its ports: other kinds (older TCPRoutes).
        wanted |= {
            ATTACH.topic(KindKey(kind, ObjectKey(namespace=parent.namespace, name=parent.name)))
            for parent in service_parents(
                route.spec.parent_refs, route_namespace=route.metadata.namespace
            )
            for kind in kinds_that_beat(self.kind)
        }
        for topic in set(self.input_topics) - wanted:
            self.unsubscribe(topic)
            self._forget_input(topic)
        for topic in sorted(wanted.difference(self.input_topics)):
            # Read the snapshot now, so this recompute already sees every input; the
            # notifications the subscription queued carry the same objects and are skipped.
            self._load_input(topic, self.subscribe(topic))
        self.input_topics = tuple(sorted(wanted))
        self._changed()

    def _load_input(self, topic: str, retained: Mapping[str, object]) -> None:
        if topic in SERVICE:
            service = retained.get(SERVICE_KEY)
            if isinstance(service, Service):
                self.services[service.key] = service
        elif topic in ATTACH:
            routes = {
                key: route
                for key, route in retained.items()
                if key != self.identity and isinstance(route, RouteAttachment)
            }
            if routes:  # usually none: no empty dict per parent kept for nothing
                self.competitors[topic] = routes
        else:
            grants = {
                key: grant for key, grant in retained.items() if isinstance(grant, ReferenceGrant)
            }
            namespace = GRANTS.key_of(topic)
            if grants and namespace is not None:
                self.grants[namespace] = grants

    def _forget_input(self, topic: str) -> None:
        if (service := SERVICE.key_of(topic)) is not None:
            self.services.pop(service, None)
        elif (namespace := GRANTS.key_of(topic)) is not None:
            self.grants.pop(namespace, None)
        else:
            self.competitors.pop(topic, None)

    def _route_rejected(self, rejected: RouteRejected) -> None:
        # A route we cannot read contributes nothing: better no route than a wrong one. (The
        # router already logged the error with the object and field.)
        self.rejected = rejected
        self.route = None
        for topic in self.input_topics:
            self.unsubscribe(topic)
        self.input_topics = ()
        self.services.clear()
        self.grants.clear()
        self.competitors.clear()
        self._unpublish_all()
        parents = rejected_route_status(
            rejected.raw, rejected.error, controller_name=self.controller_name, now=self.now()
        )
        if parents is not None or self.gateway_entries:
            stored = rejected.raw.get("status", {}) or {}
            stored_parents = stored.get("parents") if isinstance(stored, dict) else None
            meta = rejected.raw.get("metadata") or {}
            uid = meta.get("uid") if isinstance(meta, dict) else None
            self._send_status(
                parents or [],
                stored_parents if isinstance(stored_parents, list) else [],
                uid=uid if isinstance(uid, str) else "",
            )

    def _route_deleted(self) -> None:
        self.route = None
        self._unpublish_all()
        self.unpublish(ROUTE_STATUS_TOPIC, self.identity)
        self.stop_self()

    # ---------------------------------------------------------------------------------------
    # Output

    def _changed(self) -> None:
        """An input changed: recompute now, or, while more messages wait in the mailbox, after
        them (``receive`` recomputes once the mailbox is empty). A burst — a new route's
        Services arriving one by one at start-up, a namespace's grants — is then resolved once
        instead of once per message; at most ``MAX_DEFERRED`` changes wait, so a route whose
        mailbox never empties still publishes."""
        if self.deferred < MAX_DEFERRED and self.mail_waiting():
            self.deferred += 1
            return
        self._recompute()

    def _recompute(self) -> None:
        self.deferred = 0
        route = self.route
        if route is None:
            return
        by_parent = resolve_route_by_parent(
            route, self.services, self._all_grants(), require_grants=self.require_grants
        )
        for left in [key for key in self.published if key not in by_parent]:
            self.unpublish(PARENT.topic(left), self.identity)
            del self.published[left]
        for key, resolved in by_parent.items():
            if self.published.get(key) != resolved:
                self.publish(PARENT.topic(key), self.identity, resolved)
                self.published[key] = resolved
        self._publish_attachments(by_parent)
        desired = route_status(
            route,
            by_parent,
            self.services,
            controller_name=self.controller_name,
            now=self.now(),
            competitors=self._competitors_by_parent(),
        )
        self._send_status(desired, list(route.status.parents), uid=route.metadata.uid)

    def _send_status(
        self, desired: list[dict[str, Any]], stored: list[dict[str, Any]], *, uid: str
    ) -> None:
        # Entries of interlock's Gateway controller come from the GatewayController, never
        # from the stored status (they would outlive the parent they were about).
        desired = [
            entry for entry in desired if entry.get("controllerName") != GATEWAY_CONTROLLER_NAME
        ]
        desired.extend(dict(entry) for entry in self.gateway_entries)
        # Publish when it differs from what is stored (a write is needed), from what was last
        # published (a pending write the StatusWriter holds may now be stale), or when the
        # stored status changed since (another replica wrote it: a follower's StatusWriter that
        # kept the stored status it was first told would, on gaining the Lease, rewrite every
        # status the old leader had already written). The first time (also after a restart) it
        # is published in any case: the retained value may be one the predecessor published
        # for other inputs.
        if (
            self.sent_status is not None
            and self.sent_stored is not None
            and status_equal_ignoring_timestamps(desired, self.sent_status)
            and status_equal_ignoring_timestamps(desired, stored)
            and status_equal_ignoring_timestamps(stored, self.sent_stored)
        ):
            return
        self.sent_status = desired
        self.sent_stored = stored
        self.publish(
            ROUTE_STATUS_TOPIC,
            self.identity,
            DesiredRouteStatus(self.namespace, self.name, desired, stored, kind=self.kind, uid=uid),
        )

    def _all_grants(self) -> list[ReferenceGrant]:
        return [grant for grants in self.grants.values() for grant in grants.values()]

    def _publish_attachments(self, by_parent: dict[ObjectKey, ResolvedRoute]) -> None:
        # Only what routes of other kinds need (kind, age, parents): a backend coming or going
        # changes none of it, so it wakes nobody.
        for left in [key for key in self.attached if key not in by_parent]:
            self.unpublish(ATTACH.topic(KindKey(self.kind, left)), self.identity)
            del self.attached[left]
        for key, resolved in by_parent.items():
            attachment = resolved.attachment
            if self.attached.get(key) != attachment:
                topic = ATTACH.topic(KindKey(self.kind, key))
                self.publish(topic, self.identity, attachment)
                self.attached[key] = attachment

    def _competitors_by_parent(self) -> dict[ObjectKey, list[RouteAttachment]]:
        found: dict[ObjectKey, list[RouteAttachment]] = {}
        for topic, routes in self.competitors.items():
            attached = ATTACH.key_of(topic)
            if attached is not None:
                found.setdefault(attached.key, []).extend(routes.values())
        return found

    def _unpublish_all(self) -> None:
        for key in list(self.published):
            self.unpublish(PARENT.topic(key), self.identity)
        self.published.clear()
        for key in list(self.attached):
            self.unpublish(ATTACH.topic(KindKey(self.kind, key)), self.identity)
        self.attached.clear()
