"""Handling time per actor kind: always measured, summed and bucketed per kind.

Operators read it as ``interlock_message_handling_seconds`` to find which kind of actor is slow
when mailboxes grow, so it must count every handler run (tracing on or off, failed runs too) in
the right bucket, and the time of one kind must not leak into another.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from interlock.mailbox import Actor, ActorSystem, Tracer
from interlock.mailbox.statistics import HANDLING_BUCKETS
from interlock.mailbox.testing import ManualClock, ManualSleep, TakesTime, handled_for, wait_idle


def _bucket(seconds: float) -> int:
    """The bucket slot an observation of ``seconds`` belongs in (Prometheus ``le``)."""
    return next(
        (i for i, bound in enumerate(HANDLING_BUCKETS) if seconds <= bound), len(HANDLING_BUCKETS)
    )


def _expected_buckets(*durations: float) -> tuple[int, ...]:
    counts = [0] * (len(HANDLING_BUCKETS) + 1)
    for duration in durations:
        counts[_bucket(duration)] += 1
    return tuple(counts)


async def test_handling_seconds_and_buckets_per_kind_with_tracing_off() -> None:
    timer = ManualClock(0.0)
    system = ActorSystem(timer=timer)
    try:
        await handled_for(system, timer, {"slow/a": (0.000002, 0.5, 20.0), "quick/a": (0.003,)})
        kinds = system.statistics().kinds
    finally:
        await system.shutdown(timeout=1.0)

    assert kinds["slow"].handling_seconds == pytest.approx(20.500002)
    assert kinds["slow"].handling_buckets == _expected_buckets(0.000002, 0.5, 20.0)
    assert kinds["quick"].handling_seconds == pytest.approx(0.003)
    assert kinds["quick"].handling_buckets == _expected_buckets(0.003)


async def test_a_handler_that_raises_is_counted_too() -> None:
    timer = ManualClock(0.0)
    system = ActorSystem(timer=timer, sleep=ManualSleep())
    try:
        system.spawn("failing/a", lambda: TakesTime(timer))
        system.tell("failing/a", 0.25)
        system.tell("failing/a", -2.0)
        await wait_idle(system)
        stats = system.statistics().kinds["failing"]
    finally:
        await system.shutdown(timeout=1.0)

    assert stats.failed == 1
    assert stats.handling_seconds == pytest.approx(2.25)
    assert stats.handling_buckets == _expected_buckets(0.25, 2.0)


async def test_traced_durations_are_the_measured_ones_and_trace_writing_is_not_counted() -> None:
    timer = ManualClock(0.0)
    records: list[dict[str, object]] = []

    def write(line: str) -> None:
        timer.now += 7.0  # writing a record "takes" 7 s: none of it is a handler's time
        records.append(json.loads(line))

    system = ActorSystem(timer=timer, tracer=Tracer(write=write))
    try:
        system.spawn("traced/a", lambda: TakesTime(timer))
        system.tell("traced/a", 0.5)
        system.tell("traced/a", 0.002)
        await wait_idle(system)
        stats = system.statistics().kinds["traced"]
    finally:
        await system.shutdown(timeout=1.0)

    durations = [record["duration_ms"] for record in records if record["event"] == "handled"]
    assert durations == [500.0, 2.0]
    assert stats.handling_seconds == pytest.approx(0.502)
    assert stats.handling_buckets == _expected_buckets(0.5, 0.002)


async def test_a_handler_awaiting_counts_at_least_its_wait_on_the_real_clock() -> None:
    class Sleeping(Actor):
        async def receive(self, message: object) -> None:
            await asyncio.sleep(0.02)

    system = ActorSystem()
    try:
        system.spawn("sleepy/a", Sleeping)
        system.tell("sleepy/a", "go")
        await wait_idle(system)
        stats = system.statistics().kinds["sleepy"]
    finally:
        await system.shutdown(timeout=1.0)

    assert stats.processed == 1
    assert stats.handling_seconds >= 0.015
    assert sum(stats.handling_buckets) == 1
    assert sum(stats.handling_buckets[: _bucket(0.015)]) == 0
