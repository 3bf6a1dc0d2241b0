"""A crash of an edge directory loses no event: what it was handling is replayed on restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from interlock.actors.directories import (
    EndpointsDirectory,
    IngressClassDirectory,
    SecretDirectory,
    _Directory,
)
from interlock.actors.durable import durable_mailbox
from interlock.actors.edge_messages import (
    ENDPOINTS_DIRECTORY,
    INGRESS_CLASS_DIRECTORY,
    SECRET_DIRECTORY,
    SECRET_KEY,
)
from interlock.actors.messages import (
    ObjectChanged,
    ObjectParsed,
)
from interlock.actors.topics import (
    ENDPOINTS,
    INGRESS_CLASSES_TOPIC,
    SECRET,
)
from interlock.controller.kinds import parsed
from interlock.mailbox import ActorSystem
from interlock.mailbox.testing import wait_idle, wait_until
from interlock.model.meta import ObjectKey


class CrashOnce:
    """Makes the next message handled by any edge directory raise, like a bug would."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = 0
        self.crashes = 0
        original = _Directory.receive

        async def receive(actor: Any, message: object) -> object | None:
            if self.armed:
                self.armed -= 1
                self.crashes += 1
                raise RuntimeError("injected crash")
            result: object | None = await original(actor, message)
            return result

        monkeypatch.setattr(_Directory, "receive", receive)

    async def once(self, system: ActorSystem, address: str, message: object) -> None:
        """Tell ``message`` to the directory at ``address`` and wait until handling it crashed."""
        crashed = self.crashes + 1
        self.armed = 1
        system.tell(address, message)
        await wait_until(lambda: self.crashes == crashed)


def change(kind: str, name: str, obj: dict[str, Any], *, namespace: str = "default") -> Any:
    """What the router tells the kind's directory of this object."""
    return parsed(
        ObjectChanged(kind, namespace, name, deleted=False, resource_version="1", obj=obj)
    )


def ingress_class(name: str) -> ObjectParsed:
    obj = {
        "kind": "IngressClass",
        "metadata": {"name": name},
        "spec": {"controller": "interlock.dev/ingress-controller"},
    }
    return change("IngressClass", name, obj, namespace="")


def secret(name: str, value: str) -> ObjectParsed:
    obj = {
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "stringData": {"htpasswd": value},
    }
    return change("Secret", name, obj)


def endpoint_slice(name: str) -> ObjectParsed:
    obj = {
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        "ports": [{"name": "", "port": 8080}],
    }
    return change("EndpointSlice", name, obj)


@pytest.fixture
def crash(monkeypatch: pytest.MonkeyPatch) -> CrashOnce:
    return CrashOnce(monkeypatch)


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    """A runtime with the IngressClass, Secret and EndpointSlice directories, each durable."""
    system = ActorSystem()
    mailbox = durable_mailbox()
    system.spawn(INGRESS_CLASS_DIRECTORY, IngressClassDirectory, mailbox=mailbox)
    system.spawn(SECRET_DIRECTORY, SecretDirectory, mailbox=mailbox)
    system.spawn(ENDPOINTS_DIRECTORY, EndpointsDirectory, mailbox=mailbox)
    yield system
    await system.shutdown()


async def test_the_event_being_handled_when_a_directory_crashed_is_published_after_restart(
    system: ActorSystem, crash: CrashOnce
) -> None:
    system.tell(INGRESS_CLASS_DIRECTORY, ingress_class("first"))
    await wait_idle(system)
    await crash.once(system, INGRESS_CLASS_DIRECTORY, ingress_class("second"))
    await wait_until(lambda: "second" in system.retained(INGRESS_CLASSES_TOPIC))
    assert system.actor_statistics(INGRESS_CLASS_DIRECTORY).restarts == 1
    assert system.actor_statistics(INGRESS_CLASS_DIRECTORY).depth == 0
    assert system.statistics().dead_letters == 0


async def test_handled_events_are_not_replayed_and_other_directories_are_untouched(
    system: ActorSystem, crash: CrashOnce
) -> None:
    system.tell(SECRET_DIRECTORY, secret("users", "a"))
    await wait_idle(system)
    assert system.actor_statistics(SECRET_DIRECTORY).depth == 0
    await crash.once(system, INGRESS_CLASS_DIRECTORY, ingress_class("only"))
    await wait_until(lambda: "only" in system.retained(INGRESS_CLASSES_TOPIC))
    await wait_idle(system)
    assert system.actor_statistics(SECRET_DIRECTORY).restarts == 0
    assert list(system.retained(SECRET.topic(ObjectKey(namespace="default", name="users")))) == [
        SECRET_KEY
    ]


async def test_an_event_that_crashes_the_directory_again_on_replay_is_dropped(
    system: ActorSystem, crash: CrashOnce
) -> None:
    crash.armed = 2  # the event and its replay: a bug with this very event
    system.tell(SECRET_DIRECTORY, secret("poison", "x"))
    await wait_until(lambda: crash.crashes == 2)
    await wait_idle(system)
    assert system.actor_statistics(SECRET_DIRECTORY).depth == 0
    assert system.statistics().dead_letters == 1  # the poison event, counted
    # The directory survived and keeps working.
    system.tell(SECRET_DIRECTORY, secret("users", "a"))
    await wait_until(
        lambda: (
            SECRET_KEY
            in system.retained(SECRET.topic(ObjectKey(namespace="default", name="users")))
        )
    )


async def test_a_restarted_directory_still_unpublishes_what_its_predecessor_published(
    system: ActorSystem, crash: CrashOnce
) -> None:
    system.tell(SECRET_DIRECTORY, secret("users", "a"))
    await wait_idle(system)
    await crash.once(system, SECRET_DIRECTORY, secret("other", "b"))
    await wait_until(
        lambda: (
            SECRET_KEY
            in system.retained(SECRET.topic(ObjectKey(namespace="default", name="other")))
        )
    )
    system.tell(SECRET_DIRECTORY, replace(secret("users", "a"), deleted=True))
    await wait_until(
        lambda: not system.retained(SECRET.topic(ObjectKey(namespace="default", name="users")))
    )


async def test_a_restarted_endpoints_directory_still_withdraws_a_deleted_slice(
    system: ActorSystem, crash: CrashOnce
) -> None:
    topic = ENDPOINTS.topic(ObjectKey(namespace="default", name="web"))
    system.tell(ENDPOINTS_DIRECTORY, endpoint_slice("web-a"))
    await wait_idle(system)
    await crash.once(system, ENDPOINTS_DIRECTORY, endpoint_slice("web-b"))
    await wait_until(lambda: sorted(system.retained(topic)) == ["web-a", "web-b"])
    system.tell(ENDPOINTS_DIRECTORY, replace(endpoint_slice("web-a"), deleted=True))
    await wait_until(lambda: sorted(system.retained(topic)) == ["web-b"])
