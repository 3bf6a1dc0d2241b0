"""Bounded mailboxes: coalescing keeps the newest, BLOCK waits, REJECT dead-letters."""

from __future__ import annotations

import asyncio

import pytest

from interlock.mailbox import Actor, ActorSystem, MailboxConfig, MailboxFull, Overflow
from interlock.mailbox.testing import Keyed as State
from interlock.mailbox.testing import RecordingActor, wait_idle, wait_until


class Gated(Actor):
    """Blocks on its first message until released, so the test can fill the mailbox."""

    def __init__(self, gate: asyncio.Event, log: list[object]) -> None:
        self.gate = gate
        self.log = log

    async def receive(self, message: object) -> None:
        if message == "hold":
            await self.gate.wait()
        else:
            self.log.append(message)


_UNBOUNDED = MailboxConfig()


async def _held(
    system: ActorSystem, name: str, mailbox: MailboxConfig = _UNBOUNDED
) -> tuple[asyncio.Event, list[object]]:
    """Spawn a :class:`Gated` actor ``name`` and wait until it holds its first message: what
    is told next stays in its mailbox until the returned gate is set."""
    gate, log = asyncio.Event(), []  # type: asyncio.Event, list[object]
    system.spawn(name, lambda: Gated(gate, log), mailbox=mailbox)
    system.tell(name, "hold")
    await wait_until(lambda: system.actor_statistics(name).depth == 0)
    return gate, log


async def test_coalescing_keeps_the_newest_in_place(system: ActorSystem) -> None:
    gate, log = await _held(system, "svc")
    system.tell("svc", State("a", 1))
    system.tell("svc", "between")
    for version in range(2, 101):
        system.tell("svc", State("a", version))
    system.tell("svc", State("b", 1))
    assert system.actor_statistics("svc").depth == 3
    gate.set()
    await wait_until(lambda: len(log) == 3)
    assert log == [State("a", 100), "between", State("b", 1)]


async def test_coalesce_mailbox_admits_keyed_state_beyond_capacity(system: ActorSystem) -> None:
    gate, log = await _held(system, "svc", MailboxConfig(capacity=2, overflow=Overflow.COALESCE))
    system.tell("svc", "one")
    system.tell("svc", "two")
    system.tell("svc", "three")  # un-keyed overflow: dead letter
    system.tell("svc", State("x", 1))  # keyed: never lost
    assert system.statistics().dead_letters == 1
    gate.set()
    await wait_until(lambda: len(log) == 3)
    assert log == ["one", "two", State("x", 1)]


async def test_block_mailbox_refuses_sync_tell_and_tell_wait_waits(system: ActorSystem) -> None:
    gate, log = await _held(system, "sink", MailboxConfig(capacity=2, overflow=Overflow.BLOCK))
    system.tell("sink", 1)
    system.tell("sink", 2)
    with pytest.raises(MailboxFull, match="sink: mailbox full"):
        system.tell("sink", 3)
    waiting = asyncio.ensure_future(system.tell_wait("sink", 3))
    await wait_until(lambda: system.actor_statistics("sink").waiting_senders == 1)
    assert not waiting.done()
    gate.set()
    await waiting
    await wait_until(lambda: len(log) == 3)
    assert log == [1, 2, 3]
    assert system.statistics().dead_letters == 0


async def test_block_mailbox_admits_published_state_beyond_capacity(
    system: ActorSystem,
) -> None:
    gate, log = await _held(system, "sub", MailboxConfig(capacity=1, overflow=Overflow.BLOCK))
    system.subscribe("t", "sub")
    system.publish("t", "k1", 1)
    system.publish("t", "k2", 2)
    gate.set()
    await wait_until(lambda: len(log) == 2)
    assert [(m.key, m.value) for m in log] == [("k1", 1), ("k2", 2)]  # type: ignore[attr-defined]


async def test_reject_mailbox_dead_letters_the_new_message(system: ActorSystem) -> None:
    gate, log = await _held(system, "r", MailboxConfig(capacity=1, overflow=Overflow.REJECT))
    system.tell("r", "kept")
    system.tell("r", "rejected")
    system.tell("r", State("k", 2))
    assert system.statistics().dead_letters == 2
    gate.set()
    await wait_until(lambda: log == ["kept"])
    await wait_idle(system)
    assert log == ["kept"]


async def test_max_depth_is_recorded(system: ActorSystem) -> None:
    system.spawn("r", RecordingActor)
    for n in range(7):
        system.tell("r", n)
    await wait_idle(system)
    stats = system.actor_statistics("r")
    assert (stats.depth, stats.max_depth, stats.processed) == (0, 7, 7)


async def test_tell_wait_to_its_own_full_mailbox_fails_instead_of_deadlocking(
    system: ActorSystem,
) -> None:
    outcome: list[BaseException] = []

    class Self(Actor):
        async def receive(self, message: object) -> None:
            if message == "fill":
                self.tell(self.address, "a")
                try:
                    await self.system.tell_wait(self.address, "b")
                except MailboxFull as error:
                    outcome.append(error)

    system.spawn("self", Self, mailbox=MailboxConfig(capacity=1, overflow=Overflow.BLOCK))
    system.tell("self", "fill")
    await wait_until(lambda: len(outcome) == 1)


async def test_ask_waits_for_room_in_a_block_mailbox(system: ActorSystem) -> None:
    gate, log = asyncio.Event(), []  # type: asyncio.Event, list[object]

    class GatedEcho(Gated):
        async def receive(self, message: object) -> object:
            await super().receive(message)
            return message

    system.spawn(
        "sink",
        lambda: GatedEcho(gate, log),
        mailbox=MailboxConfig(capacity=1, overflow=Overflow.BLOCK),
    )
    system.tell("sink", "hold")
    await wait_until(lambda: system.actor_statistics("sink").depth == 0)
    system.tell("sink", "queued")
    answer = asyncio.ensure_future(system.ask("sink", "question"))
    await wait_until(lambda: system.actor_statistics("sink").waiting_senders == 1)
    gate.set()
    assert await answer == "question"
    assert log == ["queued", "question"]
