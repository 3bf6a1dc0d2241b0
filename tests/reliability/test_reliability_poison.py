"""A poison message about an object is not the end of that object: the controller reads it again.

The informer-fed actors have durable mailboxes: a message that crashed its handler is re-delivered
to the restarted actor, and one that crashes its own replay too is dropped as poison. The runtime
then hands its key to the controller, which reads the object's current state from the API server
(retrying while the server cannot answer) and tells it to the router again
(``Controller._resync``), so the object's policy does not stay stale until it next changes. The
runtime's half is tested in ``tests/mailbox/test_durable.py``; this is the whole path, on both
API servers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interlock.actors.messages import ObjectChanged
from interlock.actors.router import InformerRouter
from interlock.api.policy_json import policy_json
from interlock.controller.app import Controller
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey
from tests.kit.lanes import ControlPlane
from tests.kit.reliability_kit import (
    InjectedCrash,
    crd_cluster,
    eventually,
    policy_watch,
    ready_controller,
    write,
)

SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "late", "namespace": "default"},
    "spec": {"ports": [{"name": "http", "port": 80}]},
}
TARGET = WatchTarget(ServicePortKey("default", "late", 80), client_namespace="default")


@contextlib.contextmanager
def router_crashing_on(name: str, times: int) -> Iterator[list[ObjectChanged]]:
    """The router raises on its first ``times`` messages about Service ``default/name``: the
    message and its replay when ``times`` is 2, which makes it poison. Yields the messages
    about that Service that it then handled."""
    original = InformerRouter.__dict__["receive"]
    crashed = 0
    handled: list[ObjectChanged] = []

    async def receive(actor: InformerRouter, message: object) -> object | None:
        nonlocal crashed
        about = (
            isinstance(message, ObjectChanged)
            and message.kind == "Service"
            and (message.namespace, message.name) == ("default", name)
        )
        if about and crashed < times:
            crashed += 1
            raise InjectedCrash(f"router crash {crashed} on Service default/{name}")
        result = await original(actor, message)
        if about:
            assert isinstance(message, ObjectChanged)
            handled.append(message)
        return result

    InformerRouter.receive = receive  # type: ignore[method-assign]
    try:
        yield handled
    finally:
        InformerRouter.receive = original  # type: ignore[method-assign]


def backend_exists(controller: Controller, slot: Any) -> bool:
    update = slot.latest
    if update is None:
        return False
    policy = policy_json(update.policy)
    return bool(policy["routes"][0]["rules"][0]["backends"][0]["exists"])


def test_a_service_whose_event_is_poison_is_read_again_from_the_api_server(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """The Service's creation crashes the router twice (the event and its replay); the
    controller reads the Service from the API server, through one failed read, and its
    policy watch then sees it exist. Without the resynchronization it would stay missing
    until the Service next changed."""

    async def scenario() -> None:
        async with crd_cluster(tmp_path, control_plane) as server:
            with router_crashing_on("late", times=2) as handled:
                async with (
                    ready_controller(server, "poison") as controller,
                    policy_watch(controller, TARGET) as slot,
                ):
                    await eventually(
                        lambda: slot.latest is not None, within=60.0, message="first policy"
                    )
                    assert not backend_exists(controller, slot)
                    # The controller's read of the Service fails once: it must try again. (Only
                    # the resync lists Services in one namespace; the informer lists them all.)
                    server.faults.fail_next(
                        1, 500, verbs=["list"], path_contains="/namespaces/default/services"
                    )
                    await write(server, SERVICE)
                    await eventually(
                        lambda: backend_exists(controller, slot),
                        within=60.0,
                        message="the Service seen after its poison event",
                    )
                    assert server.faults.pending() == 0, "the failed read was not made"
                    assert handled and not handled[-1].deleted

    asyncio.run(scenario())


def test_a_service_deleted_while_its_event_is_poison_is_read_as_gone(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """The Service's deletion crashes the router twice; the API server answers 404 to the
    controller's read, which the router is told as the deletion: the backend stops existing."""

    async def scenario() -> None:
        async with crd_cluster(tmp_path, control_plane) as server:
            await write(server, SERVICE)
            async with (
                ready_controller(server, "poison") as controller,
                policy_watch(controller, TARGET) as slot,
            ):
                await eventually(
                    lambda: backend_exists(controller, slot), within=60.0, message="the Service"
                )
                with router_crashing_on("late", times=2) as handled:
                    await server.delete(SERVICE)
                    await eventually(
                        lambda: not backend_exists(controller, slot),
                        within=60.0,
                        message="the Service gone after its poison event",
                    )
                    assert handled and handled[-1].deleted

    asyncio.run(scenario())
