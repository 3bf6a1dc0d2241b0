"""Test helpers for code built on the runtime: capture the trace, control time, wait for idle.

Like structlog's ``capture_logs``: tests assert on what the runtime *recorded* (who sent what,
caused by which message) instead of patching internals. The captured records went through the
same JSON encoding as a trace file, so a test also proves they can be written. ``ManualClock``
and ``ManualSleep`` are real implementations of the system's injected clock and sleep, so
restart backoff is tested without sleeping.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from interlock.mailbox.actor import Actor
from interlock.mailbox.system import ActorSystem
from interlock.mailbox.tracing import Record, Tracer


class CapturedTrace:
    """The records captured so far, in order, parsed from the JSON lines a trace file holds."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.lines: list[str] = []
        """The JSON lines exactly as a trace file would hold them."""
        self.tracer = Tracer(write=self._write)
        """Pass to ``ActorSystem(tracer=...)`` when not capturing from an existing system."""

    def _write(self, line: str) -> None:
        self.lines.append(line)
        self.records.append(json.loads(line))

    def events(self, event: str | None = None, **fields: Any) -> list[Record]:
        """Records of ``event`` (any event if ``None``) whose fields equal ``fields``."""
        return [
            record
            for record in self.records
            if (event is None or record["event"] == event)
            and all(record.get(name) == value for name, value in fields.items())
        ]

    def text(self) -> str:
        """The trace as written, for asserting that something never appears in it."""
        return "".join(self.lines)


@contextmanager
def capture_trace(system: ActorSystem | None = None) -> Iterator[CapturedTrace]:
    """Capture trace records; with ``system``, install the capturing tracer on it for the block
    (restoring its previous tracer after), otherwise pass ``captured.tracer`` to a new system."""
    captured = CapturedTrace()
    if system is None:
        yield captured
        return
    previous = system.tracer
    system.set_tracer(captured.tracer)
    try:
        yield captured
    finally:
        system.set_tracer(previous)


async def eventually(
    condition: Callable[[], Any],
    *,
    within: float = 60.0,
    message: str | Callable[[], str] = "condition",
    interval: float = 0.01,
) -> Any:
    """Poll ``condition`` (sync or async) until it returns something truthy, and return that.

    An ``AssertionError`` raised by the condition counts as "not yet" (so a condition may be a
    block of asserts). After ``within`` seconds, raise ``AssertionError`` naming ``message``
    (a string, or a callable for a message built at that moment) — or re-raise the condition's
    own ``AssertionError``. The one polling helper of the test suite: every module that needs
    to wait for a condition uses this one.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            result = condition()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
        except AssertionError:
            if loop.time() >= deadline:
                raise
        if loop.time() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"{text} not met within {within:g} s")
        await asyncio.sleep(interval)


async def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 - polling needs its deadline for the message
    interval: float = 0.001,
) -> None:
    """:func:`eventually` with the runtime tests' defaults (a short interval)."""
    await eventually(condition, within=timeout, interval=interval)


async def wait_idle(system: ActorSystem, *, timeout: float = 60.0) -> None:  # noqa: ASYNC109
    """``system.wait_idle()`` with a deadline: raise ``AssertionError`` after ``timeout``
    seconds (saying how many are busy) instead of hanging the test."""
    try:
        async with asyncio.timeout(timeout):
            await system.wait_idle()
    except TimeoutError:
        busy = system.statistics().busy
        raise AssertionError(f"{busy} actor(s) still busy after {timeout:g} s") from None


class ManualClock:
    """A clock the test moves by hand (``clock.now += 30``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ManualSleep:
    """An injected sleep that records each delay and returns at once, or, when ``gated``,
    waits until the test calls :meth:`release` (one release per sleep)."""

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


class TakesTime(Actor):
    """Each message is a number of seconds its handling "takes" on the injected ``timer``; a
    negative number takes its absolute value and then raises (a handler that fails)."""

    def __init__(self, timer: ManualClock) -> None:
        self._timer = timer

    async def receive(self, message: object) -> None:
        assert isinstance(message, float)
        self._timer.now += abs(message)
        if message < 0:
            raise RuntimeError(f"a handler that took {-message} s and failed")


async def handled_for(
    system: ActorSystem, timer: ManualClock, durations: dict[str, tuple[float, ...]]
) -> None:
    """Spawn a :class:`TakesTime` actor at each address and have it handle messages that take
    the given seconds; returns once the system is idle."""
    for address, seconds in durations.items():
        system.spawn(address, lambda: TakesTime(timer))
        for each in seconds:
            system.tell(address, each)
    await wait_idle(system)


class RecordingActor(Actor):
    """Appends every message to ``log`` (pass a shared list to keep it across restarts) and
    replies with the message itself."""

    def __init__(self, log: list[object] | None = None) -> None:
        self.log: list[object] = [] if log is None else log

    async def receive(self, message: object) -> object | None:
        self.log.append(message)
        return message


@dataclass(frozen=True)
class Keyed:
    """A test message coalesced by ``key``: a keyed mailbox keeps only the latest per key, a
    durable one re-delivers it after a crash."""

    key: str
    value: int

    @property
    def coalesce_key(self) -> str:
        return self.key
