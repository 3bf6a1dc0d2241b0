"""ask: replies, timeouts, failures, and cycles that would deadlock."""

from __future__ import annotations

import asyncio

import pytest

from interlock.mailbox import (
    Actor,
    ActorFailed,
    ActorNotFound,
    ActorSystem,
    AskCycle,
    AskTimeout,
)
from interlock.mailbox.testing import RecordingActor


async def test_ask_returns_the_reply(system: ActorSystem) -> None:
    system.spawn("echo", RecordingActor)
    assert await system.ask("echo", {"n": 1}) == {"n": 1}


async def test_ask_times_out_when_no_reply_comes(system: ActorSystem) -> None:
    never = asyncio.Event()

    class Stuck(Actor):
        async def receive(self, message: object) -> None:
            await never.wait()

    system.spawn("stuck", Stuck)
    with pytest.raises(AskTimeout, match=r"stuck: no reply to str within 0\.05 s"):
        await system.ask("stuck", "hello", timeout=0.05)
    never.set()


async def test_ask_to_a_missing_actor_fails_at_once(system: ActorSystem) -> None:
    with pytest.raises(ActorNotFound, match="nobody"):
        await system.ask("nobody", "hello")
    assert system.statistics().dead_letters == 1


async def test_ask_reports_the_handler_failure(system: ActorSystem) -> None:
    class Broken(Actor):
        async def receive(self, message: object) -> None:
            raise ValueError("bad input")

    system.spawn("broken", Broken)
    with pytest.raises(ActorFailed, match="broken: ValueError while handling str") as failure:
        await system.ask("broken", "x")
    assert isinstance(failure.value.__cause__, ValueError)


async def test_an_actor_asking_itself_fails_at_once(system: ActorSystem) -> None:
    outcome: list[BaseException] = []

    class Narcissus(Actor):
        async def receive(self, message: object) -> object:
            if message == "go":
                try:
                    await self.ask(self.address, "mirror", timeout=30.0)
                except AskCycle as error:
                    outcome.append(error)
            return "ok"

    system.spawn("narcissus", Narcissus)
    assert await system.ask("narcissus", "go", timeout=30.0) == "ok"
    assert len(outcome) == 1
    assert "narcissus -> narcissus" in str(outcome[0])


async def test_a_cycle_through_another_actor_fails_at_once(system: ActorSystem) -> None:
    # a asks b; b's handler asks a back: a is busy waiting on b, so this would deadlock.
    errors: list[BaseException] = []

    class A(Actor):
        async def receive(self, message: object) -> object:
            if message == "start":
                return await self.ask("b", "ping", timeout=30.0)
            return "a-answer"

    class B(Actor):
        async def receive(self, message: object) -> object:
            try:
                return await self.ask("a", "pong", timeout=30.0)
            except AskCycle as error:
                errors.append(error)
                return "cycle"

    system.spawn("a", A)
    system.spawn("b", B)
    assert await system.ask("a", "start", timeout=30.0) == "cycle"
    assert len(errors) == 1
    assert errors[0].chain == ["b", "a", "b"]  # type: ignore[attr-defined]


async def test_a_three_actor_cycle_fails_at_once(system: ActorSystem) -> None:
    class Forward(Actor):
        def __init__(self, target: str) -> None:
            self.target = target

        async def receive(self, message: object) -> object:
            try:
                return await self.ask(self.target, message, timeout=30.0)
            except AskCycle as error:
                return error.chain

    system.spawn("x", lambda: Forward("y"))
    system.spawn("y", lambda: Forward("z"))
    system.spawn("z", lambda: Forward("x"))
    assert await system.ask("x", "go", timeout=30.0) == ["z", "x", "y", "z"]


async def test_asks_without_a_cycle_wait_for_each_other(system: ActorSystem) -> None:
    class Front(Actor):
        async def receive(self, message: object) -> object:
            reply = await self.ask("back", message)
            return f"front({reply})"

    system.spawn("front", Front)
    system.spawn("back", RecordingActor)
    results = await asyncio.gather(*(system.ask("front", n) for n in range(5)))
    assert results == [f"front({n})" for n in range(5)]
