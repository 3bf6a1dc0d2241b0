"""The mesh listener releases the Service ports it follows once they are not needed: idle for
``idle_release`` seconds, or their Service deleted — its policy watch and the endpoints only it
needed go, and the next request follows it again. The clock and the sweep's sleep are injected:
no test here waits for time to pass."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from interlock.actors.messages import (
    SERVICE_KEY,
)
from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.topics import (
    SERVICE,
)
from interlock.api.policy_json import policy_body
from interlock.controller.upstreams import SharedUpstreamCache, UpstreamIndex
from interlock.dataplane.upstreams import UpstreamError
from interlock.mailbox import ActorSystem
from interlock.mailbox.testing import ManualClock, ManualSleep, wait_until
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey, parse_service

WEB = ServicePortKey(name="web", namespace="default", port=80)
WEB_WATCH = WatchTarget(ServicePortKey("default", "web", 80), client_namespace="default")
WEB_KEY = ObjectKey(namespace="default", name="web")
IDLE = 600.0


@dataclass
class Mesh:
    system: ActorSystem
    watches: ServicePortWatches
    upstreams: UpstreamIndex
    clock: ManualClock
    sweep: ManualSleep

    def service(self, name: str = "web") -> None:
        service = parse_service(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        self.system.publish(
            SERVICE.topic(ObjectKey(namespace="default", name=name)), SERVICE_KEY, service
        )

    async def policy(self, target: ServicePortKey = WEB) -> OutboundPolicy:
        found = await self.upstreams.ready(target, within=30.0)
        assert not isinstance(found, UpstreamError), found
        return found

    def followed(self) -> list[object]:
        return [line["service"] for line in self.upstreams.debug()]


@pytest.fixture
async def mesh() -> AsyncIterator[Mesh]:
    # Timers (the watches' grace period) fire at once; the sweep waits until released.
    system = ActorSystem(timer_sleep=ManualSleep())
    watches = ServicePortWatches(system, grace=30.0, encode=policy_body)
    clock, sweep = ManualClock(), ManualSleep(gated=True)
    upstreams = UpstreamIndex(
        cache=SharedUpstreamCache(system),
        watches=watches,
        follower="mesh listener",
        client_namespace="default",
        idle_release=IDLE,
        clock=clock,
        sleep=sweep,
    )
    upstreams.start()
    yield Mesh(system, watches, upstreams, clock, sweep)
    watches.close()
    await upstreams.close()
    await system.shutdown()


async def test_an_idle_service_port_is_released_and_followed_again(mesh: Mesh) -> None:
    mesh.service()
    await mesh.policy()
    await wait_until(lambda: WEB_KEY in mesh.upstreams.tables.known)
    assert mesh.followed() == ["default/web:80"]
    mesh.clock.now += IDLE - 1
    assert mesh.upstreams.release_idle() == []
    await mesh.policy()  # a request: idle from now on
    mesh.clock.now += IDLE - 1
    assert mesh.upstreams.release_idle() == []
    mesh.clock.now += 1
    assert mesh.upstreams.release_idle() == [WEB]
    assert mesh.followed() == []
    # Its watch goes (after the grace period, a timer), and so do its backends' endpoints.
    await wait_until(lambda: WEB_WATCH not in mesh.watches.targets())
    await wait_until(lambda: WEB_KEY not in mesh.upstreams.tables.known)
    assert ("default", "web", 80) not in mesh.upstreams.tables.addresses
    # The next request follows it again.
    policy = await mesh.policy()
    assert policy.routes[0].rules[0].backends[0].exists
    assert mesh.followed() == ["default/web:80"]
    await wait_until(lambda: WEB_KEY in mesh.upstreams.tables.known)


async def test_the_sweep_releases_on_the_injected_sleep(mesh: Mesh) -> None:
    mesh.service()
    await mesh.policy()
    await wait_until(lambda: mesh.sweep.delays == [IDLE / 4])
    mesh.clock.now += IDLE
    mesh.sweep.release()  # the sweep's sleep ends: it looks, and sleeps again
    await wait_until(lambda: mesh.followed() == [])
    await wait_until(lambda: len(mesh.sweep.delays) == 2)


async def test_a_deleted_service_is_released(mesh: Mesh) -> None:
    mesh.service()
    mesh.service("other")
    await mesh.policy()
    other = ServicePortKey(name="other", namespace="default", port=80)
    await mesh.policy(other)
    await wait_until(lambda: WEB_KEY in mesh.upstreams.tables.known)
    mesh.system.unpublish(SERVICE.topic(ObjectKey(namespace="default", name="web")), SERVICE_KEY)
    await wait_until(lambda: mesh.followed() == ["default/other:80"])
    await wait_until(lambda: WEB_KEY not in mesh.upstreams.tables.known)
    assert ObjectKey(namespace="default", name="other") in mesh.upstreams.tables.known
    # A request for it now follows it again, and is answered by its policy: it is missing.
    missing = await mesh.policy()
    assert not missing.routes[0].rules[0].backends[0].exists
    assert mesh.followed() == ["default/other:80", "default/web:80"]
