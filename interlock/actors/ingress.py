"""IngressActor: one per Ingress, turning it and its inputs into its part of each host.

An Ingress's routes depend on more than the Ingress: the ModuleSets its
``interlock.dev/modules`` annotation names, the Secrets those modules reference, the Services of
its backends and the IngressClasses that decide whether it is ours. The actor subscribes to
exactly those topics (re-subscribing as the annotation or the ModuleSets change), recomputes with
:func:`~interlock.model.edge.ingress_host_routes` when any of them changes, and publishes one
:class:`~interlock.actors.edge_messages.HostPart` per host on ``host:<host>`` — only when that
part changed, so an unrelated edit costs the EdgeActors nothing. Hosts it no longer serves are
unpublished, which is how an EdgeActor learns that a route is gone.

It computes with every input that exists from the first time: ``subscribe`` returns a topic's
retained values, which the actor takes at once (again for the ModuleSets' Secrets, until no new
input is named), and the notifications the subscriptions queued, carrying the same objects, are
no change. Computing before would report "ModuleSet not found" for a moment and make the edge
reserve routes it is about to serve.

Broken rules (no host, no http paths, a resource backend) are logged and reported as an Event on
the Ingress, naming the field; the other rules are served.

When its class (or ``--ingress-nginx-annotations``) opts in, the Ingress's ingress-nginx
annotations are translated by :func:`~interlock.model.ingress_nginx.translate` and each one not
served gets a Warning Event ``AnnotationNotServed`` naming it and why (Ingress has no status
conditions; Events are where interlock reports an Ingress's problems). Without the opt-in, an
Ingress carrying them gets one Warning ``AnnotationsIgnored`` listing them: an ignored
``auth-type`` or ``whitelist-source-range`` serves a route with less protection than its author
wrote, which nobody should learn from an incident.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from loguru import logger

from interlock.actors.edge_messages import (
    HOSTS_KEY,
    DesiredIngressStatus,
    HostPart,
    IngressHosts,
    IngressSpecified,
    RecordEvent,
    SecretData,
    edge_address,
    ingress_reference,
    status_key,
)
from interlock.actors.messages import (
    STATUS_WRITER,
)
from interlock.actors.topics import (
    HOST,
    INGRESS,
    INGRESS_CLASSES_TOPIC,
    INGRESS_HOSTS,
    INGRESS_STATUS_TOPIC,
    MODULESET,
    SECRET,
    SERVICE,
)
from interlock.mailbox import Actor, Published, Unpublished
from interlock.model.edge import (
    IngressError,
    ingress_dependencies,
    ingress_errors,
    ingress_host_routes,
)
from interlock.model.ingress import Ingress, IngressClass, is_ours
from interlock.model.ingress_nginx import (
    NginxTranslation,
    Refusal,
    annotations_enabled,
    nginx_annotations_of,
    overridden_by_module_sets,
    translate,
)
from interlock.model.load_balancer import LoadBalancerStatus, published_service_status
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import (
    ModuleSet,
    Secret,
    merge_modules,
    module_secret_refs,
)
from interlock.model.service import Service

EdgeActorFactory = Callable[[str], Actor]
"""Builds the EdgeActor of a host (spawned on the host's first publication)."""


class IngressActor(Actor):
    """Publishes the parts of the hosts one Ingress serves; see the module docstring."""

    reconciles = "Ingress"

    def __init__(
        self,
        *,
        key: ObjectKey,
        edge_actor: EdgeActorFactory,
        load_balancer: Mapping[str, Any] | None = None,
        publish_service: ObjectKey | None = None,
        ingress_nginx_annotations: bool = False,
    ) -> None:
        """``load_balancer`` is written to ``status.loadBalancer`` of the Ingress while it
        serves at least one host (None: no status is written). With ``publish_service`` it is
        computed from that Service instead (followed like any input, so a load balancer
        provisioned later reaches every Ingress); while the Service does not exist nothing is
        written, and once it is deleted its last address stays: emptying the status would make
        DNS controllers withdraw records of an edge that still serves.
        ``ingress_nginx_annotations``: serve every Ingress's ingress-nginx annotations, whatever
        its class says (``--ingress-nginx-annotations``)."""
        self._key = key
        self._edge_actor = edge_actor
        self._load_balancer = None if load_balancer is None else dict(load_balancer)
        self._publish_service = publish_service
        self._nginx_flag = ingress_nginx_annotations
        self._nginx: tuple[tuple[tuple[str, str], ...], NginxTranslation | None] = ((), None)
        """The ingress-nginx annotations last translated, and their translation (None: not
        served)."""
        self._refused: tuple[Refusal, ...] = ()
        self._ingress: Ingress | None = None
        self._classes: dict[str, IngressClass] = {}
        self._module_sets: dict[ObjectKey, ModuleSet] = {}
        self._secrets: dict[ObjectKey, Secret] = {}
        self._services: dict[ObjectKey, Service] = {}
        self._inputs: set[str] = set()
        self._published: dict[str, HostPart] = {}
        self._reported: tuple[IngressError, ...] = ()
        self._status_sent: tuple[str, dict[str, Any], dict[str, Any] | None] | None = None
        self._stored_load_balancer: dict[str, Any] | None = None
        """The Ingress's ``status.loadBalancer`` as stored, told to the StatusWriter with the
        desired one: a late write of another replica is then seen, and written over."""
        """(uid, status.loadBalancer) last published for the Ingress."""
        self._seen: dict[tuple[str, str], object] = {}
        """The value last taken per (topic, key): a notification of the same object (queued by
        a subscription whose values were taken when subscribing) changes nothing."""

    async def started(self) -> None:
        namespace, name = self._key.namespace, self._key.name
        # The hosts this Ingress has parts on, as published by a predecessor of this instance
        # (after a restart): they are withdrawn if no longer wanted.
        key = ObjectKey(namespace=namespace, name=name)
        for topic in (INGRESS_HOSTS.topic(key), INGRESS.topic(key), INGRESS_CLASSES_TOPIC):
            self._take_retained(topic, self.subscribe(topic))
        if self._ingress is None:
            # The directory publishes the Ingress before this actor starts, so it is gone: a
            # predecessor crashed while handling its removal.
            self._gone()
            return
        self._follow_inputs()
        self._recompute()

    async def receive(self, message: object) -> object | None:
        if not isinstance(message, Published | Unpublished):
            return None
        value = message.value if isinstance(message, Published) else None
        if value is not None and self._seen.get((message.topic, message.key)) is value:
            return None  # taken when subscribing
        if not self._take(message):
            return None
        self._follow_inputs()
        self._recompute()
        return None

    def _take_retained(self, topic: str, retained: Mapping[str, object]) -> None:
        for key, value in retained.items():
            self._take(Published(topic, key, value))

    # --- inputs -------------------------------------------------------------------------------

    def _take(self, message: Published | Unpublished) -> bool:
        """Update the inputs; False when the Ingress is gone (the actor has stopped)."""
        value = message.value if isinstance(message, Published) else None
        topic = message.topic
        if value is None:
            self._seen.pop((topic, message.key), None)
        else:
            self._seen[(topic, message.key)] = value
        if topic in MODULESET or topic in SECRET or topic in SERVICE:
            # Notifications come only from subscribed topics; after a restart the system kept
            # the predecessor's subscriptions, which this instance learns here (and drops the
            # ones it does not want).
            self._inputs.add(topic)
        if topic == INGRESS_CLASSES_TOPIC:
            if isinstance(value, IngressClass):
                self._classes[message.key] = value
            else:
                self._classes.pop(message.key, None)
        elif topic in INGRESS_HOSTS:
            member = str(self._key)
            for host in value.hosts if isinstance(value, IngressHosts) else ():
                part = self.system.retained(HOST.topic(host)).get(member)
                if isinstance(part, HostPart) and host not in self._published:
                    self._published[host] = part
        elif topic in INGRESS:
            if not isinstance(value, IngressSpecified):
                self._gone()
                return False
            self._ingress = value.ingress
            self._stored_load_balancer = value.stored_load_balancer
        elif (key := MODULESET.key_of(topic)) is not None:
            _store(self._module_sets, key, value if isinstance(value, ModuleSet) else None)
        elif (key := SECRET.key_of(topic)) is not None:
            secret = value.to_model() if isinstance(value, SecretData) else None
            _store(self._secrets, key, secret)
        elif (key := SERVICE.key_of(topic)) is not None:
            _store(self._services, key, value if isinstance(value, Service) else None)
        return True

    def _wanted_inputs(self) -> set[str]:
        ingress = self._ingress
        if ingress is None or not is_ours(ingress, self._classes.values()):
            return set()
        namespace = ingress.metadata.namespace
        module_set_names, services = ingress_dependencies(ingress)
        wanted = {
            MODULESET.topic(ObjectKey(namespace=namespace, name=name)) for name in module_set_names
        }
        wanted.update(SERVICE.topic(ObjectKey(namespace=namespace, name=name)) for name in services)
        if self._publish_service is not None:
            wanted.add(SERVICE.topic(self._publish_service))
        usable = [
            module_set
            for name in module_set_names
            if (module_set := self._module_sets.get(ObjectKey(namespace=namespace, name=name)))
            is not None
            and not module_set.problems
        ]
        merged = merge_modules(usable)
        wanted.update(
            SECRET.topic(ObjectKey(namespace=namespace, name=ref.name))
            for ref in module_secret_refs(merged)
        )
        nginx = self._translation(ingress)
        if nginx is not None and merged.basic_auth is None:
            wanted.update(
                SECRET.topic(ObjectKey(namespace=namespace, name=name))
                for name in nginx.secret_names()
            )
        return wanted

    def _translation(self, ingress: Ingress) -> NginxTranslation | None:
        """The translation of the Ingress's ingress-nginx annotations when they are served
        (kept while they do not change)."""
        if not annotations_enabled(ingress, self._classes.values(), flag=self._nginx_flag):
            return None
        annotations = nginx_annotations_of(ingress.metadata.annotations)
        if not annotations:
            return None
        if self._nginx[0] != annotations or self._nginx[1] is None:
            self._nginx = (annotations, translate(ingress))
        return self._nginx[1]

    def _follow_inputs(self) -> None:
        """Subscribe to the inputs now needed and drop the others (and what they held), taking
        the new ones' values at once: again while those name more (a ModuleSet its Secrets)."""
        while self._follow_inputs_once():
            pass

    def _follow_inputs_once(self) -> bool:
        """One round of :meth:`_follow_inputs`; True when it subscribed to a new input."""
        wanted = self._wanted_inputs()
        for topic in sorted(self._inputs - wanted):
            self.unsubscribe(topic)
            for seen in [seen for seen in self._seen if seen[0] == topic]:
                del self._seen[seen]
            if (key := MODULESET.key_of(topic)) is not None:
                self._module_sets.pop(key, None)
            elif (key := SECRET.key_of(topic)) is not None:
                self._secrets.pop(key, None)
            elif (key := SERVICE.key_of(topic)) is not None:
                self._services.pop(key, None)
        added = sorted(wanted - self._inputs)
        self._inputs = wanted
        for topic in added:
            self._take_retained(topic, self.subscribe(topic))
        return bool(added)

    # --- outputs ------------------------------------------------------------------------------

    def _recompute(self) -> None:
        ingress = self._ingress
        if ingress is None:
            return
        if not is_ours(ingress, self._classes.values()):
            self._withdraw()
            self._reported = ()
            self._refused = ()
            return
        self._report_errors(ingress)
        nginx = self._translation(ingress)
        self._report_annotations(ingress, nginx)
        host_routes = ingress_host_routes(
            ingress, self._module_sets, self._secrets, self._services, nginx=nginx
        )
        member = str(self._key)
        for host, routes in host_routes.items():
            part = HostPart(ingress=self._key, uid=ingress.metadata.uid, routes=tuple(routes))
            if self._published.get(host) == part:
                continue
            self._published[host] = part
            self.system.spawn_or_get(edge_address(host), functools.partial(self._edge_actor, host))
            self.publish(HOST.topic(host), member, part)
        for host in sorted(set(self._published) - set(host_routes)):
            del self._published[host]
            self.unpublish(HOST.topic(host), member)
        self._record_hosts()
        self._write_status()

    def _withdraw(self) -> None:
        member = str(self._key)
        for host in sorted(self._published):
            self.unpublish(HOST.topic(host), member)
        self._published.clear()
        self._record_hosts()

    def _gone(self) -> None:
        self._withdraw()
        # Unconditionally: after a restart the status may be one a predecessor published.
        self.unpublish(INGRESS_STATUS_TOPIC, status_key(self._key))
        self.stop_self()

    def _record_hosts(self) -> None:
        topic = INGRESS_HOSTS.topic(self._key)
        hosts = tuple(sorted(self._published))
        if not hosts:
            self.unpublish(topic, HOSTS_KEY)
        elif self.system.retained(topic).get(HOSTS_KEY) != IngressHosts(hosts):
            self.publish(topic, HOSTS_KEY, IngressHosts(hosts))

    def _report_errors(self, ingress: Ingress) -> None:
        errors = tuple(ingress_errors(ingress))
        if errors == self._reported:
            return
        reference = ingress_reference(self._key, ingress.metadata.uid)
        for error in errors:
            if error in self._reported:
                continue
            logger.warning("{}", error)
            self.tell(
                STATUS_WRITER,
                RecordEvent(
                    regarding=reference,
                    type="Warning",
                    reason="InvalidRule",
                    message=f"{error.field}: {error.reason}",
                ),
            )
        self._reported = errors

    def _report_annotations(self, ingress: Ingress, nginx: NginxTranslation | None) -> None:
        """A Warning Event per ingress-nginx annotation not served (once per distinct set)."""
        refused: list[Refusal] = []
        if nginx is not None:
            namespace = ingress.metadata.namespace
            usable = [
                (name, module_set)
                for name in ingress.module_set_names()
                if (module_set := self._module_sets.get(ObjectKey(namespace=namespace, name=name)))
                is not None
                and not module_set.problems
            ]
            types = [
                (
                    f"{namespace}/{name}",
                    module_set.spec.modules.model_dump(by_alias=True, exclude_none=True).keys(),
                )
                for name, module_set in usable
            ]
            refused = [*nginx.refusals, *overridden_by_module_sets(nginx, types)]
        else:
            names = [name for name, _ in nginx_annotations_of(ingress.metadata.annotations)]
            if names:
                refused = [
                    Refusal(
                        ", ".join(names),
                        "ingress-nginx annotations are not served for this Ingress: its "
                        "IngressClass needs the annotation "
                        'interlock.dev/ingress-nginx-annotations: "true" (or run interlock '
                        "with --ingress-nginx-annotations); see docs/ingress-nginx.md",
                    )
                ]
        current = tuple(refused)
        if current == self._refused:
            return
        reference = ingress_reference(self._key, ingress.metadata.uid)
        reason = "AnnotationNotServed" if nginx is not None else "AnnotationsIgnored"
        for refusal in current:
            if refusal in self._refused:
                continue
            logger.warning("Ingress {}: {}", self._key, refusal)
            self.tell(
                STATUS_WRITER,
                RecordEvent(
                    regarding=reference,
                    type="Warning",
                    reason=reason,
                    message=str(refusal),
                ),
            )
        self._refused = current

    def _desired_load_balancer(self) -> LoadBalancerStatus | None:
        if self._publish_service is None:
            return self._load_balancer
        service = self._services.get(self._publish_service)
        return None if service is None else published_service_status(service)

    def _write_status(self) -> None:
        load_balancer = self._desired_load_balancer()
        if load_balancer is None or not self._published or self._ingress is None:
            return
        uid = self._ingress.metadata.uid
        stored = self._stored_load_balancer
        if self._status_sent == (uid, load_balancer, stored):
            return
        self._status_sent = (uid, load_balancer, stored)
        self.publish(
            INGRESS_STATUS_TOPIC,
            status_key(self._key),
            DesiredIngressStatus(self._key, load_balancer, uid, stored),
        )


V = TypeVar("V")


def _store(table: dict[ObjectKey, V], key: ObjectKey, value: V | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
