"""The Kubernetes resources interlock reads or writes, and the URL paths that address them.

Every request in ``kube/`` is built from a :class:`Resource` so that a kind's group, version,
plural and scope are written down once. Getting one of them wrong (``endpointslices`` under the
core group, a cluster-scoped path for a namespaced kind) would otherwise surface as a 404 at run
time, far away from the typo.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    """One served version of one kind: enough to build its list, watch, object and status paths."""

    group: str
    """API group; ``""`` for the core group (Service, Secret, Event)."""
    version: str
    """API version within the group, e.g. ``v1`` or ``v1beta1``."""
    plural: str
    """The lowercase plural used in URLs, e.g. ``httproutes``."""
    kind: str
    """The ``kind`` of its objects, e.g. ``HTTPRoute``."""
    namespaced: bool
    """Whether objects live in a namespace (IngressClass does not)."""

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` field of its objects: ``v1`` or ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def _prefix(self) -> str:
        if self.group:
            return f"/apis/{self.group}/{self.version}"
        return f"/api/{self.version}"

    def collection_path(self, *, namespace: str | None = None) -> str:
        """The list/watch/create path: in ``namespace``, or across all namespaces when None."""
        if self.namespaced and namespace:
            return f"{self._prefix()}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{self._prefix()}/{self.plural}"

    def object_path(self, *, namespace: str | None, name: str) -> str:
        """The path of one object (``namespace`` is ignored for cluster-scoped kinds)."""
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name}: a namespace is required for a namespaced kind")
        base = self.collection_path(namespace=namespace if self.namespaced else None)
        return f"{base}/{quote(name, safe='')}"

    def status_path(self, *, namespace: str | None, name: str) -> str:
        """The path of the ``/status`` subresource of one object."""
        return f"{self.object_path(namespace=namespace, name=name)}/status"

    def describe(self, *, namespace: str | None, name: str) -> str:
        """How errors and logs name an object of this kind: ``HTTPRoute default/web``."""
        if self.namespaced and namespace:
            return f"{self.kind} {namespace}/{name}"
        return f"{self.kind} {name}"


SERVICE = Resource("", "v1", "services", "Service", namespaced=True)
SECRET = Resource("", "v1", "secrets", "Secret", namespaced=True)
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
"""Namespaces: read for Linkerd's ``config.linkerd.io/opaque-ports`` default of their Services."""
EVENT = Resource("", "v1", "events", "Event", namespaced=True)
ENDPOINT_SLICE = Resource(
    "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True
)
GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTP_ROUTE = Resource(GATEWAY_GROUP, "v1", "httproutes", "HTTPRoute", namespaced=True)
HTTP_ROUTE_V1BETA1 = Resource(GATEWAY_GROUP, "v1beta1", "httproutes", "HTTPRoute", namespaced=True)
REFERENCE_GRANT = Resource(
    GATEWAY_GROUP, "v1", "referencegrants", "ReferenceGrant", namespaced=True
)
REFERENCE_GRANT_V1BETA1 = Resource(
    GATEWAY_GROUP, "v1beta1", "referencegrants", "ReferenceGrant", namespaced=True
)
INGRESS = Resource("networking.k8s.io", "v1", "ingresses", "Ingress", namespaced=True)
INGRESS_CLASS = Resource(
    "networking.k8s.io", "v1", "ingressclasses", "IngressClass", namespaced=False
)
MODULE_SET = Resource("interlock.dev", "v1alpha1", "modulesets", "ModuleSet", namespaced=True)
LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)

HTTP_ROUTE_VERSIONS: tuple[Resource, ...] = (HTTP_ROUTE, HTTP_ROUTE_V1BETA1)
"""HTTPRoute versions in order of preference: v1, then v1beta1 on clusters that lack v1."""
REFERENCE_GRANT_VERSIONS: tuple[Resource, ...] = (REFERENCE_GRANT, REFERENCE_GRANT_V1BETA1)
"""ReferenceGrant versions in order of preference (v1 is newer than many installed CRDs)."""
GATEWAY = Resource(GATEWAY_GROUP, "v1", "gateways", "Gateway", namespaced=True)
GATEWAY_CLASS = Resource(GATEWAY_GROUP, "v1", "gatewayclasses", "GatewayClass", namespaced=False)
LISTENER_SET = Resource(GATEWAY_GROUP, "v1", "listenersets", "ListenerSet", namespaced=True)
"""ListenerSet: v1 in the standard channel since Gateway API v1.5."""
BACKEND_TLS_POLICY = Resource(
    GATEWAY_GROUP, "v1", "backendtlspolicies", "BackendTLSPolicy", namespaced=True
)
"""BackendTLSPolicy: v1 in the standard channel since Gateway API v1.4."""
CONFIG_MAP = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
"""ConfigMaps: read for the CA bundles BackendTLSPolicies name (key ``ca.crt``)."""
GRPC_ROUTE = Resource(GATEWAY_GROUP, "v1", "grpcroutes", "GRPCRoute", namespaced=True)
"""GRPCRoute: served at v1 only (Gateway API v1.1 and later)."""
TLS_ROUTE = Resource(GATEWAY_GROUP, "v1", "tlsroutes", "TLSRoute", namespaced=True)
"""TLSRoute: v1 in the standard channel since Gateway API v1.5 (v1alpha2 before, not read)."""
TCP_ROUTE = Resource(GATEWAY_GROUP, "v1", "tcproutes", "TCPRoute", namespaced=True)
"""TCPRoute: v1 in the standard channel since Gateway API v1.5 (v1alpha2 before, not read)."""
