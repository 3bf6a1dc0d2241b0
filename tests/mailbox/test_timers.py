"""Timers: ``tell_after`` through the injected sleep, named, traced, ended with their actor."""

from __future__ import annotations

import asyncio

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import (
    ManualClock,
    ManualSleep,
    RecordingActor,
    capture_trace,
    wait_idle,
    wait_until,
)


def gated_system() -> tuple[ActorSystem, ManualSleep]:
    sleep = ManualSleep(gated=True)
    return ActorSystem(sleep=ManualSleep(), timer_sleep=sleep, clock=ManualClock()), sleep


async def test_the_message_arrives_when_the_sleep_returns() -> None:
    system, sleep = gated_system()
    log: list[object] = []
    system.spawn("r", lambda: RecordingActor(log))
    timer = system.tell_after(30.0, "r", "due")
    await wait_until(lambda: sleep.delays == [30.0])
    await wait_idle(system)
    assert log == [] and timer.pending
    assert timer.due == 1030.0
    sleep.release()
    await wait_until(lambda: log == ["due"])
    assert not timer.pending
    await system.shutdown(timeout=1.0)


async def test_a_named_timer_replaces_the_pending_one() -> None:
    system, sleep = gated_system()
    log: list[object] = []
    system.spawn("r", lambda: RecordingActor(log))
    first = system.tell_after(5.0, "r", "first", key="retry")
    second = system.tell_after(5.0, "r", "second", key="retry")
    assert not first.pending and second.pending
    assert system.timer("r", "retry") is second
    await wait_until(lambda: len(sleep.delays) >= 1)
    sleep.release()
    await wait_until(lambda: log == ["second"])
    assert system.timer("r", "retry") is None
    await system.shutdown(timeout=1.0)


async def test_cancel_withdraws_the_message() -> None:
    system, sleep = gated_system()
    log: list[object] = []
    system.spawn("r", lambda: RecordingActor(log))
    system.tell_after(5.0, "r", "never", key="k")
    assert system.cancel_timer("r", "k")
    assert not system.cancel_timer("r", "k")
    system.tell("r", "marker")
    await wait_until(lambda: log == ["marker"])
    sleep.release()
    await wait_idle(system)
    assert log == ["marker"]
    await system.shutdown(timeout=1.0)


async def test_timers_end_when_their_actor_stops() -> None:
    system, _sleep = gated_system()
    timer = None

    class Arms(Actor):
        async def receive(self, message: object) -> None:
            nonlocal timer
            timer = self.tell_after(60.0, "tick", key="tick")

    system.spawn("arms", Arms)
    system.tell("arms", "go")
    await wait_until(lambda: timer is not None)
    assert timer is not None and timer.pending
    await system.stop_and_wait("arms")
    assert not timer.pending
    await system.shutdown(timeout=1.0)
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_timers_survive_a_restart_like_queued_messages() -> None:
    system, sleep = gated_system()
    log: list[object] = []
    crashed = False

    class CrashOnce(Actor):
        async def receive(self, message: object) -> None:
            nonlocal crashed
            if message == "arm":
                self.tell_after(1.0, "due", key="k")
            elif message == "crash" and not crashed:
                crashed = True
                raise RuntimeError("injected")
            else:
                log.append(message)

    system.spawn("a", CrashOnce)
    system.tell("a", "arm")
    system.tell("a", "crash")
    await wait_until(lambda: system.actor_statistics("a").restarts == 1)
    await wait_until(lambda: len(sleep.delays) == 1)
    sleep.release()
    await wait_until(lambda: log == ["due"])
    await system.shutdown(timeout=1.0)


async def test_a_timer_is_traced_and_caused_by_the_message_that_set_it() -> None:
    system, sleep = gated_system()

    class Arms(Actor):
        async def receive(self, message: object) -> None:
            if message == "go":
                self.tell_after(2.5, "due")

    system.spawn("arms", Arms)
    with capture_trace(system) as trace:
        system.tell("arms", "go", correlation_id="c-1")
        await wait_until(lambda: bool(trace.events("scheduled")))
        sleep.release()
        await wait_until(lambda: len(trace.events("handled")) == 2)
    go = trace.events("handled", summary="'go'")[0]
    scheduled = trace.events("scheduled")[0]
    assert scheduled["causation_id"] == go["id"]
    assert scheduled["correlation_id"] == "c-1"
    assert scheduled["delay_ms"] == 2500.0
    assert trace.events("deliver", id=scheduled["id"])
    assert trace.events("handled", id=scheduled["id"])
    await system.shutdown(timeout=1.0)


async def test_a_timer_to_nobody_is_a_dead_letter(system: ActorSystem) -> None:
    timer = system.tell_after(1.0, "nobody", "x")
    assert not timer.pending
    assert system.statistics().dead_letters == 1
