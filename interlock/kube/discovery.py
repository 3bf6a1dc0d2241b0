"""Which version of a kind the cluster serves, asked once at start.

Gateway API CRDs are installed at different versions in different clusters: HTTPRoute is served
as v1 by recent releases and only as v1beta1 by older ones, and watching a version that is not
served fails with 404 forever. Asking the API server's discovery endpoint once lets the informers
pick the best served version instead of guessing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes_asyncio.client import ApiClient

from interlock.kube.resources import Resource
from interlock.kube.transport import KubeApiError, request_json


async def is_served(api: ApiClient, resource: Resource) -> bool:
    """True if ``resource``'s group/version lists its plural (GET ``/apis/<group>/<version>``).

    Raises :class:`KubeApiError` for anything but a 404 (the version is not served).
    """
    path = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    try:
        document = await request_json(
            api, method="GET", path=path, what=f"discover {resource.api_version}"
        )
    except KubeApiError as error:
        if error.code == 404:
            return False
        raise
    resources = document.get("resources")
    if not isinstance(resources, list):
        return False
    return any(isinstance(r, dict) and r.get("name") == resource.plural for r in resources)


async def served_resource(api: ApiClient, candidates: Sequence[Resource]) -> Resource | None:
    """The first of ``candidates`` (in order of preference) that the cluster serves, or None."""
    for candidate in candidates:
        if await is_served(api, candidate):
            return candidate
    return None
