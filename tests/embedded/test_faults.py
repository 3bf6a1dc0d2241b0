"""Fault injection and restart: what tests of the controller use to break the API server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch

from interlock.embedded import EmbeddedApiServer
from tests.kit.embedded_helpers import eventually, service


async def _first_event(
    stream: watch.Watch, core: client.CoreV1Api, **kwargs: Any
) -> dict[str, Any]:
    """The first event of a watch on the Services of ``default``."""
    async for event in stream.stream(core.list_namespaced_service, "default", **kwargs):
        return event  # type: ignore[no-any-return]
    raise AssertionError("the watch ended without an event")


@contextlib.asynccontextmanager
async def _watching_services(
    api_server: EmbeddedApiServer, api_client: client.ApiClient, **extra: Any
) -> AsyncIterator[asyncio.Task[dict[str, Any]]]:
    """A watch of default's Services from their current list, open on the server once the
    block starts; the task ends with its first event."""
    core = client.CoreV1Api(api_client)
    listed = await core.list_namespaced_service("default")
    stream = watch.Watch()
    async with stream:
        waiting = asyncio.create_task(
            _first_event(stream, core, resource_version=listed.metadata.resource_version, **extra)
        )
        await eventually(lambda: api_server.store.statistics()["watches"] == 1)
        yield waiting


async def test_drop_watches_breaks_open_streams(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    async with _watching_services(api_server, api_client) as waiting:
        assert api_server.faults.drop_watches() == 1
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(waiting, 60)
    await eventually(lambda: api_server.store.statistics()["watches"] == 0)


async def test_fail_next_answers_with_status_and_retry_after(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    api_server.faults.fail_next(2, 429, verbs={"list"}, path_contains="/services", retry_after=3)
    await core.read_namespace("default")  # another verb and path: not affected
    for _ in range(2):
        with pytest.raises(client.ApiException) as failed:
            await core.list_namespaced_service("default")
        assert failed.value.status == 429
        assert failed.value.headers["Retry-After"] == "3"
        assert '"reason":"TooManyRequests"' in failed.value.body
    assert (await core.list_namespaced_service("default")).items == []
    assert api_server.faults.pending() == 0
    assert api_server.audit.count(verb="list", path_contains="/services", status=429) == 2
    assert api_server.audit.count(verb="list", path_contains="/services", status=200) == 1
    assert api_server.audit.count(verb="get", path_contains="/namespaces/default") == 1


async def test_fail_next_applies_to_writes_by_verb(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    api_server.faults.fail_next(1, 503, verbs={"create"})
    with pytest.raises(client.ApiException) as failed:
        await core.create_namespaced_service("default", service("web"))
    assert failed.value.status == 503
    assert api_server.store.list(api_version="v1", kind="Service") == []
    await core.create_namespaced_service("default", service("web"))


async def test_delay_next_holds_matching_requests(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    api_server.faults.delay_next(1, 30, verbs={"get"}, path_contains="/services/web")
    api_server.store.create(service("web"))
    delayed = asyncio.create_task(core.read_namespaced_service("web", "default"))
    await eventually(lambda: api_server.faults.pending() == 0)
    # A request that does not match is served while the delayed one is still held.
    assert (await core.list_namespaced_service("default")).items
    assert not delayed.done()
    delayed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await delayed


async def test_restart_keeps_data_and_port_and_drops_connections(
    api_server: EmbeddedApiServer, kubeconfig: Any
) -> None:
    api_server.store.create(service("web"))
    port = api_server.port
    before = api_server.store.resource_version
    async with (
        aiohttp.ClientSession(
            headers=api_server.auth_headers(),
            connector=aiohttp.TCPConnector(ssl=api_server.client_ssl()),
        ) as session,
        session.get(
            f"{api_server.url}/api/v1/services?watch=1&resourceVersion={before}"
        ) as watching,
    ):
        await eventually(lambda: api_server.store.statistics()["watches"] == 1)
        await api_server.restart()
        with pytest.raises(aiohttp.ClientPayloadError):
            await watching.content.readline()
    assert api_server.port == port
    async with await config.new_client_from_config(config_file=str(kubeconfig)) as api:
        listed = await client.CoreV1Api(api).list_namespaced_service("default")
    assert [s.metadata.name for s in listed.items] == ["web"]
    assert int(listed.metadata.resource_version) == before


async def test_a_client_closing_its_watch_ends_it_on_the_server(
    api_server: EmbeddedApiServer,
) -> None:
    async with aiohttp.ClientSession(
        headers=api_server.auth_headers(),
        connector=aiohttp.TCPConnector(ssl=api_server.client_ssl()),
    ) as session:
        response = await session.get(f"{api_server.url}/api/v1/services?watch=true")
        await eventually(lambda: api_server.store.statistics()["watches"] == 1)
        response.close()
    await eventually(lambda: api_server.store.statistics()["watches"] == 0)


async def test_serve_forever_applies_manifests_and_prints_where_it_is(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from interlock.embedded import serve_forever

    manifest = tmp_path / "ns.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
    kubeconfig = tmp_path / "kubeconfig"
    serving = asyncio.create_task(
        serve_forever(host="127.0.0.1", port=0, kubeconfig_path=kubeconfig, manifests=[manifest])
    )
    try:
        await eventually(kubeconfig.exists)
        async with await config.new_client_from_config(config_file=str(kubeconfig)) as api:
            namespaces = await client.CoreV1Api(api).list_namespace()
        assert "shop" in {n.metadata.name for n in namespaces.items}
    finally:
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
    out = capsys.readouterr().out
    assert "embedded Kubernetes API server: https://127.0.0.1:" in out
    assert f"kubeconfig: {kubeconfig}" in out


async def test_watch_list_ends_its_initial_events_with_a_bookmark(
    api_server: EmbeddedApiServer,
) -> None:
    import json

    api_server.store.create(service("a"))
    api_server.store.create(service("b"))
    query = (
        "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    )
    async with (
        aiohttp.ClientSession(
            headers=api_server.auth_headers(),
            connector=aiohttp.TCPConnector(ssl=api_server.client_ssl()),
        ) as session,
        session.get(f"{api_server.url}/api/v1/namespaces/default/services?{query}") as response,
    ):
        lines = [json.loads(await response.content.readline()) for _ in range(3)]
        assert [(e["type"], e["object"]["metadata"].get("name")) for e in lines[:2]] in (
            [("ADDED", "a"), ("ADDED", "b")],
            [("ADDED", "b"), ("ADDED", "a")],
        )
        end = lines[2]["object"]["metadata"]
        assert lines[2]["type"] == "BOOKMARK"
        assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(end["resourceVersion"]) == api_server.store.resource_version
        api_server.store.create(service("c"))
        later = json.loads(await response.content.readline())
        while later["type"] == "BOOKMARK":  # periodic bookmarks may come first
            later = json.loads(await response.content.readline())
        assert (later["type"], later["object"]["metadata"]["name"]) == ("ADDED", "c")


async def test_expire_watches_sends_410_in_the_open_stream(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    async with _watching_services(api_server, api_client, timeout_seconds=60) as waiting:
        assert api_server.faults.expire_watches() == 1
        with pytest.raises(client.ApiException) as expired:
            await asyncio.wait_for(waiting, 60)
    assert expired.value.status == 410
    assert expired.value.reason.startswith("Expired: too old resource version")
