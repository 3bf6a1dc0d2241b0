"""``ActorSystem.wait_idle``: an event that fires when the last busy actor finishes."""

from __future__ import annotations

import asyncio

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import ManualSleep, RecordingActor, wait_until


def start_gated(system: ActorSystem) -> asyncio.Event:
    """An actor at ``gated`` busy with one message until the returned event is set."""
    gate = asyncio.Event()

    class Gated(Actor):
        async def receive(self, message: object) -> None:
            await gate.wait()

    system.spawn("gated", Gated)
    system.tell("gated", "go")
    return gate


async def test_wait_idle_returns_at_once_when_nothing_has_work(system: ActorSystem) -> None:
    system.spawn("r", RecordingActor)
    await asyncio.wait_for(system.wait_idle(), 60)


async def test_wait_idle_waits_for_a_chain_of_messages(system: ActorSystem) -> None:
    log: list[object] = []

    class Relay(Actor):
        async def receive(self, message: object) -> None:
            assert isinstance(message, int)
            await asyncio.sleep(0)
            if message:
                self.tell("relay", message - 1)
            else:
                log.append("done")

    system.spawn("relay", Relay)
    system.tell("relay", 50)
    await asyncio.wait_for(system.wait_idle(), 60)
    assert log == ["done"]
    assert system.statistics().busy == 0


async def test_every_waiter_wakes(system: ActorSystem) -> None:
    gate = start_gated(system)
    waiters = [asyncio.ensure_future(system.wait_idle()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(waiter.done() for waiter in waiters)
    gate.set()
    await asyncio.wait_for(asyncio.gather(*waiters), 60)


async def test_an_actor_in_restart_backoff_is_busy() -> None:
    sleep = ManualSleep(gated=True)
    system = ActorSystem(sleep=sleep)

    class Crashing(Actor):
        async def receive(self, message: object) -> None:
            raise RuntimeError("boom")

    system.spawn("crashing", Crashing)
    system.tell("crashing", "go")
    waiter = asyncio.ensure_future(system.wait_idle())
    await wait_until(lambda: bool(sleep.delays))
    assert not waiter.done()
    sleep.release()
    await asyncio.wait_for(waiter, 60)
    await system.shutdown(timeout=1.0)


async def test_a_cancelled_waiter_is_forgotten(system: ActorSystem) -> None:
    gate = start_gated(system)
    try:
        async with asyncio.timeout(0.01):
            await system.wait_idle()
    except TimeoutError:
        pass
    assert system._scheduler._idle == []
    gate.set()
    await asyncio.wait_for(system.wait_idle(), 60)
