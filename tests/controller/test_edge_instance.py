"""InstanceWatch: a remote data plane's new instance (it restarted) is noticed and published."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from interlock.actors.topics import EDGE_INSTANCE_TOPIC
from interlock.controller.edge_instance import InstanceWatch
from interlock.edge.http_provider import HttpEdge
from interlock.edge.provider import EdgeError, PermanentEdgeError, TransientEdgeError


class FakeEdge:
    """Answers ``instance()`` from a list: a name, or an error to raise."""

    def __init__(self, *answers: str | EdgeError) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def instance(self) -> str:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, EdgeError):
            raise answer
        return answer


def watch_of(edge: FakeEdge, published: list[object], restarts: list[str | None]) -> InstanceWatch:
    watch: InstanceWatch

    async def restarted() -> None:
        restarts.append(watch.instance)

    watch = InstanceWatch(
        client=cast(HttpEdge, edge),
        publish=lambda topic, key, value: published.append((topic, key, value)),
        restarted=restarted,
        every=0.0,
        at_most=0.0,
    )
    return watch


async def test_a_new_instance_calls_restarted_before_it_is_published() -> None:
    edge = FakeEdge("a", "a", TransientEdgeError("refused"), "b", "b")
    published: list[object] = []
    restarts: list[str | None] = []
    watch = watch_of(edge, published, restarts)
    await watch.check()
    await watch.check()
    with pytest.raises(TransientEdgeError):  # restarting: refused
        await watch.check()
    assert restarts == []
    await watch.check()
    await watch.check()
    assert published == [(EDGE_INSTANCE_TOPIC, "instance", i) for i in ("a", "b")]
    assert restarts == ["a"]  # called while the old one was still the one seen
    assert watch.restarts == 1 and watch.instance == "b"


async def test_the_watch_goes_on_after_failures_and_stops_on_an_edge_without_the_endpoint() -> None:
    edge = FakeEdge(
        "a", TransientEdgeError("refused"), "b", PermanentEdgeError("404"), "never asked"
    )
    published: list[object] = []
    watch = watch_of(edge, published, [])
    watch.start()
    try:
        await asyncio.wait_for(_stopped(watch), timeout=30)
    finally:
        await watch.close()
    assert edge.calls == 4 and watch.restarts == 1
    assert published == [(EDGE_INSTANCE_TOPIC, "instance", i) for i in ("a", "b")]


async def _stopped(watch: InstanceWatch) -> None:
    task = watch._task
    assert task is not None
    await task
