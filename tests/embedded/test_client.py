"""The embedded server through the real kubernetes-asyncio client, as the controller uses it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from interlock.embedded import EmbeddedApiServer
from tests.kit.embedded_helpers import MODULESET_CRD, eventually, moduleset, service

GATEWAY = "gateway.networking.k8s.io"


def _route(name: str, *, hostnames: list[str], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hostnames": hostnames},
    }


async def _collect(
    stream: watch.Watch, core: client.CoreV1Api, count: int, **kwargs: Any
) -> list[dict[str, Any]]:
    """The first ``count`` events of a watch on the Services of ``default``."""
    events = []
    async with stream:
        async for event in stream.stream(core.list_namespaced_service, "default", **kwargs):
            events.append(event)
            if len(events) == count:
                break
    return events


def _label_web(api_server: EmbeddedApiServer, labels: dict[str, str]) -> None:
    """Set ``labels`` on the Service default/web, straight in the store."""
    patch = {"metadata": {"labels": labels}}
    api_server.store.patch(
        api_version="v1", kind="Service", namespace="default", name="web", patch=patch
    )


async def test_a_fresh_server_looks_like_a_fresh_cluster(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    names = {ns.metadata.name for ns in (await core.list_namespace()).items}
    assert {"default", "kube-system"} <= names
    classes = await client.NetworkingV1Api(api_client).list_ingress_class()
    assert classes.items == []


async def test_service_create_fills_kubernetes_defaults(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    created = await core.create_namespaced_service(
        "default", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.spec.ports[0].protocol == "TCP"
    assert created.spec.ports[0].target_port == 80
    assert created.spec.type == "ClusterIP" and created.spec.cluster_ip
    fetched = await core.read_namespaced_service("web", "default")
    assert fetched.metadata.resource_version == created.metadata.resource_version


async def test_errors_are_status_bodies_with_reason(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    with pytest.raises(client.ApiException) as missing:
        await core.read_namespaced_service("nope", "default")
    assert missing.value.status == 404
    assert '"reason":"NotFound"' in missing.value.body
    with pytest.raises(client.ApiException) as bad:
        await core.create_namespaced_service(
            "default", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 70000}]}}
        )
    assert bad.value.status == 422
    assert "spec.ports[0].port" in bad.value.body
    with pytest.raises(client.ApiException) as no_namespace:
        await core.create_namespaced_service(
            "missing", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
        )
    assert no_namespace.value.status == 404
    assert 'namespaces \\"missing\\" not found' in no_namespace.value.body
    await core.create_namespaced_service("default", service("dup"))
    with pytest.raises(client.ApiException) as duplicate:
        await core.create_namespaced_service("default", service("dup"))
    assert duplicate.value.status == 409
    assert '"reason":"AlreadyExists"' in duplicate.value.body


async def test_list_selectors_and_pages(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    for index in range(7):
        api_server.store.create(service(f"svc-{index}", tier="front" if index % 2 else "back"))
    core = client.CoreV1Api(api_client)
    front = await core.list_namespaced_service("default", label_selector="tier=front")
    assert [s.metadata.name for s in front.items] == ["svc-1", "svc-3", "svc-5"]
    not_front = await core.list_service_for_all_namespaces(label_selector="tier!=front,tier")
    assert len(not_front.items) == 4
    in_process = api_server.store.list(api_version="v1", kind="Service", label_selector="tier=back")
    assert [s["metadata"]["name"] for s in in_process] == ["svc-0", "svc-2", "svc-4", "svc-6"]
    by_name = await core.list_namespaced_service("default", field_selector="metadata.name=svc-2")
    assert [s.metadata.name for s in by_name.items] == ["svc-2"]
    seen, token = [], None
    while True:
        page = await core.list_namespaced_service("default", limit=3, _continue=token)
        seen.extend(s.metadata.name for s in page.items)
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"svc-{i}" for i in range(7)]


async def test_watch_from_a_list_sees_every_change_in_order(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    listed = await core.list_namespaced_service("default")
    stream = watch.Watch()
    collecting = asyncio.create_task(
        _collect(stream, core, 3, resource_version=listed.metadata.resource_version)
    )
    api_server.store.create(service("web"))
    _label_web(api_server, {"a": "b"})
    api_server.store.delete(api_version="v1", kind="Service", namespace="default", name="web")
    events = await asyncio.wait_for(collecting, 60)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 3


async def test_watch_without_resource_version_starts_with_current_objects(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    api_server.store.create(service("a"))
    api_server.store.create(service("b"))
    events = await _collect(watch.Watch(), client.CoreV1Api(api_client), 2)
    assert sorted((e["type"], e["object"].metadata.name) for e in events) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


async def test_a_label_change_moves_an_object_out_of_a_filtered_watch(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    api_server.store.create(service("web", team="blue"))
    listed = await client.CoreV1Api(api_client).list_namespaced_service(
        "default", label_selector="team=blue"
    )
    collecting = asyncio.create_task(
        _collect(
            watch.Watch(),
            client.CoreV1Api(api_client),
            1,
            label_selector="team=blue",
            resource_version=listed.metadata.resource_version,
        )
    )
    _label_web(api_server, {"team": "red"})
    [event] = await asyncio.wait_for(collecting, 60)
    assert event["type"] == "DELETED" and event["object"].metadata.labels == {"team": "red"}


async def test_expired_resource_version_gets_410_then_relist_recovers(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    old = (await core.list_namespaced_service("default")).metadata.resource_version
    api_server.store.create(service("web"))
    api_server.faults.compact()
    stream = watch.Watch()
    with pytest.raises(client.ApiException) as expired:
        # With timeout_seconds the client does not retry the 410 itself.
        await _collect(stream, core, 1, resource_version=old, timeout_seconds=5)
    assert expired.value.status == 410
    assert "Expired" in expired.value.reason and "too old resource version" in expired.value.reason
    relisted = await core.list_namespaced_service("default")
    assert [s.metadata.name for s in relisted.items] == ["web"]
    collecting = asyncio.create_task(
        _collect(watch.Watch(), core, 1, resource_version=relisted.metadata.resource_version)
    )
    api_server.store.create(service("api"))
    [event] = await asyncio.wait_for(collecting, 60)
    assert event["type"] == "ADDED" and event["object"].metadata.name == "api"


async def test_a_short_history_expires_old_resource_versions() -> None:
    from interlock.embedded import running_api_server

    async with running_api_server(history_size=3) as server:
        old = server.store.resource_version
        for index in range(5):
            server.store.create(service(f"s{index}"))
        rtype = server.registry.by_kind(api_version="v1", kind="Service")
        assert rtype is not None
        from interlock.embedded.errors import ApiError
        from interlock.embedded.watches import WatchFilter

        with pytest.raises(ApiError) as expired:
            server.store.open_watch(rtype, where=WatchFilter(), resource_version=str(old))
        assert expired.value.code == 410
        recent = server.store.open_watch(
            rtype, where=WatchFilter(), resource_version=str(server.store.resource_version - 2)
        )
        assert recent.statistics()["pending"] == 2
        assert server.store.statistics()["watch_backlog"] == 2


async def test_bookmarks_carry_the_current_resource_version(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    listed = await core.list_namespaced_service("default")
    api_server.store.create(service("elsewhere", namespace="kube-system"))
    events = await _collect(
        watch.Watch(),
        core,
        1,
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
    )
    assert events[0]["type"] == "BOOKMARK"
    bookmark_rv = int(events[0]["raw_object"]["metadata"]["resourceVersion"])
    assert bookmark_rv == api_server.store.resource_version > int(listed.metadata.resource_version)


async def test_watch_ends_after_timeout_seconds(api_client: client.ApiClient) -> None:
    stream = watch.Watch()
    async with stream:
        events = [
            e
            async for e in stream.stream(
                client.CoreV1Api(api_client).list_namespaced_service,
                namespace="default",
                resource_version="1",
                timeout_seconds=1,
            )
        ]
    assert events == []


async def test_stale_update_is_a_conflict(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    created = await core.create_namespaced_service("default", service("web"))
    created.metadata.labels = {"first": "yes"}
    await core.replace_namespaced_service("web", "default", created)
    created.metadata.labels = {"second": "yes"}
    with pytest.raises(client.ApiException) as stale:
        await core.replace_namespaced_service("web", "default", created)
    assert stale.value.status == 409
    assert '"reason":"Conflict"' in stale.value.body
    assert "the object has been modified" in stale.value.body


async def test_finalizers_hold_deletion_until_removed(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    body = service("web")
    body["metadata"]["finalizers"] = ["interlock.dev/cleanup"]
    created = await core.create_namespaced_service("default", body)
    collecting = asyncio.create_task(
        _collect(watch.Watch(), core, 2, resource_version=created.metadata.resource_version)
    )
    await core.delete_namespaced_service("web", "default")
    pending = await core.read_namespaced_service("web", "default")
    assert pending.metadata.deletion_timestamp is not None
    await core.patch_namespaced_service(
        "web", "default", [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    events = await asyncio.wait_for(collecting, 60)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespaced_service("web", "default")
    assert gone.value.status == 404


async def test_status_writes_do_not_bump_generation_but_spec_changes_do(
    api_client: client.ApiClient,
) -> None:
    routes = client.CustomObjectsApi(api_client)
    args = (GATEWAY, "v1", "default", "httproutes", "web")
    await routes.create_namespaced_custom_object(*args[:4], _route("web", hostnames=["a.example"]))
    status = {"status": {"parents": [{"controllerName": "interlock.dev/x", "conditions": []}]}}
    after_status = await routes.patch_namespaced_custom_object_status(
        *args, status, _content_type="application/merge-patch+json"
    )
    assert after_status["metadata"]["generation"] == 1
    assert after_status["status"]["parents"][0]["controllerName"] == "interlock.dev/x"
    after_spec = await routes.patch_namespaced_custom_object(
        *args,
        {"spec": {"hostnames": ["b.example"]}, "status": None},
        _content_type="application/merge-patch+json",
    )
    assert after_spec["metadata"]["generation"] == 2
    assert after_spec["status"]["parents"], "a main-resource write must not change status"
    v1beta1 = await routes.get_namespaced_custom_object(
        GATEWAY, "v1beta1", "default", "httproutes", "web"
    )
    assert v1beta1["apiVersion"] == f"{GATEWAY}/v1beta1"
    assert v1beta1["spec"]["hostnames"] == ["b.example"]


async def test_custom_resources_of_a_crd_created_at_run_time(api_client: client.ApiClient) -> None:
    extensions = client.ApiextensionsV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    await extensions.create_custom_resource_definition(MODULESET_CRD)
    crd = await extensions.read_custom_resource_definition("modulesets.interlock.dev")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    args = ("interlock.dev", "v1alpha1", "default", "modulesets")
    await custom.create_namespaced_custom_object(
        *args, moduleset("gzip", compression={"enabled": True})
    )
    listed = await custom.list_namespaced_custom_object(*args)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["gzip"]
    with pytest.raises(client.ApiException) as invalid:
        await custom.create_namespaced_custom_object(
            *args, moduleset("bad", rateLimit={"requests": "many"})
        )
    assert invalid.value.status == 422
    assert "spec.modules.rateLimit.requests" in invalid.value.body
    patched = await custom.patch_namespaced_custom_object(
        *args,
        "gzip",
        [{"op": "replace", "path": "/spec/modules/compression/enabled", "value": False}],
    )
    assert patched["spec"]["modules"]["compression"]["enabled"] is False
    await extensions.delete_custom_resource_definition("modulesets.interlock.dev")
    with pytest.raises(client.ApiException) as gone:
        await custom.list_namespaced_custom_object(*args)
    assert gone.value.status == 404


async def test_strategic_merge_patch_merges_service_ports_by_port(
    api_client: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api_client)
    body = service("web")
    body["spec"]["ports"].append({"name": "admin", "port": 9000})
    await core.create_namespaced_service("default", body)
    patched = await core.patch_namespaced_service(
        "web",
        "default",
        {
            "spec": {
                "$setElementOrder/ports": [{"port": 80}, {"port": 9000}],
                "ports": [{"port": 80, "targetPort": 8080}],
            }
        },
        _content_type="application/strategic-merge-patch+json",
    )
    ports = {p.port: (p.name, p.target_port) for p in patched.spec.ports}
    assert ports == {80: ("http", 8080), 9000: ("admin", 9000)}


async def test_deleting_a_namespace_deletes_its_objects(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": "team"}})
    api_server.store.create(service("web", namespace="team"))
    await core.delete_namespace("team")
    assert (await core.list_namespaced_service("team")).items == []
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespace("team")
    assert gone.value.status == 404


async def test_secret_string_data_becomes_base64_data(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    secret = await core.create_namespaced_secret(
        "default", {"metadata": {"name": "users"}, "stringData": {"htpasswd": "u:p"}}
    )
    assert secret.data == {"htpasswd": "dTpw"} and secret.type == "Opaque"


async def test_in_process_writes_reach_watches_like_http_writes(
    api_server: EmbeddedApiServer,
) -> None:
    rtype = api_server.registry.by_kind(api_version="v1", kind="Service")
    assert rtype is not None
    from interlock.embedded.watches import WatchFilter

    watch_ = api_server.store.open_watch(
        rtype,
        where=WatchFilter(namespace="default"),
        resource_version=str(api_server.store.resource_version),
    )
    api_server.store.create(service("web"))
    event_type, stored = await asyncio.wait_for(watch_.next(), 60)
    assert (event_type, stored.name) == ("ADDED", "web")
    api_server.store.close_watch(watch_)
    await eventually(lambda: api_server.store.statistics()["watches"] == 0)


async def test_kind_rules_users_would_meet_on_a_cluster(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    with pytest.raises(client.ApiException) as tls:
        await core.create_namespaced_secret(
            "default",
            {
                "metadata": {"name": "cert"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": "x"},
            },
        )
    assert tls.value.status == 422 and "data[tls.key]: Required value" in tls.value.body
    await core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "data": {}})
    with pytest.raises(client.ApiException) as immutable:
        await core.patch_namespaced_secret("s", "default", {"type": "kubernetes.io/tls"})
    assert immutable.value.status == 422 and "field is immutable" in immutable.value.body
    with pytest.raises(client.ApiException) as event:
        await core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "e"},
                "involvedObject": {"kind": "Service", "name": "web", "namespace": "other"},
                "reason": "Test",
            },
        )
    assert event.value.status == 422 and "involvedObject.namespace" in event.value.body
    leases = client.CoordinationV1Api(api_client)
    with pytest.raises(client.ApiException) as lease:
        await leases.create_namespaced_lease(
            "default", {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}
        )
    assert lease.value.status == 422 and "spec.leaseDurationSeconds" in lease.value.body


async def test_a_namespace_terminates_until_its_last_finalizer_is_removed(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": "team"}})
    held = service("web", namespace="team")
    held["metadata"]["finalizers"] = ["interlock.dev/cleanup"]
    api_server.store.create(held)
    await core.delete_namespace("team")
    terminating = await core.read_namespace("team")
    assert terminating.status.phase == "Terminating"
    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_service("team", service("new", namespace="team"))
    assert refused.value.status == 403
    assert (await core.read_namespaced_service("web", "team")).metadata.deletion_timestamp
    await core.patch_namespaced_service("web", "team", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespace("team")
    assert gone.value.status == 404


async def test_an_empty_namespace_is_deleted_at_once(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": "empty"}})
    await core.delete_namespace("empty")
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespace("empty")
    assert gone.value.status == 404


async def test_crds_are_checked_like_a_real_server_does(api_client: client.ApiClient) -> None:
    extensions = client.ApiextensionsV1Api(api_client)
    misnamed = json.loads(json.dumps(MODULESET_CRD))
    misnamed["metadata"]["name"] = "modules.interlock.dev"
    with pytest.raises(client.ApiException) as wrong_name:
        await extensions.create_custom_resource_definition(misnamed)
    assert wrong_name.value.status == 422
    assert "spec.names.plural" in wrong_name.value.body
    two_storage = json.loads(json.dumps(MODULESET_CRD))
    two_storage["spec"]["versions"].append({**two_storage["spec"]["versions"][0], "name": "v1"})
    with pytest.raises(client.ApiException) as storage:
        await extensions.create_custom_resource_definition(two_storage)
    assert storage.value.status == 422 and "exactly one version" in storage.value.body
    clash = json.loads(json.dumps(MODULESET_CRD))
    clash["metadata"]["name"] = "services."
    clash["spec"].update(group="")
    clash["spec"]["names"].update(plural="services", kind="Service")
    with pytest.raises(client.ApiException) as builtin:
        await extensions.create_custom_resource_definition(clash)
    assert builtin.value.status == 422


async def test_a_dry_run_stores_nothing_and_allocates_nothing(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    before = api_server.store.resource_version
    preview = await core.create_namespaced_service("default", service("web"), dry_run="All")
    assert preview.spec.cluster_ip
    assert api_server.store.resource_version == before
    assert api_server.store.list(api_version="v1", kind="Service") == []
    created = await core.create_namespaced_service("default", service("web"))
    assert created.spec.cluster_ip == preview.spec.cluster_ip
