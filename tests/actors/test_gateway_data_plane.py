"""GatewayDataPlane on the runtime's reconciler: a Gateway whose port could not be opened is
applied again after the backoff (the port may be freed) and its failures told to the
GatewayController; a Gateway gone is removed and its failures withdrawn. Timers wait for the
test (a gated sleep)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from interlock.actors.gateway_messages import GATEWAY_CONTROLLER, PortFailures
from interlock.actors.gateways import GatewayDataPlane
from interlock.actors.topics import GATEWAY_SERVING_TOPIC
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.mailbox.testing import (
    ManualClock,
    ManualSleep,
    RecordingActor,
    wait_idle,
    wait_until,
)
from interlock.model.gateway_routes import GatewayServing
from interlock.model.meta import ObjectKey

KEY = "infra/gw"
SERVING = GatewayServing(gateway=ObjectKey(namespace="infra", name="gw"), address="", ports=())


@dataclass(frozen=True)
class Applied:
    failures: Mapping[int, str] = field(default_factory=dict)
    transient: bool = False


@dataclass
class FrontDoors:
    """Fails the port in ``busy`` while it is there; records what it was told."""

    busy: dict[int, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    async def apply(self, key: str, serving: GatewayServing) -> Applied:
        self.calls.append(f"apply {key}")
        return Applied(failures=dict(self.busy))

    async def remove(self, key: str) -> None:
        self.calls.append(f"remove {key}")


async def test_a_port_in_use_is_tried_again_after_the_backoff_then_the_gateway_removed() -> None:
    doors = FrontDoors(busy={8080: "Address already in use"})
    told: list[object] = []
    sleep = ManualSleep(gated=True)
    system = ActorSystem(sleep=ManualSleep(), timer_sleep=sleep, clock=ManualClock())
    system.spawn(GATEWAY_CONTROLLER, lambda: RecordingActor(told))
    system.spawn(
        "gateway-data-plane",
        lambda: GatewayDataPlane(
            front_doors=doors,
            backoff=BackoffPolicy(initial=1.0, maximum=8.0),
            rng=random.Random(4),
        ),
    )
    system.publish(GATEWAY_SERVING_TOPIC, KEY, SERVING)
    await wait_until(lambda: len(sleep.delays) == 1)
    await wait_idle(system)
    assert doors.calls == [f"apply {KEY}"]
    assert told == [PortFailures(KEY, ((8080, "Address already in use"),))]
    assert 1.0 <= sleep.delays[0] <= 1.5

    doors.busy.clear()  # the other process let the port go
    sleep.release()
    await wait_until(lambda: doors.calls == [f"apply {KEY}"] * 2)
    await wait_until(lambda: told[-1] == PortFailures(KEY, ()))
    assert len(sleep.delays) == 1  # served: no more retries

    system.unpublish(GATEWAY_SERVING_TOPIC, KEY)
    await wait_until(lambda: doors.calls[-1] == f"remove {KEY}")
    await system.shutdown(timeout=1.0)
