"""Small helpers shared by the embedded API server tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from interlock.mailbox.testing import eventually as _eventually

T = TypeVar("T")

MODULESET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "modulesets.interlock.dev"},
    "spec": {
        "group": "interlock.dev",
        "scope": "Namespaced",
        "names": {
            "kind": "ModuleSet",
            "plural": "modulesets",
            "singular": "moduleset",
            "shortNames": ["ms"],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {
                        "name": "Valid",
                        "type": "string",
                        "jsonPath": '.status.conditions[?(@.type=="Valid")].status',
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "modules": {
                                        "type": "object",
                                        "properties": {
                                            "compression": {
                                                "type": "object",
                                                "properties": {"enabled": {"type": "boolean"}},
                                            },
                                            "rateLimit": {
                                                "type": "object",
                                                "required": ["requests"],
                                                "properties": {
                                                    "requests": {"type": "integer", "minimum": 1},
                                                    "period": {"type": "string"},
                                                },
                                            },
                                        },
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    }
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def moduleset(name: str, *, namespace: str = "default", **modules: Any) -> dict[str, Any]:
    return {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"modules": modules},
    }


def service(
    name: str, *, namespace: str = "default", port: int = 80, **labels: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"ports": [{"name": "http", "port": port}]},
    }


async def eventually(
    check: Callable[[], Awaitable[T] | T], *, within: float = 60.0, interval: float = 0.02
) -> T:
    """Poll ``check`` until it returns a truthy value (or stops raising AssertionError)."""
    result: T = await _eventually(check, within=within, interval=interval)
    return result
