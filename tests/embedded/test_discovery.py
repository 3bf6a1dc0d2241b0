"""Discovery and OpenAPI documents, in the shapes kubectl and client-go parse."""

from __future__ import annotations

from typing import Any

import aiohttp

from interlock.embedded import EmbeddedApiServer
from tests.kit.embedded_helpers import MODULESET_CRD

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


async def _get(
    server: EmbeddedApiServer, path: str, accept: str = "application/json"
) -> tuple[str, Any]:
    async with (
        aiohttp.ClientSession(
            headers=server.auth_headers(), connector=aiohttp.TCPConnector(ssl=server.client_ssl())
        ) as session,
        session.get(server.url + path, headers={"Accept": accept}) as response,
    ):
        assert response.status == 200, await response.text()
        return response.headers["Content-Type"], await response.json(content_type=None)


async def test_aggregated_discovery_has_the_exact_content_type_and_every_kind(
    api_server: EmbeddedApiServer,
) -> None:
    content_type, core = await _get(api_server, "/api", KUBECTL_ACCEPT)
    assert content_type == AGGREGATED
    [core_group] = core["items"]
    services = next(
        r for r in core_group["versions"][0]["resources"] if r["resource"] == "services"
    )
    assert services["scope"] == "Namespaced" and services["shortNames"] == ["svc"]
    assert services["subresources"][0]["subresource"] == "status"
    _, groups = await _get(api_server, "/apis", KUBECTL_ACCEPT)
    gateway = next(
        g for g in groups["items"] if g["metadata"]["name"] == "gateway.networking.k8s.io"
    )
    assert [v["version"] for v in gateway["versions"]] == ["v1", "v1beta1"]


async def test_legacy_discovery_and_a_crd_appearing_at_run_time(
    api_server: EmbeddedApiServer,
) -> None:
    _, versions = await _get(api_server, "/api")
    assert versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    _, groups = await _get(api_server, "/apis")
    assert "interlock.dev" not in {g["name"] for g in groups["groups"]}
    api_server.store.create(MODULESET_CRD)
    _, groups = await _get(api_server, "/apis")
    interlock = next(g for g in groups["groups"] if g["name"] == "interlock.dev")
    assert interlock["preferredVersion"]["groupVersion"] == "interlock.dev/v1alpha1"
    _, resources = await _get(api_server, "/apis/interlock.dev/v1alpha1")
    assert [(r["name"], r["kind"]) for r in resources["resources"]] == [
        ("modulesets", "ModuleSet"),
        ("modulesets/status", "ModuleSet"),
    ]


async def test_openapi_v3_patch_operations_declare_field_validation(
    api_server: EmbeddedApiServer,
) -> None:
    _, index = await _get(api_server, "/openapi/v3")
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    _, document = await _get(api_server, url)
    operation = document["paths"]["/api/v1/namespaces/{namespace}/services/{name}"]["patch"]
    assert operation["x-kubernetes-group-version-kind"] == {
        "group": "",
        "version": "v1",
        "kind": "Service",
    }
    assert "fieldValidation" in {p["name"] for p in operation["parameters"] if p["in"] == "query"}
    _, version = await _get(api_server, "/version")
    assert (version["major"], version["minor"]) == ("1", "32")


async def test_tables_render_columns_and_ages_from_the_server_clock(tmp_path: Any) -> None:
    from datetime import UTC, datetime, timedelta

    from interlock.embedded import running_api_server

    now = [datetime(2025, 1, 1, tzinfo=UTC)]
    async with running_api_server(clock=lambda: now[0]) as server:
        server.store.create(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "ports": [
                        {"name": "a", "port": 80},
                        {"name": "b", "port": 81, "protocol": "UDP"},
                    ]
                },
            }
        )
        now[0] += timedelta(minutes=5, seconds=3)
        table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        _, table = await _get(server, "/api/v1/namespaces/default/services", table_accept)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    columns = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert columns == ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"]
    [row] = table["rows"]
    assert row["cells"][0] == "web" and row["cells"][4] == "80/TCP,81/UDP"
    assert row["cells"][5] == "5m3s"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == "default"


async def test_table_watches_define_columns_on_the_first_event_only(
    api_server: EmbeddedApiServer,
) -> None:
    import json

    import aiohttp

    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    since = api_server.store.resource_version
    url = f"{api_server.url}/api/v1/namespaces/default/services?watch=1&resourceVersion={since}"
    async with (
        aiohttp.ClientSession(
            headers=api_server.auth_headers(),
            connector=aiohttp.TCPConnector(ssl=api_server.client_ssl()),
        ) as session,
        session.get(url, headers={"Accept": accept}) as response,
    ):
        for name in ("a", "b"):
            api_server.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"ports": [{"port": 80}]},
                }
            )
        first = json.loads(await response.content.readline())
        second = json.loads(await response.content.readline())
    assert first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]][:2] == ["Name", "Type"]
    assert first["object"]["rows"][0]["cells"][0] == "a"
    assert not second["object"]["columnDefinitions"]
    assert second["object"]["rows"][0]["cells"][0] == "b"
