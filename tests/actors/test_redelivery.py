"""A crash of the router or of a directory loses no event: what it was handling is replayed."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.actors.durable import durable_mailbox, informer_object
from interlock.actors.messages import INFORMER_ROUTER, SERVICE_DIRECTORY, ServiceDeleted
from interlock.actors.router import InformerRouter
from interlock.actors.service_directory import ServiceDirectory
from interlock.mailbox import ActorSystem
from interlock.mailbox.testing import ManualSleep, wait_idle, wait_until
from interlock.model.meta import ObjectKey
from tests.kit.outbound_harness import Outbound, latest_policy
from tests.kit.outbound_objects import backend, backends_of, http_route, parent, service


class CrashOnce:
    """Makes the next message handled by an actor class raise, like a bug would."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cls: type[Any]) -> None:
        self.armed = False
        self.crashes = 0
        original = cls.receive

        async def receive(actor: Any, message: object) -> object | None:
            if self.armed:
                self.armed = False
                self.crashes += 1
                raise RuntimeError("injected crash")
            result: object | None = await original(actor, message)
            return result

        monkeypatch.setattr(cls, "receive", receive)


@pytest.mark.parametrize(
    ("cls", "address"),
    [(InformerRouter, INFORMER_ROUTER), (ServiceDirectory, SERVICE_DIRECTORY)],
    ids=["router", "service-directory"],
)
async def test_the_event_being_handled_when_the_actor_crashed_is_not_lost(
    outbound: Outbound, monkeypatch: pytest.MonkeyPatch, cls: type[Any], address: str
):
    crash = CrashOnce(monkeypatch, cls)
    outbound.apply(service("web"))
    outbound.apply(http_route("r", parents=[parent("web")], backends=[backend("api")]))
    _, slot = outbound.watch("web")
    await outbound.settle()
    assert backends_of(latest_policy(slot)) == [("api", False, 500)]
    crash.armed = True
    outbound.apply(service("api"))
    await wait_until(lambda: crash.crashes == 1)
    await wait_until(lambda: backends_of(latest_policy(slot)) == [("api", True, None)])
    assert outbound.system.actor_statistics(address).restarts == 1
    assert outbound.system.actor_statistics(address).depth == 0
    assert outbound.system.statistics().dead_letters == 0


async def test_a_message_that_crashes_again_after_its_replay_is_dropped(
    outbound: Outbound, monkeypatch: pytest.MonkeyPatch
):
    crash = CrashOnce(monkeypatch, ServiceDirectory)
    outbound.apply(service("web"))
    await outbound.settle()
    crash.armed = True
    outbound.apply(service("api"))
    await wait_until(lambda: crash.crashes == 1)
    crash.armed = True  # the replay crashes too: a bug with this very message
    await wait_until(lambda: crash.crashes == 2)
    await outbound.settle()
    assert outbound.system.actor_statistics(SERVICE_DIRECTORY).depth == 0
    assert outbound.system.statistics().dead_letters == 1  # the poison message, counted
    # The directory survived and keeps working.
    outbound.apply(service("db"))
    await outbound.settle()
    assert outbound.system.exists(SERVICE_DIRECTORY)
    assert outbound.system.retained("service:default/db")


async def test_a_poison_message_asks_the_informer_for_the_object_again() -> None:
    resynced: list[tuple[str, str, str]] = []
    system = ActorSystem(sleep=ManualSleep())
    crashes = 0

    class Poisoned(ServiceDirectory):
        async def receive(self, message: object) -> object | None:
            nonlocal crashes
            crashes += 1
            raise RuntimeError("injected crash")

    system.spawn(
        SERVICE_DIRECTORY,
        Poisoned,
        mailbox=durable_mailbox(lambda *target: resynced.append(target)),
    )
    system.tell(SERVICE_DIRECTORY, ServiceDeleted(ObjectKey(namespace="default", name="api")))
    await wait_until(lambda: crashes == 2)
    await wait_idle(system)
    assert resynced == [("Service", "default", "api")]
    await system.shutdown()


def test_informer_fed_keys_name_their_object() -> None:
    assert informer_object(("object", "Ingress", "default", "web")) == ("Ingress", "default", "web")
    assert informer_object(("service", "default", "api")) == ("Service", "default", "api")
    assert informer_object(("grant", "other", "g")) == ("ReferenceGrant", "other", "g")
    assert informer_object("retry") is None
