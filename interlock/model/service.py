"""The v1 Service and discovery.k8s.io/v1 EndpointSlice, as the outbound model and edge read them.

A Service is what HTTPRoutes attach to (as a parent) and send traffic to (as a backend); the
route model needs its ports, its type and whether it is headless, nothing else. EndpointSlices
give the edge its upstream addresses. Parsing both here, with field-path errors, means a
malformed object from the API server (or a typo in an embedded-mode manifest) is reported as
``Service default/web: spec.ports[0].port: ...`` instead of crashing an actor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from pydantic import Field, model_validator

from interlock.model.meta import (
    KubeModel,
    KubeObject,
    ObjectKey,
    parse_namespaced,
)

ServiceKey = ObjectKey
"""A Service is identified by its namespace and name."""


class ServicePortKey(NamedTuple):
    """A Service port: which Service (namespace, name) and which of its port numbers.

    The one key for "a Service port" everywhere: a route's backend, what a mesh request names,
    a policy watch's target (with its client namespace), an upstream table's row. A
    ``NamedTuple`` — immutable, no ``__dict__``, hashable — rather than a slotted dataclass,
    because the data plane looks it up in dicts on every request: a tuple's hash and equality
    run in C, a dataclass's in Python (a dict hit costs about a fifth as much).
    """

    namespace: str
    name: str
    port: int

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port}"

    def service_key(self) -> ObjectKey:
        """The Service this port belongs to."""
        return ObjectKey(namespace=self.namespace, name=self.name)

    def describe(self) -> str:
        """The key as the data plane's answers name it: ``Service NS/NAME port N``."""
        return f"Service {self.namespace}/{self.name} port {self.port}"


SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label that ties an EndpointSlice to its Service."""


class ServiceSpecPort(KubeModel):
    """One entry of a Service's ``spec.ports`` (what it exposes, not a key: see
    :class:`ServicePortKey`)."""

    name: str = ""
    port: int = Field(ge=1, le=65535)
    # Kubernetes' IntOrString: a number, or the name of a container port.
    target_port: int | str | None = Field(None, alias="targetPort")
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    app_protocol: str | None = Field(None, alias="appProtocol")


def _without_nulls(data: Any, fields: tuple[str, ...]) -> Any:
    """``data`` without the given keys where they are ``null`` (written by some clients for an
    empty list), so they take their defaults instead of failing the whole Service."""
    if isinstance(data, dict) and any(data.get(name, ...) is None for name in fields):
        return {k: v for k, v in data.items() if not (k in fields and v is None)}
    return data


class ServiceSpec(KubeModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"] = "ClusterIP"
    cluster_ip: str | None = Field(None, alias="clusterIP")
    cluster_ips: tuple[str, ...] = Field((), alias="clusterIPs")
    external_ips: tuple[str, ...] = Field((), alias="externalIPs")
    external_name: str | None = Field(None, alias="externalName")
    ports: tuple[ServiceSpecPort, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _null_lists_are_empty(cls, data: Any) -> Any:
        return _without_nulls(data, ("clusterIPs", "externalIPs", "ports"))


class LoadBalancerPortStatus(KubeModel):
    port: int
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    error: str | None = None

    def to_status(self) -> dict[str, Any]:
        """The same port in an Ingress's ``status.loadBalancer`` (IngressPortStatus)."""
        status: dict[str, Any] = {"port": self.port, "protocol": self.protocol}
        if self.error:
            status["error"] = self.error
        return status


class LoadBalancerIngress(KubeModel):
    """One address a cloud load balancer gave the Service (an IP or a host name)."""

    ip: str | None = None
    hostname: str | None = None
    ports: tuple[LoadBalancerPortStatus, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _null_ports_are_empty(cls, data: Any) -> Any:
        return _without_nulls(data, ("ports",))


class LoadBalancerStatus(KubeModel):
    ingress: tuple[LoadBalancerIngress, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _null_ingress_is_empty(cls, data: Any) -> Any:
        return _without_nulls(data, ("ingress",))


class ServiceStatus(KubeModel):
    """Read only for ``--publish-service`` (the address Ingresses report)."""

    load_balancer: LoadBalancerStatus = Field(
        default_factory=LoadBalancerStatus, alias="loadBalancer"
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_empty(cls, data: Any) -> Any:
        return _without_nulls(data, ("loadBalancer",))


class Service(KubeObject):
    """A v1 Service; use :func:`parse_service` to build one from API JSON."""

    spec: ServiceSpec = Field(default_factory=ServiceSpec)
    status: ServiceStatus = Field(default_factory=ServiceStatus)
    namespace_opaque_ports: str | None = Field(None, exclude=True)
    """Not a Service field: its Namespace's ``config.linkerd.io/opaque-ports`` (Linkerd reads it
    there for every Service the Service's own annotation does not override), filled in by the
    ServiceDirectory with :meth:`in_namespace`."""

    @model_validator(mode="before")
    @classmethod
    def _null_parts_are_empty(cls, data: Any) -> Any:
        return _without_nulls(data, ("spec", "status"))

    def in_namespace(self, opaque_ports: str | None) -> Service:
        """This Service with its Namespace's opaque-ports annotation (None: it has none)."""
        if opaque_ports == self.namespace_opaque_ports:
            return self
        return self.model_copy(update={"namespace_opaque_ports": opaque_ports})

    @property
    def is_headless(self) -> bool:
        """A headless Service has no cluster IP to route to (``clusterIP: None``)."""
        return self.spec.cluster_ip == "None"

    @property
    def is_external_name(self) -> bool:
        return self.spec.type == "ExternalName"

    def port_by_number(self, port: int) -> ServiceSpecPort | None:
        """The Service port numbered ``port``, or None when the Service does not expose it."""
        for candidate in self.spec.ports:
            if candidate.port == port:
                return candidate
        return None

    def port_by_name(self, name: str) -> ServiceSpecPort | None:
        """The Service port named ``name``, or None when there is none."""
        for candidate in self.spec.ports:
            if candidate.name == name:
                return candidate
        return None


class EndpointPort(KubeModel):
    name: str = ""
    # A missing port means "all ports" in the EndpointSlice API; such a slice names no number.
    port: int | None = Field(None, ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    app_protocol: str | None = Field(None, alias="appProtocol")

    @model_validator(mode="before")
    @classmethod
    def _null_name_is_empty(cls, data: Any) -> Any:
        # The API server writes ``name: null`` and ``name: ""`` interchangeably for unnamed ports.
        if isinstance(data, dict) and data.get("name") is None:
            return {**data, "name": ""}
        return data


class EndpointConditions(KubeModel):
    # Kubernetes: "a nil value indicates an unknown state ... consumers should interpret this
    # unknown state as ready", so None counts as ready.
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class Endpoint(KubeModel):
    addresses: tuple[str, ...] = Field(min_length=1)
    conditions: EndpointConditions = Field(default_factory=EndpointConditions)

    @property
    def is_ready(self) -> bool:
        return self.conditions.ready is not False


class EndpointSlice(KubeObject):
    """A discovery.k8s.io/v1 EndpointSlice; use :func:`parse_endpoint_slice`."""

    address_type: Literal["IPv4", "IPv6", "FQDN"] = Field(alias="addressType")
    endpoints: tuple[Endpoint, ...] = ()
    ports: tuple[EndpointPort, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _null_lists_are_empty(cls, data: Any) -> Any:
        # The API server serializes an empty slice as ``endpoints: null``.
        if isinstance(data, dict):
            return {
                **data,
                "endpoints": data.get("endpoints") or (),
                "ports": data.get("ports") or (),
            }
        return data

    @property
    def service_key(self) -> ServiceKey | None:
        """The Service this slice belongs to, from its ``kubernetes.io/service-name`` label."""
        name = self.metadata.labels.get(SERVICE_NAME_LABEL)
        if not name:
            return None
        return ObjectKey(namespace=self.metadata.namespace, name=name)


SERVICE_METADATA = ("name", "namespace", "annotations")
"""What a parsed Service keeps of its metadata: nothing reads its uid, resourceVersion, labels or
timestamps, and the controller holds every Service for as long as it runs (they were 190 bytes
of each Service)."""


def parse_service(raw: dict[str, Any]) -> Service:
    """A Service from API JSON, with only :data:`SERVICE_METADATA` of its metadata; raises
    :class:`InvalidObject` naming the bad field."""
    meta = raw.get("metadata")
    if isinstance(meta, dict) and not meta.keys() <= set(SERVICE_METADATA):
        kept = {name: meta[name] for name in SERVICE_METADATA if name in meta}
        raw = {**raw, "metadata": kept}
    return parse_namespaced(Service, "Service", raw)


def parse_endpoint_slice(raw: dict[str, Any]) -> EndpointSlice:
    """An EndpointSlice from API JSON; raises :class:`InvalidObject` naming the bad field."""
    return parse_namespaced(EndpointSlice, "EndpointSlice", raw)


def ready_addresses(slices: Iterable[EndpointSlice], port_name: str) -> list[tuple[str, int]]:
    """The ``(address, port)`` pairs of ready endpoints, for the slice port named ``port_name``.

    Pass the slices of one Service. The port is looked up by name in each slice (a slice's port
    numbers are the target ports, which can differ between slices during a rollout); a slice
    without that port, or whose port has no number, contributes nothing. The result is sorted
    and free of duplicates, so the same endpoints always give the same list whatever order the
    slices arrive in.
    """
    found: set[tuple[str, int]] = set()
    for endpoint_slice in slices:
        number = next(
            (p.port for p in endpoint_slice.ports if p.name == port_name and p.port is not None),
            None,
        )
        if number is None:
            continue
        for endpoint in endpoint_slice.endpoints:
            if endpoint.is_ready:
                found.update((address, number) for address in endpoint.addresses)
    return sorted(found)
