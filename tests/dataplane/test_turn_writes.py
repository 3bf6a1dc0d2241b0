"""Writes held for the end of the loop's turn (``interlock/dataplane/turn_writes.py``): nothing
reordered, nothing lost, nothing held past the turn, and holding only while turns write to more
than one connection."""

from __future__ import annotations

import asyncio

import pytest

from interlock.dataplane import turn_writes
from interlock.dataplane.turn_writes import HELD_MOST, HeldWrites, turn_of


class Recorder:
    """A transport that records what was written to it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after close"
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing


def connection(loop: asyncio.AbstractEventLoop) -> tuple[HeldWrites, Recorder]:
    writes = HeldWrites(loop)
    writes.transport = transport = Recorder()
    return writes, transport


async def next_turn() -> None:
    await asyncio.sleep(0)


@pytest.fixture
def adaptive(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's own sampling (``INTERLOCK_TEST_HOLD_WRITES=always`` changes it)."""
    monkeypatch.setattr(turn_writes, "SAMPLE_EVERY", 32)
    monkeypatch.setattr(turn_writes, "QUIET_TURNS", 4)


def holding(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's writes held from now on (as after a turn that wrote to several)."""
    turn = turn_of(loop)
    turn.holding, turn.quiet = True, 0


async def test_held_writes_go_together_when_the_turn_ends_each_connection_in_order() -> None:
    loop = asyncio.get_running_loop()
    holding(loop)
    first, one = connection(loop)
    second, two = connection(loop)
    first.write(b"a")
    second.write(b"x")
    first.write(b"b")
    assert one.written == [] and two.written == []
    await next_turn()
    assert one.written == [b"ab"] and two.written == [b"x"]
    await next_turn()
    assert one.written == [b"ab"] and two.written == [b"x"]  # nothing written twice


async def test_flush_writes_what_is_held_now_and_the_turn_does_not_write_it_again() -> None:
    loop = asyncio.get_running_loop()
    holding(loop)
    writes, transport = connection(loop)
    other, _ = connection(loop)
    writes.write(b"answer")
    other.write(b"-")
    writes.flush()  # what a connection does before it closes
    assert transport.written == [b"answer"]
    transport.closing = True
    await next_turn()
    assert transport.written == [b"answer"]


async def test_what_is_held_for_a_transport_that_closed_is_not_written() -> None:
    loop = asyncio.get_running_loop()
    holding(loop)
    writes, transport = connection(loop)
    writes.write(b"late")
    transport.closing = True  # the peer went: connection_lost
    await next_turn()
    assert transport.written == []


async def test_a_large_write_goes_at_once_after_what_was_held() -> None:
    loop = asyncio.get_running_loop()
    holding(loop)
    writes, transport = connection(loop)
    big = b"x" * (HELD_MOST + 1)
    writes.write(b"head")
    writes.write(big)
    assert transport.written == [b"head" + big]
    alone, other = connection(loop)
    alone.write(big)
    assert other.written == [big]


async def test_writes_go_at_once_until_a_sampled_turn_writes_to_several_connections(
    adaptive: None,
) -> None:
    loop = asyncio.get_running_loop()
    turn = turn_of(loop)
    assert not turn.holding
    first, one = connection(loop)
    second, two = connection(loop)
    for _ in range(turn.until_sample - 1):
        first.write(b".")
    assert len(one.written) == turn_writes.SAMPLE_EVERY - 1  # each at once
    first.write(b"sampled")  # the sampled write: this turn is held
    second.write(b"too")
    assert one.written[-1] == b"." and two.written == []
    await next_turn()
    assert one.written[-1] == b"sampled" and two.written == [b"too"]
    assert turn.holding  # the turn wrote to two connections: holding pays


async def test_turns_that_write_to_one_connection_only_stop_the_holding(adaptive: None) -> None:
    loop = asyncio.get_running_loop()
    holding(loop)
    turn = turn_of(loop)
    writes, transport = connection(loop)
    for n in range(turn_writes.QUIET_TURNS):
        assert turn.holding
        writes.write(b"%d" % n)
        assert transport.written == [b"%d" % m for m in range(n)]  # held to the turn's end
        await next_turn()
    assert not turn.holding
    writes.write(b"now")
    assert transport.written[-1] == b"now"  # at once again
    assert turn.until_sample == turn_writes.SAMPLE_EVERY - 1


async def test_each_loop_has_its_own_turn() -> None:
    loop = asyncio.get_running_loop()
    other = asyncio.new_event_loop()
    try:
        assert turn_of(loop) is turn_of(loop)
        assert turn_of(other) is not turn_of(loop)
    finally:
        other.close()


async def test_a_write_to_a_transport_found_open_goes_as_a_write_would(adaptive: None) -> None:
    # write_open: at once without asking the transport again, counted as write() counts; the
    # sampled write, a held turn and bytes already held go through write() itself.
    loop = asyncio.get_running_loop()
    turn = turn_of(loop)
    first, one = connection(loop)
    second, two = connection(loop)
    for _ in range(turn.until_sample - 1):
        first.write_open(b".")
    assert one.written == [b"."] * (turn_writes.SAMPLE_EVERY - 1)  # each at once
    one.closing = True  # not asked: the caller found it open
    first.write_open(b"sampled")  # the sampled write: held, and not written to a closing one
    one.closing = False
    second.write_open(b"too")  # this turn is held: so is this
    first.write_open(b"after")  # behind what is held
    assert one.written == [b"."] * (turn_writes.SAMPLE_EVERY - 1) and two.written == []
    await next_turn()
    assert one.written[-1] == b"sampledafter" and two.written == [b"too"]
