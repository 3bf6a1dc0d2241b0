"""Durable mailboxes: the keyed message lost with a crash is re-delivered, poison is dropped
and its key resynchronized by the owner."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from interlock.mailbox import Actor, ActorSystem, MailboxConfig
from interlock.mailbox.testing import Keyed as State
from interlock.mailbox.testing import ManualSleep, capture_trace, wait_idle, wait_until


class Keeper(Actor):
    """Keeps the latest value per name in a shared dict; raises on values in ``crash_on``
    (each listed value crashes as many times as it is listed)."""

    def __init__(self, seen: dict[str, int], crash_on: list[int], log: list[object]) -> None:
        self.seen = seen
        self.crash_on = crash_on
        self.log = log

    async def receive(self, message: object) -> None:
        self.log.append(message)
        if isinstance(message, State):
            if message.value in self.crash_on:
                self.crash_on.remove(message.value)
                raise RuntimeError(f"injected crash on {message.value}")
            self.seen[message.key] = message.value


def start(
    crash_on: list[int], *, durable: bool = True, resync: list[Hashable] | None = None
) -> tuple[ActorSystem, dict[str, int], list[object]]:
    system = ActorSystem(sleep=ManualSleep())
    seen: dict[str, int] = {}
    log: list[object] = []
    config = MailboxConfig(durable=durable, resync=None if resync is None else resync.append)
    system.spawn("keeper", lambda: Keeper(seen, crash_on, log), mailbox=config)
    return system, seen, log


async def test_the_message_lost_with_a_crash_is_handled_by_the_restarted_actor() -> None:
    system, seen, _log = start([1])
    system.tell("keeper", State("a", 1))
    system.tell("keeper", State("b", 5))
    await wait_until(lambda: system.actor_statistics("keeper").restarts == 1)
    await wait_idle(system)
    assert seen == {"a": 1, "b": 5}
    assert system.statistics().dead_letters == 0
    await system.shutdown(timeout=1.0)


async def test_without_durability_the_message_is_lost() -> None:
    system, seen, _log = start([1], durable=False)
    system.tell("keeper", State("a", 1))
    system.tell("keeper", State("b", 5))
    await wait_until(lambda: system.actor_statistics("keeper").restarts == 1)
    await wait_idle(system)
    assert seen == {"b": 5}
    await system.shutdown(timeout=1.0)


async def test_the_replay_goes_first_in_line() -> None:
    system, _seen, log = start([1])
    system.tell("keeper", State("a", 1))
    system.tell("keeper", State("b", 5))
    system.tell("keeper", "unkeyed")
    await wait_until(lambda: len(log) == 4)
    assert log == [State("a", 1), State("a", 1), State("b", 5), "unkeyed"]
    await system.shutdown(timeout=1.0)


async def test_a_newer_state_queued_meanwhile_supersedes_the_lost_one() -> None:
    system = ActorSystem(sleep=ManualSleep())
    seen: dict[str, int] = {}
    log: list[object] = []
    gate = asyncio.Event()
    waiting: list[bool] = []

    class SlowCrash(Keeper):
        async def receive(self, message: object) -> None:
            if message == State("a", 1):
                waiting.append(True)
                await gate.wait()
            await super().receive(message)

    system.spawn("keeper", lambda: SlowCrash(seen, [1], log), mailbox=MailboxConfig(durable=True))
    system.tell("keeper", State("a", 1))
    await wait_until(lambda: bool(waiting))
    system.tell("keeper", State("a", 2))  # queued while 1 is handled: the latest state of "a"
    gate.set()
    await wait_until(lambda: system.actor_statistics("keeper").restarts == 1)
    await wait_idle(system)
    assert seen == {"a": 2}
    assert log == [State("a", 1), State("a", 2)]  # 1 is not replayed
    await system.shutdown(timeout=1.0)


async def test_a_message_that_crashes_its_replay_is_dropped_as_poison_and_resynced() -> None:
    resynced: list[Hashable] = []
    system, seen, log = start([1, 1], resync=resynced)
    with capture_trace(system) as trace:
        system.tell("keeper", State("a", 1))
        await wait_until(lambda: system.actor_statistics("keeper").restarts == 2)
        await wait_idle(system)
    assert log == [State("a", 1), State("a", 1)]
    assert resynced == ["a"]
    assert [r["reason"] for r in trace.events("dead_letter")] == ["poison"]
    assert system.statistics().dead_letters == 1
    # The actor survived and keeps working.
    system.tell("keeper", State("b", 3))
    await wait_until(lambda: seen == {"b": 3})
    await system.shutdown(timeout=1.0)


async def test_a_newer_state_arriving_during_the_replay_is_not_poison() -> None:
    resynced: list[Hashable] = []
    system, seen, _log = start([1, 2], resync=resynced)
    system.tell("keeper", State("a", 1))
    await wait_until(lambda: system.actor_statistics("keeper").restarts == 1)
    await wait_idle(system)  # the replay of 1 succeeded (1 crashes once)
    system.tell("keeper", State("a", 2))  # crashes once, replayed, handled
    await wait_until(lambda: system.actor_statistics("keeper").restarts == 2)
    await wait_idle(system)
    assert seen == {"a": 2}
    assert resynced == []
    await system.shutdown(timeout=1.0)


async def test_the_resync_of_a_key_that_keeps_crashing_is_asked_once() -> None:
    resynced: list[Hashable] = []
    system = ActorSystem(sleep=ManualSleep())
    seen: dict[str, int] = {}
    crash_on = [7, 7, 7, 7]

    def resync(key: Hashable) -> None:
        resynced.append(key)
        system.tell("keeper", State(str(key), 7))  # the owner's latest: the same bad state

    system.spawn(
        "keeper",
        lambda: Keeper(seen, crash_on, []),
        mailbox=MailboxConfig(durable=True, resync=resync),
    )
    system.tell("keeper", State("a", 7))
    await wait_until(lambda: system.actor_statistics("keeper").restarts == 4)
    await wait_idle(system)
    assert resynced == ["a"]
    assert system.statistics().dead_letters == 2
    # Once a message of the key is handled, a later poison is resynced again.
    system.tell("keeper", State("a", 8))
    await wait_until(lambda: seen == {"a": 8})
    await system.shutdown(timeout=1.0)
