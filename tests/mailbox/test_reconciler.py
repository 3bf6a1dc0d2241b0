"""Reconciler: transient failures retried with growing backoff, terminal ones reported once and
not retried, a newer request superseding a pending retry, in the handler or as bounded tasks.

Timers go through a gated ``ManualSleep``: a retry fires only when the test releases it, and
its delay is read from what the sleep was asked to wait. No test sleeps or times anything."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from interlock.mailbox import (
    DONE,
    ActorSystem,
    BackoffPolicy,
    ReconcileError,
    Reconciler,
    RequeueAfter,
    TerminalError,
    TransientError,
)
from interlock.mailbox.reconciler import Result
from interlock.mailbox.testing import ManualClock, ManualSleep, wait_idle, wait_until

BACKOFF = BackoffPolicy(initial=1.0, maximum=8.0, jitter=0.5)


@dataclass
class Script:
    """What the test reconciler does: per key, the outcomes of its next reconciles (then
    ``DONE``), and what it saw."""

    outcomes: dict[str, list[Result | ReconcileError]] = field(default_factory=dict)
    reconciled: list[str] = field(default_factory=list)
    failures: list[tuple[str, str, int, float | None]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    running: int = 0
    most: int = 0
    actor: Keeper | None = None
    """The live instance."""


class Keeper(Reconciler[str]):
    """Requests the key of every string it is told; reconciles by the script."""

    def __init__(self, script: Script, *, concurrency: int = 0) -> None:
        super().__init__(backoff=BACKOFF, rng=random.Random(7), concurrency=concurrency)
        self.script = script
        script.actor = self

    async def handle(self, message: object) -> object | None:
        if isinstance(message, str):
            self.request(message)
        return None

    async def reconcile(self, key: str) -> Result:
        script = self.script
        script.reconciled.append(key)
        script.running += 1
        script.most = max(script.most, script.running)
        try:
            if script.gate is not None:
                await script.gate.wait()
            queued = script.outcomes.get(key)
            outcome = queued.pop(0) if queued else DONE
        finally:
            script.running -= 1
        if isinstance(outcome, ReconcileError):
            raise outcome
        return outcome

    def reconcile_failed(
        self, key: str, error: ReconcileError, *, attempt: int, retry_in: float | None
    ) -> None:
        self.script.failures.append((key, error.message, attempt, retry_in))


def make(script: Script, *, concurrency: int = 0) -> tuple[ActorSystem, ManualSleep, ManualClock]:
    sleep, clock = ManualSleep(gated=True), ManualClock()
    system = ActorSystem(sleep=ManualSleep(), timer_sleep=sleep, clock=clock)
    system.spawn("keeper", lambda: Keeper(script, concurrency=concurrency))
    return system, sleep, clock


def keeper(script: Script) -> Keeper:
    assert script.actor is not None
    return script.actor


async def fire(system: ActorSystem, sleep: ManualSleep, key: str) -> None:
    """Release the pending timer of ``key`` and wait until its retry was handled."""
    timer = system.timer("keeper", ("reconcile", key))
    assert timer is not None and timer.pending
    sleep.release()
    await wait_until(lambda: not timer.pending)
    await wait_idle(system)


async def test_transient_failures_are_retried_with_growing_backoff() -> None:
    script = Script(outcomes={"a": [TransientError("503")] * 3})
    system, sleep, _clock = make(script)
    system.tell("keeper", "a")
    await wait_idle(system)
    for expected in (2, 3, 4):
        await fire(system, sleep, "a")
        assert script.reconciled == ["a"] * expected
    delays = [retry_in for _key, _message, _attempt, retry_in in script.failures]
    assert [attempt for _key, _message, attempt, _retry in script.failures] == [1, 2, 3]
    assert delays == sleep.delays
    assert 1.0 <= delays[0] <= 1.5 and 2.0 <= delays[1] <= 3.0 and 4.0 <= delays[2] <= 6.0
    # The fourth reconcile succeeded: nothing is kept of the key, no timer is left.
    assert keeper(script).retry_state("a") is None
    assert system.timer("keeper", ("reconcile", "a")) is None
    await system.shutdown(timeout=1.0)


async def test_a_transient_failure_may_say_when_to_retry() -> None:
    script = Script(outcomes={"a": [TransientError("429", retry_after=7.0)]})
    system, sleep, clock = make(script)
    system.tell("keeper", "a")
    await wait_idle(system)
    state = keeper(script).retry_state("a")
    assert state is not None and state.attempts == 1 and state.error == "429"
    assert state.due == clock.now + 7.0
    assert sleep.delays == [7.0]
    await fire(system, sleep, "a")
    assert script.reconciled == ["a", "a"]
    await system.shutdown(timeout=1.0)


async def test_a_terminal_failure_is_reported_once_and_not_retried() -> None:
    script = Script(outcomes={"a": [TerminalError("invalid"), TerminalError("invalid")]})
    system, sleep, _clock = make(script)
    system.tell("keeper", "a")
    await wait_idle(system)
    assert script.failures == [("a", "invalid", 0, None)]
    assert sleep.delays == []
    state = keeper(script).retry_state("a")
    assert state is not None and state.terminal
    # Another key's work does not retry it either.
    system.tell("keeper", "b")
    await wait_idle(system)
    assert script.reconciled == ["a", "b"]
    # A new request (its inputs changed) does, once.
    system.tell("keeper", "a")
    await wait_idle(system)
    assert script.reconciled == ["a", "b", "a"]
    assert len(script.failures) == 2 and sleep.delays == []
    await system.shutdown(timeout=1.0)


async def test_a_newer_request_supersedes_a_pending_retry() -> None:
    script = Script(outcomes={"a": [TransientError("503"), TransientError("503")]})
    system, sleep, _clock = make(script)
    system.tell("keeper", "a")
    await wait_idle(system)
    first = system.timer("keeper", ("reconcile", "a"))
    assert first is not None and first.pending
    system.tell("keeper", "a")  # the key's inputs changed: at once, not after the backoff
    await wait_idle(system)
    assert script.reconciled == ["a", "a"] and not first.pending
    # Its attempts still count: the next retry waits longer.
    assert [attempt for _key, _message, attempt, _retry in script.failures] == [1, 2]
    assert sleep.delays[1] >= 2.0
    await fire(system, sleep, "a")
    assert script.reconciled == ["a", "a", "a"]
    assert keeper(script).retry_state("a") is None
    await system.shutdown(timeout=1.0)


async def test_a_superseded_timer_that_fires_anyway_retries_nothing() -> None:
    script = Script(outcomes={"a": [TransientError("503")]})
    system, sleep, _clock = make(script)
    system.tell("keeper", "a")
    await wait_idle(system)
    system.tell("keeper", "a")
    await wait_idle(system)
    sleep.release()  # the cancelled timer's sleep returns: no message, no reconcile
    await wait_idle(system)
    assert script.reconciled == ["a", "a"]
    await system.shutdown(timeout=1.0)


async def test_requeue_after_looks_at_the_key_again() -> None:
    script = Script(outcomes={"a": [RequeueAfter(30.0)]})
    system, sleep, _clock = make(script)
    system.tell("keeper", "a")
    await wait_idle(system)
    assert sleep.delays == [30.0] and script.failures == []
    await fire(system, sleep, "a")
    assert script.reconciled == ["a", "a"]
    assert keeper(script).retry_state("a") is None
    await system.shutdown(timeout=1.0)


async def test_keys_are_reconciled_in_request_order_one_per_message() -> None:
    script = Script()
    system, _sleep, _clock = make(script)
    for key in ("b", "a", "c", "a"):
        system.tell("keeper", key)
    await wait_idle(system)
    assert script.reconciled == ["b", "a", "c"]
    await system.shutdown(timeout=1.0)


async def test_tasks_run_concurrently_bounded_one_per_key_and_a_request_meanwhile_runs_after() -> (
    None
):
    script = Script(gate=asyncio.Event())
    system, _sleep, _clock = make(script, concurrency=2)
    for key in ("a", "b", "c"):
        system.tell("keeper", key)
    await wait_until(lambda: script.running == 2)
    system.tell("keeper", "a")  # while a's reconcile runs
    await wait_idle(system)  # the actor is free while its reconciles run
    assert sorted(keeper(script).reconciling()) == ["a", "b"]
    script.gate.set()
    await wait_until(lambda: len(script.reconciled) == 4 and script.running == 0)
    await wait_until(lambda: not keeper(script).reconciling())
    assert script.most == 2
    assert sorted(script.reconciled) == ["a", "a", "b", "c"]
    await system.shutdown(timeout=1.0)


async def test_an_unforeseen_error_in_a_task_is_retried_not_stuck() -> None:
    script = Script(outcomes={"a": [KeyError("status")]})  # type: ignore[list-item]

    class Buggy(Keeper):
        async def reconcile(self, key: str) -> Result:
            queued = self.script.outcomes.get(key)
            if queued:
                error = queued.pop(0)
                assert isinstance(error, BaseException)
                raise error
            return await super().reconcile(key)

    sleep = ManualSleep(gated=True)
    system = ActorSystem(sleep=ManualSleep(), timer_sleep=sleep, clock=ManualClock())
    system.spawn("keeper", lambda: Buggy(script, concurrency=1))
    system.tell("keeper", "a")
    await wait_until(lambda: system.timer("keeper", ("reconcile", "a")) is not None)
    await wait_until(lambda: not keeper(script).reconciling())
    assert [f[1] for f in script.failures] == ["KeyError: 'status'"]
    await fire(system, sleep, "a")
    await wait_until(lambda: script.reconciled == ["a"])
    await system.shutdown(timeout=1.0)
