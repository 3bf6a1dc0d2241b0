"""CustomResourceDefinitions: their validation, their status, and the ones installed at start.

Creating a CRD is what makes a kind exist (the store registers its ResourceType on commit);
this module checks a CRD the way kube-apiserver does where users would notice (name is
``plural.group``, exactly one storage version, no clash with a built-in kind), reports it
Established, and provides the Gateway API CRDs every embedded server starts with.

In a real cluster HTTPRoute and ReferenceGrant exist because the Gateway API CRDs were
installed. The embedded server pre-creates the same CRDs (with the upstream printer columns and,
when asked, the constraints of :mod:`~interlock.embedded.gateway_schemas`), so ``kubectl get
crd`` lists them, ``kubectl apply`` of the upstream bundle updates them in place, and they are
served by the same custom-resource code as the ModuleSet CRD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlock.embedded.errors import FieldError, required_value
from interlock.embedded.gateway_schemas import (
    grpcroute_schema,
    httproute_schema,
    referencegrant_schema,
    stream_route_schema,
)
from interlock.embedded.registry import Registry

JsonObject = dict[str, Any]

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_HOSTNAMES = {"name": "Hostnames", "type": "string", "jsonPath": ".spec.hostnames"}


def _crd(
    kind: str,
    versions: list[str],
    columns: list[dict[str, Any]],
    schema: dict[str, Any],
    *,
    status: bool = True,
    scope: str = "Namespaced",
    plural: str | None = None,
) -> dict[str, Any]:
    """A Gateway API CRD as the v1.6.1 bundle writes it: plural ``<kind>s``, stored as v1."""
    group = "gateway.networking.k8s.io"
    plural = plural or f"{kind.lower()}s"
    storage = "v1"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "annotations": {"gateway.networking.k8s.io/bundle-version": "v1.6.1"},
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
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": version == storage,
                    "schema": {"openAPIV3Schema": schema},
                    "additionalPrinterColumns": columns,
                    **({"subresources": {"status": {}}} if status else {}),
                }
                for version in versions
            ],
        },
    }


_PERMISSIVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def gateway_api_crds(*, constrained: bool) -> list[dict[str, Any]]:
    """HTTPRoute, GRPCRoute, TLSRoute, TCPRoute and ReferenceGrant CRDs; ``constrained``: with
    the upstream constraints of
    :mod:`~interlock.embedded.gateway_schemas`, else a schema that admits any spec.

    GatewayClass, Gateway and BackendTLSPolicy are served with a schema that admits any spec
    (interlock applies their defaults and checks them itself); applying the upstream bundle
    replaces them with the real schemas."""

    def schema(make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return make() if constrained else _PERMISSIVE_SCHEMA

    return [
        _crd("HTTPRoute", ["v1", "v1beta1"], [_HOSTNAMES, _AGE], schema(httproute_schema)),
        _crd("GRPCRoute", ["v1"], [_HOSTNAMES, _AGE], schema(grpcroute_schema)),
        _crd("TLSRoute", ["v1"], [_AGE], schema(lambda: stream_route_schema(tls=True))),
        _crd("TCPRoute", ["v1"], [_AGE], schema(lambda: stream_route_schema(tls=False))),
        _crd(
            "GatewayClass",
            ["v1", "v1beta1"],
            [{"name": "Controller", "type": "string", "jsonPath": ".spec.controllerName"}, _AGE],
            _PERMISSIVE_SCHEMA,
            scope="Cluster",
            plural="gatewayclasses",
        ),
        _crd(
            "Gateway",
            ["v1", "v1beta1"],
            [{"name": "Class", "type": "string", "jsonPath": ".spec.gatewayClassName"}, _AGE],
            _PERMISSIVE_SCHEMA,
        ),
        _crd(
            "ListenerSet",
            ["v1"],
            [
                {
                    "name": "Accepted",
                    "type": "string",
                    "jsonPath": '.status.conditions[?(@.type=="Accepted")].status',
                },
                _AGE,
            ],
            _PERMISSIVE_SCHEMA,
        ),
        _crd(
            "ReferenceGrant",
            ["v1", "v1beta1"],
            [_AGE],
            schema(referencegrant_schema),
            status=False,
        ),
        _crd(
            "BackendTLSPolicy",
            ["v1"],
            [_AGE],
            _PERMISSIVE_SCHEMA,
            plural="backendtlspolicies",
        ),
    ]


def crd_errors(obj: JsonObject, *, registry: Registry) -> list[FieldError]:
    """What is wrong with a CustomResourceDefinition (after the generic metadata checks)."""
    errors: list[FieldError] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required_value("spec")]
    names = spec.get("names") or {}
    if not spec.get("group"):
        errors.append(required_value("spec.group"))
    for field in ("plural", "kind"):
        if not names.get(field):
            errors.append(required_value(f"spec.names.{field}"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(
            FieldError(
                "spec.scope",
                f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", '
                '"Namespaced"',
                reason="FieldValueNotSupported",
            )
        )
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        errors.append(required_value("spec.versions"))
    elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        errors.append(
            FieldError(
                "spec.versions",
                "Invalid value: must have exactly one version marked as storage version",
            )
        )
    if not errors:
        expected = f"{names['plural']}.{spec['group']}"
        if obj["metadata"].get("name") != expected:
            errors.append(
                FieldError(
                    "metadata.name",
                    f'Invalid value: "{obj["metadata"].get("name")}": must be spec.names.plural'
                    f'+"."+spec.group ({expected})',
                )
            )
        builtin = next(
            (t for t in registry if t.key == (spec["group"], names["plural"]) and not t.from_crd),
            None,
        )
        if builtin is not None:
            errors.append(
                FieldError("spec.group", f'Invalid value: "{spec["group"]}": is a built-in group')
            )
    return errors


def accept_crd(obj: JsonObject, *, old: JsonObject | None, now: str) -> None:
    """Fill in defaulted names and the status a real server reports once it serves the kind."""
    spec = obj["spec"]
    spec.setdefault("conversion", {"strategy": "None"})
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", f"{names['kind']}List")
    spec["names"] = names
    stored_versions = list(((old or {}).get("status") or {}).get("storedVersions") or [])
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    if storage not in stored_versions:
        stored_versions.append(storage)
    obj["status"] = {
        "acceptedNames": names,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "storedVersions": stored_versions,
    }
    if old is not None and old.get("status", {}).get("conditions"):
        # Keep transition times stable so a re-apply is a no-op.
        obj["status"]["conditions"] = old["status"]["conditions"]
