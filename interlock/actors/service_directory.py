"""ServiceDirectory: the one actor that knows every Service and tells routes what changed.

Routes depend on a handful of Service fields (ports, type, cluster IP, external name, Linkerd's
policy annotations: retries, timeouts, failure accrual, opaque ports), and Ingress statuses on
its addresses (cluster IPs, external IPs, load-balancer status) when it is the
``--publish-service``. Labels, other annotations and the rest of the status change far more often;
forwarding those would make every route that references the Service recompute for nothing.
The directory publishes ``service:<ns>/<name>`` (retained) on create, on delete (unpublish),
and on changes routes can see — silent otherwise. Because the topic is retained, a route actor
that subscribes later still gets the Service, and one that subscribes to a Service that does
not exist yet gets it the moment it is created.

It also knows each Namespace's ``config.linkerd.io/opaque-ports`` (Linkerd applies it to every
Service of the namespace that has no such annotation of its own) and publishes each Service with
it (:meth:`Service.in_namespace`): a change to the Namespace's annotation republishes exactly the
Services of that namespace whose effective value changed.
"""

from __future__ import annotations

from interlock.actors.messages import (
    SERVICE_KEY,
    NamespaceOpaquePorts,
    ServiceDeleted,
    ServiceUpserted,
)
from interlock.actors.topics import (
    SERVICE,
)
from interlock.mailbox import Actor
from interlock.model.cluster_ips import ServiceAddresses
from interlock.model.meta import ObjectKey
from interlock.model.policy_annotations import policy_annotations_of
from interlock.model.service import Service


def routing_view(service: Service) -> tuple[object, ...]:
    """The parts of a Service that route resolution and policies read, and those that the
    Ingresses' ``status.loadBalancer`` reads when it is the ``--publish-service`` (its
    addresses: a load balancer provisioned later changes only ``status``)."""
    spec = service.spec
    addresses = (spec.cluster_ips, spec.external_ips, service.status.load_balancer)
    annotations = policy_annotations_of(service.metadata.annotations)
    return (
        spec.type,
        spec.cluster_ip,
        spec.external_name,
        spec.ports,
        addresses,
        annotations,
        service.namespace_opaque_ports,
    )


class ServiceDirectory(Actor):
    """Receives :class:`ServiceUpserted` / :class:`ServiceDeleted`; publishes changes routes see."""

    reconciles = "Service"

    def __init__(self, *, addresses: ServiceAddresses | None = None) -> None:
        self.addresses = addresses
        """The cluster-IP index the gRPC API reads (kept only when it is served)."""
        self.services: dict[ObjectKey, Service] = {}
        """Every Service, as last seen (published or not)."""
        self.opaque_ports: dict[str, str] = {}
        """Each Namespace's ``config.linkerd.io/opaque-ports``, where it has one."""

    async def receive(self, message: object) -> object | None:
        if isinstance(message, ServiceUpserted):
            self._upsert(message.service)
        elif isinstance(message, ServiceDeleted):
            self._delete(message.key)
        elif isinstance(message, NamespaceOpaquePorts):
            self._namespace(message.namespace, message.value)
        return None

    def _namespace(self, namespace: str, value: str | None) -> None:
        if self.opaque_ports.get(namespace) == value:
            return
        if value is None:
            del self.opaque_ports[namespace]
        else:
            self.opaque_ports[namespace] = value
        for key, service in list(self.services.items()):
            if key.namespace == namespace:
                self._upsert(service)

    def _upsert(self, service: Service) -> None:
        service = service.in_namespace(self.opaque_ports.get(service.metadata.namespace))
        key = service.key
        self.services[key] = service
        if self.addresses is not None:
            self.addresses.upsert(service)
        topic = SERVICE.topic(key)
        # Compared with the retained value, not with local state: after a restart the topic
        # still holds what was published, and an unchanged Service must stay silent.
        previous = self.system.retained(topic).get(SERVICE_KEY)
        if isinstance(previous, Service) and routing_view(previous) == routing_view(service):
            return
        self.publish(topic, SERVICE_KEY, service)

    def _delete(self, key: ObjectKey) -> None:
        self.services.pop(key, None)
        if self.addresses is not None:
            self.addresses.delete(key)
        topic = SERVICE.topic(key)
        if SERVICE_KEY in self.system.retained(topic):
            self.unpublish(topic, SERVICE_KEY)
