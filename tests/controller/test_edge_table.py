"""EdgeTable, the edge workers' upstream table kept by change, always equals the whole rebuild
(:func:`edge_table`), and every worker ends up holding it, whatever the sequence of policy,
Service, endpoint and following changes, failed pushes and restarted workers in between.

The index and the cache are stood in for by plain tables that tell their listeners each row
that changed, as :class:`~interlock.controller.upstreams.UpstreamIndex` and
:class:`~interlock.actors.upstream_cache.UpstreamCache` do (that they do is
``tests/controller/test_upstreams.py``'s).
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.controller.worker_upstreams import UpstreamPusher, edge_table
from interlock.edge.http_provider import TableReplaced
from interlock.edge.provider import EdgeError, TransientEdgeError
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey, parse_service
from interlock.model.upstream_table import ServiceEndpoints, TableChanges
from tests.kit.grpc_policies import policy_of
from tests.kit.upstream_index import PusherIndex

NAMES = ("a", "b", "c")
PORTS = (80, 81)


def _service(name: str, ports: tuple[int, ...]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": f"p{port}", "port": port} for port in ports]},
    }


SPECS = ((80,), (80, 81))
"""The port lists a Service may have (a change of them moves its rows)."""


def _policy(name: str, port: int, variant: int) -> OutboundPolicy:
    """Two different policies per Service port: its Service's, and one of a missing Service."""
    parent = _service(name, SPECS[1]) if variant == 0 else None
    return policy_of(parent, name=name, port=port)


POLICIES = {
    (name, port, variant): _policy(name, port, variant)
    for name in NAMES
    for port in PORTS
    for variant in (0, 1)
}


class Index(PusherIndex):
    """The edge index and its cache's tables as the pusher reads them: each change told."""

    def policy(self, name: str, port: int, variant: int | None) -> None:
        target = ServicePortKey("default", name, port)
        if variant is None:
            if self.ready_policies.pop(target, None) is not None:
                self.told(target)
        else:
            self.ready_policies[target] = POLICIES[name, port, variant]
            self.told(target)

    def follow(self, name: str, followed: bool) -> None:
        key = ObjectKey(namespace="default", name=name)
        if followed and key not in self.tracked:
            self.tracked.add(key)
            self.told(key)
        elif not followed and key in self.tracked:
            self.tracked.discard(key)
            self.told(key)

    # The cache: it writes a Service's rows, then tells its listeners (followed or not).

    def service(self, name: str, spec: int | None) -> None:
        key = ObjectKey(namespace="default", name=name)
        tables = self.tables
        for port in PORTS:
            target = ServicePortKey("default", name, port)
            if spec is None or port not in SPECS[spec]:
                tables.addresses.pop(target, None)
            else:
                tables.addresses.setdefault(target, [])
        if spec is None:
            tables.services.pop(key, None)
        else:
            tables.services[key] = parse_service(_service(name, SPECS[spec]))
        tables.changed(key)

    def known(self, name: str, known: bool) -> None:
        key = ObjectKey(namespace="default", name=name)
        (self.tables.known.add if known else self.tables.known.discard)(key)
        self.tables.changed(key)

    def endpoints(self, name: str, port: int, count: int) -> None:
        target = ServicePortKey("default", name, port)
        if target in self.tables.addresses:  # only a port of a Service that exists has a row
            self.tables.addresses[target] = [(f"10.0.0.{i}", 8080) for i in range(count)]
            self.tables.changed(target.service_key())


@dataclass(eq=False)
class Worker:
    """An edge's copy of the table behind its admin API: refuses a PATCH on another epoch."""

    epoch: str = "e0"
    failing: bool = False
    unaware: bool = False
    """Restarted behind the pusher's back (a remote edge): it learns of it at the next change."""
    policies: dict[ServicePortKey, OutboundPolicy] = field(default_factory=dict)
    services: dict[ObjectKey, ServiceEndpoints] = field(default_factory=dict)
    meanwhile: list[Any] = field(default_factory=list)
    """What happens while its next push is in flight (a change, someone asking in_sync)."""

    async def push_upstreams(self, changes: TableChanges, *, epoch: str | None = None) -> str:
        while self.meanwhile:
            self.meanwhile.pop(0)()
        await asyncio.sleep(0)
        if self.failing:
            raise TransientEdgeError("no answer")
        if not changes.replace and epoch != self.epoch:
            raise TableReplaced("412: another table")
        if changes.replace:
            self.policies.clear()
            self.services.clear()
            self.unaware = False
        # A row added and removed between two pushes is sent as removed: PushedUpstreams
        # ignores the removal of a row it does not hold, and so does this copy.
        for target in changes.removed_policies:
            self.policies.pop(target, None)
        for key in changes.removed_services:
            self.services.pop(key, None)
        self.policies.update(changes.policies)
        self.services.update(changes.services)
        return self.epoch

    def restart(self) -> None:
        self.epoch = secrets.token_hex(4)
        self.policies.clear()
        self.services.clear()


name = st.sampled_from(NAMES)
port = st.sampled_from(PORTS)
worker = st.integers(0, 1)
CHANGES = st.one_of(
    st.tuples(st.just("policy"), name, port, st.sampled_from((0, 1, None))),
    st.tuples(st.just("follow"), name, st.booleans()),
    st.tuples(st.just("service"), name, st.sampled_from((0, 1, None))),
    st.tuples(st.just("known"), name, st.booleans()),
    st.tuples(st.just("endpoints"), name, port, st.integers(0, 2)),
)
OPS = st.one_of(
    CHANGES,
    st.tuples(st.just("meanwhile"), worker, CHANGES),
    st.tuples(st.just("flush")),
    st.tuples(st.just("failing"), worker, st.booleans()),
    st.tuples(st.just("restart"), worker, st.booleans()),
    st.tuples(st.just("running"), st.integers(0, 2)),
)


async def _run(ops: list[tuple[Any, ...]]) -> None:
    index, workers = Index(), [Worker(), Worker()]
    running = [2]
    pusher = UpstreamPusher(
        index=index,  # type: ignore[arg-type]
        clients=lambda: workers[: running[0]],  # type: ignore[arg-type,return-value]
    )
    for op in [*ops, ("failing", 0, False), ("failing", 1, False), ("flush",)]:
        kind, *args = op
        if kind == "flush":  # and again while changes came during it (the pusher is woken)
            pending = True
            while pending:
                before = sum(len(w.meanwhile) for w in workers)
                try:
                    await pusher.flush()
                except EdgeError:
                    assert any(w.failing for w in workers[: running[0]])
                pending = sum(len(w.meanwhile) for w in workers) != before
            whole = edge_table(index)
            assert pusher.table.whole() == whole  # the kept table is the rebuilt one
            for held in workers[: running[0]]:
                if not held.failing and not held.unaware:  # after a push it took
                    assert (held.policies, held.services) == (whole.policies, whole.services)
            if pusher.in_sync():
                for held in workers[: running[0]]:
                    if held.unaware:
                        continue
                    assert (held.policies, held.services) == (whole.policies, whole.services)
            else:
                assert any(w.failing for w in workers[: running[0]])
        elif kind == "failing":
            workers[args[0]].failing = args[1]
        elif kind == "restart":  # synced: a local worker, started again by EdgeWorkers
            restarted = workers[args[0]]
            restarted.restart()
            restarted.unaware = not args[1]
            if args[1]:
                try:
                    await pusher.sync(restarted)  # type: ignore[arg-type]
                except EdgeError:
                    assert restarted.failing
        elif kind == "meanwhile":  # a change, then in_sync, while its next push is in flight
            change, *change_args = args[1]
            workers[args[0]].meanwhile += [
                lambda change=change, change_args=change_args: getattr(index, change)(*change_args),
                pusher.in_sync,
            ]
        elif kind == "running":
            running[0] = args[0]
        else:
            getattr(index, kind)(*args)
    await pusher.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_the_kept_table_is_the_whole_rebuild_and_every_worker_holds_it(
    ops: list[tuple[Any, ...]],
) -> None:
    asyncio.run(_run(ops))


def test_a_row_changed_again_is_sent_to_a_worker_that_held_the_rows_after_its_first_change() -> (
    None
):
    """The journal keeps rows by the version they last changed at: a worker at version 2 (a
    then b) is sent a's later change, and a worker at 3 nothing."""
    index = Index()
    pusher = UpstreamPusher(index=index, clients=list)  # type: ignore[arg-type]
    table = pusher.table
    index.policy("a", 80, 0)
    assert table.update() == 1
    index.policy("b", 80, 0)
    assert table.update() == 2
    index.policy("a", 80, 1)
    assert table.update() == 3
    a = ServicePortKey("default", "a", 80)
    assert table.changes_since(2).policies == ((a, POLICIES["a", 80, 1]),)
    assert len(table.changes_since(1)) == 2 and len(table.changes_since(3)) == 0
    table.forget_until(2)  # every worker holds 2: b's row is forgotten, a's kept
    assert table.changes_since(2).policies == ((a, POLICIES["a", 80, 1]),)
