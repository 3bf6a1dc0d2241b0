"""Discovery documents: how kubectl learns which kinds exist and where they live.

kubectl 1.32 asks ``/api`` and ``/apis`` for *aggregated* discovery
(``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``) and uses that one
answer for every kind; older clients walk the legacy documents (``APIVersions``,
``APIGroupList``, one ``APIResourceList`` per group-version). Both are derived from the registry,
so a CRD created at run time is discoverable on the next request.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from interlock.embedded.registry import Registry, ResourceType

JsonObject = dict[str, Any]

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
CUSTOM_RESOURCE_VERBS = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
]
"""kube-apiserver lists a custom resource's verbs in this order (and a built-in's sorted)."""
STATUS_VERBS = ["get", "patch", "update"]
KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-interlock-embedded",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def wants_aggregated(accept: str) -> bool:
    return any(
        "g=apidiscovery.k8s.io" in part and "v=v2" in part and "v=v2beta1" not in part
        for part in accept.split(",")
    )


def verbs(rtype: ResourceType) -> list[str]:
    if rtype.from_crd:
        return CUSTOM_RESOURCE_VERBS
    if rtype.key == ("", "namespaces"):
        return [verb for verb in VERBS if verb != "deletecollection"]
    return VERBS


def storage_version_hash(rtype: ResourceType) -> str:
    """What kube-apiserver publishes so that clients notice a change of storage version."""
    digest = hashlib.sha256(f"{rtype.group}/{rtype.storage_version}/{rtype.kind}".encode())
    return base64.b64encode(digest.digest()[:8]).decode()


def _aggregated_resource(rtype: ResourceType, version: str) -> JsonObject:
    kind = {"group": rtype.group, "version": version, "kind": rtype.kind}
    resource: JsonObject = {
        "resource": rtype.plural,
        "responseKind": kind,
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        "verbs": verbs(rtype),
    }
    if rtype.short_names:
        resource["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        resource["categories"] = list(rtype.categories)
    if rtype.status_subresource:
        resource["subresources"] = [
            {"subresource": "status", "responseKind": kind, "verbs": STATUS_VERBS}
        ]
    return resource


def _aggregated_group(registry: Registry, group: str, versions: list[str]) -> JsonObject:
    return {
        "metadata": {"name": group} if group else {},
        "versions": [
            {
                "version": version,
                "resources": [
                    _aggregated_resource(rtype, version)
                    for rtype in registry
                    if rtype.group == group and version in rtype.versions
                ],
                "freshness": "Current",
            }
            for version in versions
        ],
    }


def aggregated_discovery(registry: Registry, *, core: bool) -> JsonObject:
    groups = registry.group_versions()
    items = [
        _aggregated_group(registry, group, versions)
        for group, versions in sorted(groups.items())
        if (group == "") == core
    ]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


def api_versions(server_address: str) -> JsonObject:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group(group: str, versions: list[str]) -> JsonObject:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": listed,
        "preferredVersion": listed[0],
    }


def api_group_list(registry: Registry) -> JsonObject:
    groups = registry.group_versions()
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {k: v for k, v in api_group(group, versions).items() if k not in ("kind", "apiVersion")}
            for group, versions in sorted(groups.items())
            if group
        ],
    }


def api_resource_list(registry: Registry, group: str, version: str) -> JsonObject | None:
    resources: list[JsonObject] = []
    for rtype in registry:
        if rtype.group != group or version not in rtype.versions:
            continue
        entry: JsonObject = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": verbs(rtype),
            "storageVersionHash": storage_version_hash(rtype),
        }
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        if rtype.categories:
            entry["categories"] = list(rtype.categories)
        resources.append(entry)
        if rtype.status_subresource:
            resources.append(
                {
                    "name": f"{rtype.plural}/status",
                    "singularName": "",
                    "namespaced": rtype.namespaced,
                    "kind": rtype.kind,
                    "verbs": STATUS_VERBS,
                }
            )
    if not resources:
        return None
    if not group:  # kube-apiserver's /api/v1 carries no apiVersion
        return {"kind": "APIResourceList", "groupVersion": version, "resources": resources}
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": resources,
    }
