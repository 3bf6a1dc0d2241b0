"""Supervision: restart with backoff, messages kept during backoff, the intensity limit."""

from __future__ import annotations

import random

from interlock.mailbox import (
    Actor,
    ActorSystem,
    BackoffPolicy,
    Published,
    SupervisionPolicy,
)
from interlock.mailbox.testing import ManualClock, ManualSleep, capture_trace, wait_idle, wait_until

POLICY = SupervisionPolicy(
    backoff=BackoffPolicy(initial=0.01, maximum=10.0, jitter=0.5), max_restarts=3, within=60.0
)


class Fragile(Actor):
    """Raises on "boom"; records everything else and how many instances were started."""

    instances = 0

    def __init__(self, log: list[object]) -> None:
        self.log = log

    async def started(self) -> None:
        Fragile.instances += 1
        self.log.append(("started", Fragile.instances))

    async def receive(self, message: object) -> None:
        if message == "boom":
            raise RuntimeError("kaboom")
        self.log.append(message)


async def test_restart_after_backoff_keeps_queued_messages_in_order() -> None:
    Fragile.instances = 0
    sleep = ManualSleep(gated=True)
    system = ActorSystem(clock=ManualClock(), rng=random.Random(7), sleep=sleep)
    log: list[object] = []
    system.spawn("f", lambda: Fragile(log), supervision=POLICY)
    system.tell("f", "before")
    system.tell("f", "boom")
    await wait_until(lambda: system.actor_statistics("f").state == "restarting")
    system.tell("f", "during-1")
    system.tell("f", "during-2")
    assert system.actor_statistics("f").depth == 2
    sleep.release()
    await wait_until(lambda: len(log) == 5)
    assert log == [("started", 1), "before", ("started", 2), "during-1", "during-2"]
    expected = BackoffPolicy(initial=0.01, maximum=10.0, jitter=0.5).delay(0, random.Random(7))
    assert sleep.delays == [expected]
    await wait_idle(system)
    stats = system.actor_statistics("f")
    assert (stats.failed, stats.restarts, stats.state) == (1, 1, "idle")
    await system.shutdown()


async def test_backoff_grows_with_each_restart_in_the_window() -> None:
    sleep = ManualSleep()
    system = ActorSystem(clock=ManualClock(), rng=random.Random(1), sleep=sleep)
    policy = SupervisionPolicy(
        backoff=BackoffPolicy(initial=0.5, maximum=1.5, jitter=0.0), max_restarts=10
    )
    system.spawn("f", lambda: Fragile([]), supervision=policy)
    for _ in range(4):
        system.tell("f", "boom")
    await wait_until(lambda: len(sleep.delays) == 4)
    assert sleep.delays == [0.5, 1.0, 1.5, 1.5]
    await system.shutdown()


async def test_too_many_restarts_within_the_window_stop_the_actor() -> None:
    clock = ManualClock()
    system = ActorSystem(clock=clock, sleep=ManualSleep())
    with capture_trace(system) as trace:
        system.spawn("f", lambda: Fragile([]), supervision=POLICY)
        for _ in range(4):
            system.tell("f", "boom")
        system.tell("f", "after")
        await wait_until(lambda: not system.exists("f"))
        await wait_idle(system)
    assert [r["attempt"] for r in trace.events("restart")] == [0, 1, 2]
    assert trace.events("stopped", recipient="f", reason="restart intensity")
    # the message queued behind the last failure became a dead letter
    assert [r["summary"] for r in trace.events("dead_letter")] == ["'after'"]
    await system.shutdown()


async def test_failures_outside_the_window_do_not_count() -> None:
    clock = ManualClock()
    system = ActorSystem(clock=clock, sleep=ManualSleep())
    log: list[object] = []
    system.spawn("f", lambda: Fragile(log), supervision=POLICY)
    for _ in range(10):
        system.tell("f", "boom")
        await wait_idle(system)
        clock.now += 30.0  # two failures per 60 s window at most: under the limit of 3
    system.tell("f", "alive")
    await wait_until(lambda: "alive" in log)
    assert system.actor_statistics("f").restarts == 10
    await system.shutdown()


async def test_a_fresh_instance_gets_every_retained_value_of_its_topics_again() -> None:
    received: list[list[object]] = []

    class Subscriber(Actor):
        def __init__(self) -> None:
            self.seen: list[object] = []
            received.append(self.seen)

        async def started(self) -> None:
            if len(received) == 1:
                self.subscribe("services")

        async def receive(self, message: object) -> None:
            if message == "boom":
                raise RuntimeError("kaboom")
            if isinstance(message, Published):
                self.seen.append((message.key, message.value))

    system = ActorSystem(sleep=ManualSleep())
    system.publish("services", "default/a", 1)
    system.publish("services", "default/b", 2)
    system.spawn("sub", Subscriber)
    await wait_until(lambda: len(received[0]) == 2)
    system.tell("sub", "boom")
    await wait_until(lambda: len(received) == 2 and len(received[1]) == 2)
    assert received[1] == [("default/a", 1), ("default/b", 2)]
    system.publish("services", "default/a", 3)
    await wait_until(lambda: len(received[1]) == 3)
    assert received[1][-1] == ("default/a", 3)
    await system.shutdown()


async def test_stop_during_backoff_does_not_wait_for_the_delay() -> None:
    sleep = ManualSleep(gated=True)
    system = ActorSystem(sleep=sleep)
    system.spawn("f", lambda: Fragile([]), supervision=POLICY)
    system.tell("f", "boom")
    await wait_until(lambda: len(sleep.delays) == 1)
    await system.stop_and_wait("f")
    assert not system.exists("f")
    assert system.statistics().busy == 0
    await system.shutdown()


async def test_stopped_hook_runs_on_the_failed_instance() -> None:
    hooks: list[int] = []

    class Cleanup(Actor):
        count = 0

        def __init__(self) -> None:
            Cleanup.count += 1
            self.number = Cleanup.count

        async def receive(self, message: object) -> None:
            raise RuntimeError("kaboom")

        async def stopped(self) -> None:
            hooks.append(self.number)

    system = ActorSystem(sleep=ManualSleep())
    system.spawn("c", Cleanup, supervision=POLICY)
    system.tell("c", "x")
    await wait_until(lambda: hooks == [1])
    await system.shutdown()
    assert hooks == [1, 2]


async def test_the_restart_is_traced_as_caused_by_the_failed_message() -> None:
    system = ActorSystem(sleep=ManualSleep())
    with capture_trace(system) as trace:
        system.spawn("f", lambda: Fragile([]), supervision=POLICY)
        system.tell("f", "boom", correlation_id="event-9")
        await wait_idle(system)
    (boom,) = trace.events("deliver", summary="'boom'")
    (restart,) = trace.events("restart")
    assert restart["id"] == boom["id"]
    (started,) = trace.events("deliver", type="Started")
    assert (started["causation_id"], started["correlation_id"]) == (boom["id"], "event-9")
    assert trace.events("handled", id=started["id"])
    await system.shutdown()
