"""GatewayServiceWriter on the runtime's reconciler: the leader applies each Gateway's Service,
retries a transient failure after the backoff, leaves a refused one until what it wants
changes, and deletes the Service when its Gateway goes. Timers wait for the test (a gated
sleep): a retry happens only when released."""

from __future__ import annotations

import random
from typing import Any

from interlock.actors.gateway_messages import DesiredGatewayService
from interlock.actors.gateway_services import (
    GatewayServiceError,
    GatewayServiceWriter,
    TransientGatewayServiceError,
)
from interlock.actors.messages import LeadershipChanged
from interlock.actors.topics import GATEWAY_SERVICES_TOPIC
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.mailbox.testing import ManualClock, ManualSleep, wait_idle, wait_until
from interlock.model.meta import ObjectKey

WRITER = "gateway-services"
KEY = "infra/gw"


class Sink:
    """Records applies and deletes; fails the next ones as told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail: list[Exception] = []

    async def apply(self, manifest: dict[str, Any]) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.calls.append(("apply", manifest["spec"]["ports"][0]["name"]))

    async def delete(self, namespace: str, name: str) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.calls.append(("delete", f"{namespace}/{name}"))


def desired(port: str) -> DesiredGatewayService:
    manifest = {
        "metadata": {"namespace": "infra", "name": "gw-interlock-gateway"},
        "spec": {"ports": [{"name": port}]},
    }
    return DesiredGatewayService(ObjectKey(namespace="infra", name="gw"), manifest)


def start(sink: Sink, leading: list[bool]) -> tuple[ActorSystem, ManualSleep]:
    sleep = ManualSleep(gated=True)
    system = ActorSystem(sleep=ManualSleep(), timer_sleep=sleep, clock=ManualClock())
    system.spawn(
        WRITER,
        lambda: GatewayServiceWriter(
            sink=sink,
            is_leader=lambda: leading[0],
            backoff=BackoffPolicy(initial=1.0, maximum=8.0),
            rng=random.Random(2),
        ),
    )
    return system, sleep


async def test_only_the_leader_writes_and_a_new_leader_applies_what_is_wanted() -> None:
    sink, leading = Sink(), [False]
    system, _sleep = start(sink, leading)
    system.publish(GATEWAY_SERVICES_TOPIC, KEY, desired("http"))
    await wait_idle(system)
    assert sink.calls == []
    leading[0] = True
    system.tell(WRITER, LeadershipChanged(True))
    await wait_until(lambda: sink.calls == [("apply", "http")])
    system.unpublish(GATEWAY_SERVICES_TOPIC, KEY)
    await wait_until(lambda: sink.calls[-1] == ("delete", "infra/gw-interlock-gateway"))
    await system.shutdown(timeout=1.0)


async def test_a_transient_failure_is_retried_after_the_backoff() -> None:
    sink, leading = Sink(), [True]
    sink.fail = [TransientGatewayServiceError("503"), TransientGatewayServiceError("503")]
    system, sleep = start(sink, leading)
    system.publish(GATEWAY_SERVICES_TOPIC, KEY, desired("http"))
    for expected in (1, 2):
        await wait_until(lambda: len(sleep.delays) >= expected)  # noqa: B023 - awaited at once
        await wait_idle(system)
        assert sink.calls == []
        sleep.release()
    await wait_until(lambda: sink.calls == [("apply", "http")])
    first, second = sleep.delays
    assert 1.0 <= first <= 1.5 and 2.0 <= second <= 3.0
    await system.shutdown(timeout=1.0)


async def test_a_refused_service_waits_for_a_change() -> None:
    sink, leading = Sink(), [True]
    sink.fail = [GatewayServiceError("a Service of that name is not interlock's")]
    system, sleep = start(sink, leading)
    system.publish(GATEWAY_SERVICES_TOPIC, KEY, desired("http"))
    await wait_idle(system)
    assert sink.calls == [] and sleep.delays == []
    system.publish(GATEWAY_SERVICES_TOPIC, KEY, desired("https"))
    await wait_until(lambda: sink.calls == [("apply", "https")])
    await system.shutdown(timeout=1.0)
