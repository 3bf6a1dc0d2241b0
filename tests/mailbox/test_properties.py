"""Properties that must hold whatever the order of sends: per-sender order, latest state wins."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.mailbox import Actor, ActorSystem, MailboxConfig
from interlock.mailbox.testing import Keyed as State
from interlock.mailbox.testing import wait_idle


@dataclass(frozen=True)
class Numbered:
    sender: str
    n: int


class Log(Actor):
    def __init__(self, log: list[object]) -> None:
        self.log = log

    async def receive(self, message: object) -> None:
        self.log.append(message)
        await asyncio.sleep(0)


class Sender(Actor):
    """Sends ``count`` numbered messages to ``sink``, yielding between some of them."""

    async def receive(self, message: object) -> None:
        assert isinstance(message, tuple)
        count, pauses = message
        for n in range(count):
            self.tell("sink", Numbered(self.address, n))
            if n in pauses:
                await asyncio.sleep(0)


async def _per_sender_order(plan: list[tuple[int, frozenset[int]]]) -> None:
    system = ActorSystem()
    log: list[object] = []
    system.spawn("sink", lambda: Log(log), mailbox=MailboxConfig(capacity=10_000))
    for index, job in enumerate(plan):
        system.spawn(f"sender/{index}", Sender)
        system.tell(f"sender/{index}", job)
    await wait_idle(system)
    for index, (count, _) in enumerate(plan):
        mine = [m.n for m in log if isinstance(m, Numbered) and m.sender == f"sender/{index}"]
        assert mine == list(range(count))
    await system.shutdown()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.frozensets(st.integers(0, 30), max_size=5)),
        min_size=1,
        max_size=5,
    )
)
def test_messages_from_each_sender_arrive_in_the_order_sent(
    plan: list[tuple[int, frozenset[int]]],
) -> None:
    asyncio.run(_per_sender_order(plan))


async def _latest_state_wins(steps: list[tuple[str, int] | int]) -> None:
    system = ActorSystem()
    log: list[object] = []
    system.spawn("sink", lambda: Log(log), mailbox=MailboxConfig(capacity=4))
    sent: dict[str, int] = {}
    for step in steps:
        if isinstance(step, int):
            for _ in range(step):
                await asyncio.sleep(0)
        else:
            key, value = step
            system.tell("sink", State(key, value))
            sent[key] = value
    await wait_idle(system)
    seen: dict[str, int] = {}
    for message in log:
        assert isinstance(message, State)
        seen[message.key] = message.value
    assert seen == sent  # every key's latest value arrives, even past the capacity of 4
    assert system.statistics().dead_letters == 0
    await system.shutdown()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 100)), st.integers(1, 3)),
        max_size=60,
    )
)
def test_the_latest_state_of_every_key_is_never_lost(steps: list[tuple[str, int] | int]) -> None:
    asyncio.run(_latest_state_wins(steps))
