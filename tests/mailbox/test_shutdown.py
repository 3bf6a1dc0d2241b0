"""Shutdown drains mailboxes, runs stopped() hooks, and cancels what will not finish."""

from __future__ import annotations

import asyncio

import pytest

from interlock.mailbox import Actor, ActorNotFound, ActorStopped, ActorSystem
from interlock.mailbox.testing import ManualSleep, wait_until


class Chain(Actor):
    """Handles ``n`` by recording it and sending ``n - 1`` to the next actor in the ring."""

    def __init__(self, log: list[tuple[str, int]], hooks: list[str]) -> None:
        self.log = log
        self.hooks = hooks

    async def receive(self, message: object) -> None:
        assert isinstance(message, int)
        self.log.append((self.address, message))
        await asyncio.sleep(0)
        if message > 0:
            self.tell("ring/b" if self.address == "ring/a" else "ring/a", message - 1)

    async def stopped(self) -> None:
        self.hooks.append(self.address)


async def test_shutdown_drains_chains_in_flight_then_runs_hooks() -> None:
    system = ActorSystem()
    log: list[tuple[str, int]] = []
    hooks: list[str] = []
    system.spawn("ring/a", lambda: Chain(log, hooks))
    system.spawn("ring/b", lambda: Chain(log, hooks))
    system.tell("ring/a", 20)
    system.tell("ring/b", 5)
    await system.shutdown(timeout=5.0)
    assert [n for _, n in log if _ in ("ring/a", "ring/b")].count(0) == 2
    assert len(log) == 21 + 6
    assert sorted(hooks) == ["ring/a", "ring/b"]
    assert system.addresses() == []
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_shutdown_refuses_new_external_messages() -> None:
    system = ActorSystem()
    log: list[tuple[str, int]] = []
    system.spawn("ring/a", lambda: Chain(log, []))
    await system.shutdown()
    system.tell("ring/a", 1)
    with pytest.raises(ActorNotFound):
        await system.ask("ring/a", 1)
    assert log == []
    assert system.statistics().dead_letters == 2


async def test_shutdown_cancels_handlers_that_outlive_the_timeout() -> None:
    cancelled: list[bool] = []
    hooks: list[str] = []
    entered = asyncio.Event()

    class Forever(Actor):
        async def receive(self, message: object) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        async def stopped(self) -> None:
            hooks.append("stopped")

    system = ActorSystem()
    system.spawn("forever", Forever)
    question = asyncio.ensure_future(system.ask("forever", "x", timeout=60.0))
    await entered.wait()
    await system.shutdown(timeout=0.05)
    assert cancelled == [True]
    with pytest.raises(ActorStopped, match="forever: stopped before it handled str"):
        await question
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_shutdown_does_not_wait_for_a_restart_backoff() -> None:
    class Fails(Actor):
        async def receive(self, message: object) -> None:
            raise RuntimeError("no")

    sleep = ManualSleep(gated=True)
    system = ActorSystem(sleep=sleep)
    system.spawn("f", Fails)
    system.tell("f", "x")
    await wait_until(lambda: len(sleep.delays) == 1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await system.shutdown(timeout=10.0)
    assert loop.time() - started < 5.0
    assert system.statistics().busy == 0


async def test_async_with_shuts_the_system_down() -> None:
    hooks: list[str] = []

    class Hooked(Actor):
        async def receive(self, message: object) -> None:
            return None

        async def stopped(self) -> None:
            hooks.append(self.address)

    async with ActorSystem() as system:
        system.spawn("hooked", Hooked)
        system.tell("hooked", "x")
    assert hooks == ["hooked"]
    assert not system.exists("hooked")
