"""Raw Ingress objects (and the Service a backend names) for edge tests (unit, end to end,
reliability), as the API server sends them: one builder instead of one per test module.

Shared like ``outbound_objects.py`` (pytest puts ``tests/`` on the import path through its root
``conftest.py``). An empty ``modules`` writes no ``interlock.dev/modules`` annotation, which the
model reads as no modules, like an empty one.
"""

from __future__ import annotations

from typing import Any


def ingress_rule(host: str, *, backend: str = "web", path: str = "/") -> dict[str, Any]:
    """One rule: ``host`` + ``path`` (Prefix) to port 80 of the Service ``backend``."""
    return {
        "host": host,
        "http": {
            "paths": [
                {
                    "path": path,
                    "pathType": "Prefix",
                    "backend": {"service": {"name": backend, "port": {"number": 80}}},
                }
            ]
        },
    }


def ingress(
    name: str,
    *hosts: str,
    backend: str = "web",
    modules: str = "",
    path: str = "/",
    rules: list[dict[str, Any]] | None = None,
    class_name: str | None = "interlock",
    uid: str | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """Ingress ``default/name`` of class ``class_name`` (None: no class named), one rule per
    host (or ``rules``); ``uid`` and ``created`` (``creationTimestamp``) as the API server
    would fill them in, for tests that hand the object to an actor directly."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if uid is not None:
        metadata["uid"] = uid
    if created is not None:
        metadata["creationTimestamp"] = created
    if modules:
        metadata["annotations"] = {"interlock.dev/modules": modules}
    spec: dict[str, Any] = {} if class_name is None else {"ingressClassName": class_name}
    spec["rules"] = [ingress_rule(h, backend=backend, path=path) for h in hosts]
    if rules is not None:
        spec["rules"] = rules
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": spec,
    }


INGRESS_CLASS_OBJ: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "interlock"},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}
"""The IngressClass ``interlock``, whose Ingresses the controller serves."""


def module_set(name: str, modules: dict[str, Any]) -> dict[str, Any]:
    """ModuleSet ``default/name`` with ``modules`` (module type → settings)."""
    return {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"modules": modules},
    }


def backend_service(name: str) -> dict[str, Any]:
    """The Service ``default/<name>`` an Ingress backend names: one unnamed TCP port 80."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}]},
    }


def web_route(rules: list[dict[str, Any]], *, name: str = "split") -> dict[str, Any]:
    """An HTTPRoute ``name`` attached to Service ``web`` port 80 (what an Ingress to ``web``
    sends through) with these rules."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80}],
            "rules": rules,
        },
    }
