"""UpstreamPusher: a worker gets the whole table first, then only what changed; a worker whose
push failed gets the whole table again; an attach waits for its backend's table everywhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from interlock.controller.worker_upstreams import TablesFirst, UpstreamPusher
from interlock.dataplane.source import UpstreamError
from interlock.edge.http_provider import TableReplaced
from interlock.edge.provider import BackendTarget, TransientEdgeError
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
