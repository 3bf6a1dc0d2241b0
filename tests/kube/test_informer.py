"""Informers against the embedded API server through the real kubernetes-asyncio client."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from interlock.embedded import running_api_server
from interlock.kube.client import api_client
from interlock.kube.informer import Deleted, Informer, InformerEvent, InformerSet, Upserted
from interlock.kube.resources import INGRESS_CLASS, SECRET, SERVICE
from interlock.kube.transport import request_json
from interlock.mailbox.backoff import BackoffPolicy

from .conftest import Collector, create, delete, ensure_namespace, get, replace, service, wait_for

TINY_BACKOFF = BackoffPolicy(initial=0.01, maximum=0.05, jitter=0.0)


def make_informer(api: Any, sink: Collector, **options: Any) -> Informer:
    options.setdefault("backoff", TINY_BACKOFF)
    options.setdefault("rng", random.Random(1))
    return Informer(api, SERVICE, sink=sink, **options)


@contextlib.asynccontextmanager
async def running(runner: Informer | InformerSet) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(runner.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def listed(api: Any, **options: Any) -> AsyncIterator[tuple[Informer, Collector]]:
    """A running Service informer (``options`` as for :func:`make_informer`) once it listed,
    and the sink it feeds."""
    sink = Collector()
    informer = make_informer(api, sink, **options)
    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
        yield informer, sink


async def server_versions(api: Any, namespace: str | None = None) -> dict[str, str]:
    listing = await request_json(
        api, method="GET", path=SERVICE.collection_path(namespace=namespace), what="list"
    )
    return {
        f"{item['metadata']['namespace']}/{item['metadata']['name']}": item["metadata"][
            "resourceVersion"
        ]
        for item in listing["items"]
    }


async def test_initial_list_is_delivered_across_pages_before_ready(api: Any) -> None:
    for index in range(7):
        await create(api, SERVICE, service("default", f"svc-{index}"))
    async with listed(api, page_size=3) as (_informer, sink):
        expected = await server_versions(api, "default")
        assert {k: v for k, v in sink.versions().items() if k.startswith("default/")} == expected
        assert all(isinstance(event, Upserted) for event in sink.events)
        assert sink.events[0].obj["kind"] == "Service"
        assert sink.events[0].obj["apiVersion"] == "v1"


async def test_create_update_and_delete_are_seen(api: Any) -> None:
    async with listed(api, namespaces=["default"]) as (informer, sink):
        created = await create(api, SERVICE, service("default", "web"))
        await wait_for(lambda: "default/web" in sink.state, what="create")
        created["spec"]["ports"][0]["port"] = 8080
        updated = await replace(api, SERVICE, created)
        await wait_for(
            lambda: sink.versions().get("default/web") == updated["metadata"]["resourceVersion"],
            what="update",
        )
        assert sink.state["default/web"]["spec"]["ports"][0]["port"] == 8080
        await delete(api, SERVICE, "default", "web")
        await wait_for(lambda: "default/web" not in sink.state, what="delete")
        assert isinstance(sink.events[-1], Deleted)
        # What the namespace held before the test (a real cluster's default/kubernetes).
        assert informer.statistics().objects == len(await server_versions(api, "default"))


async def test_dropped_watches_reconnect_and_lose_nothing(api: Any, server: Any) -> None:
    async with listed(api, namespaces=["default"]) as (informer, sink):
        for round_ in range(5):
            await create(api, SERVICE, service("default", f"a-{round_}"))
            server.faults.drop_watches()
            await create(api, SERVICE, service("default", f"b-{round_}"))
            if round_:
                await delete(api, SERVICE, "default", f"a-{round_ - 1}")
        expected = await server_versions(api, "default")
        await wait_for(lambda: sink.versions() == expected, what="informer to catch up")
        statistics = informer.statistics()
        assert statistics.reconnects + statistics.relists >= 1
        upserted = sink.keys_of(Upserted)
        assert len(upserted) == len(set(upserted)), "an unchanged object was delivered twice"


@pytest.mark.compaction
async def test_compaction_relists_and_delivers_only_the_difference(api: Any, server: Any) -> None:
    for name in ("kept", "changed", "removed"):
        await create(api, SERVICE, service("default", name))
    sink = Collector()
    informer = make_informer(api, sink, namespaces=["default"])
    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
    # Disconnected: changes happen and the history that would replay them is compacted away.
    seen_before = len(sink.events)
    await create(api, SERVICE, service("default", "added"))
    await delete(api, SERVICE, "default", "removed")
    current = await get(api, SERVICE, "default", "changed")
    current["spec"]["ports"][0]["port"] = 9090
    await replace(api, SERVICE, current)
    await server.faults.compact()
    async with running(informer):
        expected = await server_versions(api, "default")
        await wait_for(lambda: sink.versions() == expected, what="relist")
    after = sink.events[seen_before:]
    assert sorted(event.key for event in after if isinstance(event, Upserted)) == [
        "default/added",
        "default/changed",
    ]
    deleted = [event for event in after if isinstance(event, Deleted)]
    assert [event.key for event in deleted] == ["default/removed"]
    assert deleted[0].obj["metadata"]["name"] == "removed"
    assert informer.statistics().relists == 1


@pytest.mark.compaction
async def test_the_store_keeps_identities_and_fetch_reads_the_current_object(
    api: Any, server: Any
) -> None:
    labelled = service("default", "labelled")
    labelled["metadata"]["labels"] = {"app": "web"}
    await create(api, SERVICE, labelled)
    sink = Collector()
    informer = make_informer(api, sink, namespaces=["default"])
    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
    # What the informer keeps of an object is who it is, not what it says: no second copy of
    # every object beside what the actors parsed from it.
    (stored,) = [
        seen.as_object()
        for r in informer._reflectors
        for key, seen in r.store.items()
        if key.endswith("/labelled")
    ]
    assert "spec" not in stored
    assert stored["kind"] == "Service" and stored["metadata"]["labels"] == {"app": "web"}
    assert stored["metadata"]["name"] == "labelled" and stored["metadata"]["uid"]
    # Gone while the informer was away: the relist's Deleted still names it and its labels (an
    # EndpointSlice's directory finds its Service by them).
    await delete(api, SERVICE, "default", "labelled")
    await server.faults.compact()
    async with running(informer):
        await wait_for(lambda: "default/labelled" not in sink.state, what="relist")
    (gone,) = [e for e in sink.events if isinstance(e, Deleted) and e.key == "default/labelled"]
    assert gone.obj["metadata"]["labels"] == {"app": "web"}
    # The whole current object (a resync after a poison message) comes from the API server.
    await create(api, SERVICE, service("default", "current", port=8080))
    current = await informer.fetch("default", "current")
    assert current is not None and current["spec"]["ports"][0]["port"] == 8080
    assert current["kind"] == "Service"
    assert await informer.fetch("default", "labelled") is None
    assert await InformerSet([informer]).fetch("Service", "default", "current") == current


async def test_failing_requests_are_retried_with_backoff(api: Any, server: Any) -> None:
    await create(api, SERVICE, service("default", "web"))
    server.faults.fail_next(3, status=500)
    async with listed(api, namespaces=["default"]) as (informer, sink):
        assert "default/web" in sink.state
        statistics = informer.statistics()
        assert statistics.reconnects == 3
        assert statistics.last_error is not None
        assert "500" in statistics.last_error


async def test_only_the_chosen_namespaces_are_watched(api: Any) -> None:
    for namespace in ("team-a", "team-b", "team-c"):
        await ensure_namespace(api, namespace)
        await create(api, SERVICE, service(namespace, "web"))
    async with listed(api, namespaces=["team-a", "team-b"]) as (_informer, sink):
        assert sorted(sink.state) == ["team-a/web", "team-b/web"]
        await create(api, SERVICE, service("team-c", "api"))
        await create(api, SERVICE, service("team-b", "api"))
        await wait_for(lambda: "team-b/api" in sink.state, what="team-b/api")
        assert "team-c/api" not in sink.state


async def test_informer_set_is_ready_when_every_informer_is(api: Any, server: Any) -> None:
    await ensure_namespace(api, "team-a")
    await create(api, SERVICE, service("team-a", "web"))
    first, second = Collector(), Collector()
    informers = InformerSet(
        [
            make_informer(api, first, name="all-services"),
            make_informer(api, second, namespaces=["team-a"], name="team-a-services"),
        ]
    )
    server.faults.fail_next(2, status=503)
    async with running(informers):
        await asyncio.wait_for(informers.ready.wait(), 60)
        assert "team-a/web" in first.state
        assert "team-a/web" in second.state
        statistics = informers.statistics()
        assert set(statistics) == {"all-services", "team-a-services"}
        assert sum(s.reconnects for s in statistics.values()) == 2


@pytest.mark.embedded_only(
    "needs bookmarks every 0.05 s (kube-apiserver sends them about once a minute)"
)
async def test_bookmarks_advance_the_resource_version_so_reconnects_need_no_relist(
    tmp_path: Path,
) -> None:
    async with running_api_server(bookmark_interval=0.05) as server:
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        async with api_client(kubeconfig=str(kubeconfig), in_cluster=False) as api:
            await ensure_namespace(api, "quiet")
            async with listed(api, namespaces=["quiet"]) as (informer, sink):
                # Changes elsewhere move the cluster's resourceVersion past the quiet namespace's.
                for index in range(5):
                    await create(api, SERVICE, service("default", f"busy-{index}"))
                seen = informer.statistics().bookmarks
                await wait_for(
                    lambda: informer.statistics().bookmarks >= seen + 2, what="bookmarks"
                )
                server.faults.compact()
                server.faults.drop_watches()
                await create(api, SERVICE, service("quiet", "web"))
                await wait_for(lambda: "quiet/web" in sink.state, what="quiet/web")
                statistics = informer.statistics()
                assert statistics.relists == 0
                assert statistics.reconnects >= 1
                assert sink.events == [event for event in sink.events if event.key == "quiet/web"]


async def test_an_expired_continue_token_restarts_the_list_without_duplicates(
    api: Any, server: Any
) -> None:
    for index in range(7):
        await create(api, SERVICE, service("default", f"svc-{index}"))
    sink = Collector()

    def sink_that_expires_the_snapshot(event: InformerEvent) -> None:
        if not sink.events:  # while the first page is delivered, the snapshot gets compacted
            server.faults.fail_next(1, status=410, verbs=["list"])
        sink(event)

    informer = Informer(
        api,
        SERVICE,
        sink=sink_that_expires_the_snapshot,
        namespaces=["default"],
        page_size=3,
        backoff=TINY_BACKOFF,
    )
    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
        assert sink.versions() == await server_versions(api, "default")
        upserted = sink.keys_of(Upserted)
        assert len(upserted) == len(set(upserted)) == len(await server_versions(api, "default"))
        assert informer.statistics().reconnects == 0


async def test_watches_ended_by_the_server_timeout_are_reopened_without_relisting(
    api: Any,
) -> None:
    async with listed(api, namespaces=["default"], watch_timeout=1) as (informer, sink):
        await wait_for(lambda: informer.statistics().watches >= 2, what="a second watch")
        await create(api, SERVICE, service("default", "late"))
        await wait_for(lambda: "default/late" in sink.state, what="default/late")
        statistics = informer.statistics()
        assert (statistics.relists, statistics.reconnects) == (0, 0)


async def test_label_selector_limits_what_is_delivered(api: Any) -> None:
    chosen = service("default", "chosen")
    chosen["metadata"]["labels"] = {"app": "edge"}
    await create(api, SERVICE, chosen)
    await create(api, SERVICE, service("default", "other"))
    async with listed(api, label_selector="app=edge") as (_informer, sink):
        assert sorted(sink.state) == ["default/chosen"]


async def test_a_failing_sink_is_logged_without_secret_data_and_delivery_goes_on(
    api: Any,
) -> None:
    lines: list[str] = []
    handler = logger.add(lines.append, level="ERROR", diagnose=True, backtrace=True)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"namespace": "default", "name": "users"},
        "data": {"htpasswd": "c3VwZXItc2VjcmV0LXBhc3N3b3Jk"},
    }
    await create(api, SECRET, secret)
    delivered: list[str] = []

    def reject(data: object) -> None:
        raise RuntimeError("cannot use this secret")

    def sink(event: InformerEvent) -> None:
        data = event.obj.get("data", {})
        if event.name == "users":
            reject(data)
        delivered.append(event.key)

    informer = Informer(api, SECRET, sink=sink, namespaces=["default"], backoff=TINY_BACKOFF)
    try:
        async with running(informer):
            await asyncio.wait_for(informer.ready.wait(), 60)
            await create(api, SECRET, {**secret, "metadata": {**secret["metadata"], "name": "b"}})
            await wait_for(lambda: "default/b" in delivered, what="delivery after a failure")
    finally:
        logger.remove(handler)
    assert informer.statistics().sink_errors == 1
    text = "".join(lines)
    assert "sink raised on Secret default/users" in text
    assert "cannot use this secret" in text
    assert "c3VwZXItc2VjcmV0LXBhc3N3b3Jk" not in text


@pytest.mark.compaction
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_changes_with_drops_and_compactions_converge(
    api: Any, server: Any, seed: int
) -> None:
    rng = random.Random(seed)
    sink = Collector()
    informer = make_informer(api, sink, namespaces=["default"], rng=random.Random(seed))
    names = [f"svc-{index}" for index in range(8)]
    live: dict[str, dict[str, Any]] = {}

    async def change() -> None:
        name = rng.choice(names)
        if name not in live:
            live[name] = await create(api, SERVICE, service("default", name))
        elif rng.random() < 0.5:
            live[name]["spec"]["ports"][0]["port"] = rng.randrange(1, 65535)
            live[name] = await replace(api, SERVICE, live[name])
        else:
            await delete(api, SERVICE, "default", name)
            del live[name]

    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
        for _ in range(60):
            roll = rng.random()
            if roll < 0.1:
                server.faults.drop_watches()
            elif roll < 0.2:
                # Changes while disconnected, then their history is compacted away: a 410 follows.
                server.faults.drop_watches()
                for _ in range(3):
                    await change()
                await server.faults.compact()
            await change()
        expected = await server_versions(api, "default")
        await wait_for(lambda: sink.versions() == expected, what="convergence")
    delivered = [(e.key, e.resource_version) for e in sink.events if isinstance(e, Upserted)]
    assert len(delivered) == len(set(delivered)), "an object version was delivered twice"


async def test_cluster_scoped_kinds_ignore_the_namespace_filter(api: Any) -> None:
    await create(
        api,
        INGRESS_CLASS,
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "interlock"},
            "spec": {"controller": "interlock.dev/ingress-controller"},
        },
    )
    sink = Collector()
    informer = Informer(api, INGRESS_CLASS, sink=sink, namespaces=["team-a", "team-b"])
    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
        assert list(sink.state) == ["interlock"]
        assert sink.events[0].trace_summary().startswith("IngressClass interlock rv=")


async def test_an_unexpected_error_is_logged_and_the_informer_starts_over(api: Any) -> None:
    await create(api, SERVICE, service("default", "web"))
    sink = Collector()
    informer = make_informer(api, sink, namespaces=["default"])
    [reflector] = informer._reflectors
    real_list = reflector._list
    calls = 0

    async def list_that_breaks_once() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("unforeseen answer")
        await real_list()

    reflector._list = list_that_breaks_once  # type: ignore[method-assign]
    async with running(informer):
        await asyncio.wait_for(informer.ready.wait(), 60)
    assert "default/web" in sink.state
    statistics = informer.statistics()
    assert statistics.reconnects == 1
    assert (
        statistics.last_error
        == "list/watch Service in namespace default: RuntimeError: unforeseen answer"
    )
