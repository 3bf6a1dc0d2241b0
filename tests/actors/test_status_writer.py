"""StatusWriter: only the leader writes, only changes, transient failures are retried, and a
crash of the writer loses no pending status."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from interlock.actors.messages import (
    DesiredRouteStatus,
    LeadershipChanged,
    route_identity,
)
from interlock.actors.status_writer import StatusWriter, TransientStatusError
from interlock.actors.topics import (
    ROUTE_STATUS_TOPIC,
)
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.mailbox.testing import ManualSleep, wait_until
from tests.kit.status_kit import CrashingStatusWriter, ForgetRecorder


def parents(reason: str, *, at: str = "2026-01-01T00:00:00Z") -> list[dict[str, Any]]:
    return [
        {
            "parentRef": {"group": "", "kind": "Service", "name": "web"},
            "controllerName": "interlock.dev/policy-controller",
            "conditions": [
                {"type": "ResolvedRefs", "reason": reason, "lastTransitionTime": at},
            ],
        }
    ]


class RecordingSink(ForgetRecorder):
    """A StatusSink that records writes and fails the next ``failures`` of them transiently."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str, str]] = []
        self.failures = 0

    async def write_status(
        self, *, kind: str, namespace: str, name: str, status: dict[str, Any], uid: str = ""
    ) -> bool:
        parents = status["parents"]
        if self.failures:
            self.failures -= 1
            raise TransientStatusError("503 from the API server")
        self.writes.append((namespace, name, parents[0]["conditions"][0]["reason"]))
        return True


class Harness:
    def __init__(self, *, concurrency: int = 8) -> None:
        # Restart backoff is waited out through ManualSleep: restarts take no time. Retry
        # timers wait for the test: ``fire_retry`` releases the next one.
        self.timer_sleep = ManualSleep(gated=True)
        self.system = ActorSystem(sleep=ManualSleep(), timer_sleep=self.timer_sleep)
        self.sink = RecordingSink()
        self.leading = False
        self.fired = 0
        self.writer: StatusWriter | None = None
        CrashingStatusWriter.armed = False

        def factory() -> StatusWriter:
            self.writer = CrashingStatusWriter(
                sink=self.sink,
                is_leader=lambda: self.leading,
                backoff=BackoffPolicy(initial=0.5, maximum=8.0),
                concurrency=concurrency,
                rng=random.Random(1),
            )
            return self.writer

        self.system.spawn("status-writer", factory)

    async def settle(self) -> None:
        """The actor idle and no write task left running."""
        await wait_until(
            lambda: (
                self.system.statistics().busy == 0
                and self.writer is not None
                and not self.writer.reconciling()
            )
        )

    async def fire_retry(self, name: str = "a") -> float:
        """Wait for the writer's next retry timer (of route ``name``), fire it and return its
        delay."""
        await wait_until(lambda: len(self.timer_sleep.delays) > self.fired)
        delay = self.timer_sleep.delays[self.fired]
        self.fired += 1
        timer = self.system.timer("status-writer", ("reconcile", ("HTTPRoute", "default", name)))
        assert timer is not None
        self.timer_sleep.release()
        await wait_until(lambda: not timer.pending)  # its message is in the mailbox now
        return delay

    def send(self, name: str, reason: str, *, stored: str | None = None) -> None:
        """Publish the route's desired status, as its RouteActor does."""
        self.system.publish(
            ROUTE_STATUS_TOPIC,
            route_identity("default", name),
            DesiredRouteStatus(
                "default", name, parents(reason), parents(stored, at="x") if stored else []
            ),
        )

    def delete(self, name: str) -> None:
        self.system.unpublish(ROUTE_STATUS_TOPIC, route_identity("default", name))

    def crash(self) -> None:
        """The writer raises while handling the next published status."""
        CrashingStatusWriter.armed = True

    def restarts(self) -> int:
        return self.system.actor_statistics("status-writer").restarts

    def lead(self, leading: bool) -> None:
        self.leading = leading
        self.system.tell("status-writer", LeadershipChanged(leading))


@pytest.fixture
async def harness():
    running = Harness()
    yield running
    await running.system.shutdown()


async def test_a_follower_writes_nothing_and_the_new_leader_writes_what_is_pending(harness):
    harness.send("a", "BackendNotFound")
    harness.send("b", "ResolvedRefs", stored="ResolvedRefs")
    await harness.settle()
    assert harness.sink.writes == []
    harness.lead(True)
    await harness.settle()
    # b's stored status already says the same (timestamps aside): no write.
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]


async def test_to_write_counts_what_a_new_leader_would_write(harness):
    harness.send("a", "BackendNotFound")
    harness.send("b", "ResolvedRefs", stored="ResolvedRefs")
    await harness.settle()
    assert harness.writer is not None
    assert harness.writer.statistics().to_write == 1  # a; b is stored as desired
    # The leader wrote a: the follower's RouteActor tells the stored status it now sees.
    harness.send("a", "BackendNotFound", stored="BackendNotFound")
    await harness.settle()
    assert harness.writer.statistics().to_write == 0
    harness.lead(True)
    await harness.settle()
    assert harness.sink.writes == []
    harness.send("b", "BackendNotFound", stored="ResolvedRefs")
    await harness.settle()
    assert harness.sink.writes == [("default", "b", "BackendNotFound")]
    assert harness.writer.statistics().to_write == 0  # written, so no longer differing
    harness.delete("b")
    await harness.settle()
    assert harness.writer.statistics().objects == 1


async def test_a_status_held_back_while_leadership_lapsed_is_written_when_it_is_back(harness):
    harness.lead(True)
    # The renew deadline passed (a stalled event loop): is_leader says False, and no message
    # says so. The desired status that arrives now is held back.
    harness.leading = False
    harness.send("a", "BackendNotFound")
    await harness.settle()
    assert harness.sink.writes == []
    # The late renewal: the elector tells "stopped", then "started" (kube/lease.py).
    harness.lead(False)
    harness.lead(True)
    await harness.settle()
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]


async def test_the_leader_writes_each_change_once(harness):
    harness.lead(True)
    harness.send("a", "BackendNotFound")
    await harness.settle()
    harness.send("a", "BackendNotFound")
    await harness.settle()
    harness.send("a", "ResolvedRefs", stored="BackendNotFound")
    await harness.settle()
    assert harness.sink.writes == [
        ("default", "a", "BackendNotFound"),
        ("default", "a", "ResolvedRefs"),
    ]


async def test_reverting_to_the_stored_status_after_a_write_writes_again(harness):
    harness.lead(True)
    harness.send("a", "ResolvedRefs", stored="BackendNotFound")
    await harness.settle()
    # The route actor has not seen our write yet: its stored snapshot is the old one.
    harness.send("a", "BackendNotFound", stored="BackendNotFound")
    await harness.settle()
    assert [w[2] for w in harness.sink.writes] == ["ResolvedRefs", "BackendNotFound"]


async def test_transient_failures_are_retried_with_backoff(harness):
    harness.lead(True)
    harness.sink.failures = 2
    harness.send("a", "BackendNotFound")
    await harness.settle()
    assert harness.sink.writes == []
    for _ in range(2):
        await harness.fire_retry()
        await harness.settle()
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]


async def test_retry_delays_grow(harness):
    harness.lead(True)
    harness.sink.failures = 3
    harness.send("a", "BackendNotFound")
    delays = []
    for _ in range(3):
        delays.append(await harness.fire_retry())
        await harness.settle()
    assert delays[0] < delays[1] < delays[2]
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]


async def test_a_deleted_route_is_forgotten(harness):
    harness.send("a", "BackendNotFound")
    harness.delete("a")
    harness.lead(True)
    await harness.settle()
    assert harness.sink.writes == []


async def test_a_route_deleted_after_its_write_is_forgotten_by_the_sink(harness):
    """Found by the soak: the status patcher's cache kept every object ever written, so a
    controller whose routes come and go under fresh names grew without bound."""
    harness.lead(True)
    harness.send("a", "BackendNotFound")
    await harness.settle()
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]
    harness.delete("a")
    await harness.settle()
    assert harness.sink.forgotten == [("HTTPRoute", "default", "a")]


async def test_losing_the_lease_mid_flush_starts_no_more_writes():
    harness = Harness(concurrency=1)
    harness.send("a", "BackendNotFound")
    harness.send("b", "BackendNotFound")
    await harness.settle()
    original = harness.sink.write_status

    async def write_then_lose_the_lease(**kwargs: Any) -> bool:
        result = await original(**kwargs)
        harness.leading = False
        return result

    harness.sink.write_status = write_then_lose_the_lease
    harness.lead(True)
    await harness.settle()
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]
    # The next leadership writes what is left (and re-checks a: another leader may have
    # written it in between, and this replica has not seen the route change since).
    harness.sink.write_status = original
    harness.lead(True)
    await harness.settle()
    assert "b" in [w[1] for w in harness.sink.writes[1:]]
    await harness.system.shutdown()


class GatedSink(ForgetRecorder):
    """A StatusSink whose writes wait for the test to open the gate; tracks concurrency."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.running = 0
        self.most = 0
        self.writes: list[tuple[str, str]] = []

    async def write_status(
        self, *, kind: str, namespace: str, name: str, status: dict[str, Any], uid: str = ""
    ) -> bool:
        parents = status["parents"]
        self.running += 1
        self.most = max(self.most, self.running)
        await self.gate.wait()
        self.running -= 1
        self.writes.append((name, parents[0]["conditions"][0]["reason"]))
        return True


async def test_writes_run_concurrently_bounded_one_per_route_newest_last():
    harness = Harness(concurrency=3)
    sink = GatedSink()
    assert harness.writer is not None
    harness.writer.sink = sink
    harness.lead(True)
    for i in range(10):
        harness.send(f"r{i}", "BackendNotFound")
    await wait_until(lambda: sink.running == 3)
    # The actor is not blocked by the writes in flight: it takes a newer status for r0.
    harness.send("r0", "ResolvedRefs")
    await wait_until(lambda: harness.system.statistics().busy == 0)
    sink.gate.set()
    await harness.settle()
    assert sink.most == 3
    assert sorted(name for name, _ in sink.writes) == sorted([f"r{i}" for i in range(10)] + ["r0"])
    assert [reason for name, reason in sink.writes if name == "r0"] == [
        "BackendNotFound",
        "ResolvedRefs",
    ]
    await harness.system.shutdown()


async def test_an_unexpected_error_in_a_write_is_retried_not_stuck(harness):
    calls = 0
    original = harness.sink.write_status

    async def buggy_once(**kwargs: Any) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyError("status")
        return await original(**kwargs)

    harness.sink.write_status = buggy_once
    harness.lead(True)
    harness.send("a", "BackendNotFound")
    await harness.fire_retry()
    await harness.settle()
    assert harness.sink.writes == [("default", "a", "BackendNotFound")]


async def test_a_crash_while_following_loses_no_pending_status(harness):
    harness.send("a", "BackendNotFound")
    await harness.settle()
    harness.crash()
    harness.send("b", "BackendNotFound")
    await wait_until(lambda: harness.restarts() == 1)
    await harness.settle()
    harness.lead(True)
    await harness.settle()
    assert sorted(harness.sink.writes) == [
        ("default", "a", "BackendNotFound"),
        ("default", "b", "BackendNotFound"),
    ]


async def test_a_crash_while_leading_still_writes_the_status_it_was_handling(harness):
    harness.lead(True)
    harness.send("a", "BackendNotFound")
    await harness.settle()
    harness.crash()
    harness.send("a", "ResolvedRefs", stored="BackendNotFound")
    await wait_until(lambda: harness.restarts() == 1)
    await harness.settle()
    assert harness.sink.writes == [
        ("default", "a", "BackendNotFound"),
        ("default", "a", "ResolvedRefs"),
    ]


async def test_a_route_deleted_before_a_crash_stays_forgotten(harness):
    harness.send("a", "BackendNotFound")
    harness.send("b", "BackendNotFound")
    harness.delete("a")
    await harness.settle()
    harness.crash()
    harness.send("c", "BackendNotFound")
    await wait_until(lambda: harness.restarts() == 1)
    harness.lead(True)
    await harness.settle()
    assert sorted(name for _, name, _ in harness.sink.writes) == ["b", "c"]


async def test_a_stored_status_someone_else_wrote_after_this_replicas_write_is_repaired(harness):
    """A write landing after this replica's (an old leader's, after a Lease handover, or a
    predecessor's held by a slow request) is seen as a stored status that changed to one this
    replica did not write: that is trusted over its own last write, which is made again."""
    harness.lead(True)
    harness.send("a", "ResolvedRefs", stored="BackendNotFound")
    await harness.settle()
    harness.send("a", "ResolvedRefs", stored="ResolvedRefs")  # the route actor sees the write
    await harness.settle()
    assert [w[2] for w in harness.sink.writes] == ["ResolvedRefs"]
    harness.send("a", "ResolvedRefs", stored="BackendNotFound")  # then the late one landed
    await harness.settle()
    assert [w[2] for w in harness.sink.writes] == ["ResolvedRefs", "ResolvedRefs"]
    assert ("HTTPRoute", "default", "a") in harness.sink.forgotten  # the patcher's cache too


async def test_a_write_in_flight_when_the_writer_crashes_is_checked_again_by_its_successor(
    harness,
):
    """Found by the harness on the real server: the crashed writer's write was applied after
    its successor's, which never repaired it. The write runs to its end and tells the
    successor, which writes again."""
    gated = GatedSink()
    assert harness.writer is not None
    harness.writer.sink = gated  # the successor gets the harness's recording sink
    harness.lead(True)
    harness.send("a", "BackendNotFound")
    await wait_until(lambda: gated.running == 1)
    harness.crash()
    harness.send("a", "ResolvedRefs")
    await wait_until(lambda: harness.restarts() == 1)
    await harness.settle()
    assert [w[2] for w in harness.sink.writes] == ["ResolvedRefs"]
    gated.gate.set()  # the predecessor's BackendNotFound lands now, after ResolvedRefs
    await wait_until(lambda: gated.writes == [("a", "BackendNotFound")])
    await wait_until(lambda: len(harness.sink.writes) == 2)
    await harness.settle()
    assert [w[2] for w in harness.sink.writes] == ["ResolvedRefs", "ResolvedRefs"]
