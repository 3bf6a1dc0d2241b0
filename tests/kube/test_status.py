"""StatusPatcher against the embedded API server: /status merge patches, skips, gone objects."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.kube.resources import HTTP_ROUTE
from interlock.kube.status import PatchResult, RetryableStatusError, StatusPatcher

from .conftest import create, delete, get


def http_route(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "parentRefs": [{"group": "core", "kind": "Service", "name": "web", "port": 80}],
            "rules": [{"backendRefs": [{"name": "api", "port": 8080}]}],
        },
    }


def accepted(generation: int, status: str = "True") -> dict[str, Any]:
    return {
        "parents": [
            {
                "parentRef": {"group": "core", "kind": "Service", "name": "web", "port": 80},
                "controllerName": "interlock.dev/policy-controller",
                "conditions": [
                    {
                        "type": "Accepted",
                        "status": status,
                        "reason": "Accepted",
                        "message": "",
                        "observedGeneration": generation,
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        ]
    }


async def test_status_is_written_without_touching_spec_or_generation(api: Any) -> None:
    created = await create(api, HTTP_ROUTE, http_route("default", "web"))
    generation = created["metadata"].get("generation", 1)
    patcher = StatusPatcher(api)
    outcome = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(generation))
    assert outcome.result is PatchResult.WRITTEN
    stored = await get(api, HTTP_ROUTE, "default", "web")
    assert stored["status"] == accepted(generation)
    assert stored["metadata"].get("generation", 1) == generation
    assert stored["spec"] == created["spec"]
    assert outcome.resource_version == stored["metadata"]["resourceVersion"]


async def test_identical_writes_are_skipped_and_changes_are_not(api: Any) -> None:
    await create(api, HTTP_ROUTE, http_route("default", "web"))
    patcher = StatusPatcher(api)
    first = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    version = (await get(api, HTTP_ROUTE, "default", "web"))["metadata"]["resourceVersion"]
    again = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    assert (first.result, again.result) == (PatchResult.WRITTEN, PatchResult.UNCHANGED)
    assert (await get(api, HTTP_ROUTE, "default", "web"))["metadata"]["resourceVersion"] == version
    assert patcher.cache.statistics().skipped == 1
    assert patcher.statistics().unchanged == 1
    changed = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1, "False"))
    assert changed.result is PatchResult.WRITTEN
    stored = await get(api, HTTP_ROUTE, "default", "web")
    assert stored["status"]["parents"][0]["conditions"][0]["status"] == "False"


async def test_a_missing_object_is_gone_not_an_error(api: Any) -> None:
    outcome = await StatusPatcher(api).patch_status(HTTP_ROUTE, "default", "nope", accepted(1))
    assert outcome.result is PatchResult.GONE
    assert outcome.code == 404


async def test_server_errors_are_retryable_and_the_write_is_not_remembered(
    api: Any, server: Any
) -> None:
    await create(api, HTTP_ROUTE, http_route("default", "web"))
    patcher = StatusPatcher(api)
    server.faults.fail_next(1, status=503)
    with pytest.raises(RetryableStatusError, match="HTTPRoute default/web: 503"):
        await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    retried = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    assert retried.result is PatchResult.WRITTEN
    statistics = patcher.statistics()
    assert (statistics.failed, statistics.written) == (1, 1)


async def test_rejected_writes_are_reported_with_the_servers_reason(api: Any, server: Any) -> None:
    await create(api, HTTP_ROUTE, http_route("default", "web"))
    patcher = StatusPatcher(api)
    server.faults.fail_next(1, status=422, verbs=["patch"])
    outcome = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    assert outcome.result is PatchResult.REJECTED
    assert outcome.code == 422
    assert "patch status of HTTPRoute default/web: 422" in outcome.message
    assert (await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))).result is (
        PatchResult.WRITTEN
    )


async def test_a_status_for_an_object_deleted_and_created_again_does_not_land_on_the_new_one(
    api: Any,
) -> None:
    """Found by CI's real lane: a write computed for the old object, sent after it was deleted
    and created again under the same name, landed on the new one (a merge patch cannot name
    the object it is meant for; the API server ignores ``metadata`` in a custom resource's
    ``/status`` patch). Naming the uid makes it a JSON patch that tests it first."""
    old = await create(api, HTTP_ROUTE, http_route("default", "web"))
    patcher = StatusPatcher(api)
    written = await patcher.patch_status(
        HTTP_ROUTE, "default", "web", accepted(1), uid=old["metadata"]["uid"]
    )
    assert written.result is PatchResult.WRITTEN
    assert (await get(api, HTTP_ROUTE, "default", "web"))["status"] == accepted(1)
    await delete(api, HTTP_ROUTE, "default", "web")
    new = await create(api, HTTP_ROUTE, http_route("default", "web"))
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    late = await patcher.patch_status(
        HTTP_ROUTE, "default", "web", accepted(1, "False"), uid=old["metadata"]["uid"]
    )
    assert late.result is PatchResult.REJECTED
    assert late.code == 422
    assert not (await get(api, HTTP_ROUTE, "default", "web")).get("status", {}).get("parents")
    own = await patcher.patch_status(
        HTTP_ROUTE, "default", "web", accepted(1, "False"), uid=new["metadata"]["uid"]
    )
    assert own.result is PatchResult.WRITTEN
    assert (await get(api, HTTP_ROUTE, "default", "web"))["status"] == accepted(1, "False")


async def test_a_uid_guarded_status_leaves_out_keys_set_to_none_as_a_merge_patch_does(
    api: Any,
) -> None:
    created = await create(api, HTTP_ROUTE, http_route("default", "web"))
    patcher = StatusPatcher(api)
    status: dict[str, Any] = {**accepted(1), "unknown": None}
    outcome = await patcher.patch_status(
        HTTP_ROUTE, "default", "web", status, uid=created["metadata"]["uid"]
    )
    assert outcome.result is PatchResult.WRITTEN
    assert (await get(api, HTTP_ROUTE, "default", "web"))["status"] == accepted(1)


async def test_a_write_that_ends_after_the_object_was_forgotten_is_not_remembered(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller forgets an object while a write to it is in flight (it no longer trusts what
    it wrote: someone else wrote after it). When that write ends it must not be cached, or the
    next write of the same status would be skipped and the other writer's status stay."""
    import interlock.kube.status as status_module

    await create(api, HTTP_ROUTE, http_route("default", "web"))
    patcher = StatusPatcher(api)
    send = status_module.request_json

    async def forgotten_meanwhile(*args: Any, **kwargs: Any) -> Any:
        patcher.cache.forget(HTTP_ROUTE, "default", "web")
        return await send(*args, **kwargs)

    monkeypatch.setattr(status_module, "request_json", forgotten_meanwhile)
    first = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    monkeypatch.setattr(status_module, "request_json", send)
    assert patcher.cache.statistics().entries == 0
    # Another writer's status lands; the same status as the first write must be sent again.
    await StatusPatcher(api).patch_status(HTTP_ROUTE, "default", "web", accepted(1, "False"))
    again = await patcher.patch_status(HTTP_ROUTE, "default", "web", accepted(1))
    assert (first.result, again.result) == (PatchResult.WRITTEN, PatchResult.WRITTEN)
    stored = await get(api, HTTP_ROUTE, "default", "web")
    assert stored["status"] == accepted(1)
