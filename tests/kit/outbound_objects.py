"""Raw Kubernetes objects for outbound tests (unit and end to end), as the API server sends them.

Shared by ``tests/actors``, ``tests/api`` and ``tests/e2e``.
"""

from __future__ import annotations

from typing import Any

GATEWAY = "gateway.networking.k8s.io"

ACCRUAL = {
    "balancer.linkerd.io/failure-accrual": "consecutive",
    "balancer.linkerd.io/failure-accrual-consecutive-max-failures": "2",
    "balancer.linkerd.io/failure-accrual-consecutive-min-penalty": "1h",
    "balancer.linkerd.io/failure-accrual-consecutive-max-penalty": "2h",
}
"""A Service's annotations for consecutive failure accrual: two failures in a row take an
endpoint out for an hour (longer than any test)."""


def service(
    name: str,
    *,
    namespace: str = "default",
    ports: tuple[int, ...] = (80,),
    port_names: tuple[str, ...] | None = None,
    cluster_ip: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    names = port_names or tuple(f"p{port}" for port in ports)
    # No clusterIP by default: the API server allocates one (a real one refuses two Services
    # with the same address, or one outside its service range).
    spec: dict[str, Any] = {} if cluster_ip is None else {"clusterIP": cluster_ip}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            **spec,
            "ports": [
                {"name": port_name, "port": port, "protocol": "TCP"}
                for port, port_name in zip(ports, names, strict=True)
            ],
        },
    }


def backend(
    name: str, port: int = 80, *, namespace: str | None = None, weight: int = 1
) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, "port": port, "weight": weight}
    if namespace is not None:
        ref["namespace"] = namespace
    return ref


def parent(name: str, *, port: int | None = None, namespace: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": "core", "kind": "Service", "name": name}
    if port is not None:
        ref["port"] = port
    if namespace is not None:
        ref["namespace"] = namespace
    return ref


def http_route(
    name: str,
    *,
    namespace: str = "default",
    parents: list[dict[str, Any]],
    backends: list[dict[str, Any]],
    path: str = "/",
    created: str | None = None,
    generation: int = 1,
    version: str = "v1",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "generation": generation}
    if created is not None:
        metadata["creationTimestamp"] = created
    return {
        "apiVersion": f"{GATEWAY}/{version}",
        "kind": "HTTPRoute",
        "metadata": metadata,
        "spec": {
            "parentRefs": parents,
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "backendRefs": backends,
                }
            ],
        },
    }


def stream_route(
    kind: str,
    name: str,
    backends: list[dict[str, Any]],
    *,
    service_port: tuple[str, int] = ("db", 5432),
    **spec: Any,
) -> dict[str, Any]:
    """A TCPRoute or TLSRoute (``kind``) in ``default`` whose parent is ``service_port`` (a
    Service's name and port; ``db:5432`` unless given), one rule to ``backends``."""
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [
                {
                    "group": "core",
                    "kind": "Service",
                    "name": service_port[0],
                    "port": service_port[1],
                }
            ],
            **spec,
            "rules": [{"backendRefs": backends}],
        },
    }


def reference_grant(name: str, *, namespace: str, from_namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "from": [{"group": GATEWAY, "kind": "HTTPRoute", "namespace": from_namespace}],
            "to": [{"group": "", "kind": "Service"}],
        },
    }


def backends_of(policy: dict[str, Any]) -> list[tuple[str, bool, int | None]]:
    """``(name, exists, failure status)`` of every backend of every route of a policy JSON."""
    return [
        (
            b["name"],
            b["exists"],
            b["failureInjector"]["status"] if b["failureInjector"] else None,
        )
        for route in policy["routes"]
        for rule in route["rules"]
        for b in rule["backends"]
    ]


def route_names(policy: dict[str, Any]) -> list[str]:
    return [f"{route['kind']}:{route['namespace']}/{route['name']}" for route in policy["routes"]]


def served_retry(*, codes: list[int], attempts: int, source: str = "rule") -> dict[str, Any]:
    """The ``retry`` of a served rule that retries HTTP ``codes`` up to ``attempts`` times
    (no status ranges, gRPC codes, backoff or per-try timeout)."""
    return {
        "source": source,
        "codes": codes,
        "statusRanges": [],
        "grpcCodes": [],
        "attempts": attempts,
        "backoff": None,
        "timeout": None,
    }
