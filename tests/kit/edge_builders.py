"""Builders for the edge model tests: raw Kubernetes JSON in, parsed objects out."""

import base64
from typing import Any

from interlock.model.ingress import (
    CONTROLLER_NAME,
    Ingress,
    IngressClass,
    parse_ingress,
    parse_ingress_class,
)
from interlock.model.moduleset import ModuleSet, Secret, parse_module_set, parse_secret
from interlock.model.service import Service, parse_service

NS = "shop"
PLANTED = "planted-s3cret-value"

OUR_CLASS = parse_ingress_class(
    {"metadata": {"name": "interlock"}, "spec": {"controller": CONTROLLER_NAME}}
)
OUR_DEFAULT_CLASS = parse_ingress_class(
    {
        "metadata": {
            "name": "interlock",
            "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
        },
        "spec": {"controller": CONTROLLER_NAME},
    }
)
OTHER_CLASS = parse_ingress_class(
    {"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}}
)
CLASSES: list[IngressClass] = [OUR_CLASS, OTHER_CLASS]


def path(
    path: str, service: str = "web", port: int | str = 80, path_type: str = "Prefix"
) -> dict[str, Any]:
    port_ref = {"number": port} if isinstance(port, int) else {"name": port}
    return {
        "path": path,
        "pathType": path_type,
        "backend": {"service": {"name": service, "port": port_ref}},
    }


def rule(host: str, *paths: dict[str, Any]) -> dict[str, Any]:
    return {"host": host, "http": {"paths": list(paths)}}


def ingress(
    name: str,
    *rules: dict[str, Any],
    namespace: str = NS,
    created: str | None = "2026-01-01T00:00:00Z",
    class_name: str | None = "interlock",
    modules: str | None = None,
    tls: list[dict[str, Any]] | None = None,
    default_backend: dict[str, Any] | None = None,
) -> Ingress:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": {}}
    if created is not None:
        metadata["creationTimestamp"] = created
    if modules is not None:
        metadata["annotations"]["interlock.dev/modules"] = modules
    spec: dict[str, Any] = {"rules": list(rules)}
    if class_name is not None:
        spec["ingressClassName"] = class_name
    if tls is not None:
        spec["tls"] = tls
    if default_backend is not None:
        spec["defaultBackend"] = default_backend
    return parse_ingress({"metadata": metadata, "spec": spec})


def service(
    name: str = "web",
    *ports: tuple[str, int],
    namespace: str = NS,
    external: bool = False,
) -> Service:
    spec: dict[str, Any] = {
        "ports": [{"name": port_name, "port": number} for port_name, number in ports]
        or [{"name": "http", "port": 80}]
    }
    if external:
        spec = {"type": "ExternalName", "externalName": "example.org"}
    return parse_service({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def module_set(name: str, modules: dict[str, Any], *, namespace: str = NS) -> ModuleSet:
    return parse_module_set(
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"modules": modules}}
    )


def secret(name: str, *, namespace: str = NS, **data: str) -> Secret:
    return parse_secret(
        {
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
    )
