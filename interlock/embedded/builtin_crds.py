"""The Gateway API CustomResourceDefinitions every embedded server starts with.

In a real cluster HTTPRoute and ReferenceGrant exist because the Gateway API CRDs were
installed. The embedded server pre-creates the same CRDs (with the upstream printer columns and
a permissive schema), so ``kubectl get crd`` lists them, ``kubectl apply`` of the upstream
bundle updates them in place, and they are served by the same custom-resource code as the
ModuleSet CRD.
"""

from __future__ import annotations

from typing import Any

_PERMISSIVE_SCHEMA: dict[str, Any] = {
    "openAPIV3Schema": {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
}

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _crd(
    *,
    kind: str,
    plural: str,
    versions: list[str],
    storage: str,
    columns: list[dict[str, Any]],
    status: bool,
) -> dict[str, Any]:
    group = "gateway.networking.k8s.io"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "annotations": {"gateway.networking.k8s.io/bundle-version": "v1.2.1"},
        },
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "categories": ["gateway-api"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": version == storage,
                    "schema": _PERMISSIVE_SCHEMA,
                    "additionalPrinterColumns": columns,
                    **({"subresources": {"status": {}}} if status else {}),
                }
                for version in versions
            ],
        },
    }


def gateway_api_crds() -> list[dict[str, Any]]:
    return [
        _crd(
            kind="HTTPRoute",
            plural="httproutes",
            versions=["v1", "v1beta1"],
            storage="v1",
            columns=[
                {"name": "Hostnames", "type": "string", "jsonPath": ".spec.hostnames"},
                _AGE,
            ],
            status=True,
        ),
        _crd(
            kind="ReferenceGrant",
            plural="referencegrants",
            versions=["v1", "v1beta1"],
            storage="v1",
            columns=[_AGE],
            status=False,
        ),
    ]
