"""The GatewayServiceWriter's boundary to Kubernetes: create, update and delete of Services.

:class:`~interlock.actors.gateway_services.GatewayServiceWriter` decides what to write and when
(leader only, on change, with retries); this turns it into requests that the embedded API server
serves too (it has no server-side apply): a create, and when the Service exists already a JSON
patch that first tests the ``app.kubernetes.io/managed-by: interlock`` label and then sets the
labels, annotations, owner and ports interlock wants. A Service of that name that is not
interlock's (a user's own) fails the test (422) and is left alone, never taken over.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient

from interlock.actors.gateway_services import GatewayServiceError, TransientGatewayServiceError
from interlock.kube.resources import SERVICE
from interlock.kube.transport import KubeApiError, request_json
from interlock.model.gateway_infrastructure import MANAGED_BY, MANAGED_BY_LABEL

JSON_PATCH = "application/json-patch+json"


class KubeGatewayServiceSink:
    """Services through the API server: ``POST``, then ``PATCH`` when it exists; ``DELETE``."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api

    async def apply(self, manifest: dict[str, Any]) -> None:
        meta = manifest["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        try:
            await request_json(
                self._api,
                method="POST",
                path=SERVICE.collection_path(namespace=namespace),
                what=f"create Service {namespace}/{name}",
                body=manifest,
            )
            return
        except KubeApiError as error:
            if error.code != 409:
                raise _classified(error) from error
        label = MANAGED_BY_LABEL.replace("~", "~0").replace("/", "~1")
        operations = [
            {"op": "test", "path": f"/metadata/labels/{label}", "value": MANAGED_BY},
            {"op": "add", "path": "/metadata/labels", "value": meta["labels"]},
            {"op": "add", "path": "/metadata/annotations", "value": meta["annotations"]},
            {"op": "add", "path": "/spec/ports", "value": manifest["spec"]["ports"]},
        ]
        if "ownerReferences" in meta:
            operations.append(
                {"op": "add", "path": "/metadata/ownerReferences", "value": meta["ownerReferences"]}
            )
        try:
            await request_json(
                self._api,
                method="PATCH",
                path=SERVICE.object_path(namespace=namespace, name=name),
                what=f"update Service {namespace}/{name} (if interlock's)",
                body=operations,
                content_type=JSON_PATCH,
            )
        except KubeApiError as error:
            raise _classified(error) from error

    async def delete(self, namespace: str, name: str) -> None:
        try:
            await request_json(
                self._api,
                method="DELETE",
                path=SERVICE.object_path(namespace=namespace, name=name),
                what=f"delete Service {namespace}/{name}",
            )
        except KubeApiError as error:
            if error.code != 404:
                raise _classified(error) from error


def _classified(error: KubeApiError) -> Exception:
    if error.retryable:
        return TransientGatewayServiceError(str(error))
    return GatewayServiceError(str(error))
