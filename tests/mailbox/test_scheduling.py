"""Shared workers: waiting handlers never hold up other actors, and nobody starves."""

from __future__ import annotations

import asyncio

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import ManualSleep, wait_idle, wait_until


async def test_many_waiting_handlers_do_not_hold_up_the_rest(system: ActorSystem) -> None:
    release = asyncio.Event()
    finished: list[str] = []

    class Waits(Actor):
        async def receive(self, message: object) -> None:
            await release.wait()
            finished.append(self.address)

    class Quick(Actor):
        async def receive(self, message: object) -> None:
            finished.append(self.address)

    for n in range(50):
        system.spawn(f"wait/{n}", Waits)
        system.tell(f"wait/{n}", "go")
    system.spawn("quick", Quick)
    system.tell("quick", "go")
    await wait_until(lambda: finished == ["quick"])
    release.set()
    await wait_until(lambda: len(finished) == 51)


async def test_a_flooded_actor_does_not_starve_another(system: ActorSystem) -> None:
    seen = {"flood": 0, "other": 0}
    progress_when_other_ran: list[int] = []

    class Counts(Actor):
        async def receive(self, message: object) -> None:
            seen[self.address] += 1
            if self.address == "other":
                progress_when_other_ran.append(seen["flood"])

    system.spawn("flood", Counts)
    system.spawn("other", Counts)
    for n in range(900):
        system.tell("flood", n)
    system.tell("other", "hello")
    await wait_idle(system)
    assert seen == {"flood": 900, "other": 1}
    assert progress_when_other_ran[0] < 900


async def test_asyncio_timeout_works_inside_a_handler(system: ActorSystem) -> None:
    outcomes: list[str] = []

    class Patient(Actor):
        async def receive(self, message: object) -> None:
            try:
                async with asyncio.timeout(0.01):
                    await asyncio.Event().wait()
            except TimeoutError:
                outcomes.append("timed out")

    system.spawn("patient", Patient)
    system.tell("patient", "go")
    await wait_until(lambda: outcomes == ["timed out"])


async def test_a_handler_raising_cancelled_error_is_a_failure_not_a_lost_worker() -> None:
    log: list[object] = []

    class Odd(Actor):
        async def receive(self, message: object) -> None:
            if message == "cancel":
                raise asyncio.CancelledError
            log.append(message)

    system = ActorSystem(sleep=ManualSleep())
    system.spawn("odd", Odd)
    system.tell("odd", "cancel")
    system.tell("odd", "after")
    await wait_until(lambda: log == ["after"])
    assert system.actor_statistics("odd").failed == 1
    await system.shutdown()


async def test_no_task_remains_once_the_work_is_done() -> None:
    system = ActorSystem()

    class Chatty(Actor):
        async def receive(self, message: object) -> None:
            if isinstance(message, int) and message > 0:
                self.tell(f"chat/{message % 7}", message - 1)
                await asyncio.sleep(0)

    for n in range(7):
        system.spawn(f"chat/{n}", Chatty)
    for n in range(7):
        system.tell(f"chat/{n}", 40)
    await wait_idle(system)
    assert asyncio.all_tasks() == {asyncio.current_task()}
    await system.shutdown()


async def test_an_actor_sees_how_many_messages_wait_behind_the_one_it_handles(
    system: ActorSystem,
) -> None:
    waiting: list[tuple[object, int]] = []

    class Looks(Actor):
        async def receive(self, message: object) -> None:
            waiting.append((message, self.mail_waiting()))
            if message == "b":
                self.tell(self.address, "d")

    system.spawn("looks", Looks)
    for message in ("a", "b", "c"):
        system.tell("looks", message)
    await wait_idle(system)
    assert waiting == [("a", 2), ("b", 1), ("c", 1), ("d", 0)]
    assert system.mail_waiting("looks") == 0
    assert system.mail_waiting("nobody") == 0
