"""Every topic of the controller: its family, its key, who publishes on it and who reads it.

Topics are retained pub/sub values (``docs/design.md``, the flow of a change): a subscriber gets
the current values the moment it subscribes, then every change. A family makes its topics from
a typed key (``SERVICE.topic(key)``) and gives the key back (``SERVICE.key_of(topic)``, ``None``
for another family's topic), so no actor formats or takes apart a topic string of its own. To
find where a change goes, find its family here, then its publishers and readers.

Each family: its topics and retained key, what they carry; published by → read by.

- ``SERVICE``: ``service:<ns>/<name>``, key ``service``, the ``Service``; the ServiceDirectory
  (only when a field readers use changed) → RouteActor, ServicePortWatch, IngressActor,
  GatewayController, UpstreamCache.
- ``GRANTS`` (by namespace): ``grants:<ns>``, key = grant name, each ``ReferenceGrant``; the
  GrantsDirectory → RouteActor, GatewayController.
- ``ROUTE``: ``route:<Kind>:<ns>/<name>``, key ``route``, ``RouteSpecified`` or
  ``RouteRejected``; the InformerRouter → that route's RouteActor.
- ``PARENT`` (by parent Service): ``parent:<ns>/<svc>``, key = route identity, the route's
  ``ResolvedRoute``; each RouteActor with that parent → ServicePortWatch.
- ``ATTACH`` (by route kind and parent Service): ``attach:<Kind>:<ns>/<svc>``, key = route
  identity, its ``RouteAttachment``; RouteActors of that kind → RouteActors of the kinds it can
  beat on that Service.
- ``GATEWAY_PARENTS``: ``gateway-parents:<Kind>:<ns>/<name>``, key ``gateway``, the route's
  ``status.parents`` entries for interlock's Gateways; the GatewayController → that route's
  RouteActor.
- ``INGRESS``: ``ingress:<ns>/<name>``, key ``ingress``, the ``Ingress``; the Ingress directory
  → that Ingress's IngressActor.
- ``MODULESET``: ``moduleset:<ns>/<name>``, key ``moduleset``; the ModuleSet directory →
  IngressActor, GatewayController.
- ``SECRET``: ``secret:<ns>/<name>``, key ``secret``, ``SecretData``; the Secret directory →
  IngressActor, EdgeActor (its TLS certificate), GatewayController.
- ``ENDPOINTS`` (by Service): ``endpoints:<ns>/<svc>``, key = EndpointSlice name; the
  EndpointSlice directory → UpstreamCache.
- ``HOST``: ``host:<host>``, key = an Ingress's ``<ns>/<name>``, its ``HostPart``; IngressActors
  → that host's EdgeActor.
- ``INGRESS_HOSTS``: ``ingress-hosts:<ns>/<name>``, key ``hosts``; an IngressActor → itself,
  after a restart.
- ``CA_BUNDLE`` (by ConfigMap): ``ca-bundle:<ns>/<name>``, key ``ca-bundle``, the ConfigMap's
  ``CABundle`` (its ``ca.crt``, for BackendTLSPolicy); the CABundleDirectory (only when
  ``ca.crt`` changed) → GatewayController.
- ``STATUS`` (by what is written): ``status:route`` (all four route kinds),
  ``status:ingress``, ``status:moduleset``, ``status:gateway``, key = the object's; RouteActor,
  IngressActor, ModuleSet directory, GatewayController → StatusWriter.

Four topics stand alone: ``ingressclasses`` (key = class name, by the IngressClass directory,
read by every IngressActor), ``gateway-serving`` (key = a Gateway's ``<ns>/<name>``, by the
GatewayController, read by the GatewayDataPlane), ``gateway-services`` (key = a Gateway's
``<ns>/<name>``, the ``DesiredGatewayService`` kept for it, by the GatewayController, read by the
GatewayServiceWriter) and ``edge-instance`` (key ``instance``, the name a data plane at
``--edge-admin-url`` drew when it started, by the edge half's ``InstanceWatch``, read by every
EdgeActor: another one means it restarted, and each programs its host again).
"""

from __future__ import annotations

from typing import NamedTuple

from interlock.mailbox.topic_family import TopicFamily
from interlock.model.meta import ObjectKey


class KindKey(NamedTuple):
    """An object of a kind that shares its family with other kinds (``HTTPRoute``, …)."""

    kind: str
    key: ObjectKey


def _object(key: ObjectKey) -> str:
    return f"{key.namespace}/{key.name}"


def _object_of(text: str) -> ObjectKey:
    namespace, _, name = text.partition("/")
    return ObjectKey(namespace=namespace, name=name)


def _kind_object(key: KindKey) -> str:
    return f"{key.kind}:{key.key.namespace}/{key.key.name}"


def _kind_object_of(text: str) -> KindKey:
    kind, _, rest = text.partition(":")
    return KindKey(kind, _object_of(rest))


def _text(key: str) -> str:
    return key


def _objects(name: str) -> TopicFamily[ObjectKey]:
    return TopicFamily(name, encode=_object, decode=_object_of)


def _kind_objects(name: str) -> TopicFamily[KindKey]:
    return TopicFamily(name, encode=_kind_object, decode=_kind_object_of)


def _texts(name: str) -> TopicFamily[str]:
    return TopicFamily(name, encode=_text, decode=_text)


SERVICE = _objects("service")
GRANTS = _texts("grants")
"""Keyed by namespace."""
ROUTE = _kind_objects("route")
PARENT = _objects("parent")
"""Keyed by the parent Service."""
ATTACH = _kind_objects("attach")
"""Keyed by the attaching routes' kind and the parent Service."""
GATEWAY_PARENTS = _kind_objects("gateway-parents")
INGRESS = _objects("ingress")
MODULESET = _objects("moduleset")
SECRET = _objects("secret")
ENDPOINTS = _objects("endpoints")
"""Keyed by the Service."""
HOST = _texts("host")
INGRESS_HOSTS = _objects("ingress-hosts")
CA_BUNDLE = _objects("ca-bundle")
STATUS = _texts("status")
"""Keyed by what is written: ``route``, ``ingress``, ``moduleset``, ``gateway``."""

INGRESS_CLASSES_TOPIC = "ingressclasses"
GATEWAY_SERVING_TOPIC = "gateway-serving"
GATEWAY_SERVICES_TOPIC = "gateway-services"
EDGE_INSTANCE_TOPIC = "edge-instance"
ROUTE_STATUS_TOPIC = STATUS.topic("route")
INGRESS_STATUS_TOPIC = STATUS.topic("ingress")
MODULESET_STATUS_TOPIC = STATUS.topic("moduleset")
GATEWAY_STATUS_TOPIC = STATUS.topic("gateway")
