"""EdgeStatusWriter: status and Events only while leading, each change once, retries."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from interlock.actors.edge_messages import (
    EDGE_STATUS_WRITER,
    DesiredIngressStatus,
    DesiredModuleSetStatus,
    EventType,
    RecordEvent,
)
from interlock.actors.edge_status import EdgeStatusWriter, StatusKind, TransientEdgeStatusError
from interlock.actors.messages import LeadershipChanged
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.mailbox.testing import ManualClock, wait_idle, wait_until
from interlock.model.meta import ObjectKey

KEY = ObjectKey(namespace="default", name="web")
LB = {"ingress": [{"ip": "127.0.0.1"}]}
REGARDING = {"kind": "Ingress", "namespace": "default", "name": "web"}


class Sink:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.events: list[str] = []
        self.fail_next = 0

    async def patch_status(
        self, *, kind: StatusKind, namespace: str, name: str, status: dict[str, Any]
    ) -> bool:
        if self.fail_next:
            self.fail_next -= 1
            raise TransientEdgeStatusError("503 from the API server")
        self.patches.append((kind, f"{namespace}/{name}", status))
        return True

    async def record_event(
        self, *, regarding: Mapping[str, str], type: EventType, reason: str, message: str
    ) -> None:
        self.events.append(reason)


class Later:
    """call_later that runs the callback at once, recording the delays."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> None:
        self.delays.append(delay)
        callback()


def start(sink: Sink, leading: list[bool], clock: ManualClock, later: Later) -> ActorSystem:
    system = ActorSystem()
    system.spawn(
        EDGE_STATUS_WRITER,
        lambda: EdgeStatusWriter(
            sink=sink,
            is_leader=lambda: leading[0],
            backoff=BackoffPolicy(initial=1.0, maximum=4.0),
            rng=random.Random(3),
            call_later=later,
            clock=clock,
            event_grace=30.0,
        ),
    )
    return system


def event(reason: str) -> RecordEvent:
    return RecordEvent(regarding=REGARDING, type="Normal", reason=reason, message=reason)


async def test_nothing_is_written_until_leading_then_the_latest_of_each() -> None:
    sink, leading, clock, later = Sink(), [False], ManualClock(), Later()
    system = start(sink, leading, clock, later)
    try:
        system.tell(EDGE_STATUS_WRITER, DesiredIngressStatus(KEY, LB))
        conditions = [{"type": "Valid", "status": "True"}]
        system.tell(EDGE_STATUS_WRITER, DesiredModuleSetStatus(KEY, [{"type": "Valid"}]))
        system.tell(EDGE_STATUS_WRITER, DesiredModuleSetStatus(KEY, conditions))
        system.tell(EDGE_STATUS_WRITER, event("ModulesApplied"))
        await wait_idle(system)
        assert sink.patches == [] and sink.events == []

        leading[0] = True
        system.tell(EDGE_STATUS_WRITER, LeadershipChanged(True))
        await wait_until(lambda: len(sink.patches) == 2)
        assert ("Ingress", "default/web", {"loadBalancer": LB}) in sink.patches
        assert ("ModuleSet", "default/web", {"conditions": conditions}) in sink.patches
        assert sink.events == ["ModulesApplied"]  # raised just before the Lease was acquired
    finally:
        await system.shutdown()


async def test_events_older_than_the_grace_period_are_not_replayed() -> None:
    sink, leading, clock, later = Sink(), [False], ManualClock(), Later()
    system = start(sink, leading, clock, later)
    try:
        system.tell(EDGE_STATUS_WRITER, event("Old"))
        await wait_idle(system)
        clock.now += 31
        system.tell(EDGE_STATUS_WRITER, event("Recent"))
        await wait_idle(system)
        leading[0] = True
        system.tell(EDGE_STATUS_WRITER, LeadershipChanged(True))
        await wait_until(lambda: sink.events == ["Recent"])
        system.tell(EDGE_STATUS_WRITER, event("Now"))
        await wait_until(lambda: sink.events == ["Recent", "Now"])
    finally:
        await system.shutdown()


async def test_transient_failures_are_retried_with_backoff() -> None:
    sink, leading, clock, later = Sink(), [True], ManualClock(), Later()
    sink.fail_next = 2
    system = start(sink, leading, clock, later)
    try:
        system.tell(EDGE_STATUS_WRITER, DesiredIngressStatus(KEY, LB))
        await wait_until(lambda: len(sink.patches) == 1)
        first, second = later.delays
        assert 1.0 <= first <= 1.5 and 2.0 <= second <= 3.0
        # Gone objects are forgotten, not written.
        system.tell(EDGE_STATUS_WRITER, DesiredModuleSetStatus(KEY, None))
        await wait_idle(system)
        assert len(sink.patches) == 1
    finally:
        await system.shutdown()
