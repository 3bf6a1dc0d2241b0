"""OpenAPI v3 documents, just complete enough for kubectl.

Before ``kubectl apply``/``create`` sends anything it decides how to validate: it reads
``/openapi/v3``, fetches the document of the object's group-version and looks for the PATCH
operation tagged with the object's ``x-kubernetes-group-version-kind``. When that operation
declares the ``fieldValidation`` query parameter, kubectl leaves validation to the server
(which this server does: 422 with the field). The documents also carry each kind's schema
(a CRD's own ``openAPIV3Schema``), which ``kubectl explain`` reads.

The PATCH operations deliberately do not list the strategic-merge content type: kubectl then
computes strategic merge patches for core kinds from its own compiled-in types, and JSON merge
patches for custom resources, exactly what the server implements.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from interlock.embedded.registry import Registry, ResourceType

JsonObject = dict[str, Any]

_OBJECT_META_REF = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
_OBJECT_META_SCHEMA: JsonObject = {
    "type": "object",
    "description": "Standard object's metadata.",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "resourceVersion": {"type": "string"},
        "uid": {"type": "string"},
        "generation": {"type": "integer", "format": "int64"},
        "creationTimestamp": {"type": "string", "format": "date-time"},
        "deletionTimestamp": {"type": "string", "format": "date-time"},
    },
}
_QUERY_PARAMETERS = ["dryRun", "fieldManager", "fieldValidation", "pretty"]


def group_version_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rtype: ResourceType, version: str) -> str:
    group = ".".join(reversed(rtype.group.split("."))) if rtype.group else "io.k8s.api.core"
    return f"{group}.{version}.{rtype.kind}"


def _kind_schema(rtype: ResourceType, version: str) -> JsonObject:
    gvk = {"group": rtype.group, "version": version, "kind": rtype.kind}
    base = rtype.schemas.get(version) or {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    schema: JsonObject = json.loads(json.dumps(base))
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = _OBJECT_META_REF
    schema.setdefault("type", "object")
    schema["x-kubernetes-group-version-kind"] = [gvk]
    return schema


def _operation(rtype: ResourceType, version: str, action: str, body: bool) -> JsonObject:
    ref = {"$ref": f"#/components/schemas/{schema_name(rtype, version)}"}
    operation: JsonObject = {
        "operationId": f"{action}{rtype.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rtype.group,
            "version": version,
            "kind": rtype.kind,
        },
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _QUERY_PARAMETERS
        ],
        "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
    }
    if body:
        types = (
            ["application/json-patch+json", "application/merge-patch+json"]
            if action == "patch"
            else ["application/json"]
        )
        operation["requestBody"] = {
            "content": {
                t: {"schema": {"type": "object"} if action == "patch" else ref} for t in types
            },
            "required": True,
        }
    return operation


def group_version_document(registry: Registry, group: str, version: str) -> JsonObject | None:
    paths: JsonObject = {}
    schemas: JsonObject = {
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": _OBJECT_META_SCHEMA,
    }
    for rtype in registry:
        if rtype.group != group or version not in rtype.versions:
            continue
        prefix = rtype.path_prefix(version)
        collection = (
            f"{prefix}/namespaces/{{namespace}}/{rtype.plural}"
            if rtype.namespaced
            else f"{prefix}/{rtype.plural}"
        )
        paths[collection] = {
            "get": _operation(rtype, version, "list", body=False),
            "post": _operation(rtype, version, "post", body=True),
        }
        paths[f"{collection}/{{name}}"] = {
            "get": _operation(rtype, version, "get", body=False),
            "put": _operation(rtype, version, "put", body=True),
            "patch": _operation(rtype, version, "patch", body=True),
            "delete": _operation(rtype, version, "delete", body=False),
        }
        if rtype.status_subresource:
            paths[f"{collection}/{{name}}/status"] = {
                "get": _operation(rtype, version, "get", body=False),
                "put": _operation(rtype, version, "put", body=True),
                "patch": _operation(rtype, version, "patch", body=True),
            }
        schemas[schema_name(rtype, version)] = _kind_schema(rtype, version)
    if len(schemas) == 1:
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def document_hash(document: JsonObject) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:64].upper()


def openapi_index(registry: Registry) -> JsonObject:
    paths: JsonObject = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            document = group_version_document(registry, group, version)
            if document is None:
                continue
            path = group_version_path(group, version)
            paths[path] = {
                "serverRelativeURL": f"/openapi/v3/{path}?hash={document_hash(document)}"
            }
    return {"paths": paths}
