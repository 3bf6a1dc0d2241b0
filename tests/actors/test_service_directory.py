"""ServiceDirectory and GrantsDirectory publish what routes can see, and only that."""

from __future__ import annotations

import pytest

from interlock.actors.grants import GrantsDirectory
from interlock.actors.messages import (
    GRANTS_DIRECTORY,
    SERVICE_DIRECTORY,
    GrantDeleted,
    GrantUpserted,
    ServiceDeleted,
    ServiceUpserted,
)
from interlock.actors.service_directory import ServiceDirectory
from interlock.actors.topics import (
    GRANTS,
    SERVICE,
)
from interlock.mailbox import ActorSystem, Published, Unpublished
from interlock.mailbox.testing import RecordingActor, wait_idle
from interlock.model.gateway import parse_reference_grant
from interlock.model.meta import ObjectKey
from interlock.model.service import parse_service
from tests.kit.outbound_objects import reference_grant, service


@pytest.fixture
async def system():
    running = ActorSystem()
    running.spawn(SERVICE_DIRECTORY, ServiceDirectory)
    running.spawn(GRANTS_DIRECTORY, GrantsDirectory)
    yield running
    await running.shutdown()


async def test_service_published_on_create_relevant_change_and_delete_only(system):
    log: list[object] = []
    system.spawn("observer", lambda: RecordingActor(log))
    system.subscribe(SERVICE.topic(ObjectKey(namespace="default", name="api")), "observer")

    def upsert(**kwargs: object) -> None:
        system.tell(SERVICE_DIRECTORY, ServiceUpserted(parse_service(service("api", **kwargs))))

    upsert()
    await wait_idle(system)
    upsert(labels={"team": "blue"})  # not something routes read
    await wait_idle(system)
    upsert(ports=(80, 8080))
    await wait_idle(system)
    upsert(ports=(80, 8080), cluster_ip="None")  # headless now: parents are no longer accepted
    await wait_idle(system)
    system.tell(SERVICE_DIRECTORY, ServiceDeleted(ObjectKey(namespace="default", name="api")))
    await wait_idle(system)
    kinds = [type(m).__name__ for m in log]
    assert kinds == ["Published", "Published", "Published", "Unpublished"]
    ports = [len(m.value.spec.ports) for m in log if isinstance(m, Published)]
    assert ports == [1, 2, 2]
    assert isinstance(log[-1], Unpublished)
    assert system.retained(SERVICE.topic(ObjectKey(namespace="default", name="api"))) == {}


async def test_a_late_subscriber_gets_the_current_service(system):
    system.tell(SERVICE_DIRECTORY, ServiceUpserted(parse_service(service("api"))))
    await wait_idle(system)
    log: list[object] = []
    system.spawn("late", lambda: RecordingActor(log))
    system.subscribe(SERVICE.topic(ObjectKey(namespace="default", name="api")), "late")
    await wait_idle(system)
    assert [m.value.metadata.name for m in log if isinstance(m, Published)] == ["api"]


async def test_grants_published_per_namespace_keyed_by_name(system):
    log: list[object] = []
    system.spawn("observer", lambda: RecordingActor(log))
    system.subscribe(GRANTS.topic("shared"), "observer")
    grant = parse_reference_grant(
        reference_grant("g", namespace="shared", from_namespace="default")
    )
    system.tell(GRANTS_DIRECTORY, GrantUpserted(grant))
    await wait_idle(system)
    system.tell(GRANTS_DIRECTORY, GrantUpserted(grant))  # unchanged: silent
    await wait_idle(system)
    system.tell(GRANTS_DIRECTORY, GrantDeleted(ObjectKey(namespace="shared", name="g")))
    await wait_idle(system)
    assert [(type(m).__name__, m.key) for m in log] == [("Published", "g"), ("Unpublished", "g")]
