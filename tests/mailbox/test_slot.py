"""The latest-value slot between a watch actor and a (possibly slow) reader."""

from __future__ import annotations

import asyncio

import pytest

from interlock.mailbox.slot import LatestValueSlot, SlotClosed


async def test_reader_gets_only_the_newest_of_a_burst():
    slot: LatestValueSlot[str] = LatestValueSlot()
    for value in ("a", "b", "c"):
        slot.put(value)
    assert await slot.next(after=0) == (3, "c")


async def test_reader_waits_for_a_newer_version():
    slot: LatestValueSlot[str] = LatestValueSlot()
    slot.put("a")
    waiting = asyncio.create_task(slot.next(after=1))
    await asyncio.sleep(0)
    assert not waiting.done()
    slot.put("b")
    assert await asyncio.wait_for(waiting, 60) == (2, "b")


async def test_close_wakes_the_reader_and_ignores_later_puts():
    slot: LatestValueSlot[str] = LatestValueSlot()
    waiting = asyncio.create_task(slot.next(after=0))
    await asyncio.sleep(0)
    slot.close()
    with pytest.raises(SlotClosed):
        await asyncio.wait_for(waiting, 60)
    slot.put("late")
    assert slot.version == 0


async def test_a_cancelled_reader_leaves_the_slot_usable():
    slot: LatestValueSlot[str] = LatestValueSlot()
    waiting = asyncio.create_task(slot.next(after=0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slot.put("a")
    assert await asyncio.wait_for(slot.next(after=0), 60) == (1, "a")


async def test_wait_is_done_at_once_for_a_newer_version_or_a_closed_slot():
    slot: LatestValueSlot[str] = LatestValueSlot()
    slot.put("a")
    assert slot.wait(after=0).done()
    idle = slot.wait(after=1)
    assert not idle.done()
    slot.put("b")
    assert idle.done()
    closed: LatestValueSlot[str] = LatestValueSlot()
    pending = closed.wait(after=0)
    assert not pending.done()
    closed.close()
    assert pending.done()
    assert closed.wait(after=0).done()
