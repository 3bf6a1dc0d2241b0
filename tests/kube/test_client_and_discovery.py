"""Client construction and version discovery against the embedded API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlock.kube.client import KubeConfigError, api_client, make_api_client
from interlock.kube.discovery import is_served, served_resource
from interlock.kube.resources import (
    HTTP_ROUTE,
    HTTP_ROUTE_V1BETA1,
    HTTP_ROUTE_VERSIONS,
    MODULE_SET,
    SERVICE,
    Resource,
)
from interlock.kube.transport import KubeApiError, request_json


async def test_a_client_from_a_kubeconfig_reaches_the_server(server: Any, tmp_path: Path) -> None:
    kubeconfig = server.write_kubeconfig(tmp_path / "config")
    async with api_client(kubeconfig=str(kubeconfig), in_cluster=False) as api:
        listing = await request_json(
            api, method="GET", path=SERVICE.collection_path(), what="list services"
        )
        assert isinstance(listing["items"], list)


async def test_a_missing_kubeconfig_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="--kubeconfig PATH"):
        await make_api_client(kubeconfig=str(tmp_path / "absent"), in_cluster=False)


async def test_the_preferred_served_version_is_chosen(api: Any) -> None:
    assert await served_resource(api, HTTP_ROUTE_VERSIONS) in (HTTP_ROUTE, HTTP_ROUTE_V1BETA1)
    assert await is_served(api, HTTP_ROUTE)
    assert await is_served(api, SERVICE)
    unknown = Resource("example.com", "v9", "widgets", "Widget", namespaced=True)
    assert await served_resource(api, [unknown, HTTP_ROUTE]) == HTTP_ROUTE
    assert await served_resource(api, [unknown]) is None


async def test_discovery_errors_other_than_not_found_are_raised(api: Any, server: Any) -> None:
    server.faults.fail_next(1, status=503)
    with pytest.raises(KubeApiError, match=r"discover interlock\.dev/v1alpha1: 503"):
        await is_served(api, MODULE_SET)


async def test_without_a_path_the_kubeconfig_environment_variable_is_used(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = server.write_kubeconfig(tmp_path / "from-env")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    async with api_client(kubeconfig=None, in_cluster=False) as api:
        assert await is_served(api, SERVICE)


async def test_in_cluster_outside_a_pod_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError, match="in-cluster service account"):
        await make_api_client(kubeconfig=None, in_cluster=True)
