"""Spawning, addressing, ordering, concurrency, stopping and the no-task-while-idle rule."""

from __future__ import annotations

import asyncio

import pytest

from interlock.mailbox import Actor, ActorExists, ActorSystem, SystemShuttingDown
from interlock.mailbox.testing import RecordingActor, wait_idle, wait_until


async def test_messages_to_one_actor_are_handled_in_order(system: ActorSystem) -> None:
    log: list[object] = []
    system.spawn("r/1", lambda: RecordingActor(log))
    for n in range(500):
        system.tell("r/1", n)
    await wait_until(lambda: len(log) == 500)
    assert log == list(range(500))


async def test_one_message_at_a_time_even_when_handlers_await(system: ActorSystem) -> None:
    active = 0
    overlap = False
    done: list[int] = []

    class Slow(Actor):
        async def receive(self, message: object) -> None:
            nonlocal active, overlap
            active += 1
            overlap = overlap or active > 1
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            active -= 1
            done.append(1)

    system.spawn("slow", Slow)
    for n in range(20):
        system.tell("slow", n)
    await wait_until(lambda: len(done) == 20)
    assert not overlap


async def test_actors_run_concurrently(system: ActorSystem) -> None:
    # Each actor waits until the other has started handling: only possible if both run at once.
    entered = {"a": asyncio.Event(), "b": asyncio.Event()}
    finished: list[str] = []

    class Pair(Actor):
        async def receive(self, message: object) -> None:
            me, other = str(message), "b" if message == "a" else "a"
            entered[me].set()
            await asyncio.wait_for(entered[other].wait(), 2.0)
            finished.append(me)

    system.spawn("pair/a", Pair)
    system.spawn("pair/b", Pair)
    system.tell("pair/a", "a")
    system.tell("pair/b", "b")
    await wait_until(lambda: len(finished) == 2)
    assert sorted(finished) == ["a", "b"]


async def test_spawn_on_a_taken_address_raises_and_spawn_or_get_returns_it(
    system: ActorSystem,
) -> None:
    first: list[object] = []
    system.spawn("route/default/web", lambda: RecordingActor(first))
    with pytest.raises(ActorExists, match="route/default/web"):
        system.spawn("route/default/web", RecordingActor)
    calls = 0

    def factory() -> RecordingActor:
        nonlocal calls
        calls += 1
        return RecordingActor()

    assert system.spawn_or_get("route/default/web", factory) == "route/default/web"
    assert calls == 0
    system.tell("route/default/web", "hello")
    await wait_until(lambda: first == ["hello"])


async def test_lookup_and_addresses_by_prefix(system: ActorSystem) -> None:
    for address in ["route/a/x", "route/b/y", "service/a/x"]:
        system.spawn(address, RecordingActor)
    assert system.exists("route/a/x")
    assert system.lookup("service/a/x")
    assert not system.exists("route/c/z")
    assert system.addresses("route/") == ["route/a/x", "route/b/y"]
    assert system.addresses() == ["route/a/x", "route/b/y", "service/a/x"]


async def test_started_runs_first_and_sees_its_address(system: ActorSystem) -> None:
    seen: list[object] = []

    class Greeter(Actor):
        async def started(self) -> None:
            seen.append(("started", self.address))

        async def receive(self, message: object) -> None:
            seen.append(message)

    system.spawn("greeter", Greeter)
    system.tell("greeter", "first")
    await wait_until(lambda: len(seen) == 2)
    assert seen == [("started", "greeter"), "first"]


async def test_stop_finishes_current_message_runs_hook_and_dead_letters_the_rest(
    system: ActorSystem,
) -> None:
    release = asyncio.Event()
    handled: list[object] = []
    hooks: list[str] = []

    class Gate(Actor):
        async def receive(self, message: object) -> None:
            if message == "wait":
                await release.wait()
            handled.append(message)

        async def stopped(self) -> None:
            hooks.append(self.address)

    system.spawn("gate", Gate)
    system.tell("gate", "wait")
    system.tell("gate", "queued-1")
    system.tell("gate", "queued-2")
    await wait_until(lambda: system.actor_statistics("gate").depth == 2)
    system.stop("gate")
    assert not system.exists("gate")
    release.set()
    await wait_until(lambda: hooks == ["gate"])
    assert handled == ["wait"]
    assert system.statistics().dead_letters == 2
    system.tell("gate", "late")  # never raises
    assert system.statistics().dead_letters == 3


async def test_stopped_address_can_be_spawned_again_at_once(system: ActorSystem) -> None:
    log: list[object] = []
    system.spawn("x", RecordingActor)
    system.stop("x")
    system.spawn("x", lambda: RecordingActor(log))
    system.tell("x", 1)
    await wait_until(lambda: log == [1])


async def test_stop_and_wait_returns_after_the_hook(system: ActorSystem) -> None:
    hooks: list[str] = []

    class Hooked(Actor):
        async def receive(self, message: object) -> None:
            return None

        async def stopped(self) -> None:
            await asyncio.sleep(0)
            hooks.append("done")

    system.spawn("hooked", Hooked)
    await system.stop_and_wait("hooked")
    assert hooks == ["done"]


async def test_stop_self_from_a_handler(system: ActorSystem) -> None:
    class Once(Actor):
        async def receive(self, message: object) -> None:
            self.stop_self()

    system.spawn("once", Once)
    system.tell("once", "go")
    system.tell("once", "ignored")
    await wait_until(lambda: not system.exists("once") and system.statistics().busy == 0)
    assert system.statistics().dead_letters == 1


async def test_idle_actors_own_no_task() -> None:
    system = ActorSystem()
    logs = [[] for _ in range(300)]  # type: list[list[object]]
    for n in range(300):
        system.spawn(f"idle/{n}", lambda n=n: RecordingActor(logs[n]))  # type: ignore[misc]
    assert system.statistics().busy == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}
    for n in range(300):
        system.tell(f"idle/{n}", n)
    assert system.statistics().busy == 300
    await wait_idle(system)
    assert all(log == [n] for n, log in enumerate(logs))
    assert system.statistics().busy == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert system.actor_statistics("idle/7").state == "idle"
    await system.shutdown()


async def test_spawn_after_shutdown_is_refused() -> None:
    system = ActorSystem()
    await system.shutdown()
    with pytest.raises(SystemShuttingDown):
        system.spawn("late", RecordingActor)
