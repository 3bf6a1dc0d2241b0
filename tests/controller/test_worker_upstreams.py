"""UpstreamPusher: a worker gets the whole table first, then only what changed; a worker whose
push failed gets the whole table again; an attach waits for its backend's table everywhere."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from interlock.controller.worker_upstreams import TablesFirst, UpstreamPusher
from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.dataplane.source import UpstreamError
from interlock.edge.fanout import FanOutEdge
from interlock.edge.http_provider import TableReplaced
from interlock.edge.provider import ApplyModules, BackendTarget, TransientEdgeError
from interlock.model.moduleset import Modules
from interlock.model.service import ServicePortKey, parse_service
from interlock.model.upstream_table import TableChanges
from tests.kit.grpc_policies import policy_of
from tests.kit.lanes import eventually_true
from tests.kit.upstream_index import PusherIndex

WEB = ServicePortKey("default", "web", 80)
SERVICE = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}


@dataclass
class Index(PusherIndex):
    """The edge index as the pusher and TablesFirst read it."""

    asked: list[ServicePortKey] = field(default_factory=list)

    async def ready(self, target: ServicePortKey, *, within: float) -> Any:
        self.asked.append(target)
        return self.ready_policies.get(target) or UpstreamError(503, f"{target}: not known yet")

    def serve_web(self, address: tuple[str, int]) -> None:
        """As the index and the cache do: each change told to the listeners."""
        key = WEB.service_key()
        self.tracked.add(key)
        self.tables.known.add(key)
        self.tables.services[key] = parse_service(SERVICE)
        self.tables.addresses[WEB] = [address]
        self.ready_policies[WEB] = policy_of(SERVICE)
        self.told(key)
        self.told(WEB)

    def move_web(self, address: tuple[str, int]) -> None:
        """web's endpoints change (the cache tells its listeners)."""
        self.tables.addresses[WEB] = [address]
        self.tables.changed(WEB.service_key())


@dataclass(eq=False)
class Worker:
    pushed: list[TableChanges] = field(default_factory=list)
    failing: bool = False
    epoch: str = "e1"

    async def push_upstreams(self, changes: TableChanges, *, epoch: str | None = None) -> str:
        if self.failing:
            raise TransientEdgeError("worker 1: no answer")
        if not changes.replace and epoch != self.epoch:
            raise TableReplaced("412: it restarted")
        self.pushed.append(changes)
        return self.epoch


@dataclass
class Edge:
    """The workers' provider under TablesFirst: records attaches."""

    attached: list[BackendTarget] = field(default_factory=list)

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        self.attached.append(backend)


async def test_whole_table_first_then_only_what_changed_and_whole_again_after_a_failure() -> None:
    index, worker = Index(), Worker()
    pusher = UpstreamPusher(index=index, clients=lambda: [worker])  # type: ignore[arg-type,list-item]
    index.serve_web(("10.0.0.1", 8080))
    await pusher.flush()
    assert [c.replace for c in worker.pushed] == [True] and pusher.in_sync()
    assert worker.pushed[0].policies == ((WEB, index.ready_policies[WEB]),)

    await pusher.flush()  # nothing changed: nothing sent
    assert len(worker.pushed) == 1

    index.move_web(("10.0.0.2", 8080))
    assert not pusher.in_sync()
    await pusher.flush()
    moved = worker.pushed[-1]
    assert not moved.replace and moved.policies == () and len(moved.services) == 1
    assert moved.services[0][1].ports == ((80, (("10.0.0.2", 8080),)),)

    worker.failing = True
    index.move_web(("10.0.0.3", 8080))
    with pytest.raises(TransientEdgeError, match="no answer"):
        await pusher.flush()
    worker.failing = False
    await pusher.flush()
    assert worker.pushed[-1].replace  # its state was unknown: the whole table

    # The edge restarted (a remote one, behind the same client): its empty table has another
    # epoch, so the rows are refused and the whole table sent at once.
    worker.epoch = "e2"
    index.move_web(("10.0.0.4", 8080))
    await pusher.flush()
    assert worker.pushed[-1].replace and pusher.in_sync()


async def test_a_backend_is_attached_only_once_its_table_reached_every_worker() -> None:
    index, worker, edge = Index(), Worker(), Edge()
    pusher = UpstreamPusher(index=index, clients=lambda: [worker])  # type: ignore[arg-type,list-item]
    provider = TablesFirst(edge, index=index, pusher=pusher)  # type: ignore[arg-type]
    backend = BackendTarget(WEB)
    with pytest.raises(TransientEdgeError, match="not known yet"):
        await provider.attach_backend(host="shop.example", route_id="r", backend=backend)
    assert edge.attached == [] and worker.pushed == []

    index.serve_web(("10.0.0.1", 8080))
    worker.failing = True
    with pytest.raises(TransientEdgeError):
        await provider.attach_backend(host="shop.example", route_id="r", backend=backend)
    assert edge.attached == []

    worker.failing = False
    await provider.attach_backend(host="shop.example", route_id="r", backend=backend)
    assert edge.attached == [backend] and pusher.in_sync()
    # A backend that does not exist answers 500 wherever it is: no table to wait for.
    ghost = BackendTarget(ServicePortKey("default", "ghost", 80), exists=False)
    await provider.attach_backend(host="shop.example", route_id="r", backend=ghost)
    assert edge.attached[-1] == ghost and index.asked == [WEB, WEB, WEB]


@dataclass(eq=False)
class Flaky(Worker):
    """Fails its first pushes: a refusal, then a bug (not an EdgeError)."""

    errors: list[Exception] = field(default_factory=list)

    async def push_upstreams(self, changes: TableChanges, *, epoch: str | None = None) -> str:
        if self.errors:
            raise self.errors.pop(0)
        return await super().push_upstreams(changes, epoch=epoch)


async def test_the_background_push_retries_after_a_refusal_and_after_a_bug(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("interlock.controller.worker_upstreams.RETRY_DELAY", 0.0)
    index = Index()
    index.serve_web(("10.0.0.1", 8080))
    worker = Flaky(errors=[TransientEdgeError("busy"), RuntimeError("a bug")])
    pusher = UpstreamPusher(index=index, clients=lambda: [worker])  # type: ignore[arg-type,list-item]
    pusher.start()
    try:
        await eventually_true(pusher.in_sync, within=10.0, message="the table reached the worker")
        assert worker.errors == [] and [c.replace for c in worker.pushed] == [True]
    finally:
        await pusher.close()


API = ServicePortKey("default", "api", 80)
API_SERVICE = {
    "metadata": {"name": "api", "namespace": "default"},
    "spec": {"ports": [{"port": 80}]},
}
SHOP = "shop.example"


def _route(route_id: str) -> ApplyModules:
    return ApplyModules(
        host=SHOP, route_id=route_id, path="/", path_type="Prefix", modules=Modules()
    )


@dataclass(eq=False)
class TableWorker(Worker):
    """A worker started with --pushed-upstreams: its copy of the tables (PushedUpstreams), and
    an attach refused (503) while that copy lacks the backend's policy, as its admin API does."""

    table: PushedUpstreams = field(default_factory=PushedUpstreams)
    attached: list[BackendTarget] = field(default_factory=list)
    meanwhile: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """What happens elsewhere while its next route's modules are applied."""

    async def push_upstreams(self, changes: TableChanges, *, epoch: str | None = None) -> str:
        answer = await super().push_upstreams(changes, epoch=epoch)
        self.table.apply(changes)
        return answer

    async def apply_modules(self, command: ApplyModules) -> None:
        while self.meanwhile:
            await self.meanwhile.pop(0)()

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        if backend.exists and not self.table.has_policy(backend.key):
            raise TransientEdgeError(f"503: no upstream table for {backend.key} yet")
        self.attached.append(backend)


async def test_a_backend_attached_while_a_restarted_worker_is_replayed_is_not_refused() -> None:
    """EdgeWorkers syncs a restarted worker's tables, then replays the routes the others
    serve. A backend attached to the others meanwhile has its table only since the sync: each
    backend is replayed after the tables caught up (only what changed), so the worker takes it
    instead of refusing it (and being started once more)."""
    index, running, restarted = Index(), TableWorker(), TableWorker()
    index.serve_web(("10.0.0.1", 8080))
    pusher = UpstreamPusher(index=index, clients=lambda: [running])  # type: ignore[arg-type,list-item]
    fanout = FanOutEdge([running])  # type: ignore[list-item]
    provider = TablesFirst(fanout, index=index, pusher=pusher)  # type: ignore[arg-type]
    for route in ("a", "b"):
        await provider.apply_modules(_route(route))
    await provider.attach_backend(host=SHOP, route_id="a", backend=BackendTarget(WEB))
    await pusher.sync(restarted)  # type: ignore[arg-type]

    async def api_attached_to_the_others() -> None:
        index.ready_policies[API] = policy_of(API_SERVICE, name="api")
        index.told(API)
        await provider.attach_backend(host=SHOP, route_id="b", backend=BackendTarget(API))

    restarted.meanwhile.append(api_attached_to_the_others)
    await fanout.replay(
        restarted,  # type: ignore[arg-type]
        before_backend=functools.partial(pusher.catch_up, restarted),  # type: ignore[arg-type]
    )
    assert restarted.attached == running.attached == [BackendTarget(WEB), BackendTarget(API)]
    # The whole table once, then only api's row: the push to the running worker meanwhile
    # kept what the restarted one holds.
    assert [c.replace for c in restarted.pushed] == [True, False]
    assert restarted.pushed[1].policies == ((API, index.ready_policies[API]),)


async def test_a_worker_stopped_before_it_counted_is_forgotten() -> None:
    index, running, restarted = Index(), TableWorker(), TableWorker()
    index.serve_web(("10.0.0.1", 8080))
    pusher = UpstreamPusher(index=index, clients=lambda: [running])  # type: ignore[arg-type,list-item]
    await pusher.sync(restarted)  # type: ignore[arg-type]
    pusher.forget(restarted)  # type: ignore[arg-type]
    await pusher.catch_up(restarted)  # type: ignore[arg-type]
    assert [c.replace for c in restarted.pushed] == [True, True]  # unknown again: whole
