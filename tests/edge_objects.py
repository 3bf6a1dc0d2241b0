"""Raw Ingress objects for edge tests (unit, end to end, reliability), as the API server sends
them: one builder instead of one per test module.

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
    class_name: str = "interlock",
) -> dict[str, Any]:
    """Ingress ``default/name`` of class ``class_name``: one rule per host (or ``rules``)."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if modules:
        metadata["annotations"] = {"interlock.dev/modules": modules}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": {
            "ingressClassName": class_name,
            "rules": [ingress_rule(h, backend=backend, path=path) for h in hosts]
            if rules is None
            else rules,
        },
    }
