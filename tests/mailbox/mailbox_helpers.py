"""Helpers shared by the runtime tests: a recording actor, a hand-moved clock, a gated sleep."""

from __future__ import annotations

import asyncio

from interlock.mailbox import Actor


class Recorder(Actor):
    """Records every message it receives (in ``log``, shared across restarts if given)."""

    def __init__(self, log: list[object] | None = None) -> None:
        self.log: list[object] = [] if log is None else log

    async def receive(self, message: object) -> object | None:
        self.log.append(message)
        return message


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordedSleep:
    """An injected sleep: records each delay and returns at once, or waits for ``release()``."""

    def __init__(self, *, gated: bool = False) -> None:
        self.delays: list[float] = []
        self.gated = gated
        self._gate = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.gated:
            await self._gate.wait()
            self._gate.clear()

    def release(self) -> None:
        self._gate.set()
