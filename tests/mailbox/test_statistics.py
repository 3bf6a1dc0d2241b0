"""statistics(): per actor, per kind and system totals."""

from __future__ import annotations

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import ManualClock, ManualSleep, RecordingActor, wait_idle


class FailsOnNegative(Actor):
    async def receive(self, message: object) -> None:
        if isinstance(message, int) and message < 0:
            raise ValueError("negative")


async def test_counters_per_actor_kind_and_system() -> None:
    clock = ManualClock()
    system = ActorSystem(clock=clock, sleep=ManualSleep())
    system.spawn("route/default/web", RecordingActor)
    system.spawn("route/default/api", FailsOnNegative)
    system.spawn("service/default/web", RecordingActor)
    for n in range(3):
        system.tell("route/default/web", n)
    clock.now = 2000.0
    system.tell("route/default/api", -1)
    system.tell("route/default/api", 1)
    system.tell("service/default/web", "x")
    system.tell("nobody/here", "x")
    await wait_idle(system)

    web = system.actor_statistics("route/default/web")
    assert (web.kind, web.actor_type, web.processed, web.last_message_at) == (
        "route",
        "RecordingActor",
        3,
        1000.0,
    )
    api = system.actor_statistics("route/default/api")
    assert (api.processed, api.failed, api.restarts, api.last_message_at) == (1, 1, 1, 2000.0)

    stats = system.statistics()
    assert (stats.actors, stats.busy, stats.depth) == (3, 0, 0)
    assert (stats.processed, stats.failed, stats.restarts, stats.dead_letters) == (5, 1, 1, 1)
    route = stats.kinds["route"]
    assert (route.actors, route.processed, route.failed, route.restarts) == (2, 4, 1, 1)
    assert stats.kinds["service"].processed == 1
    assert stats.kinds["nobody"].dead_letters == 1
    await system.shutdown()
