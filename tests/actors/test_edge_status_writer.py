"""StatusWriter for the edge's kinds: Ingress and ModuleSet status and Events only while
leading, each change once, retries, and a crash of the writer loses no pending status."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from interlock.actors.edge_messages import (
    DesiredIngressStatus,
    DesiredModuleSetStatus,
    EventType,
    RecordEvent,
    status_key,
)
from interlock.actors.messages import (
    STATUS_WRITER,
    LeadershipChanged,
)
from interlock.actors.status_writer import StatusKind, TransientStatusError
from interlock.actors.topics import (
    INGRESS_STATUS_TOPIC,
    MODULESET_STATUS_TOPIC,
)
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.mailbox.testing import ManualClock, ManualSleep, wait_idle, wait_until
from interlock.model.meta import ObjectKey
from tests.kit.status_kit import CrashingStatusWriter, ForgetRecorder

KEY = ObjectKey(namespace="default", name="web")
LB = {"ingress": [{"ip": "127.0.0.1"}]}
REGARDING = {"kind": "Ingress", "namespace": "default", "name": "web"}


class Sink(ForgetRecorder):
    def __init__(self) -> None:
        super().__init__()
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.events: list[str] = []
        self.fail_next = 0

    async def write_status(
        self, *, kind: StatusKind, namespace: str, name: str, status: dict[str, Any], uid: str
    ) -> bool:
        if self.fail_next:
            self.fail_next -= 1
            raise TransientStatusError("503 from the API server")
        self.patches.append((kind, f"{namespace}/{name}", status))
        return True

    async def record_event(
        self, *, regarding: Mapping[str, str], type: EventType, reason: str, message: str
    ) -> None:
        self.events.append(reason)


def start(sink: Sink, leading: list[bool], clock: ManualClock, later: ManualSleep) -> ActorSystem:
    # Restart backoff and retry timers are waited out through ManualSleep: they take no time
    # (``later`` records the retry delays).
    system = ActorSystem(sleep=ManualSleep(), timer_sleep=later)
    CrashingStatusWriter.armed = False
    system.spawn(
        STATUS_WRITER,
        lambda: CrashingStatusWriter(
            sink=sink,
            is_leader=lambda: leading[0],
            backoff=BackoffPolicy(initial=1.0, maximum=4.0),
            rng=random.Random(3),
            clock=clock,
            event_grace=30.0,
        ),
    )
    return system


def want_ingress(
    system: ActorSystem,
    key: ObjectKey,
    load_balancer: dict[str, Any],
    stored: dict[str, Any] | None = None,
) -> None:
    """Publish an Ingress's desired status (and the stored one), as its IngressActor does."""
    desired = DesiredIngressStatus(key, load_balancer, stored=stored)
    system.publish(INGRESS_STATUS_TOPIC, status_key(key), desired)


def want_module_set(system: ActorSystem, key: ObjectKey, conditions: list[dict[str, Any]]) -> None:
    """Publish a ModuleSet's desired status, as the ModuleSet directory does."""
    system.publish(MODULESET_STATUS_TOPIC, status_key(key), DesiredModuleSetStatus(key, conditions))


def event(reason: str) -> RecordEvent:
    return RecordEvent(regarding=REGARDING, type="Normal", reason=reason, message=reason)


async def test_nothing_is_written_until_leading_then_the_latest_of_each() -> None:
    sink, leading, clock, later = Sink(), [False], ManualClock(), ManualSleep()
    system = start(sink, leading, clock, later)
    try:
        want_ingress(system, KEY, LB)
        conditions = [{"type": "Valid", "status": "True"}]
        want_module_set(system, KEY, [{"type": "Valid"}])
        want_module_set(system, KEY, conditions)
        system.tell(STATUS_WRITER, event("ModulesApplied"))
        await wait_idle(system)
        assert sink.patches == [] and sink.events == []

        leading[0] = True
        system.tell(STATUS_WRITER, LeadershipChanged(True))
        await wait_until(lambda: len(sink.patches) == 2)
        assert ("Ingress", "default/web", {"loadBalancer": LB}) in sink.patches
        assert ("ModuleSet", "default/web", {"conditions": conditions}) in sink.patches
        assert sink.events == ["ModulesApplied"]  # raised just before the Lease was acquired
    finally:
        await system.shutdown()


async def test_an_ingress_status_someone_else_wrote_after_this_replicas_is_written_over() -> None:
    """An old leader's write landing after this one's is seen as a stored status that changed
    to one this replica did not write, and the desired status is written again."""
    sink, leading, clock, later = Sink(), [True], ManualClock(), ManualSleep()
    system = start(sink, leading, clock, later)
    try:
        want_ingress(system, KEY, LB, stored={})
        await wait_until(lambda: len(sink.patches) == 1)
        want_ingress(system, KEY, LB, stored=LB)  # the IngressActor sees the write
        await wait_idle(system)
        assert len(sink.patches) == 1
        want_ingress(system, KEY, LB, stored={"ingress": [{"ip": "192.0.2.1"}]})  # the late one
        await wait_until(lambda: len(sink.patches) == 2)
        assert sink.patches[1] == ("Ingress", "default/web", {"loadBalancer": LB})
    finally:
        await system.shutdown()


async def test_events_older_than_the_grace_period_are_not_replayed() -> None:
    sink, leading, clock, later = Sink(), [False], ManualClock(), ManualSleep()
    system = start(sink, leading, clock, later)
    try:
        system.tell(STATUS_WRITER, event("Old"))
        await wait_idle(system)
        clock.now += 31
        system.tell(STATUS_WRITER, event("Recent"))
        await wait_idle(system)
        leading[0] = True
        system.tell(STATUS_WRITER, LeadershipChanged(True))
        await wait_until(lambda: sink.events == ["Recent"])
        system.tell(STATUS_WRITER, event("Now"))
        await wait_until(lambda: sink.events == ["Recent", "Now"])
    finally:
        await system.shutdown()


async def test_transient_failures_are_retried_with_backoff() -> None:
    sink, leading, clock, later = Sink(), [True], ManualClock(), ManualSleep()
    sink.fail_next = 2
    system = start(sink, leading, clock, later)
    try:
        want_ingress(system, KEY, LB)
        await wait_until(lambda: len(sink.patches) == 1)
        first, second = later.delays
        assert 1.0 <= first <= 1.5 and 2.0 <= second <= 3.0
        # Gone objects are forgotten, not written.
        want_module_set(system, KEY, [{"type": "Valid"}])
        system.unpublish(MODULESET_STATUS_TOPIC, status_key(KEY))
        await wait_idle(system)
        assert len(sink.patches) == 1
    finally:
        await system.shutdown()


async def test_a_crash_loses_no_pending_status() -> None:
    sink, leading, clock, later = Sink(), [False], ManualClock(), ManualSleep()
    system = start(sink, leading, clock, later)
    other = ObjectKey(namespace="default", name="other")
    try:
        want_ingress(system, KEY, LB)
        await wait_idle(system)
        CrashingStatusWriter.armed = True
        want_module_set(system, other, [{"type": "Valid"}])
        await wait_until(lambda: system.actor_statistics(STATUS_WRITER).restarts == 1)
        await wait_idle(system)
        leading[0] = True
        system.tell(STATUS_WRITER, LeadershipChanged(True))
        await wait_until(lambda: len(sink.patches) == 2)
        assert sorted(sink.patches, key=lambda patch: patch[0]) == [
            ("Ingress", "default/web", {"loadBalancer": LB}),
            ("ModuleSet", "default/other", {"conditions": [{"type": "Valid"}]}),
        ]
        # Leading, a crash on a changed status: the restarted writer still writes it.
        CrashingStatusWriter.armed = True
        want_module_set(system, other, [{"type": "Valid", "status": "False"}])
        await wait_until(lambda: system.actor_statistics(STATUS_WRITER).restarts == 2)
        await wait_until(
            lambda: (
                (
                    "ModuleSet",
                    "default/other",
                    {"conditions": [{"type": "Valid", "status": "False"}]},
                )
                in sink.patches
            )
        )
    finally:
        await system.shutdown()
