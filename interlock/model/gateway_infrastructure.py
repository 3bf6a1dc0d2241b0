"""The Service interlock keeps for each of its Gateways (``spec.infrastructure``).

interlock serves a Gateway from its own process, on an address of its pool: it starts no Pod
and no load balancer, so until now a Gateway left no trace among the cluster's resources. Tools
and people look for a Gateway's resources by the label ``gateway.networking.k8s.io/gateway-name``
(the conformance suite does, and so do dashboards and cost reports), and a Gateway's
``spec.infrastructure`` asks for labels and annotations on "any resources created in response to
this Gateway" (a cost centre, a team, a monitoring opt-in). So each Gateway gets one Service:

* named ``<gateway>-interlock-gateway`` in the Gateway's namespace (a hash-derived name when that
  would not be a valid Service name), owned by the Gateway (``ownerReferences``, so Kubernetes'
  garbage collector deletes it with the Gateway even while interlock is down);
* headless and without selector (``clusterIP: None``): it routes nothing — traffic goes to the
  Gateway's address — but names the Gateway's ports, and its address in the
  ``interlock.dev/gateway-address`` annotation (also in the Gateway's ``status.addresses``);
* labelled ``gateway.networking.k8s.io/gateway-name`` and ``app.kubernetes.io/managed-by:
  interlock``, with ``spec.infrastructure.labels`` and ``.annotations`` (ours win on a clash:
  the Service must stay findable).

A cluster IP was not chosen because it would lead nowhere (no endpoint answers on it): a user
curling it would meet silence instead of the Gateway.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from interlock.model.gateway import GATEWAY_GROUP
from interlock.model.gateway_listeners import AddressProblem, Gateway

GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "interlock"
ADDRESS_ANNOTATION = "interlock.dev/gateway-address"
SERVICE_SUFFIX = "-interlock-gateway"

_SERVICE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _port_prefix(protocol: str) -> str:
    """A Service port name's start: the protocol (``http``), or ``port`` for one that cannot be
    part of a DNS label (``example.com/custom``)."""
    lowered = protocol.lower()
    return lowered if re.fullmatch(r"[a-z0-9]{1,40}", lowered) else "port"


def service_name(gateway_name: str) -> str:
    """The Service of the Gateway ``gateway_name``: ``<name>-interlock-gateway``, or, when
    that is not a DNS-1035 label of at most 63 characters (a Gateway name may hold dots, start
    with a digit and run to 253 characters), ``interlock-gateway-`` and a hash of the name."""
    wanted = gateway_name + SERVICE_SUFFIX
    if len(wanted) <= 63 and _SERVICE_NAME.fullmatch(wanted):
        return wanted
    digest = hashlib.sha256(gateway_name.encode()).hexdigest()[:16]
    return f"interlock-gateway-{digest}"


def gateway_service(gateway: Gateway, address: str | AddressProblem) -> dict[str, Any]:
    """The Service interlock keeps for ``gateway``, served at ``address``."""
    # One Service port per port number: a port carries one protocol, and a conflicting
    # listener's does not rename it (the first listener's wins).
    by_port: dict[int, str] = {}
    for listener in gateway.spec.listeners:
        by_port.setdefault(listener.port, listener.protocol)
    infrastructure = gateway.spec.infrastructure
    labels = {} if infrastructure is None else dict(infrastructure.labels)
    annotations = {} if infrastructure is None else dict(infrastructure.annotations)
    if isinstance(address, str):
        annotations[ADDRESS_ANNOTATION] = address
    else:
        annotations.pop(ADDRESS_ANNOTATION, None)
    name, namespace = gateway.metadata.name, gateway.metadata.namespace
    metadata: dict[str, Any] = {
        "name": service_name(name),
        "namespace": namespace,
        "labels": {**labels, GATEWAY_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
        "annotations": annotations,
    }
    if gateway.metadata.uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": f"{GATEWAY_GROUP}/v1",
                "kind": "Gateway",
                "name": name,
                "uid": gateway.metadata.uid,
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "None",
            "ports": [
                {"name": f"{_port_prefix(by_port[port])}-{port}", "port": port, "protocol": "TCP"}
                for port in sorted(by_port)
            ],
        },
    }
