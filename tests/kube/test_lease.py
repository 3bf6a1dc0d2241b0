"""LeaderElector against the embedded API server: one leader, takeover, conflicts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from interlock.kube.lease import LeaderElector
from interlock.kube.resources import LEASE

from .conftest import get, wait_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: Any, identity: str, **options: Any) -> LeaderElector:
    options.setdefault("lease_duration", 3.0)
    options.setdefault("renew_deadline", 2.0)
    options.setdefault("retry_period", 0.05)
    return LeaderElector(api, namespace="default", identity=identity, **options)


async def holder(api: Any) -> str:
    lease = await get(api, LEASE, "default", "interlock")
    return str(lease["spec"].get("holderIdentity") or "")


async def test_one_of_two_electors_leads_and_the_other_takes_over_on_release(api: Any) -> None:
    transitions: list[str] = []
    a = elector(
        api,
        "a",
        on_started_leading=lambda: transitions.append("a+"),
        on_stopped_leading=lambda: transitions.append("a-"),
    )
    b = elector(api, "b", on_started_leading=lambda: transitions.append("b+"))
    tasks = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        await wait_for(lambda: a.is_leader or b.is_leader, what="a leader")
        leader, follower = (a, b) if a.is_leader else (b, a)
        for _ in range(20):  # several renewal periods: the follower never leads meanwhile
            assert leader.is_leader != follower.is_leader
            await asyncio.sleep(0.02)
        assert await holder(api) == leader.identity
        await leader.release()
        assert not leader.is_leader
        await wait_for(lambda: follower.is_leader, what="takeover after release")
        assert await holder(api) == follower.identity
        lease = await get(api, LEASE, "default", "interlock")
        assert lease["spec"]["leaseTransitions"] >= 1
        assert transitions[0] in ("a+", "b+")
        assert transitions[-1] == f"{follower.identity}+"
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_release_returns_run_and_hands_over_without_waiting_for_expiry(api: Any) -> None:
    clock = FakeClock()  # frozen: the Lease never expires on its own in this test
    a = elector(api, "a", clock=clock)
    b = elector(api, "b", clock=clock)
    run_a = asyncio.create_task(a.run())
    await wait_for(lambda: a.is_leader, what="a leads")
    assert not await b.try_acquire_or_renew()
    await a.release()
    await asyncio.wait_for(run_a, 60)
    assert await b.try_acquire_or_renew()
    assert b.is_leader
    assert not a.is_leader


async def test_the_lease_is_taken_over_after_it_expires(api: Any) -> None:
    clock = FakeClock()
    a = elector(api, "a", clock=clock, lease_duration=15.0, renew_deadline=10.0)
    b = elector(api, "b", clock=clock, lease_duration=15.0, renew_deadline=10.0)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 10.0
    assert not a.is_leader  # past its renew deadline it stops claiming leadership
    assert not await b.try_acquire_or_renew()  # not yet expired as b has observed it
    clock.now += 6.0
    assert await b.try_acquire_or_renew()
    assert await holder(api) == "b"
    assert not await a.try_acquire_or_renew()
    assert b.is_leader
    assert not a.is_leader


async def test_a_conflicting_write_does_not_make_two_leaders(api: Any) -> None:
    clock = FakeClock()
    a = elector(api, "a", clock=clock)
    b = elector(api, "b", clock=clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 5.0  # a's lease has expired in b's eyes, and a has not renewed
    read = b._read

    async def read_then_let_a_renew() -> dict[str, Any]:
        lease = await read()
        assert await a.try_acquire_or_renew()  # a renews between b's read and b's write
        return lease

    b._read = read_then_let_a_renew  # type: ignore[method-assign]
    assert not await b.try_acquire_or_renew()
    assert b.statistics().conflicts == 1
    assert a.is_leader
    assert not b.is_leader
    assert await holder(api) == "a"


async def test_a_leader_that_cannot_renew_steps_down_and_comes_back(api: Any, server: Any) -> None:
    started: list[float] = []
    stopped: list[float] = []
    a = elector(
        api,
        "a",
        renew_deadline=0.5,
        on_started_leading=lambda: started.append(1),
        on_stopped_leading=lambda: stopped.append(1),
    )
    task = asyncio.create_task(a.run())
    try:
        await wait_for(lambda: a.is_leader, what="a leads")
        server.faults.fail_next(10_000, status=500, path_contains="/leases")
        await wait_for(lambda: len(stopped) == 1, what="a steps down")
        assert not a.is_leader
        assert a.statistics().failures >= 1
        server.faults.clear()
        await wait_for(lambda: len(started) == 2, what="a leads again")
        assert a.is_leader
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_renewal_after_the_renew_deadline_says_leadership_lapsed_and_is_back(
    api: Any,
) -> None:
    # A stalled event loop (a loaded machine: the stress test's huge ModuleSet) delays the
    # renewal past the renew deadline, so is_leader says False until the next one succeeds. The
    # status writer held its writes back then; unless told that leadership is back, it kept
    # them queued until some other message came (for minutes, docs/reliability.md).
    clock = FakeClock()
    a: LeaderElector
    transitions: list[str] = []
    a = elector(
        api,
        "a",
        clock=clock,
        on_started_leading=lambda: transitions.append(f"started, is_leader {a.is_leader}"),
        on_stopped_leading=lambda: transitions.append("stopped"),
    )
    task = asyncio.create_task(a.run())
    try:
        await wait_for(lambda: a.is_leader, what="a leads")
        assert transitions == ["started, is_leader True"]
        clock.now += 2.0  # the renew deadline passes before the next renewal: the loop stalled
        assert not a.is_leader
        await wait_for(lambda: a.is_leader, what="a renews late")
        # Told at the renewal that made is_leader True again, and then it already was True:
        # a writer that flushes on "started" finds it may write.
        assert transitions == [
            "started, is_leader True",
            "stopped",
            "started, is_leader True",
        ]
        assert await holder(api) == "a"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_one_failed_renewal_does_not_end_leadership(api: Any, server: Any) -> None:
    clock = FakeClock()
    a = elector(api, "a", clock=clock)
    assert await a.try_acquire_or_renew()
    server.faults.fail_next(1, status=500, path_contains="/leases")
    assert not await a.try_acquire_or_renew()
    assert a.is_leader  # still within its renew deadline: status writes go on
    assert a.statistics().failures == 1
    clock.now += 2.0  # the renew deadline has passed without a successful renewal
    assert not a.is_leader


async def test_when_the_leader_dies_without_releasing_the_other_takes_over_on_expiry(
    api: Any,
) -> None:
    # leaseDurationSeconds is whole seconds. 3 s, not the shortest (1 s): a leader stalled by a
    # loaded machine for more than its renew deadline would hand over before the crash.
    a = elector(api, "a", lease_duration=3.0, renew_deadline=2.0)
    b = elector(api, "b", lease_duration=3.0, renew_deadline=2.0)
    run_a = asyncio.create_task(a.run())
    await wait_for(lambda: a.is_leader, what="a leads")
    run_b = asyncio.create_task(b.run())
    try:
        await wait_for(lambda: b.statistics().holder == "a", what="b sees a holding the Lease")
        assert not b.is_leader
        run_a.cancel()  # a crashes: no release, the Lease must expire
        with contextlib.suppress(asyncio.CancelledError):
            await run_a
        await wait_for(lambda: b.is_leader, within=60.0, what="takeover after expiry")
        assert await holder(api) == "b"
    finally:
        run_b.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run_b
