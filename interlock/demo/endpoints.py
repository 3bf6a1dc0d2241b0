"""EndpointSlices that point the demo's Services at its local echo servers.

In a cluster, the EndpointSlice controller writes these from Pods; in ``interlock demo`` there are
no Pods, so the demo writes one slice per echo Service, exactly as that controller would (label
``kubernetes.io/service-name``, a port named like the Service port), and applies it with the
example manifests. The edge then resolves upstreams the same way it does in a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
PORT_NAME = "http"
"""The name of the port in manifests/examples/services.yaml that the slices must match."""


def endpoint_slice(*, namespace: str, service: str, host: str, port: int) -> dict[str, Any]:
    """One ready endpoint ``host:port`` for ``namespace/service``."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-demo",
            "namespace": namespace,
            "labels": {
                SERVICE_NAME_LABEL: service,
                "endpointslice.kubernetes.io/managed-by": "interlock-demo",
            },
        },
        "addressType": "IPv6" if ":" in host else "IPv4",
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
    }


def write_endpoint_slices(
    path: Path, *, namespace: str, host: str, ports: Mapping[str, int]
) -> Path:
    """Write a slice per ``service → port`` as one YAML file at ``path``; returns ``path``."""
    documents = [
        endpoint_slice(namespace=namespace, service=service, host=host, port=port)
        for service, port in sorted(ports.items())
    ]
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return path
